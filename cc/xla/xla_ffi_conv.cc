// The XLA side of tf_ucudnn on the GPU: typed-FFI handlers of the custom calls
// that cc/xla/xla_conv_ops.cc emits, one per pass. Each call runs the pass
// through the same engine as the TF kernel (RunConvPass: kernel cache,
// benchmark database, Workspace Reuse, legacy and graph-API candidates,
// Workspace Division groups, plan records), on XLA's stream, with benchmark
// buffers and workspace from XLA's scratch allocator (TF's allocator under
// TF), so that the workspace is bounded by the op's limit as without XLA; or,
// with UCUDNN_XLA_WORKSPACE=buffer, the workspace from the call's second
// result, a buffer of the limit's size that XLA places in its temp allocation.
#if GOOGLE_CUDA

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "cc/kernels/device_memory.h"
#include "cc/engine/conv_runner.h"
#include "cc/xla/xla_conv_config.h"
#include "xla/ffi/api/c_api.h"
#include "xla/ffi/api/ffi.h"

namespace tensorflow {
namespace ucudnn_tf {
namespace {

namespace ffi = xla::ffi;
using ucudnn::Pass;

// The engine's ScratchAllocator over XLA's: memory lives until the handler
// returns (XLA gives it back then; stream-ordered on XLA's stream). With
// UCUDNN_XLA_WORKSPACE=buffer the call also has a workspace result buffer
// (placed by XLA's buffer assignment, of the workspace limit's size), which
// serves cuDNN's workspace while it is free and large enough.
//
// cuDNN's workspace otherwise comes from TF's allocator of the GPU directly,
// asked without retry (HeldBlocks): XLA's FFI allocates with retry on
// failure, and TF's BFC allocator then waits up to 10 s for memory to be
// freed before it refuses a block. Such a block goes back at Release,
// ReleaseAll or the handler's end, like XLA's scratch (TF's allocator is not
// stream-ordered; XLA runs on TF's compute stream).
class FfiScratch : public ucudnn::ScratchAllocator {
 public:
  FfiScratch(ffi::ScratchAllocator* scratch, int device, void* workspace,
             int64_t workspace_bytes)
      : scratch_(scratch), device_(device), workspace_(workspace),
        workspace_bytes_(workspace_bytes), direct_(TfGpuAllocator(device)) {}
  FfiScratch(const FfiScratch&) = delete;
  FfiScratch& operator=(const FfiScratch&) = delete;
  void* Allocate(int64_t bytes) override {
    if (bytes <= 0) return nullptr;
    // XLA's FFI accepts alignments up to 16 bytes; its allocator (TF's BFC
    // under TF) returns blocks aligned to 256 bytes anyway, as cuDNN wants.
    std::optional<void*> p = scratch_->Allocate(static_cast<size_t>(bytes), 16);
    return p.has_value() ? *p : nullptr;
  }
  void* AllocateWorkspace(int64_t bytes) override {
    if (workspace_ != nullptr && !workspace_lent_ && bytes <= workspace_bytes_) {
      workspace_lent_ = true;
      return workspace_;
    }
    if (TfGpuAllocator(device_) == nullptr) return Allocate(bytes);
    return direct_.Allocate(bytes);
  }
  // XLA's scratch goes back only when the call returns; the buffer is free
  // again for the next workspace; a block of TF's allocator goes back now.
  void Release(void* block) override {
    if (block == nullptr) return;
    if (block == workspace_) {
      workspace_lent_ = false;
      return;
    }
    direct_.Free(block);
  }
  void ReleaseAll() override {
    workspace_lent_ = false;
    direct_.FreeAll();
  }
  // XLA's scratch allocator under TF is TF's allocator of the call's GPU.
  ucudnn::FreeDeviceMemory FreeMemory() override { return FreeMemoryOf(TfGpuAllocator(device_)); }

