#if GOOGLE_CUDA

#include "cc/kernels/device_memory.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "tensorflow/core/common_runtime/gpu/gpu_id_manager.h"
#include "tensorflow/core/common_runtime/gpu/gpu_process_state.h"
#include "tensorflow/core/protobuf/config.pb.h"

namespace tensorflow {
namespace ucudnn_tf {

ucudnn::FreeDeviceMemory FreeMemoryOf(Allocator* allocator) {
  ucudnn::FreeDeviceMemory free;
  if (allocator == nullptr) return free;
  const std::optional<AllocatorStats> stats = allocator->GetStats();
  if (!stats.has_value() || !stats->bytes_limit.has_value()) return free;
  const int64_t limit = *stats->bytes_limit;
  const int64_t unused = std::max<int64_t>(limit - stats->bytes_in_use, 0);
  int64_t block = unused;
  if (stats->pool_bytes.has_value() && stats->largest_free_block_bytes > 0) {
    // A pool (BFC) that reports its largest free chunk: that, or a new region
    // in the part of the limit it has not reserved yet (memory growth). One
    // that reports none (0 with bytes unused) is taken at its unused bytes.
    block = std::max<int64_t>(stats->largest_free_block_bytes, limit - *stats->pool_bytes);
  }
  free.available = std::min(block, unused);
  free.pool_limit = limit;
  return free;
}

Allocator* TfGpuAllocator(int ordinal) {
  static std::mutex mu;
  static auto* found = new std::map<int, Allocator*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = found->find(ordinal);
  if (it != found->end()) return it->second;
  Allocator* allocator = nullptr;
  // TF device ids are dense from 0; the first one unknown to the manager ends them.
  for (int id = 0; id < 64 && allocator == nullptr; ++id) {
    tsl::PlatformDeviceId platform;
    if (!GpuIdManager::TfToPlatformDeviceId(tsl::TfDeviceId(id), &platform).ok()) break;
    if (platform.value() != ordinal) continue;
    // The device exists, so its allocator does: this returns it.
    allocator = GPUProcessState::singleton()->GetGPUAllocator(GPUOptions(), tsl::TfDeviceId(id),
                                                              /*total_bytes=*/0, {});
  }
  if (allocator != nullptr) (*found)[ordinal] = allocator;
  return allocator;
}

void* HeldBlocks::Allocate(int64_t bytes) {
  if (bytes <= 0 || allocator_ == nullptr) return nullptr;
  AllocationAttributes attrs;
  attrs.retry_on_failure = false;
  void* block =
      allocator_->AllocateRaw(Allocator::kAllocatorAlignment, static_cast<size_t>(bytes), attrs);
  if (block != nullptr) held_.push_back(block);
  return block;
}

bool HeldBlocks::Free(void* block) {
  auto it = std::find(held_.begin(), held_.end(), block);
  if (block == nullptr || it == held_.end()) return false;
  allocator_->DeallocateRaw(block);
  held_.erase(it);
  return true;
}

void HeldBlocks::FreeAll() {
  for (void* block : held_) allocator_->DeallocateRaw(block);
  held_.clear();
}

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
