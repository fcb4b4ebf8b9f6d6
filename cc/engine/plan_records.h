// Plan records: every plan chosen so far, as tf_ucudnn.plans() shows it (a
// registry, not a cache: the kernels are cached in kernel_cache.h).
#ifndef TF_UCUDNN_ENGINE_PLAN_RECORDS_H_
#define TF_UCUDNN_ENGINE_PLAN_RECORDS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include <functional>

#include "cc/engine/conv_params.h"
#include "cc/engine/knobs.h"
#include "cc/engine/planner.h"

namespace ucudnn {

// One chosen plan, as tf_ucudnn.plans() shows it.
struct PlanRecord {
  std::string device;        // e.g. "/device:GPU:0"
  Pass pass = Pass::kForward;
  ConvParams params;
  int64_t workspace_limit = 0;
  std::string policy;        // batch-size policy, or "forced"
  struct Step {
    int64_t size;
    std::string algo;
    int64_t workspace_bytes;
    double time_ms;          // measured by the benchmark; NaN where not measured (CPU)
  };
  std::vector<Step> micro_batches;
  int64_t workspace_bytes = 0;
  double time_ms = 0;
  std::string note;          // e.g. a fallback because workspace could not be allocated
  // Wall-clock ms the kernel spent planning (benchmarking or reading the
  // database, then Workspace Reuse); NaN where not measured.
  double planning_ms = std::numeric_limits<double>::quiet_NaN();
};

// The label of the knobs' batch-size policy in plan records: "powerOfTwo",
// "forced 8" (a forced micro_batch_size), ...
std::string PolicyLabel(const PlanningKnobs& knobs);

// The record of `plan`, chosen for `pass` of `params` on `device` (e.g.
// "/device:GPU:0") under `knobs`: the limit it was planned within
// (knobs.BenchmarkLimit()), the policy (PolicyLabel), one step per
// micro-batch with its algorithm's name (algo_name), workspace (bytes) and
// time (ms), and the plan's totals. The caller adds the note and the planning
// time, and replaces what its planning changed (the limit "auto" resolved to).
PlanRecord MakePlanRecord(const std::string& device, Pass pass, const ConvParams& params,
                          const PlanningKnobs& knobs, const Plan& plan,
                          const std::function<std::string(const MicroBatch&)>& algo_name);

// Adds a record; thread-safe. Then calls the plan listener, if any (no lock
// held; e.g. a progress bar while kernels benchmark).
void RecordPlan(PlanRecord record);
using PlanListener = void (*)();
void SetPlanListener(PlanListener listener);  // nullptr: none
// Every record so far as a JSON array.
std::string PlanRecordsJson();
// Forgets every record (the planned kernels stay cached).
void ClearPlanRecords();

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_PLAN_RECORDS_H_