 private:
  ffi::ScratchAllocator* scratch_;
  int device_;               // CUDA ordinal
  void* workspace_;          // the call's workspace result, or nullptr
  int64_t workspace_bytes_;  // its size
  bool workspace_lent_ = false;
  HeldBlocks direct_;  // workspaces from TF's allocator, not yet given back
};

ffi::Error ToFfiError(const ucudnn::Status& s) {
  switch (s.code()) {
    case ucudnn::Status::Code::kOk: return ffi::Error::Success();
    case ucudnn::Status::Code::kInvalidArgument:
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, s.message());
    case ucudnn::Status::Code::kResourceExhausted:
      return ffi::Error(ffi::ErrorCode::kResourceExhausted, s.message());
    case ucudnn::Status::Code::kInternal:
      return ffi::Error(ffi::ErrorCode::kInternal, s.message());
  }
  return ffi::Error(ffi::ErrorCode::kUnknown, s.message());
}

// The attributes every handler takes, as XlaConvAttributes.
struct FfiAttributes {
  ffi::Span<const int64_t> conv;
  int64_t workspace_limit, policy, micro_batch_size, total_workspace, engines;
  double graph_prune_factor;
  int64_t graph_search, graph_layouts, allow_tf32, deterministic;
};

// The sizes XLA's buffers must have for `pass` of the call's convolution:
// a, b, out as PassTensorBytes; the bias, where the fusion has one, and the
// statistics' two sums, where it has them.
bool BuffersMatch(Pass pass, const ucudnn::ConvParams& p, const ffi::AnyBuffer& a,
                  const ffi::AnyBuffer& b, const ffi::AnyBuffer& out,
                  const std::optional<ffi::AnyBuffer>& bias, const ffi::AnyBuffer* sum,
                  const ffi::AnyBuffer* sum_of_squares, const ffi::AnyBuffer* prologue) {
  const ucudnn::PassBytes want = ucudnn::PassTensorBytes(pass, p, p.batch);
  const int64_t sums = p.out_channels * static_cast<int64_t>(sizeof(float));
  const int64_t channels = p.in_channels * static_cast<int64_t>(sizeof(float));
  if ((prologue != nullptr) != p.fusion.input_scale_bias() ||
      (prologue != nullptr && (static_cast<int64_t>(prologue[0].size_bytes()) != channels ||
                               static_cast<int64_t>(prologue[1].size_bytes()) != channels))) {
    return false;
  }
  return static_cast<int64_t>(a.size_bytes()) == want.a &&
         static_cast<int64_t>(b.size_bytes()) == want.b &&
         static_cast<int64_t>(out.size_bytes()) == want.out &&
         bias.has_value() == (pass == Pass::kForward && p.fusion.bias()) &&
         (!bias.has_value() ||
          static_cast<int64_t>(bias->size_bytes()) == p.out_channels * ucudnn::DTypeSize(p.dtype)) &&
         (sum != nullptr) == p.fusion.statistics() &&
         (sum == nullptr || (static_cast<int64_t>(sum->size_bytes()) == sums &&
                             static_cast<int64_t>(sum_of_squares->size_bytes()) == sums));
}

// One pass of the call's convolution through the engine: a, b, out as
// PassTensors names them; `bias`, the forward pass's third operand where the
// fusion has one; `sum` and `sum_of_squares`, results where the fusion
// computes the statistics (the statistics targets); `prologue`, the input
// prologue's scale and offset (two operands) where the fusion has one.
ffi::Error RunConv(Pass pass, const char* target, cudaStream_t stream,
                   ffi::ScratchAllocator& scratch, int32_t device, ffi::AnyBuffer a,
                   ffi::AnyBuffer b, std::optional<ffi::AnyBuffer> bias, ffi::AnyBuffer out,
                   const ffi::AnyBuffer* sum, const ffi::AnyBuffer* sum_of_squares,
                   const ffi::AnyBuffer* prologue,
                   std::optional<ffi::Result<ffi::AnyBuffer>>& workspace,
                   const FfiAttributes& f) {
  XlaConvAttributes attrs;
  attrs.conv = f.conv.begin();
  attrs.conv_size = f.conv.size();
  attrs.workspace_limit = f.workspace_limit;
  attrs.policy = f.policy;
  attrs.micro_batch_size = f.micro_batch_size;
  attrs.total_workspace = f.total_workspace;
  attrs.engines = f.engines;
  attrs.graph_prune_factor = f.graph_prune_factor;
  attrs.graph_search = f.graph_search;
  attrs.graph_layouts = f.graph_layouts;
  attrs.allow_tf32 = f.allow_tf32;
  attrs.deterministic = f.deterministic;
  XlaConvConfig config;
  if (!DecodeXlaConvConfig(attrs, &config)) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      std::string("tf_ucudnn: malformed attributes of custom call ") + target);
  }
  ucudnn::ConvRequest q;
  q.pass = pass;
  q.params = config.params;
  q.knobs = config.knobs;
  const ucudnn::ConvParams& p = q.params;
  // The buffers XLA passes must be the ones the attributes describe.
  if (!BuffersMatch(pass, p, a, b, out, bias, sum, sum_of_squares, prologue)) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      std::string("tf_ucudnn: buffer sizes of ") + target + " do not match " +
                          p.ToString());
  }
  q.device = device;
  q.stream = stream;
  q.device_name = "/device:GPU:" + std::to_string(device) + " (XLA)";
  ucudnn::PassTensors tensors;
  tensors.a = a.untyped_data();
  tensors.b = b.untyped_data();
  tensors.out = out.untyped_data();
  tensors.filter_in_cudnn_layout = true;  // the custom call's operand layout (xla_conv_ops.cc)
  if (bias.has_value()) tensors.bias = bias->untyped_data();
  if (sum != nullptr) {
    tensors.sum = static_cast<float*>(sum->untyped_data());
    tensors.sum_of_squares = static_cast<float*>(sum_of_squares->untyped_data());
  }
  if (prologue != nullptr) {
    tensors.input_scale = static_cast<const float*>(prologue[0].untyped_data());
    tensors.input_bias = static_cast<const float*>(prologue[1].untyped_data());
  }
  // The workspace result (UCUDNN_XLA_WORKSPACE=buffer), u8 of the limit's size.
  void* workspace_data = nullptr;
  int64_t workspace_bytes = 0;
  if (workspace.has_value()) {
    workspace_data = (*workspace)->untyped_data();
    workspace_bytes = static_cast<int64_t>((*workspace)->size_bytes());
  }
  FfiScratch allocator(&scratch, device, workspace_data, workspace_bytes);
  return ToFfiError(ucudnn::RunConvPass(q, tensors, &allocator));
}

