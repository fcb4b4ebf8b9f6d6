#if GOOGLE_CUDA

#include "cc/engine/statistics_reduction.h"

#include <algorithm>
#include <string>

#include "cc/engine/cuda_check.h"
#include "cc/engine/cudnn_descriptors.h"

namespace ucudnn {

bool StatisticsUnfused(const ConvParams& params, bool allow_tf32) {
  return params.fusion.statistics() && params.dtype == DType::kFloat && !allow_tf32;
}

Status ReduceStatistics(cudnnHandle_t handle, const ConvParams& p,
                        const PassTensors& t, ScratchAllocator* scratch) {
  if (p.dtype != DType::kFloat) {
    return Status::Internal(std::string("the unfused statistics take float32, not ") +
                            DTypeName(p.dtype));
  }
  TensorDesc y, sums;
  int64_t s[4];
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, s);
  UCUDNN_RETURN_IF_ERROR(
      y.Set(p.dtype, p.batch, p.out_channels, p.out_height, p.out_width, s));
  UCUDNN_RETURN_IF_ERROR(sums.SetBias(DType::kFloat, p.out_channels));
  ReduceDesc add, norm;
  UCUDNN_RETURN_IF_ERROR(add.Set(CUDNN_REDUCE_TENSOR_ADD));
  UCUDNN_RETURN_IF_ERROR(norm.Set(CUDNN_REDUCE_TENSOR_NORM2));
  size_t add_bytes = 0, norm_bytes = 0;
  UCUDNN_CUDNN_OK(cudnnGetReductionWorkspaceSize(handle, add.d, y.d, sums.d, &add_bytes));
  UCUDNN_CUDNN_OK(cudnnGetReductionWorkspaceSize(handle, norm.d, y.d, sums.d, &norm_bytes));
  const int64_t workspace_bytes = static_cast<int64_t>(std::max(add_bytes, norm_bytes));
  const int64_t norms_bytes = AlignedBytes(p.out_channels * 4);
  char* block = static_cast<char*>(scratch->Allocate(norms_bytes + workspace_bytes));
  if (block == nullptr) {
    return Status::ResourceExhausted("could not allocate " +
                                     std::to_string(norms_bytes + workspace_bytes) +
                                     " bytes to reduce the output's statistics");
  }
  float* norms = reinterpret_cast<float*>(block);
  void* workspace = workspace_bytes > 0 ? block + norms_bytes : nullptr;
  const float one = 1.0f, zero = 0.0f;
  UCUDNN_CUDNN_OK(cudnnReduceTensor(handle, add.d, nullptr, 0, workspace, add_bytes, &one, y.d,
                                    t.out, &zero, sums.d, t.sum));
  UCUDNN_CUDNN_OK(cudnnReduceTensor(handle, norm.d, nullptr, 0, workspace, norm_bytes, &one, y.d,
                                    t.out, &zero, sums.d, norms));
  // sum_of_squares = norm * norm.
  OpTensorDesc mul;
  UCUDNN_CUDNN_OK(cudnnSetOpTensorDescriptor(mul.d, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
                                             CUDNN_NOT_PROPAGATE_NAN));
  UCUDNN_CUDNN_OK(cudnnOpTensor(handle, mul.d, &one, sums.d, norms, &one, sums.d, norms, &zero,
                                sums.d, t.sum_of_squares));
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
