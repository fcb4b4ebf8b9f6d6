#if GOOGLE_CUDA

#include "cc/engine/statistics_reduction.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "cc/engine/cuda_check.h"
#include "cc/engine/cudnn_descriptors.h"

namespace ucudnn {

bool StatisticsUnfused(const ConvParams& params, bool allow_tf32) {
  return params.fusion.statistics() && params.dtype == DType::kFloat && !allow_tf32;
}

namespace {

// Types whose direct reduction cuDNN refused (CUDNN_STATUS_NOT_SUPPORTED or
// BAD_PARAM): they take the chunked path from then on.
std::atomic<uint32_t> refused_types{0};

bool Refused(cudnnStatus_t status) {
  return status == CUDNN_STATUS_NOT_SUPPORTED || status == CUDNN_STATUS_BAD_PARAM;
}

// The sums read the output in its own type, computing in float32: the sum
// (CUDNN_REDUCE_TENSOR_ADD) and the L2 norm (NORM2), squared into the sum of
// squares (cudnnOpTensor on the K norms): two reads of the output, no copy.
// *refused: cuDNN does not reduce this type into float32 sums.
Status ReduceDirect(cudnnHandle_t handle, const ConvParams& p, const PassTensors& t,
                    ScratchAllocator* scratch, bool* refused) {
  *refused = false;
  int64_t s[4];
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, s);
  TensorDesc y, sums;
  UCUDNN_RETURN_IF_ERROR(y.Set(p.dtype, p.batch, p.out_channels, p.out_height, p.out_width, s));
  UCUDNN_RETURN_IF_ERROR(sums.SetBias(DType::kFloat, p.out_channels));
  ReduceDesc add, norm;
  UCUDNN_RETURN_IF_ERROR(add.Set(CUDNN_REDUCE_TENSOR_ADD));
  UCUDNN_RETURN_IF_ERROR(norm.Set(CUDNN_REDUCE_TENSOR_NORM2));
  size_t add_bytes = 0, norm_bytes = 0;
  cudnnStatus_t st = cudnnGetReductionWorkspaceSize(handle, add.d, y.d, sums.d, &add_bytes);
  if (st == CUDNN_STATUS_SUCCESS) {
    st = cudnnGetReductionWorkspaceSize(handle, norm.d, y.d, sums.d, &norm_bytes);
  }
  if (Refused(st)) {
    *refused = true;
    return Status();
  }
  UCUDNN_CUDNN_OK(st);
  const size_t workspace_bytes = std::max(add_bytes, norm_bytes);
  const int64_t norms_bytes = AlignedBytes(p.out_channels * 4);
  char* block = static_cast<char*>(
      scratch->Allocate(norms_bytes + static_cast<int64_t>(workspace_bytes)));
  if (block == nullptr) {
    return Status::ResourceExhausted(
        "could not allocate " + std::to_string(norms_bytes + workspace_bytes) +
        " bytes to reduce the output's statistics");
  }
  void* workspace = workspace_bytes > 0 ? block + norms_bytes : nullptr;
  const float one = 1.0f, zero = 0.0f;
  st = cudnnReduceTensor(handle, add.d, nullptr, 0, workspace, workspace_bytes, &one, y.d, t.out,
                         &zero, sums.d, t.sum);
  if (Refused(st)) {
    *refused = true;
    return Status();
  }
  UCUDNN_CUDNN_OK(st);
  UCUDNN_CUDNN_OK(cudnnReduceTensor(handle, norm.d, nullptr, 0, workspace, workspace_bytes, &one,
                                    y.d, t.out, &zero, sums.d, block));
  OpTensorDesc mul;
  UCUDNN_CUDNN_OK(cudnnSetOpTensorDescriptor(mul.d, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
                                             CUDNN_NOT_PROPAGATE_NAN));
  UCUDNN_CUDNN_OK(cudnnOpTensor(handle, mul.d, &one, sums.d, block, &one, sums.d, block, &zero,
                                sums.d, t.sum_of_squares));
  return Status();
}

}  // namespace

