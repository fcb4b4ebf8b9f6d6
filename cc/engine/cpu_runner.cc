// RunConvPassCpu (conv_runner.h): the CPU path of the runner, planned and
// recorded here and run by RunCpuPlan (cpu_pass.h), so that a front end only
// hands over the call.
#include <cmath>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "cc/engine/conv_runner.h"
#include "cc/engine/cpu_pass.h"

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

}  // namespace

Status RunConvPassCpu(const ConvRequest& q, const CpuPassTensors& tensors,
                      const ParallelFor& parallel_for) {
  // On the CPU there is one algorithm and no workspace: micro-batches of
  // micro_batch_size if given, else the whole mini-batch. An empty
  // convolution has no plan (RunCpuPlan writes its fusion's result, or
  // refuses it).
  Plan plan;
  if (!q.params.empty()) {
    const std::string fusion_error = q.params.fusion.Check(q.pass, tensors.present());
    if (!fusion_error.empty()) return Status::InvalidArgument(fusion_error);
    plan = UniformPlan(q.params.batch, q.knobs.micro_batch_size);
    RecordCpuPlanOnce(q, plan);
  }
  return RunCpuPlan(plan, q.pass, q.params, tensors, parallel_for);
}

}  // namespace ucudnn