// `bias`: the forward pass's third operand, where the convolution has one
// (a fusion with a bias in the attributes: Fusion::bias).
template <Pass kPass>
ffi::Error RunPass(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                   ffi::AnyBuffer a, ffi::AnyBuffer b, std::optional<ffi::AnyBuffer> bias,
                   ffi::Result<ffi::AnyBuffer> out,
                   std::optional<ffi::Result<ffi::AnyBuffer>> workspace,
                   ffi::Span<const int64_t> conv, int64_t workspace_limit, int64_t policy,
                   int64_t micro_batch_size, int64_t total_workspace, int64_t engines,
                   double graph_prune_factor, int64_t graph_search, int64_t graph_layouts,
                   int64_t allow_tf32, int64_t deterministic) {
  const FfiAttributes f{conv,         workspace_limit,    policy,       micro_batch_size,
                        total_workspace, engines,         graph_prune_factor, graph_search,
                        graph_layouts, allow_tf32,        deterministic};
  return RunConv(kPass, XlaConvTarget(kPass), stream, scratch, device, a, b, bias, *out,
                 nullptr, nullptr, nullptr, workspace, f);
}

// The forward pass with the statistics epilogue: the output, and the sum
// and sum of squares of its channels (float32, out_channels each).
ffi::Error RunForwardStatistics(cudaStream_t stream, ffi::ScratchAllocator scratch,
                                int32_t device, ffi::AnyBuffer a, ffi::AnyBuffer b,
                                ffi::Result<ffi::AnyBuffer> out,
                                ffi::Result<ffi::AnyBuffer> sum,
                                ffi::Result<ffi::AnyBuffer> sum_of_squares,
                                std::optional<ffi::Result<ffi::AnyBuffer>> workspace,
                                ffi::Span<const int64_t> conv, int64_t workspace_limit,
                                int64_t policy, int64_t micro_batch_size,
                                int64_t total_workspace, int64_t engines,
                                double graph_prune_factor, int64_t graph_search,
                                int64_t graph_layouts, int64_t allow_tf32,
                                int64_t deterministic) {
  const FfiAttributes f{conv,         workspace_limit,    policy,       micro_batch_size,
                        total_workspace, engines,         graph_prune_factor, graph_search,
                        graph_layouts, allow_tf32,        deterministic};
  const ffi::AnyBuffer sums[2] = {*sum, *sum_of_squares};
  return RunConv(Pass::kForward, kXlaStatisticsTarget, stream, scratch, device, a, b,
                 std::nullopt, *out, &sums[0], &sums[1], nullptr, workspace, f);
}

// The same with the input prologue: its scale and offset (float32,
// in_channels each) as the third and fourth operands.
ffi::Error RunForwardNormalizedStatistics(
    cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device, ffi::AnyBuffer a,
    ffi::AnyBuffer b, ffi::AnyBuffer scale, ffi::AnyBuffer offset,
    ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> sum,
    ffi::Result<ffi::AnyBuffer> sum_of_squares,
    std::optional<ffi::Result<ffi::AnyBuffer>> workspace, ffi::Span<const int64_t> conv,
    int64_t workspace_limit, int64_t policy, int64_t micro_batch_size, int64_t total_workspace,
    int64_t engines, double graph_prune_factor, int64_t graph_search, int64_t graph_layouts,
    int64_t allow_tf32, int64_t deterministic) {
  const FfiAttributes f{conv,         workspace_limit,    policy,       micro_batch_size,
                        total_workspace, engines,         graph_prune_factor, graph_search,
                        graph_layouts, allow_tf32,        deterministic};
  const ffi::AnyBuffer sums[2] = {*sum, *sum_of_squares};
  const ffi::AnyBuffer prologue[2] = {scale, offset};
  return RunConv(Pass::kForward, kXlaNormalizedStatisticsTarget, stream, scratch, device, a, b,
                 std::nullopt, *out, &sums[0], &sums[1], prologue, workspace, f);
}

