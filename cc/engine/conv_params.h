// What defines one convolution: shapes, geometry, layout, element type.
// No TensorFlow includes below cc/engine/.
#ifndef TF_UCUDNN_ENGINE_CONV_PARAMS_H_
#define TF_UCUDNN_ENGINE_CONV_PARAMS_H_

#include <array>
#include <cstdint>
#include <string>

namespace ucudnn {

// The three convolution passes (kernels) of a layer.
enum class Pass : int { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };
enum class Layout : int { kNHWC = 0, kNCHW = 1 };
enum class DType : int { kFloat = 0, kHalf = 1, kBFloat16 = 2 };

const char* PassName(Pass pass);      // "forward", "backward-data", "backward-filter"
const char* LayoutName(Layout layout);  // "NHWC", "NCHW"
const char* DTypeName(DType dtype);    // "float32", "float16", "bfloat16"
int DTypeSize(DType dtype);            // bytes per element

// What a forward kernel computes on the convolution's output, in the same
// kernel (an epilogue): the nodes after the convolution in cuDNN's graph
// (graph-API engines), or cuDNN calls after a legacy algorithm.
enum class Epilogue : int {
  kNone = 0,
  // y = conv(x, w) + bias, the bias of out_channels elements broadcast over
  // the batch and pixels (Conv2D + BiasAdd; cudnnAddTensor after a legacy
  // algorithm).
  kBias = 1,
  // y = max(conv(x, w) + bias, 0) (Conv2D + BiasAdd + Relu;
  // cudnnActivationForward after the add).
  kBiasRelu = 2,
  // y = conv(x, w), and the per-output-channel sum and sum of squares of y
  // over the batch and pixels (two float32 tensors of out_channels elements),
  // added up over the plan's micro-batches to the mini-batch's: what a
  // following BatchNormalization's training step needs (batch_norm.h;
  // cudnn-frontend's "genstats"). Summed from y as stored in the pass's
  // dtype, as Keras' moments read the convolution's output.
  kStatistics = 3,
};

// What a forward kernel applies to the convolution's input, per input
// channel, before the convolution reads it (a prologue): the previous
// layer's batch-norm apply (and ReLU) done inside this convolution, so that
// the normalized tensor is never stored. The padding stays zero (it pads the
// transformed input, as the unfused graph pads the normalized tensor).
enum class Prologue : int {
  kNone = 0,
  // y = conv(x * scale + bias, w), scale and bias float32 tensors of
  // in_channels elements (BatchNormalization's apply: batch_norm.h).
  kScaleBias = 1,
  // y = conv(max(x * scale + bias, 0), w) (BatchNormalization + ReLU).
  kScaleBiasRelu = 2,
};

// Which tensors a caller hands a kernel beside the convolution's own, for
// Fusion::Check.
struct FusionTensors {
  bool bias = false;         // the epilogue's bias: out_channels elements of the dtype
  bool input_scale = false;  // the prologue's scale: in_channels float32
  bool input_bias = false;   // the prologue's bias: in_channels float32
  bool statistics = false;   // sum and sum of squares: out_channels float32 each (written)
};

// What a kernel fuses around its convolution, as one value: every reader goes
// through its functions (the graph builder, graph_operations.cc; candidate kinds,
// Name(); the kernel and database keys, Code(); the XLA attributes,
// ConvParams::Fields(); plan records, ConvParams::ToString()). A prologue on
// the forward input and an epilogue on the forward output; the CPU runs
// every combination (cpu_fusion.h), the GPU today the bias epilogues only.
// A new fusion (a residual add, say) is a new Epilogue or Prologue value: a
// new case of Name(), Code() (a number of its own, so that stored keys never
// change meaning), Check() and the backends, and of the tensors the pass
// carries (FusionTensors, CpuPassTensors, PassTensors).
struct Fusion {
  Prologue prologue = Prologue::kNone;
  Epilogue epilogue = Epilogue::kNone;

  // True when the kernel reads a bias tensor of out_channels elements.
  bool bias() const { return epilogue == Epilogue::kBias || epilogue == Epilogue::kBiasRelu; }
  // True when a ReLU follows the bias.
  bool relu() const { return epilogue == Epilogue::kBiasRelu; }
  // True when the kernel writes the output's per-channel sums.
  bool statistics() const { return epilogue == Epilogue::kStatistics; }
  // True when the kernel reads the input's per-channel scale and bias.
  bool input_scale_bias() const { return prologue != Prologue::kNone; }
  // True when a ReLU follows the input's scale and bias.
  bool input_relu() const { return prologue == Prologue::kScaleBiasRelu; }
  // The suffix of the pass in candidates' kinds and plan records, and of the
  // benchmark database's stored pass ("forward+bias+relu"): the prologue's
  // part ("+input-scale-bias", "+input-scale-bias-relu"), then the
  // epilogue's ("+bias", "+bias+relu", "+stats"); "" for no fusion.
  const char* Name() const;
  // The key encoding (the last of ConvParams::Fields(), the XLA attribute
  // conv's field 20): epilogue + kPrologueCodeStep * prologue, so that the
  // epilogues alone keep their codes (0 none, 1 bias, 2 bias and ReLU, 3
  // statistics) and the prologues take 16, 32 and up.
  static constexpr int64_t kPrologueCodeStep = 16;
  int64_t Code() const {
    return static_cast<int64_t>(epilogue) + kPrologueCodeStep * static_cast<int64_t>(prologue);
  }
  // The fusion of Code(); false (and *fusion unchanged) for any other number.
  static bool FromCode(int64_t code, Fusion* fusion);
  // Why the fusion cannot run on `pass` given the caller's tensors: "" when
  // it can, else the reason. A prologue or an epilogue runs on the forward
  // pass only (their gradients are other kernels), and each needs its
  // tensors. Every dtype can take every fusion: the prologue's scale and bias
  // and the statistics are float32 whatever the dtype.
  std::string Check(Pass pass, const FusionTensors& tensors) const;

