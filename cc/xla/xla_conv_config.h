// What an XLA custom call of tf_ucudnn carries from compile time (the tf2xla
// kernel, cc/xla/xla_conv_ops.cc) to run time (the FFI handler,
// cc/xla/xla_ffi_conv.cc): the target name of each pass and the
// attributes, written as the MLIR dictionary XLA parses for typed-FFI custom
// calls. No TensorFlow includes, and none of the runner's: the encoding of
// the engine's values (ConvParams, PlanningKnobs) alone, tested on the CPU
// (xla_conv_config_test.cc).
#ifndef TF_UCUDNN_XLA_XLA_CONV_CONFIG_H_
#define TF_UCUDNN_XLA_XLA_CONV_CONFIG_H_

#include <cstdint>
#include <string>

#include "cc/engine/conv_params.h"
#include "cc/engine/knobs.h"

namespace tensorflow {
namespace ucudnn_tf {

struct XlaConvConfig {
  ucudnn::ConvParams params;  // its fusion included (conv's field 20)
  // Resolved when the tf2xla kernel was created, as by the TF kernel; the
  // numerics fixed when the function is compiled.
  ucudnn::PlanningKnobs knobs;
};

// "ucudnn_conv2d_forward", "ucudnn_conv2d_backward_data", "ucudnn_conv2d_backward_filter".
const char* XlaConvTarget(ucudnn::Pass pass);
// The custom-call target of the forward pass with the statistics epilogue
// (Ucudnn>Conv2DWithStatistics): three results, the output and its two
// per-channel sums.
inline constexpr char kXlaStatisticsTarget[] = "ucudnn_conv2d_forward_statistics";
// Ucudnn>NormalizedConv2DWithStatistics's: input, filter, scale and offset
// (float32, in_channels each) in; output, sum, sum of squares (and the
// optional workspace) out.
inline constexpr char kXlaNormalizedStatisticsTarget[] =
    "ucudnn_conv2d_forward_normalized_statistics";

// Attribute names, shared by the encoder and the handler's binding.
inline constexpr char kAttrConv[] = "conv";  // ConvParams::Fields(), i64 array
inline constexpr char kAttrWorkspaceLimit[] = "workspace_limit";
inline constexpr char kAttrBatchSizePolicy[] = "batch_size_policy";  // enum value
inline constexpr char kAttrMicroBatchSize[] = "micro_batch_size";
inline constexpr char kAttrTotalWorkspace[] = "total_workspace";
inline constexpr char kAttrEngines[] = "engines";  // enum value
inline constexpr char kAttrGraphPruneFactor[] = "graph_prune_factor";  // f64
inline constexpr char kAttrGraphSearch[] = "graph_search";  // ucudnn::GraphSearch
inline constexpr char kAttrGraphLayouts[] = "graph_layouts";  // enum value
inline constexpr char kAttrAllowTf32[] = "allow_tf32";  // 0 or 1
inline constexpr char kAttrDeterministic[] = "deterministic";  // 0 or 1

// The input channels (C) the custom call of `params` runs with: C, or 8 where
// a half-precision (float16, bfloat16) convolution without groups has C < 8
// (an image's 1 to 4 channels, e.g. the 7x7 stem of ResNet-50); 4 for a
// float16 image of 3 channels into 32 or 64 filters, which cuDNN's
// first-layer kernels take, as XLA's cudnn_pad_for_convolutions pads it (the
// ResNet-50 stem's forward on an H200: stock XLA's first-layer kernel
// 0.40 ms; ours planned 0.83 ms on 4 channels, 1.35 ms on 8). The tf2xla
// kernel pads the input (and the filter's input channels) with zeros in XLA's
// buffers and slices a gradient back to C, as XLA pads its own float16
// convolutions for tensor cores (cudnn_pad_for_convolutions). cuDNN would
// otherwise pad inside the workspace: with C = 3, no fast bfloat16 engine fits
// 64 MiB at N = 128, and the stem ran in 32 micro-batches of 4 (H200;
// docs/benchmarks.md section 5). Results are unchanged: the added channels are
// zeros in both operands.
int64_t XlaPaddedInChannels(const ucudnn::ConvParams& params);

// The custom call's backend config: an MLIR dictionary of i64 attributes
// (and graph_prune_factor, f64),
// e.g. "{conv = array<i64: 8, 3, ...>, workspace_limit = 67108864 : i64, ...}".
std::string EncodeXlaConvConfig(const XlaConvConfig& config);

// The attributes as the FFI handler binds them (UCUDNN_FFI_BINDING in
// cc/xla/xla_ffi_conv.cc), before they are checked.
struct XlaConvAttributes {
  const int64_t* conv = nullptr;  // ConvParams::Fields()
  size_t conv_size = 0;
  int64_t workspace_limit = 0, policy = 0, micro_batch_size = 0, total_workspace = 0;
  int64_t engines = 0;
  double graph_prune_factor = 0;
  int64_t graph_search = 0, graph_layouts = 0, allow_tf32 = 0, deterministic = 0;
};

// The config EncodeXlaConvConfig wrote (its inverse); false when an attribute
// is out of range (a field count, an enum value or fusion code not known, a
// negative size, a flag other than 0 or 1, a prune factor
// ValidGraphPruneFactor refuses, a workspace limit neither bytes nor
// kAutoWorkspaceLimit: the knobs are resolved, so kFromEnvironment is refused).
bool DecodeXlaConvConfig(const XlaConvAttributes& attrs, XlaConvConfig* config);

// ConvParams from ConvParams::Fields(); false if `n` is not the field count or
// an enum value is out of range.
bool ConvParamsFromFields(const int64_t* fields, size_t n, ucudnn::ConvParams* params);

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // TF_UCUDNN_XLA_XLA_CONV_CONFIG_H_