#define UCUDNN_FFI_ATTRIBUTES                               \
      .Attr<ffi::Span<const int64_t>>(kAttrConv)            \
      .Attr<int64_t>(kAttrWorkspaceLimit)                   \
      .Attr<int64_t>(kAttrBatchSizePolicy)                  \
      .Attr<int64_t>(kAttrMicroBatchSize)                   \
      .Attr<int64_t>(kAttrTotalWorkspace)                   \
      .Attr<int64_t>(kAttrEngines)                          \
      .Attr<double>(kAttrGraphPruneFactor)                  \
      .Attr<int64_t>(kAttrGraphSearch)                      \
      .Attr<int64_t>(kAttrGraphLayouts)                     \
      .Attr<int64_t>(kAttrAllowTf32)                        \
      .Attr<int64_t>(kAttrDeterministic)

// What every handler gets from XLA besides its buffers and attributes.
#define UCUDNN_FFI_CONTEXT                                  \
  ffi::Ffi::Bind()                                          \
      .Ctx<ffi::PlatformStream<cudaStream_t>>()             \
      .Ctx<ffi::ScratchAllocator>()                         \
      .Ctx<ffi::DeviceOrdinal>()

#define UCUDNN_FFI_BINDING                                  \
  UCUDNN_FFI_CONTEXT                                        \
      .Arg<ffi::AnyBuffer>()                                \
      .Arg<ffi::AnyBuffer>()                                \
      .OptionalArg<ffi::AnyBuffer>()                        \
      .Ret<ffi::AnyBuffer>()                                \
      .OptionalRet<ffi::AnyBuffer>()                        \
      UCUDNN_FFI_ATTRIBUTES

// The statistics target: input and filter in; output, sum, sum of squares
// and the optional workspace out.
#define UCUDNN_FFI_STATISTICS_BINDING                       \
  UCUDNN_FFI_CONTEXT                                        \
      .Arg<ffi::AnyBuffer>()                                \
      .Arg<ffi::AnyBuffer>()                                \
      .Ret<ffi::AnyBuffer>()                                \
      .Ret<ffi::AnyBuffer>()                                \
      .Ret<ffi::AnyBuffer>()                                \
      .OptionalRet<ffi::AnyBuffer>()                        \
      UCUDNN_FFI_ATTRIBUTES

XLA_FFI_DEFINE_HANDLER(kForwardHandler, RunPass<Pass::kForward>, UCUDNN_FFI_BINDING);
XLA_FFI_DEFINE_HANDLER(kBackwardDataHandler, RunPass<Pass::kBackwardData>, UCUDNN_FFI_BINDING);
XLA_FFI_DEFINE_HANDLER(kBackwardFilterHandler, RunPass<Pass::kBackwardFilter>,
                       UCUDNN_FFI_BINDING);
XLA_FFI_DEFINE_HANDLER(kForwardStatisticsHandler, RunForwardStatistics,
                       UCUDNN_FFI_STATISTICS_BINDING);

// The normalized statistics target: input, filter, scale and offset in; as
// the statistics target out.
XLA_FFI_DEFINE_HANDLER(kForwardNormalizedStatisticsHandler, RunForwardNormalizedStatistics,
                       UCUDNN_FFI_CONTEXT
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .OptionalRet<ffi::AnyBuffer>()
                           UCUDNN_FFI_ATTRIBUTES);

// Registers the five handlers for XLA's CUDA platform when the op library is
// loaded; a failure is reported on stderr (compiling then fails with XLA's
// "no registered implementation" error naming the target).
bool RegisterHandlers() {
  const XLA_FFI_Api* api = XLA_FFI_GetApi();
  const struct {
    const char* target;
    XLA_FFI_Handler* handler;
  } handlers[] = {{XlaConvTarget(Pass::kForward), kForwardHandler},
                  {XlaConvTarget(Pass::kBackwardData), kBackwardDataHandler},
                  {XlaConvTarget(Pass::kBackwardFilter), kBackwardFilterHandler},
                  {kXlaStatisticsTarget, kForwardStatisticsHandler},
                  {kXlaNormalizedStatisticsTarget, kForwardNormalizedStatisticsHandler}};
  bool ok = true;
  for (const auto& h : handlers) {
    if (XLA_FFI_Error* err =
            ffi::Ffi::RegisterStaticHandler(api, h.target, "CUDA", h.handler)) {
      std::fprintf(stderr, "W tf_ucudnn: could not register the XLA handler %s: %s\n",
                   h.target, ffi::internal::GetErrorMessage(api, err));
      ffi::internal::DestroyError(api, err);
      ok = false;
    }
  }
  return ok;
}

[[maybe_unused]] const bool kRegistered = RegisterHandlers();

}  // namespace
}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
