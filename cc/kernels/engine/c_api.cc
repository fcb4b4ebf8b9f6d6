// A C interface to the planner and the plan registry, for tf_ucudnn's Python
// side (ctypes on the same shared library): one implementation of the
// Workspace Reuse recurrence and the Pareto front, shared with the kernels.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cc/kernels/engine/plan_cache.h"
#include "cc/kernels/engine/planner.h"

#if GOOGLE_CUDA
#include "cc/kernels/engine/cudnn_backend.h"
#endif

namespace {

// Plans as a flat int64 list: count, then per plan its length L and L pairs
// (size, algo). Returns the number of int64 values needed.
int64_t WritePlans(const std::vector<ucudnn::Plan>& plans, int64_t* out, int64_t capacity) {
  std::vector<int64_t> flat = {static_cast<int64_t>(plans.size())};
  for (const ucudnn::Plan& plan : plans) {
    flat.push_back(static_cast<int64_t>(plan.micro_batches.size()));
    for (const ucudnn::MicroBatch& mb : plan.micro_batches) {
      flat.push_back(mb.size);
      flat.push_back(mb.algo);
    }
  }
  if (static_cast<int64_t>(flat.size()) <= capacity) {
    std::memcpy(out, flat.data(), flat.size() * sizeof(int64_t));
  }
  return static_cast<int64_t>(flat.size());
}

int64_t WriteString(const std::string& s, char* out, int64_t capacity) {
  if (static_cast<int64_t>(s.size()) < capacity) std::memcpy(out, s.c_str(), s.size() + 1);
  return static_cast<int64_t>(s.size()) + 1;
}

}  // namespace

extern "C" {

// The TensorFlow major.minor this library was compiled against.
void ucudnn_built_for_tf(int32_t* major, int32_t* minor) {
  *major = TF_UCUDNN_TF_MAJOR;
  *minor = TF_UCUDNN_TF_MINOR;
}

// 1 when the library has its cuDNN kernels, else 0.
int32_t ucudnn_has_cudnn() {
#if GOOGLE_CUDA
  return 1;
#else
  return 0;
#endif
}

// Allowed micro-batch sizes; returns how many (writes at most `capacity`).
int64_t ucudnn_micro_batch_sizes(int32_t policy, int64_t batch_size, int64_t* out,
                                 int64_t capacity) {
  const std::vector<int64_t> sizes =
      ucudnn::MicroBatchSizes(static_cast<ucudnn::BatchSizePolicy>(policy), batch_size);
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()) && i < capacity; ++i) {
    out[i] = sizes[i];
  }
  return static_cast<int64_t>(sizes.size());
}

// Plans over a benchmark table of `rows` rows (size, algo, time_ms,
// workspace_bytes), restricted to the policy's sizes.
//   mode 0: Workspace Reuse best plan within workspace_limit (0 or 1 plan)
//   mode 1: the Pareto front
//   mode 2: the forced plan of micro-batches of max_size within workspace_limit
int64_t ucudnn_plan(int64_t rows, const int64_t* sizes, const int32_t* algos,
                    const double* times_ms, const int64_t* workspace_bytes, int64_t batch_size,
                    int32_t policy, int32_t mode, int64_t workspace_limit, int64_t max_size,
                    int64_t* out, int64_t capacity) {
  ucudnn::PerfTable table;
  for (int64_t i = 0; i < rows; ++i) {
    table[sizes[i]].push_back({algos[i], times_ms[i], workspace_bytes[i]});
  }
  std::vector<ucudnn::Plan> plans;
  if (mode == 2) {
    const ucudnn::Plan plan = ucudnn::ForcedPlan(table, batch_size, max_size, workspace_limit);
    if (!plan.empty()) plans.push_back(plan);
  } else {
    table = ucudnn::RestrictTable(
        table, ucudnn::MicroBatchSizes(static_cast<ucudnn::BatchSizePolicy>(policy), batch_size));
    if (mode == 0) {
      const ucudnn::Plan plan = ucudnn::BestPlan(table, batch_size, workspace_limit);
      if (!plan.empty()) plans.push_back(plan);
    } else {
      plans = ucudnn::ParetoFront(table, batch_size);
    }
  }
  return WritePlans(plans, out, capacity);
}

// The plans chosen so far as JSON; returns the bytes needed (with the NUL).
int64_t ucudnn_plans_json(char* out, int64_t capacity) {
  return WriteString(ucudnn::PlanRecordsJson(), out, capacity);
}

void ucudnn_clear_plans() { ucudnn::ClearPlanRecords(); }

// cuDNN's version as "9.19.0" ("" without cuDNN); returns the bytes needed.
int64_t ucudnn_cudnn_version(char* out, int64_t capacity) {
#if GOOGLE_CUDA
  return WriteString(ucudnn::CudnnVersionString(), out, capacity);
#else
  return WriteString("", out, capacity);
#endif
}

}  // extern "C"
