#include "cc/engine/plan.h"

#include <algorithm>

namespace ucudnn {

namespace {

int64_t RoundUpTo(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

}  // namespace

void AppendMicroBatch(Plan* plan, int64_t size, const AlgoPerf& perf) {
  plan->micro_batches.push_back({size, perf.algo, perf.time_ms, perf.workspace_bytes});
  plan->time_ms += perf.time_ms;
  plan->workspace_bytes = std::max(plan->workspace_bytes, perf.workspace_bytes);
}

void SortLargerFirst(Plan* plan) {
  std::stable_sort(plan->micro_batches.begin(), plan->micro_batches.end(),
                   [](const MicroBatch& a, const MicroBatch& b) { return a.size > b.size; });
}

void AddAccumulator(Plan* plan, int64_t bytes) {
  plan->workspace_bytes = RoundUpTo(plan->workspace_bytes, kAccumulatorAlign) + bytes;
  plan->accumulator_bytes = bytes;
}

int64_t LimitBeside(int64_t workspace_limit, int64_t accumulator_bytes) {
  return (workspace_limit - accumulator_bytes) / kAccumulatorAlign * kAccumulatorAlign;
}

int64_t FloatAccumulatorBytes(int64_t filter_elements) {
  return RoundUpTo(filter_elements * 4, kAccumulatorAlign) + kAccumulatorAlign;
}

}  // namespace ucudnn