  bool operator==(const Fusion& o) const {
    return prologue == o.prologue && epilogue == o.epilogue;
  }
  bool operator!=(const Fusion& o) const { return !(*this == o); }
};

// A 2-D convolution as TensorFlow defines it. The filter is always stored as
// TF stores it, [filter_height, filter_width, in_channels / groups,
// out_channels] (HWIO); input and output follow `layout`. Paddings may be
// asymmetric (TF's SAME with an even total, or EXPLICIT).
struct ConvParams {
  int64_t batch = 0;        // N
  int64_t in_channels = 0;  // C (all groups)
  int64_t in_height = 0;    // H
  int64_t in_width = 0;     // W
  int64_t out_channels = 0; // K (all groups)
  int64_t filter_height = 0;  // R
  int64_t filter_width = 0;   // S
  int64_t groups = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t out_height = 0;   // P
  int64_t out_width = 0;    // Q
  Layout layout = Layout::kNHWC;
  DType dtype = DType::kFloat;
  // What the kernel fuses around the convolution (the forward pass only).
  Fusion fusion;

  int64_t group_in_channels() const { return in_channels / groups; }
  int64_t group_out_channels() const { return out_channels / groups; }
  bool symmetric_padding() const {
    return pad_top == pad_bottom && pad_left == pad_right;
  }
  // Elements per sample of the input and the output, and of the filter.
  int64_t input_sample_size() const { return in_channels * in_height * in_width; }
  int64_t output_sample_size() const { return out_channels * out_height * out_width; }
  int64_t filter_size() const {
    return filter_height * filter_width * group_in_channels() * out_channels;
  }
  // True when the input, the filter or the output has no elements (a batch
  // of 0, an empty spatial dimension, 0 output channels). Such a pass computes
  // nothing: its result is empty, or zero where it has elements (each element
  // is a sum over an empty set), as in tf.nn.conv2d. Front ends produce that
  // result themselves; the engine never plans or runs an empty convolution
  // (cuDNN rejects zero-sized descriptors).
  bool empty() const {
    return batch == 0 || in_channels == 0 || in_height == 0 || in_width == 0 ||
           out_channels == 0 || filter_height == 0 || filter_width == 0 || out_height == 0 ||
           out_width == 0;
  }

  // Every field that defines the convolution, batch included, for cache keys;
  // the last is fusion.Code().
  std::array<int64_t, 21> Fields() const;
  // The convolution of Fields() (its inverse; a fusion code Fusion::FromCode
  // refuses gives no fusion, so Fields() then differs from `f`).
  static ConvParams FromFields(const std::array<int64_t, 21>& f);
  // e.g. "N=256 C=64 H=56 W=56 K=64 R=3 S=3 stride=1x1 pad=1,1,1,1 dil=1x1 groups=1 NHWC float32",
  // with " " and fusion.Name() appended where there is a fusion (" +bias").
  std::string ToString() const;
};

// Bytes of one pass's tensors for `samples` samples (the filter always
// whole), named as PassTensors names them (pass_buffers.h):
//   forward:         a = input,        b = filter,       out = output
//   backward-data:   a = out_backprop, b = filter,       out = in_backprop
//   backward-filter: a = input,        b = out_backprop, out = filter_backprop
struct PassBytes {
  int64_t a = 0, b = 0, out = 0;
};
PassBytes PassTensorBytes(Pass pass, const ConvParams& params, int64_t samples);

// Element strides (n, c, h, w) of a [n, c, h, w] tensor stored packed in
// `layout` (NHWC or NCHW), whose spatial extent is (height, width).
void LayoutStrides(Layout layout, int64_t c, int64_t height, int64_t width, int64_t s[4]);

// Output size along one dimension (TF's formula with explicit paddings).
int64_t ConvOutputSize(int64_t in, int64_t filter, int64_t dilation, int64_t stride,
                       int64_t pad_before, int64_t pad_after);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_CONV_PARAMS_H_
