// Registers the three micro-batched convolution ops: TensorFlow's Conv2D,
// Conv2DBackpropInput and Conv2DBackpropFilter interfaces plus μ-cuDNN's knobs.
#include <string>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {
namespace {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// A shape whose known dimensions multiply past 2^63 - 1 must not leave the
// shape function: whatever builds a TensorShape from it later (a kernel, a
// Grappler pass) would CHECK-fail and abort the process.
absl::Status CheckNumElements(InferenceContext* c, ShapeHandle shape, const char* what) {
  if (!c->RankKnown(shape)) return absl::OkStatus();
  int64_t elements = 1;
  for (int i = 0; i < c->Rank(shape); ++i) {
    const DimensionHandle d = c->Dim(shape, i);
    if (!c->ValueKnown(d)) continue;
    if (__builtin_mul_overflow(elements, c->Value(d), &elements)) {
      return errors::InvalidArgument(what, " ", c->DebugString(shape),
                                     " would have more than 2**63 - 1 elements");
    }
  }
  return absl::OkStatus();
}

// Ucudnn>Conv2D's shape: TF's Conv2D shape function, after checking what it
// adds in plain int64 (each pair of explicit paddings: signed overflow near
// 2^62 is undefined behaviour), and then the output's element count.
absl::Status UcudnnConv2DShape(InferenceContext* c) {
  std::string padding;
  TF_RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  if (padding == "EXPLICIT") {
    std::vector<int64_t> pads;
    TF_RETURN_IF_ERROR(c->GetAttr("explicit_paddings", &pads));
    for (size_t i = 0; i + 1 < pads.size(); i += 2) {
      int64_t sum = 0;
      if (pads[i] >= 0 && pads[i + 1] >= 0 && __builtin_add_overflow(pads[i], pads[i + 1], &sum)) {
        return errors::InvalidArgument("explicit_paddings ", pads[i], " + ", pads[i + 1],
                                       " (dimension ", i / 2, ") exceeds 2^63 - 1");
      }
    }
  }
  TF_RETURN_IF_ERROR(shape_inference::Conv2DShapeWithExplicitPadding(c));
  return CheckNumElements(c, c->output(0), "the output shape");
}

// The gradients' shape: the 4 sizes of a size tensor (input_sizes or
// filter_sizes), whose element count must fit in int64.
absl::Status ShapeFromSizes(InferenceContext* c, int input, const char* name) {
  ShapeHandle s;
  TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(input, &s));
  TF_RETURN_IF_ERROR(c->WithRank(s, 4, &s));
  TF_RETURN_IF_ERROR(CheckNumElements(c, s, name));
  c->set_output(0, s);
  return absl::OkStatus();
}

// TF's Conv2D attrs, then μ-cuDNN's: workspace_limit in bytes (-1 = the
// UCUDNN_DEFAULT_WORKSPACE_LIMIT environment variable, default 64 MiB),
// batch_size_policy ("" = UCUDNN_BATCH_SIZE_POLICY, default powerOfTwo),
// micro_batch_size (0 = the planner decides; k > 0 = micro-batches of k),
// total_workspace in bytes (Workspace Division: kernels with the same total
// on one device share it; -1 = UCUDNN_TOTAL_WORKSPACE_SIZE for ops without an
// explicit workspace_limit, else off; 0 = off).
#define UCUDNN_CONV_ATTRS                                        \
  Attr("T: {half, bfloat16, float}")                             \
      .Attr("strides: list(int)")                                \
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")            \
      .Attr("explicit_paddings: list(int) = []")                 \
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")            \
      .Attr("dilations: list(int) = [1, 1, 1, 1]")               \
      .Attr("workspace_limit: int = -1")                         \
      .Attr("batch_size_policy: string = ''")                    \
      .Attr("micro_batch_size: int = 0")                         \
      .Attr("total_workspace: int = -1")

REGISTER_OP("Ucudnn>Conv2D")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .UCUDNN_CONV_ATTRS
    .SetShapeFn(UcudnnConv2DShape)
    .Doc(R"doc(
Micro-batched 2-D convolution (Oyama et al. 2018); same results as Conv2D.
input: [batch, height, width, in_channels] (NHWC) or [batch, in_channels, height, width] (NCHW).
filter: [filter_height, filter_width, in_channels / groups, out_channels].
)doc");

// Ucudnn>Conv2DWithBias's shape: Conv2DShape's, and a bias of out_channels elements.
absl::Status Conv2DWithBiasShape(InferenceContext* c) {
  TF_RETURN_IF_ERROR(UcudnnConv2DShape(c));
  ShapeHandle bias;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &bias));
  ShapeHandle filter = c->input(1);
  if (c->RankKnown(filter) && c->Rank(filter) == 4) {
    DimensionHandle unused;
    TF_RETURN_IF_ERROR(c->Merge(c->Dim(bias, 0), c->Dim(filter, 3), &unused));
  }
  return absl::OkStatus();
}

