// One micro-batch of a convolution pass on the CPU: im2col + Eigen GEMM per
// sample and group, computed in float32. Covers what TF's CPU convolution
// lacks: NCHW, and the gradients of grouped convolutions. What runs around
// the convolution (the fusion) is in cpu_fusion.h, the loop over a plan's
// micro-batches in cpu_pass.h.
#ifndef TF_UCUDNN_ENGINE_CPU_BACKEND_H_
#define TF_UCUDNN_ENGINE_CPU_BACKEND_H_

#include <cstdint>
#include <functional>

#include "cc/engine/conv_params.h"

namespace ucudnn {

// parallel_for(units, cost_per_unit, fn): calls fn(begin, end) over disjoint
// ranges covering [0, units), possibly concurrently (TF's Shard in the glue).
using ParallelFor =
    std::function<void(int64_t, int64_t, const std::function<void(int64_t, int64_t)>&)>;

// All pointers address the micro-batch's first sample (input/output, layout
// params.layout) or the whole filter ([R, S, C/groups, K]); `size` is the
// number of samples in the micro-batch.
template <typename T>
void CpuForward(const ConvParams& params, int64_t size, const T* input, const T* filter,
                T* output, const ParallelFor& parallel_for);

template <typename T>
void CpuBackwardData(const ConvParams& params, int64_t size, const T* out_backprop,
                     const T* filter, T* in_backprop, const ParallelFor& parallel_for);

// Writes (accumulate = false) or adds to (accumulate = true) the filter
// gradient, which is float32 whatever T: the micro-batches of a plan all add
// to it, and accumulating in T would round every partial sum to T (bfloat16
// keeps 8 significant bits), an error that grows with the number of
// micro-batches. CpuStoreFilter rounds the sum to T once, at the end.
template <typename T>
void CpuBackwardFilter(const ConvParams& params, int64_t size, const T* input,
                       const T* out_backprop, float* filter_backprop, bool accumulate,
                       const ParallelFor& parallel_for);

// The float32 filter gradient ([R, S, C/groups, K]) rounded to T.
template <typename T>
void CpuStoreFilter(const ConvParams& params, const float* filter_backprop, T* out);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_CPU_BACKEND_H_
