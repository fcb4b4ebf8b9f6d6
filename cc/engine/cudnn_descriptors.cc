#if GOOGLE_CUDA

#include "cc/engine/cudnn_descriptors.h"


namespace ucudnn {

cudnnDataType_t CudnnDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat: return CUDNN_DATA_FLOAT;
    case DType::kHalf: return CUDNN_DATA_HALF;
    case DType::kBFloat16: return CUDNN_DATA_BFLOAT16;
  }
  return CUDNN_DATA_FLOAT;
}

cudnnTensorFormat_t CudnnFormat(Layout layout) {
  return layout == Layout::kNHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}


int MaxAlgoCount(Pass pass) {
  switch (pass) {
    case Pass::kForward: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case Pass::kBackwardData: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case Pass::kBackwardFilter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
  return 0;
}

const char* AlgoEnumName(Pass pass, int algo) {
  static const char* kForward[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                   "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* kBackwardData[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                        "WINOGRAD_NONFUSED"};
  static const char* kBackwardFilter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                          "WINOGRAD_NONFUSED", "FFT_TILING"};
  const char** names = pass == Pass::kForward        ? kForward
                       : pass == Pass::kBackwardData ? kBackwardData
                                                     : kBackwardFilter;
  const int count = pass == Pass::kForward ? 8 : pass == Pass::kBackwardData ? 6 : 7;
  return algo >= 0 && algo < count ? names[algo] : "UNKNOWN";
}

const char* MathTypeName(int math_type) {
  switch (math_type) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op-conversion";
    case CUDNN_FMA_MATH: return "fma";
  }
  return "?";
}


}  // namespace ucudnn

#endif  // GOOGLE_CUDA
