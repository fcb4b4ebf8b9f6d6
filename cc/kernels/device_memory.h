// What TensorFlow's GPU allocator can hand out now, for workspace_limit=auto:
// from the allocator's statistics (the BFC allocator's largest free chunk,
// the room its pool may still grow into, and its memory limit, which a
// logical device's memory_limit sets). Used by the TF kernel's scratch
// allocator and by the XLA custom calls' (whose scratch memory comes from the
// same allocator under TF).
#ifndef TF_UCUDNN_KERNELS_DEVICE_MEMORY_H_
#define TF_UCUDNN_KERNELS_DEVICE_MEMORY_H_

#if GOOGLE_CUDA

#include "cc/kernels/engine/pass_buffers.h"
#include "tensorflow/core/framework/allocator.h"

namespace tensorflow {
namespace ucudnn_tf {

// What `allocator` could allocate in one block now, and its memory limit;
// unknown (-1) where it keeps no statistics or no limit.
ucudnn::FreeDeviceMemory FreeMemoryOf(Allocator* allocator);

// TensorFlow's allocator of the GPU with CUDA ordinal `ordinal` (the first
// TF GPU device on it), or nullptr where TensorFlow made none.
Allocator* TfGpuAllocator(int ordinal);

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_KERNELS_DEVICE_MEMORY_H_
