// One micro-batch of a convolution pass on the CPU: im2col + Eigen GEMM per
// sample and group, computed in float32. Covers what TF's CPU convolution
// lacks: NCHW, and the gradients of grouped convolutions.
#ifndef TF_UCUDNN_ENGINE_CPU_BACKEND_H_
#define TF_UCUDNN_ENGINE_CPU_BACKEND_H_

#include <cstdint>
#include <functional>

#include "cc/kernels/engine/conv_params.h"

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

// Writes (accumulate = false) or adds to (accumulate = true) filter_backprop.
template <typename T>
void CpuBackwardFilter(const ConvParams& params, int64_t size, const T* input,
                       const T* out_backprop, T* filter_backprop, bool accumulate,
                       const ParallelFor& parallel_for);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_CPU_BACKEND_H_