Status ReduceStatistics(cudnnHandle_t handle, const ConvParams& p,
                        const PassTensors& t, ScratchAllocator* scratch) {
  const uint32_t type_bit = 1u << static_cast<int>(p.dtype);
  if ((refused_types.load() & type_bit) == 0) {
    bool refused = false;
    UCUDNN_RETURN_IF_ERROR(ReduceDirect(handle, p, t, scratch, &refused));
    if (!refused) return Status();
    refused_types.fetch_or(type_bit);
  }
  // The batch in chunks of at most kChunkBytes of float32 (at least one
  // sample): each chunk's output in float32 (converted, or read in place in
  // float32), its squares beside it, both summed into the sums (beta = 1
  // after the first chunk). The batch is the outermost dimension in either
  // layout, so a chunk is contiguous.
  constexpr int64_t kChunkBytes = 32 << 20;
  const int64_t sample = p.output_sample_size();
  const int64_t chunk = std::clamp<int64_t>(kChunkBytes / (4 * sample), 1, p.batch);
  const bool convert = p.dtype != DType::kFloat;
  int64_t s[4];
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, s);
  TensorDesc sums;
  UCUDNN_RETURN_IF_ERROR(sums.SetBias(DType::kFloat, p.out_channels));
  ReduceDesc add;
  UCUDNN_RETURN_IF_ERROR(add.Set(CUDNN_REDUCE_TENSOR_ADD));
  OpTensorDesc mul;
  UCUDNN_CUDNN_OK(cudnnSetOpTensorDescriptor(mul.d, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
                                             CUDNN_NOT_PROPAGATE_NAN));
  size_t workspace_bytes = 0;
  {
    TensorDesc whole;
    UCUDNN_RETURN_IF_ERROR(
        whole.Set(DType::kFloat, chunk, p.out_channels, p.out_height, p.out_width, s));
    UCUDNN_CUDNN_OK(
        cudnnGetReductionWorkspaceSize(handle, add.d, whole.d, sums.d, &workspace_bytes));
  }
  const int64_t buffer_bytes = AlignedBytes(chunk * sample * 4);
  const int64_t total = buffer_bytes * (convert ? 2 : 1) + static_cast<int64_t>(workspace_bytes);
  char* block = static_cast<char*>(scratch->Allocate(total));
  if (block == nullptr) {
    return Status::ResourceExhausted("could not allocate " + std::to_string(total) +
                                     " bytes to reduce the output's statistics");
  }
  float* squares = reinterpret_cast<float*>(block);
  float* converted = convert ? reinterpret_cast<float*>(block + buffer_bytes) : nullptr;
  void* workspace = workspace_bytes > 0 ? block + buffer_bytes * (convert ? 2 : 1) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  const int64_t out_bytes = sample * DTypeSize(p.dtype);
  for (int64_t n0 = 0; n0 < p.batch; n0 += chunk) {
    const int64_t n = std::min(chunk, p.batch - n0);
    TensorDesc y, f;
    UCUDNN_RETURN_IF_ERROR(y.Set(p.dtype, n, p.out_channels, p.out_height, p.out_width, s));
    UCUDNN_RETURN_IF_ERROR(f.Set(DType::kFloat, n, p.out_channels, p.out_height, p.out_width, s));
    const void* out = static_cast<const char*>(t.out) + n0 * out_bytes;
    const float* values = static_cast<const float*>(out);
    if (convert) {
      UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, y.d, out, &zero, f.d, converted));
      values = converted;
    }
    const float beta = n0 == 0 ? 0.0f : 1.0f;
    UCUDNN_CUDNN_OK(cudnnReduceTensor(handle, add.d, nullptr, 0, workspace, workspace_bytes, &one,
                                      f.d, values, &beta, sums.d, t.sum));
    UCUDNN_CUDNN_OK(cudnnOpTensor(handle, mul.d, &one, f.d, values, &one, f.d, values, &zero, f.d,
                                  squares));
    UCUDNN_CUDNN_OK(cudnnReduceTensor(handle, add.d, nullptr, 0, workspace, workspace_bytes, &one,
                                      f.d, squares, &beta, sums.d, t.sum_of_squares));
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
