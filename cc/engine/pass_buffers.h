// What a front end lends the engine for one pass: its tensors (PassTensors),
// device memory from its own allocator (ScratchAllocator), and other GPUs
// that may benchmark for it (BenchmarkPeer). The engine never allocates
// device memory itself and works only on the caller's stream. No TensorFlow
// includes.
#ifndef TF_UCUDNN_ENGINE_PASS_BUFFERS_H_
#define TF_UCUDNN_ENGINE_PASS_BUFFERS_H_

#if GOOGLE_CUDA

#include <cstdint>

#include "cuda_runtime_api.h"
#include "cc/engine/conv_params.h"

namespace ucudnn {

// Sub-buffers of one block of device memory (a transposed copy, a
// micro-batch's sums, a reduction's workspace) start at multiples of this
// many bytes: what TF's allocator aligns its blocks to, more than any cuDNN
// engine needs.
constexpr int64_t kBlockAlign = 256;
inline int64_t AlignedBytes(int64_t bytes) {
  return (bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
}

// What a device's allocator can hand out now, for workspace_limit=auto
// (bytes; -1: the front end cannot tell).
struct FreeDeviceMemory {
  int64_t available = -1;   // the largest block it could allocate now
  int64_t pool_limit = -1;  // all it may ever hold (its memory limit)
};

// Device memory that lives until the op's Compute returns (stream-ordered).
class ScratchAllocator {
 public:
  virtual ~ScratchAllocator() = default;
  // nullptr when `bytes` cannot be allocated; never nullptr for bytes == 0
  // callers must not dereference.
  virtual void* Allocate(int64_t bytes) = 0;
  // cuDNN's workspace: the search workspace while benchmarking, the plan's
  // while running (at most one at a time). A front end may serve it from
  // memory of its own (an XLA custom call's workspace result buffer); the
  // default allocates it like any other block.
  virtual void* AllocateWorkspace(int64_t bytes) { return Allocate(bytes); }
  // Gives back everything allocated so far (stream-ordered: work already
  // queued on the stream may still use it). The default keeps it.
  virtual void ReleaseAll() {}
  // Gives back one block that Allocate returned (stream-ordered, as
  // ReleaseAll). The default keeps it until ReleaseAll or the call's end.
  virtual void Release(void* block) {}
  // What the allocator behind this one can hand out now (workspace_limit=auto).
  // The default cannot tell.
  virtual FreeDeviceMemory FreeMemory() { return FreeDeviceMemory(); }
};

// Another GPU that benchmarks some of a kernel's micro-batch sizes
// (UCUDNN_BENCHMARK_DEVICES): its CUDA ordinal, a stream of it, and memory
// that is stream-ordered on that stream. Must be the same GPU model.
struct BenchmarkPeer {
  int device = 0;
  cudaStream_t stream = nullptr;
  ScratchAllocator* scratch = nullptr;
};

// What one micro-batch's fused convolution reads or writes besides its x, w
// and y: the prologue's scale and bias and the epilogue's bias (the whole
// pass's), and the statistics epilogue's sums of this micro-batch alone
// (out_channels float32 each, written; the plan runner adds them up over the
// micro-batches).
struct FusionPointers {
  const void* bias = nullptr;
  float* sum = nullptr;
  float* sum_of_squares = nullptr;
  const void* input_scale = nullptr;
  const void* input_bias = nullptr;
};

// The tensors of one pass, in TF's layouts (filter HWIO), and the forward
// pass's bias where it has one.
//   forward:         a = input,        b = filter,       out = output
//   backward-data:   a = out_backprop, b = filter,       out = in_backprop
//   backward-filter: a = input,        b = out_backprop, out = filter_backprop
struct PassTensors {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  // The filter (or filter_backprop) is in cuDNN's layout instead: KRSC for
  // NHWC, KCRS for NCHW. XLA's custom calls ask for it so (the compiler
  // transposes the filter once, where it can inside a fusion); the kernel
  // then neither transforms it nor allocates a copy of it.
  bool filter_in_cudnn_layout = false;
  // Forward with ConvParams::bias: the bias, out_channels elements.
  const void* bias = nullptr;
  // Forward with the statistics epilogue (Fusion::statistics): the
  // per-output-channel sum and sum of squares of the output over the whole
  // mini-batch, out_channels float32 each, written.
  float* sum = nullptr;
  float* sum_of_squares = nullptr;
  // Forward with an input prologue (Fusion::input_scale_bias): the scale and
  // bias of each input channel, in_channels float32 each (the front ends'),
  // and the same in the convolution's type, which cuDNN's fused batch-norm
  // graphs take (RunConvPass converts them; the engine's passes read these).
  const float* input_scale = nullptr;
  const float* input_bias = nullptr;
  const void* prologue_scale = nullptr;
  const void* prologue_bias = nullptr;

  // Which fusion tensors are there, for Fusion::Check.
  FusionTensors present() const {
    FusionTensors t;
    t.bias = bias != nullptr;
    t.statistics = sum != nullptr && sum_of_squares != nullptr;
    t.input_scale = input_scale != nullptr;
    t.input_bias = input_bias != nullptr;
    return t;
  }
  // The fusion's tensors as a graph of the whole pass reads them.
  FusionPointers fusion() const {
    FusionPointers f;
    f.bias = bias;
    f.sum = sum;
    f.sum_of_squares = sum_of_squares;
    f.input_scale = prologue_scale;
    f.input_bias = prologue_bias;
    return f;
  }
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_PASS_BUFFERS_H_
