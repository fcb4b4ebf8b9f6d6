// TF glue: reads and validates the ops' attributes and tensor shapes, and
// turns them into the engine's ConvParams.
#ifndef TF_UCUDNN_KERNELS_CONV_ATTRS_H_
#define TF_UCUDNN_KERNELS_CONV_ATTRS_H_

#include <string>
#include <vector>

#include "cc/engine/conv_params.h"
#include "cc/engine/knobs.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tensorflow {
namespace ucudnn_tf {

struct ConvAttrs {
  ucudnn::Layout layout = ucudnn::Layout::kNHWC;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::string padding;  // SAME | VALID | EXPLICIT
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;  // EXPLICIT
  // The planning knobs (workspace_limit, total_workspace, batch_size_policy,
  // micro_batch_size; UCUDNN_ENGINES and UCUDNN_GRAPH_*), resolved when the
  // kernel is created (ucudnn::ResolvePlanningKnobs); the numerics are set
  // where the front end fixes them.
  ucudnn::PlanningKnobs knobs;
  // What Ucudnn>Conv2DWithBias fuses (ConvParams::fusion of its forward
  // pass): the bias, and max(., 0) after it where its activation is "relu".
  // None for the ops without a bias.
  ucudnn::Fusion fusion;
};

// The engine's status as TF's, code and message (a knob reader's,
// cc/engine/knobs.h, is OK or InvalidArgument naming the variable and
// the values allowed).
absl::Status EngineStatusToTf(const ucudnn::Status& s);

// Reads every attribute; the planning knobs' through
// ucudnn::ResolvePlanningKnobs (cc/engine/knobs.h), which applies
// UCUDNN_DEFAULT_WORKSPACE_LIMIT, UCUDNN_BATCH_SIZE_POLICY and
// UCUDNN_TOTAL_WORKSPACE_SIZE where an attribute asks for the default, and
// UCUDNN_ENGINES and UCUDNN_GRAPH_*: the environment as it is when the kernel
// is created.
absl::Status ParseConvAttrs(OpKernelConstruction* ctx, ConvAttrs* attrs);

// Validates the input and filter shapes against the attributes and fills
// *params (batch, channels, groups, output size, resolved SAME padding).
// Every size is computed overflow-safe: a bad or overflowing shape is an
// InvalidArgument naming the value, never undefined behaviour or an abort.
// Zero-size shapes (batch 0, an empty spatial dimension, 0 output channels)
// are accepted, as by tf.nn.conv2d: callers check params->empty() and produce
// the empty or zero result themselves. A non-empty convolution is also held
// to cuDNN's int dimensions.
absl::Status MakeConvParams(const ConvAttrs& attrs, const TensorShape& input,
                            const TensorShape& filter, DataType dtype,
                            ucudnn::ConvParams* params);

// The output (forward) shape of `params` in its layout; MakeConvParams has
// checked that its element count fits.
TensorShape OutputShape(const ucudnn::ConvParams& params);

// The shape a pass produces: the output (forward), the input (backward-data)
// or the filter (backward-filter).
const TensorShape& PassResultShape(ucudnn::Pass pass, const TensorShape& input,
                                   const TensorShape& filter, const TensorShape& output);

// InvalidArgument unless the gradient passes' out_backprop has the
// convolution's output shape.
absl::Status CheckOutBackprop(const TensorShape& out_backprop, const TensorShape& output);

// InvalidArgument unless `bias` is 1-D with params' out_channels elements.
absl::Status CheckBias(const TensorShape& bias, const ucudnn::ConvParams& params);

// InvalidArgument unless the input prologue's `scale` and `offset` are 1-D
// with params' in_channels elements each.
absl::Status CheckInputScaleBias(const TensorShape& scale, const TensorShape& offset,
                                 const ucudnn::ConvParams& params);

// Reads a 1-D int32 tensor of 4 sizes (input_sizes / filter_sizes): each
// non-negative, their product at most 2^63 - 1.
absl::Status ShapeFromSizesTensor(const Tensor& sizes, const char* name, TensorShape* shape);

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // TF_UCUDNN_KERNELS_CONV_ATTRS_H_
