// What runs around one micro-batch's convolution on the CPU (Fusion,
// conv_params.h): the input's scale-bias(-ReLU) prologue before im2col, the
// bias(-ReLU) epilogue and the statistics epilogue after the GEMM. Each works
// on `size` samples stored packed in params.layout ([N, H, W, C] NHWC or
// [N, C, H, W] NCHW) and computes in float32 (double for the statistics).
#ifndef TF_UCUDNN_ENGINE_CPU_FUSION_H_
#define TF_UCUDNN_ENGINE_CPU_FUSION_H_

#include <cstdint>

#include "cc/engine/conv_params.h"

namespace ucudnn {

// out = x * scale[c] + bias[c] for every element of input channel c, then
// max(., 0) where params.fusion.input_relu(); scale and bias are float32 of
// in_channels elements; computed in float32 and rounded to T once, as the
// unfused graph stores the normalized tensor in T (Keras' BatchNormalization
// casts its output to the compute dtype). `input` and `out`:
// [size, in_height, in_width, in_channels] in params.layout; may not overlap.
template <typename T>
void CpuInputPrologue(const ConvParams& params, int64_t size, const T* input,
                      const float* scale, const float* bias, T* out);

// Adds bias[k] to every element of channel k of `size` output samples, then
// max(., 0) where params.fusion.relu() (in float32, rounded to T once).
template <typename T>
void CpuBiasEpilogue(const ConvParams& params, int64_t size, const T* bias, T* output);

// Adds to sum[k] and sum_of_squares[k] (out_channels each) every element of
// output channel k of `size` output samples, as stored in T: the statistics
// epilogue of one micro-batch. The CPU reference sums in double, so that the
// micro-batches' sums equal the mini-batch's up to the order of summation
// (the GPU graphs sum in float32); the caller rounds them to float32 once.
template <typename T>
void CpuAddStatistics(const ConvParams& params, int64_t size, const T* output, double* sum,
                      double* sum_of_squares);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_CPU_FUSION_H_
