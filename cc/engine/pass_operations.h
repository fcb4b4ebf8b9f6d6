// The buffers and cuDNN calls around one kernel's convolutions: the filter's
// copy in cuDNN's layout and its transforms, the explicitly padded
// micro-batch (asymmetric padding), the bias (and ReLU) epilogue of legacy
// algorithms, and the float32 accumulation of float16/bfloat16
// backward-filter micro-batches. Used by the plan runner and the autotuner;
// nothing is synchronised. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_PASS_OPERATIONS_H_
#define TF_UCUDNN_ENGINE_PASS_OPERATIONS_H_

#if GOOGLE_CUDA

#include <cstdint>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/descriptor_cache.h"
#include "cc/engine/kernel_spec.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/status.h"

namespace ucudnn {

// Buffers a pass needs besides workspace: the filter in cuDNN's layout, and a
// padded input (or input gradient) micro-batch when padding is asymmetric.
struct PassScratch {
  void* filter = nullptr;
  void* padded = nullptr;
};

// Bytes of the filter's copy in cuDNN's layout that a pass allocates before
// its workspace (0 where the filter is in that layout already).
int64_t FilterCopyBytes(const ConvParams& p, const PassTensors& t);
// The filter's copy in cuDNN's layout, unless the caller's filter is in that
// layout already (t.filter_in_cudnn_layout: XLA's custom calls).
Status AllocateFilter(const ConvParams& p, const PassTensors& t, ScratchAllocator* scratch,
                      PassScratch* ps);

// The zeroed buffer of one explicitly padded micro-batch of up to `max_size`
// samples, when padding is asymmetric.
Status AllocatePadded(const ConvParams& p, bool asymmetric, int64_t max_size,
                      int64_t padded_sample_elems, cudaStream_t stream,
                      ScratchAllocator* scratch, PassScratch* ps);

// The cuDNN calls around a kernel's convolution, with its descriptors. The
// handle must be held and on the stream.
class PassOperations {
 public:
  // The float32 accumulator starts kAccumulatorAlign-aligned within the
  // plan's workspace; its last kAccumulatorAlign bytes are zero (the zero
  // element of OpTensor, and the one-element destination of the probe at
  // kProbeOffset).
  static constexpr int64_t kProbeOffset = 128;

  PassOperations(const KernelSpec& spec, const PaddedGeometry& geometry,
                 DescriptorCache* descriptors)
      : spec_(spec), geometry_(geometry), descriptors_(descriptors) {}

  // The filter operand (b) and the output as the pass's cuDNN calls take
  // them: the caller's when its filter is in cuDNN's layout; else ps.filter
  // (AllocateFilter) as the filter, transformed from t.b (forward,
  // backward-data), or as backward-filter's output (Run transforms it back
  // into t.out).
  Status FilterOperands(cudnnHandle_t handle, const PassTensors& t, const PassScratch& ps,
                        const void** b, void** out);
  // HWIO <-> cuDNN's filter layout (KCRS for NCHW, KRSC for NHWC).
  Status TransformFilter(cudnnHandle_t handle, const void* src, void* dst, bool to_cudnn);
  // Input micro-batch into / gradient out of the padded buffer (asymmetric
  // padding): one pitched 3-D copy on the stream.
  Status CopyPadded(cudaStream_t stream, int64_t size, const void* src, void* dst,
                    bool into_padded);
  // A legacy algorithm's forward output of `size` samples at `y` gets the
  // bias added (cudnnAddTensor; the descriptors of `math_type`), then the
  // ReLU where the epilogue has one (Fusion::relu).
  Status AddBias(cudnnHandle_t handle, int64_t size, int math_type, const void* bias, void* y);

  // Float32 accumulation of a float16/bfloat16 backward-filter plan of several
  // micro-batches. cuDNN's beta = 1 would round every partial sum to the
  // element type (bfloat16: 8 significant bits), an error that grows with the
  // number of micro-batches; instead each micro-batch writes its gradient
  // (beta = 0) and cudnnOpTensor adds it into a float32 sum in the plan's
  // workspace, rounded to the element type once at the end.
  // Adds the float32 filter gradient of one micro-batch (`part`, cuDNN's filter
  // layout) to `sum`; with `probe`, also rounds the sum back into `part` (an
  // exact round trip at the first micro-batch) to learn that cuDNN takes both
  // type mixes. The raw status: a refusal falls back to accumulating in T.
  cudnnStatus_t AccumulateFloat(cudnnHandle_t handle, const void* part, float* sum,
                                const void* zero, bool probe);
  // The float32 sum rounded to the element type into `out` (cuDNN's layout).
  Status StoreFloatSum(cudnnHandle_t handle, cudaStream_t stream, const float* sum,
                       const void* zero, void* out);

 private:
  const KernelSpec spec_;
  const PaddedGeometry geometry_;
  DescriptorCache* const descriptors_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_PASS_OPERATIONS_H_
