// Registers the three micro-batched convolution ops: TensorFlow's Conv2D,
// Conv2DBackpropInput and Conv2DBackpropFilter interfaces plus μ-cuDNN's knobs.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {
namespace {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

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
    .SetShapeFn(shape_inference::Conv2DShapeWithExplicitPadding)
    .Doc(R"doc(
Micro-batched 2-D convolution (Oyama et al. 2018); same results as Conv2D.
input: [batch, height, width, in_channels] (NHWC) or [batch, in_channels, height, width] (NCHW).
filter: [filter_height, filter_width, in_channels / groups, out_channels].
)doc");

REGISTER_OP("Ucudnn>Conv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .UCUDNN_CONV_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle s;
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(0, &s));
      TF_RETURN_IF_ERROR(c->WithRank(s, 4, &s));
      c->set_output(0, s);
      return absl::OkStatus();
    })
    .Doc("Gradient of Ucudnn>Conv2D with respect to its input (backward-data).");

REGISTER_OP("Ucudnn>Conv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .UCUDNN_CONV_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle s;
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(1, &s));
      TF_RETURN_IF_ERROR(c->WithRank(s, 4, &s));
      c->set_output(0, s);
      return absl::OkStatus();
    })
    .Doc("Gradient of Ucudnn>Conv2D with respect to its filter (backward-filter).");

}  // namespace
}  // namespace tensorflow
