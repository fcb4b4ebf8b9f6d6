// The statistics epilogue where no cuDNN graph engine fuses it: the per-channel
// sum and sum of squares of a convolution's whole output, reduced after it with
// cudnnReduceTensor (float32 without TF32: cuDNN's fused reductions all compute
// the convolution with TF32; any type where no fused engine planned, or where
// the plain convolution and this reduction measured faster than the fused
// graph: UCUDNN_STATISTICS, knobs.h). No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_STATISTICS_REDUCTION_H_
#define TF_UCUDNN_ENGINE_STATISTICS_REDUCTION_H_

#if GOOGLE_CUDA

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/status.h"

namespace ucudnn {

// Whether the statistics of `params` run unfused, after the convolution:
// float32 without TF32 (every fused reduction engine of cuDNN 9.19 carries
// the TENSOR_CORE note).
bool StatisticsUnfused(const ConvParams& params, bool allow_tf32);

// t.sum[k] and t.sum_of_squares[k] of the forward output t.out ([N, K, P, Q]
// packed in params.layout, any dtype), over N, P and Q, in float32. Where
// cuDNN reduces the type into float32 sums: the sum and the L2 norm read from
// the output itself (cudnnReduceTensor ADD and NORM2, computing in float32),
// the norms squared into the sum of squares; scratch: the reduction's
// workspace and K floats. Otherwise (a type cuDNN refuses, from then on): the
// batch in chunks of up to 32 MiB of float32, each converted
// (cudnnTransformTensor), squared (cudnnOpTensor) and summed into the sums;
// scratch: up to two such chunks and the workspace. The handle must be held
// and on the output's stream.
Status ReduceStatistics(cudnnHandle_t handle, const ConvParams& params, const PassTensors& t,
                        ScratchAllocator* scratch);

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_STATISTICS_REDUCTION_H_
