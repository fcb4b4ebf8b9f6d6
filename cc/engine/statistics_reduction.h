// The statistics epilogue where no cuDNN graph engine fuses it: the per-channel
// sum and sum of squares of a convolution's whole output, reduced after it with
// cudnnReduceTensor (float32: cuDNN's fused reductions all compute the
// convolution with TF32, which float32 without TF32 forbids). No TensorFlow
// includes.
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
// packed in params.layout, float32), over N, P and Q: a cudnnReduceTensor
// sum, and a norm (the square root of the sum of squares) squared by
// cudnnOpTensor. Scratch: the reduction's workspace and out_channels floats.
// The handle must be held and on the output's stream.
Status ReduceStatistics(cudnnHandle_t handle, const ConvParams& params, const PassTensors& t,
                        ScratchAllocator* scratch);

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_STATISTICS_REDUCTION_H_
