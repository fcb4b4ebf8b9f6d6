#include "cc/kernels/xla_compile_plan.h"

#if GOOGLE_CUDA

#include <utility>
#include <vector>

#include "cc/kernels/conv_attrs.h"
#include "cc/kernels/engine/conv_runner.h"
#include "tensorflow/compiler/tf2xla/xla_compiler.h"
#include "tensorflow/compiler/tf2xla/xla_context.h"
#include "xla/stream_executor/device_address_allocator.h"
#include "xla/stream_executor/stream.h"

namespace tensorflow {
namespace ucudnn_tf {
namespace {

namespace se = ::stream_executor;

// The engine's ScratchAllocator over the allocator the compilation lends
// (TF's, stream-ordered on its compute stream, where the engine benchmarks):
// blocks go back on Release, ReleaseAll, or when planning ends.
class CompileScratch : public ucudnn::ScratchAllocator {
 public:
  CompileScratch(se::DeviceAddressAllocator* allocator, int device)
      : allocator_(allocator), device_(device) {}
  void* Allocate(int64_t bytes) override {
    if (bytes <= 0) return nullptr;
    // No retry: a failed benchmark allocation means a smaller workspace (or
    // planning at the first run), not a wait for memory.
    absl::StatusOr<se::ScopedDeviceAddress<uint8_t>> block =
        allocator_->Allocate(device_, static_cast<uint64_t>(bytes), /*retry_on_failure=*/false,
                             /*memory_space=*/0);
    if (!block.ok() || block->is_null()) return nullptr;
    void* data = block->cref().opaque();
    blocks_.push_back(std::move(*block));
    return data;
  }
  void Release(void* block) override {
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (it->cref().opaque() == block) {
        blocks_.erase(it);
        return;
      }
    }
  }
  void ReleaseAll() override { blocks_.clear(); }

 private:
  se::DeviceAddressAllocator* allocator_;
  int device_;
  std::vector<se::ScopedDeviceAddress<uint8_t>> blocks_;
};

}  // namespace

absl::StatusOr<int64_t> PlanWhenCompiled(XlaOpKernelContext* ctx, ucudnn::Pass pass,
                                         const XlaConvConfig& config) {
  const XlaCompiler::Options& options = ctx->xla_context()->compiler()->options();
  se::DeviceAddressAllocator* allocator = options.device_allocator.get();
  const int device = options.device_ordinal;
  // None in a compilation for inspection only (experimental_get_compiler_ir).
  absl::StatusOr<se::Stream*> stream =
      allocator != nullptr && device >= 0
          ? allocator->GetStream(device)
          : absl::FailedPreconditionError("the compilation lends no GPU memory");
  if (!stream.ok()) return absl::FailedPreconditionError(stream.status().message());
  ucudnn::ConvRequest request = XlaConvRequest(
      pass, config, device, static_cast<cudaStream_t>((*stream)->platform_specific_handle().stream));
  if (request.stream == nullptr) {
    return absl::FailedPreconditionError("the compilation's stream has no CUDA stream");
  }
  int current = -1;
  const bool restore = cudaGetDevice(&current) == cudaSuccess && current != device;
  CompileScratch scratch(allocator, device);
  ucudnn::Plan plan;
  const ucudnn::Status status =
      ucudnn::PlanConvPass(request, kXlaFilterInCudnnLayout, &scratch, &plan);
  if (restore) cudaSetDevice(current);
  if (status.code() == ucudnn::Status::Code::kResourceExhausted) {
    return absl::UnavailableError(status.message());
  }
  TF_RETURN_IF_ERROR(EngineStatusToTf(status));
  return plan.workspace_bytes;
}

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
