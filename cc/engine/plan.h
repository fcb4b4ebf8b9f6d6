// What planning reads and produces: a benchmark table (micro-batch size ->
// the candidates measured there) and a plan (micro-batches in execution
// order with their candidates), and the float32 accumulator a plan of
// several float16/bfloat16 backward-filter micro-batches keeps in its
// workspace. Pure C++, no TensorFlow, no GPU.
#ifndef TF_UCUDNN_ENGINE_PLAN_H_
#define TF_UCUDNN_ENGINE_PLAN_H_

#include <cstdint>
#include <map>
#include <vector>

namespace ucudnn {

// One benchmarked algorithm at one micro-batch size.
struct AlgoPerf {
  int algo = 0;                 // index into the caller's candidate list
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};

// Micro-batch size -> the algorithms measured at that size.
using PerfTable = std::map<int64_t, std::vector<AlgoPerf>>;

struct MicroBatch {
  int64_t size = 0;
  int algo = 0;
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};

struct Plan {
  std::vector<MicroBatch> micro_batches;  // in execution order, larger first
  double time_ms = 0;                     // sum over micro-batches
  int64_t workspace_bytes = 0;            // max over micro-batches (+ accumulator_bytes)
  // Bytes at the end of the workspace that hold a float32 accumulator: a
  // float16/bfloat16 backward-filter plan of several micro-batches adds them
  // up in float32 (see PlanRunner), counted against the workspace limit.
  // 0 otherwise; the planner itself never sets it.
  int64_t accumulator_bytes = 0;
  bool empty() const { return micro_batches.empty(); }
};

// Float32 accumulation of float16/bfloat16 backward-filter plans (see
// PlanRunner::AccumulatorBytes): a plan of several micro-batches adds their
// filter gradients in a float32 sum kept at the end of its workspace, after
// the cuDNN workspace rounded up to kAccumulatorAlign; a plan of one
// micro-batch needs none. The functions below count that sum against the
// limit and set Plan::accumulator_bytes; with accumulator_bytes = 0 they are
// BestPlan, ForcedPlan and ParetoFront.
constexpr int64_t kAccumulatorAlign = 256;
// The accumulator of a filter of `filter_elements`: the float32 sum, rounded
// up to kAccumulatorAlign, and one zeroed block of kAccumulatorAlign bytes.
int64_t FloatAccumulatorBytes(int64_t filter_elements);

// Building a plan (Workspace Reuse and the Pareto front): appends a
// micro-batch of `size` samples run with `perf`, adding its time and taking
// the larger workspace.
void AppendMicroBatch(Plan* plan, int64_t size, const AlgoPerf& perf);
// Orders the micro-batches larger first (stable), as plans run them.
void SortLargerFirst(Plan* plan);
// Puts an accumulator of `bytes` after the plan's workspace (rounded up to
// kAccumulatorAlign) and sets Plan::accumulator_bytes.
void AddAccumulator(Plan* plan, int64_t bytes);
// The limit left to the cuDNN workspace of a plan with the accumulator.
int64_t LimitBeside(int64_t workspace_limit, int64_t accumulator_bytes);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_PLAN_H_
