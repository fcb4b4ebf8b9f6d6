// RunConvPassCpu (conv_runner.h): the CPU path of the runner, planned and run
// here (cpu_backend.h), so that a front end only hands over the call.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <tuple>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "cc/engine/conv_runner.h"
#include "cc/engine/cpu_backend.h"
#include "cc/engine/executor.h"

namespace ucudnn {
namespace {

// Records the plan of a CPU kernel once per (pass, convolution, device,
// forced micro-batch size), as tf_ucudnn.plans() shows it.
void RecordCpuPlanOnce(const ConvRequest& q, const Plan& plan) {
  static std::mutex mu;
  static auto* seen = new std::set<std::tuple<Pass, std::array<int64_t, 21>, int, int64_t>>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen->insert({q.pass, q.params.Fields(), q.device, q.knobs.micro_batch_size}).second) {
      return;
    }
  }
  PlanRecord r = MakePlanRecord(q.device_name, q.pass, q.params, q.knobs, plan,
                                [](const MicroBatch&) { return std::string("im2col-gemm"); });
  if (q.knobs.micro_batch_size == 0) r.policy = "undivided (CPU)";
  for (PlanRecord::Step& step : r.micro_batches) step.time_ms = std::nan("");
  r.time_ms = std::nan("");
  RecordPlan(r);
  LogPlan(r);
}

template <typename T>
Status RunCpu(const ConvRequest& q, const CpuPassTensors& t, const ParallelFor& parallel_for) {
  const ConvParams& p = q.params;
  const T* a = static_cast<const T*>(t.a);
  const T* b = static_cast<const T*>(t.b);
  const T* bias = static_cast<const T*>(t.bias);
  T* out = static_cast<T*>(t.out);
  if (p.empty()) {
    // Only a forward pass with a bias has something to write: the bias of
    // each output element's channel (a sum over nothing, plus the bias).
    std::fill(out, out + p.batch * p.output_sample_size(), static_cast<T>(0.0f));
    CpuBiasEpilogue<T>(p, p.batch, bias, out);
    return Status();
  }
  // On the CPU there is one algorithm and no workspace: micro-batches of
  // micro_batch_size if given, else the whole mini-batch.
  const Plan plan = UniformPlan(p.batch, q.knobs.micro_batch_size);
  RecordCpuPlanOnce(q, plan);
  // Backward-filter micro-batches add up in float32 (see CpuBackwardFilter):
  // in the output itself for float32, else in a temporary rounded to T once.
  float* filter_acc = nullptr;
  std::vector<float> acc;
  if (q.pass == Pass::kBackwardFilter) {
    if constexpr (std::is_same_v<T, float>) {
      filter_acc = out;
    } else {
      acc.resize(p.filter_size());
      filter_acc = acc.data();
    }
  }
  UCUDNN_RETURN_IF_ERROR(
      ExecutePlan(plan, q.pass, [&](int64_t offset, const MicroBatch& mb, bool accumulate) {
        const int64_t in_off = offset * p.input_sample_size();
        const int64_t out_off = offset * p.output_sample_size();
        switch (q.pass) {
          case Pass::kForward:
            CpuForward<T>(p, mb.size, a + in_off, b, out + out_off, parallel_for);
            if (p.fusion.bias()) CpuBiasEpilogue<T>(p, mb.size, bias, out + out_off);
            break;
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
  if constexpr (!std::is_same_v<T, float>) {
    if (q.pass == Pass::kBackwardFilter) CpuStoreFilter<T>(p, filter_acc, out);
  }
  return Status();
}

}  // namespace

Status RunConvPassCpu(const ConvRequest& q, const CpuPassTensors& tensors,
                      const ParallelFor& parallel_for) {
  const std::string fusion_error = q.params.fusion.Check(q.pass, tensors.bias != nullptr);
  if (!fusion_error.empty()) return Status::InvalidArgument(fusion_error);
  if (q.params.empty() && !q.params.fusion.bias()) {
    return Status::InvalidArgument("an empty convolution has nothing to run: " +
                                   q.params.ToString());
  }
  switch (q.params.dtype) {
    case DType::kFloat: return RunCpu<float>(q, tensors, parallel_for);
    case DType::kHalf: return RunCpu<Eigen::half>(q, tensors, parallel_for);
    case DType::kBFloat16: return RunCpu<Eigen::bfloat16>(q, tensors, parallel_for);
  }
  return Status::InvalidArgument(std::string("no CPU kernel for ") + DTypeName(q.params.dtype));
}

}  // namespace ucudnn
