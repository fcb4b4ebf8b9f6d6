// TensorFlow's GPU allocator as the engine's scratch memory sees it: what it
// can hand out now, for workspace_limit=auto (from the allocator's
// statistics: the BFC allocator's largest free chunk, the room its pool may
// still grow into, and its memory limit, which a logical device's
// memory_limit sets), and blocks asked of it without retry. Used by the TF
// kernel's scratch allocator, the XLA custom calls' and the benchmark peers'.
#ifndef TF_UCUDNN_KERNELS_DEVICE_MEMORY_H_
#define TF_UCUDNN_KERNELS_DEVICE_MEMORY_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <vector>

#include "cc/engine/pass_buffers.h"
#include "tensorflow/core/framework/allocator.h"

namespace tensorflow {
namespace ucudnn_tf {

// What `allocator` could allocate in one block now, and its memory limit;
// unknown (-1) where it keeps no statistics or no limit.
ucudnn::FreeDeviceMemory FreeMemoryOf(Allocator* allocator);

// TensorFlow's allocator of the GPU with CUDA ordinal `ordinal` (the first
// TF GPU device on it), or nullptr where TensorFlow made none.
Allocator* TfGpuAllocator(int ordinal);

// Blocks of one TF allocator, asked without retry on failure and held until
// Free, FreeAll or the holder's end. Without retry a refusal comes at once,
// where TF's BFC allocator would wait up to 10 s for memory to be freed: the
// engine would rather take a smaller workspace or plan at once. TF's
// allocator is not stream-ordered: the holder frees a block only after the
// work using it was issued on the stream the allocator serves.
class HeldBlocks {
 public:
  explicit HeldBlocks(Allocator* allocator) : allocator_(allocator) {}
  ~HeldBlocks() { FreeAll(); }
  HeldBlocks(const HeldBlocks&) = delete;
  HeldBlocks& operator=(const HeldBlocks&) = delete;

  // A block of `bytes`, aligned for cuDNN; nullptr where bytes <= 0, the
  // allocator refused, or there is no allocator.
  void* Allocate(int64_t bytes);
  // Gives back `block` if this holder holds it; false otherwise.
  bool Free(void* block);
  void FreeAll();

 private:
  Allocator* allocator_;
  std::vector<void*> held_;
};

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_KERNELS_DEVICE_MEMORY_H_