REGISTER_OP("Ucudnn>Conv2DWithBias")
    .Input("input: T")
    .Input("filter: T")
    .Input("bias: T")
    .Output("output: T")
    .UCUDNN_CONV_ATTRS
    .Attr("activation: {'linear', 'relu'} = 'linear'")
    .SetShapeFn(Conv2DWithBiasShape)
    .Doc(R"doc(
Ucudnn>Conv2D followed by BiasAdd, and Relu where activation is 'relu', in one
kernel on the GPU (bias and ReLU are the epilogue of the convolution's cuDNN
engine where one takes them).
bias: [out_channels], added to every output element of its channel.
activation: 'linear' (none) or 'relu' (max(., 0) after the bias).
)doc");

// Ucudnn>Conv2DWithStatistics's shape: Conv2DShape's output, and two vectors
// of the filter's out_channels.
absl::Status Conv2DWithStatisticsShape(InferenceContext* c) {
  TF_RETURN_IF_ERROR(UcudnnConv2DShape(c));
  ShapeHandle filter = c->input(1);
  const DimensionHandle k =
      c->RankKnown(filter) && c->Rank(filter) == 4 ? c->Dim(filter, 3) : c->UnknownDim();
  c->set_output(1, c->Vector(k));
  c->set_output(2, c->Vector(k));
  return absl::OkStatus();
}

REGISTER_OP("Ucudnn>Conv2DWithStatistics")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .Output("sum: float")
    .Output("sum_of_squares: float")
    .UCUDNN_CONV_ATTRS
    .SetShapeFn(Conv2DWithStatisticsShape)
    .Doc(R"doc(
Ucudnn>Conv2D and the per-channel statistics of its output that a following
batch normalization needs, in one kernel on the GPU (the statistics are the
epilogue of the convolution's cuDNN graph engine), micro-batched, the sums
added up over the micro-batches in float32.
sum: [out_channels], the sum of the output over the batch and pixels.
sum_of_squares: [out_channels], the sum of the output's squares.
)doc");

// Ucudnn>NormalizedConv2DWithStatistics's shape: Conv2DWithStatisticsShape,
// with scale and offset vectors of the input's channels.
absl::Status NormalizedConv2DWithStatisticsShape(InferenceContext* c) {
  TF_RETURN_IF_ERROR(Conv2DWithStatisticsShape(c));
  ShapeHandle filter = c->input(1);
  for (int i : {2, 3}) {
    ShapeHandle vector;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 1, &vector));
    if (c->RankKnown(filter) && c->Rank(filter) == 4) {
      DimensionHandle unused;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(vector, 0), c->Dim(filter, 2), &unused));
    }
  }
  return absl::OkStatus();
}

REGISTER_OP("Ucudnn>NormalizedConv2DWithStatistics")
    .Input("input: T")
    .Input("filter: T")
    .Input("scale: float")
    .Input("offset: float")
    .Output("output: T")
    .Output("sum: float")
    .Output("sum_of_squares: float")
    .UCUDNN_CONV_ATTRS
    .Attr("input_relu: bool = true")
    .SetShapeFn(NormalizedConv2DWithStatisticsShape)
    .Doc(R"doc(
Ucudnn>Conv2DWithStatistics of relu(input * scale + offset) (without the ReLU
where input_relu is false), per input channel: a batch normalization's
normalization (and its ReLU) as the convolution's prologue, so that the
normalized tensor is never stored. On the GPU one cuDNN graph where an engine
fuses it (float16: scale-bias-ReLU, convolution, genstats; scale and offset
rounded to T for it), else the prologue into scratch and the convolution after
it.
scale: [in_channels], each input channel's factor.
offset: [in_channels], added after the factor.
)doc");

REGISTER_OP("Ucudnn>Conv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .UCUDNN_CONV_ATTRS
    .SetShapeFn([](InferenceContext* c) { return ShapeFromSizes(c, 0, "input_sizes"); })
    .Doc("Gradient of Ucudnn>Conv2D with respect to its input (backward-data).");

REGISTER_OP("Ucudnn>Conv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .UCUDNN_CONV_ATTRS
    .SetShapeFn([](InferenceContext* c) { return ShapeFromSizes(c, 1, "filter_sizes"); })
    .Doc("Gradient of Ucudnn>Conv2D with respect to its filter (backward-filter).");

}  // namespace
}  // namespace tensorflow
