// cuDNN's legacy vocabulary as the engine uses it: RAII descriptors, the
// descriptors of one micro-batch size (ConvDescriptors) and of the filter
// (FilterDescriptors), data types, and the names of legacy algorithms. No
// TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_CUDNN_DESCRIPTORS_H_
#define TF_UCUDNN_ENGINE_CUDNN_DESCRIPTORS_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <limits>
#include <string>

#include "cudnn.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/cuda_check.h"
#include "cc/engine/status.h"

namespace ucudnn {

// cuDNN's data type of a DType.
cudnnDataType_t CudnnDataType(DType dtype);
cudnnTensorFormat_t CudnnFormat(Layout layout);

// RAII for the descriptor types used here.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { cudnnCreateTensorDescriptor(&d); }
  ~TensorDesc() { if (d) cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // A [n, c, h, w] view with explicit strides.
  Status Set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, const int64_t s[4]) {
    // The legacy descriptor takes int: a larger value would wrap silently.
    for (int64_t v : {n, c, h, w, s[0], s[1], s[2], s[3]}) {
      if (v > std::numeric_limits<int>::max()) {
        return Status::InvalidArgument("a tensor dimension or stride (" + std::to_string(v) +
                                       ") exceeds 2^31 - 1, which cuDNN's legacy API cannot "
                                       "describe");
      }
    }
    UCUDNN_CUDNN_OK(cudnnSetTensor4dDescriptorEx(
        d, CudnnDataType(dtype), static_cast<int>(n), static_cast<int>(c), static_cast<int>(h),
        static_cast<int>(w), static_cast<int>(s[0]), static_cast<int>(s[1]),
        static_cast<int>(s[2]), static_cast<int>(s[3])));
    return Status();
  }
  // A per-channel bias of `channels` values as [1, channels, 1, 1], the
  // operand cudnnAddTensor broadcasts over a batch in either layout.
  Status SetBias(DType dtype, int64_t channels) {
    const int64_t strides[4] = {channels, 1, 1, 1};
    return Set(dtype, 1, channels, 1, 1, strides);
  }
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { cudnnCreateFilterDescriptor(&d); }
  ~FilterDesc() { if (d) cudnnDestroyFilterDescriptor(d); }
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { cudnnCreateConvolutionDescriptor(&d); }
  ~ConvDesc() { if (d) cudnnDestroyConvolutionDescriptor(d); }
};

struct OpTensorDesc {
  cudnnOpTensorDescriptor_t d = nullptr;
  OpTensorDesc() { cudnnCreateOpTensorDescriptor(&d); }
  ~OpTensorDesc() { if (d) cudnnDestroyOpTensorDescriptor(d); }
  OpTensorDesc(const OpTensorDesc&) = delete;
  OpTensorDesc& operator=(const OpTensorDesc&) = delete;
};

// A cudnnReduceTensor descriptor of `op` in float32, without indices (the
// unfused statistics: statistics_reduction.h).
struct ReduceDesc {
  cudnnReduceTensorDescriptor_t d = nullptr;
  ReduceDesc() { cudnnCreateReduceTensorDescriptor(&d); }
  ~ReduceDesc() { if (d) cudnnDestroyReduceTensorDescriptor(d); }
  ReduceDesc(const ReduceDesc&) = delete;
  ReduceDesc& operator=(const ReduceDesc&) = delete;
  Status Set(cudnnReduceTensorOp_t op) {
    UCUDNN_CUDNN_OK(cudnnSetReduceTensorDescriptor(d, op, CUDNN_DATA_FLOAT,
                                                   CUDNN_NOT_PROPAGATE_NAN,
                                                   CUDNN_REDUCE_TENSOR_NO_INDICES,
                                                   CUDNN_32BIT_INDICES));
    return Status();
  }
};

// A ReLU (cudnnActivationForward, in place on y: the bias-and-ReLU epilogue
// after a legacy algorithm, and an empty convolution's relu(bias)).
struct ReluDesc {
  cudnnActivationDescriptor_t d = nullptr;
  ReluDesc() {
    cudnnCreateActivationDescriptor(&d);
    cudnnSetActivationDescriptor(d, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0);
  }
  ~ReluDesc() { if (d) cudnnDestroyActivationDescriptor(d); }
  ReluDesc(const ReluDesc&) = delete;
  ReluDesc& operator=(const ReluDesc&) = delete;
  // y = max(y, 0) for the tensor `desc` describes.
  Status Apply(cudnnHandle_t handle, const TensorDesc& desc, void* y) const {
    const float one = 1.0f, zero = 0.0f;
    UCUDNN_CUDNN_OK(cudnnActivationForward(handle, d, &one, desc.d, y, &zero, desc.d, y));
    return Status();
  }
};

// The descriptors of one micro-batch size and math type.
struct ConvDescriptors {
  TensorDesc x, y;  // x: the input as cuDNN sees it (padded if asymmetric)
  FilterDesc w;
  ConvDesc conv;
};

// The filter as TF stores it (HWIO) and as cuDNN reads it, both viewed as
// [K, C, R, S]; made once per kernel, since every run transforms the filter.
// For the float32 accumulation of backward-filter (see plan_execution.cc): the
// cuDNN-layout filter in float32, a one-element zero in T and in float32 (the
// B operand of cudnnOpTensor, broadcast and scaled by 0), and the ADD op.
// For a forward pass with a bias: the bias as [1, K, 1, 1] (cudnnAddTensor
// after a legacy algorithm), and the ReLU where the epilogue has one.
struct FilterDescriptors {
  TensorDesc tf, cudnn;
  TensorDesc cudnn_float, zero_t, zero_float;
  OpTensorDesc add;
  TensorDesc bias;
  ReluDesc relu;
};

// Legacy algorithms of a pass: how many cuDNN has, and their enum names.
int MaxAlgoCount(Pass pass);
const char* AlgoEnumName(Pass pass, int algo);
const char* MathTypeName(int math_type);

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDNN_DESCRIPTORS_H_
