#include "cc/engine/cpu_pass.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "cc/engine/cpu_fusion.h"
#include "cc/engine/executor.h"

namespace ucudnn {
namespace {

template <typename T>
Status RunCpu(const Plan& plan, Pass pass, const ConvParams& p, const CpuPassTensors& t,
              const ParallelFor& parallel_for) {
  const T* a = static_cast<const T*>(t.a);
  const T* b = static_cast<const T*>(t.b);
  const T* bias = static_cast<const T*>(t.bias);
  T* out = static_cast<T*>(t.out);
  // The statistics of the whole mini-batch, summed in double over the
  // micro-batches (CpuAddStatistics) and rounded to float32 once.
  std::vector<double> sum, sum_of_squares;
  if (p.fusion.statistics()) {
    sum.assign(p.out_channels, 0.0);
    sum_of_squares.assign(p.out_channels, 0.0);
  }
  if (p.empty()) {
    // A sum over nothing: zeros, then the bias where there is one.
    std::fill(out, out + p.batch * p.output_sample_size(), static_cast<T>(0.0f));
    if (p.fusion.bias()) CpuBiasEpilogue<T>(p, p.batch, bias, out);
    if (p.fusion.statistics()) {
      CpuAddStatistics<T>(p, p.batch, out, sum.data(), sum_of_squares.data());
    }
  }
  // Backward-filter micro-batches add up in float32 (see CpuBackwardFilter):
  // in the output itself for float32, else in a temporary rounded to T once.
  float* filter_acc = nullptr;
  std::vector<float> acc;
  if (pass == Pass::kBackwardFilter) {
    if constexpr (std::is_same_v<T, float>) {
      filter_acc = out;
    } else {
      acc.resize(p.filter_size());
      filter_acc = acc.data();
    }
  }
  // The prologue's output, one micro-batch of the input at a time; its scale
  // and bias rounded to T, as the GPU engine hands them to cuDNN's graphs
  // (the same op on either device).
  std::vector<T> staged;
  std::vector<float> scale, shift;
  if (p.fusion.input_scale_bias() && !p.empty()) {
    for (int64_t c = 0; c < p.in_channels; ++c) {
      scale.push_back(static_cast<float>(static_cast<T>(t.input_scale[c])));
      shift.push_back(static_cast<float>(static_cast<T>(t.input_bias[c])));
    }
    int64_t largest = 0;
    for (const MicroBatch& mb : plan.micro_batches) largest = std::max(largest, mb.size);
    staged.resize(largest * p.input_sample_size());
  }
  if (!p.empty()) {
    UCUDNN_RETURN_IF_ERROR(
        ExecutePlan(plan, pass, [&](int64_t offset, const MicroBatch& mb, bool accumulate) {
          const int64_t in_off = offset * p.input_sample_size();
          const int64_t out_off = offset * p.output_sample_size();
          switch (pass) {
            case Pass::kForward: {
              const T* input = a + in_off;
              if (p.fusion.input_scale_bias()) {
                CpuInputPrologue<T>(p, mb.size, input, scale.data(), shift.data(),
                                    staged.data());
                input = staged.data();
              }
              CpuForward<T>(p, mb.size, input, b, out + out_off, parallel_for);
              if (p.fusion.bias()) CpuBiasEpilogue<T>(p, mb.size, bias, out + out_off);
              if (p.fusion.statistics()) {
                CpuAddStatistics<T>(p, mb.size, out + out_off, sum.data(),
                                    sum_of_squares.data());
              }
              break;
            }
            case Pass::kBackwardData:
              CpuBackwardData<T>(p, mb.size, a + out_off, b, out + in_off, parallel_for);
              break;
            case Pass::kBackwardFilter:
              CpuBackwardFilter<T>(p, mb.size, a + in_off, b + out_off, filter_acc, accumulate,
                                   parallel_for);
              break;
          }
          return Status();
        }));
  }
  if constexpr (!std::is_same_v<T, float>) {
    if (pass == Pass::kBackwardFilter && !p.empty()) CpuStoreFilter<T>(p, filter_acc, out);
  }
  for (size_t k = 0; k < sum.size(); ++k) {
    t.sum[k] = static_cast<float>(sum[k]);
    t.sum_of_squares[k] = static_cast<float>(sum_of_squares[k]);
  }
  return Status();
}

}  // namespace

Status RunCpuPlan(const Plan& plan, Pass pass, const ConvParams& params,
                  const CpuPassTensors& tensors, const ParallelFor& parallel_for) {
  const std::string fusion_error = params.fusion.Check(pass, tensors.present());
  if (!fusion_error.empty()) return Status::InvalidArgument(fusion_error);
  if (params.empty() && !params.fusion.bias() && !params.fusion.statistics()) {
    return Status::InvalidArgument("an empty convolution has nothing to run: " +
                                   params.ToString());
  }
  int64_t planned = 0;
  for (const MicroBatch& mb : plan.micro_batches) planned += mb.size;
  if (!params.empty() && planned != params.batch) {
    return Status::InvalidArgument("a CPU plan of " + std::to_string(planned) +
                                   " samples for a mini-batch of " +
                                   std::to_string(params.batch));
  }
  switch (params.dtype) {
    case DType::kFloat: return RunCpu<float>(plan, pass, params, tensors, parallel_for);
    case DType::kHalf: return RunCpu<Eigen::half>(plan, pass, params, tensors, parallel_for);
    case DType::kBFloat16:
      return RunCpu<Eigen::bfloat16>(plan, pass, params, tensors, parallel_for);
  }
  return Status::InvalidArgument(std::string("no CPU kernel for ") + DTypeName(params.dtype));
}

}  // namespace ucudnn
