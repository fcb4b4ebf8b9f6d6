// A C interface to the planner and the plan registry, for tf_ucudnn's Python
// side (ctypes on the same shared library): one implementation of the
// Workspace Reuse recurrence and the Pareto front, shared with the kernels.
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/engine/division_groups.h"
#include "cc/kernels/engine/plan_records.h"
#include "cc/kernels/engine/planner.h"

#if GOOGLE_CUDA
#include "cc/kernels/engine/kernel_cache.h"
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

// Workspace Division at run time: the function that divides a group's
// budget (see division_groups.h); nullptr turns it off.
void ucudnn_set_division_callback(ucudnn::DivisionCallback callback) {
  ucudnn::SetDivisionCallback(callback);
}

// Called after each new plan record (progress while benchmarking).
void ucudnn_set_plan_listener(ucudnn::PlanListener listener) {
  ucudnn::SetPlanListener(listener);
}

// 1 when the library has its cuDNN kernels, else 0.
int32_t ucudnn_has_cudnn() {
#if GOOGLE_CUDA
  return 1;
#else
  return 0;
#endif
}

// Allowed micro-batch sizes; returns how many (writes at most `capacity`, so
// a caller can ask with capacity 0 first). Lists nothing it does not write:
// policy all with N = 2^40 has 2^40 sizes.
int64_t ucudnn_micro_batch_sizes(int32_t policy, int64_t batch_size, int64_t* out,
                                 int64_t capacity) {
  const auto p = static_cast<ucudnn::BatchSizePolicy>(policy);
  const int64_t count = ucudnn::MicroBatchSizeCount(p, batch_size);
  if (p == ucudnn::BatchSizePolicy::kAll) {
    for (int64_t i = 0; i < count && i < capacity; ++i) out[i] = i + 1;
  } else if (capacity > 0) {
    const std::vector<int64_t> sizes = ucudnn::MicroBatchSizes(p, batch_size);  // <= 64
    for (int64_t i = 0; i < count && i < capacity; ++i) out[i] = sizes[i];
  }
  return count;
}

// Plans over a benchmark table of `rows` rows (size, algo, time_ms,
// workspace_bytes), restricted to the policy's sizes.
//   mode 0: Workspace Reuse best plan within workspace_limit (0 or 1 plan)
//   mode 1: the Pareto front
//   mode 2: the forced plan of micro-batches of max_size within workspace_limit
// Returns -1 when batch_size is too large for the table (ucudnn::PlanTooLarge).
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
    table = ucudnn::RestrictTable(table, static_cast<ucudnn::BatchSizePolicy>(policy),
                                  batch_size);
    if (ucudnn::PlanTooLarge(table, batch_size)) return -1;
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

#if GOOGLE_CUDA
namespace {

void AppendPlanJson(std::ostringstream& s, const ucudnn::CudnnKernel& kernel,
                    const ucudnn::Plan& plan) {
  s << "{\"time_ms\":" << plan.time_ms << ",\"workspace_bytes\":" << plan.workspace_bytes
    << ",\"micro_batches\":[";
  for (size_t i = 0; i < plan.micro_batches.size(); ++i) {
    const ucudnn::MicroBatch& mb = plan.micro_batches[i];
    s << (i ? "," : "") << "{\"size\":" << mb.size << ",\"algo\":\""
      << ucudnn::CudnnAlgoName(kernel.pass(), kernel.algos()[mb.algo])
      << "\",\"workspace_bytes\":" << mb.workspace_bytes << ",\"time_ms\":" << mb.time_ms
      << "}";
  }
  s << "]}";
}

// Kernel `id` (from ucudnn_kernels_json), or false with a message in `error`.
bool FindKernel(int64_t id, std::pair<ucudnn::KernelKey, std::shared_ptr<ucudnn::CudnnKernel>>* out,
                char* error, int64_t capacity) {
  const auto kernels = ucudnn::AllKernels();
  if (id < 0 || id >= static_cast<int64_t>(kernels.size())) {
    WriteString("no kernel with id " + std::to_string(id), error, capacity);
    return false;
  }
  *out = kernels[id];
  return true;
}

}  // namespace
#endif

extern "C" {

// Every planned GPU kernel with its Pareto front, as JSON: a list of
// {id, device, pass, shape, conv: [ConvParams::Fields()], workspace_limit
// (the op's), planned_limit (the limit its plan now uses), plan, front}.
// `id` is the argument of ucudnn_set_kernel_limit. Returns the bytes needed.
int64_t ucudnn_kernels_json(char* out, int64_t capacity) {
  std::ostringstream s;
  s.precision(9);
  s << "[";
#if GOOGLE_CUDA
  const auto kernels = ucudnn::AllKernels();
  bool first = true;
  for (size_t id = 0; id < kernels.size(); ++id) {
    const ucudnn::KernelKey& key = kernels[id].first;
    const ucudnn::CudnnKernel& kernel = *kernels[id].second;
    const std::vector<ucudnn::Plan> front = kernel.ParetoFront();
    if (front.empty()) continue;  // created but not planned (an error, or in flight)
    s << (first ? "" : ",") << "{\"id\":" << id << ",\"device\":" << key.device
      << ",\"pass\":\"" << ucudnn::PassName(key.pass) << "\",\"shape\":\""
      << kernel.params().ToString() << "\",\"conv\":[";
    for (size_t i = 0; i < key.conv.size(); ++i) s << (i ? "," : "") << key.conv[i];
    s << "],\"workspace_limit\":" << key.workspace_limit
      << ",\"total_workspace\":" << key.total_workspace
      << ",\"allow_tf32\":" << key.allow_tf32 << ",\"deterministic\":" << key.deterministic
      << ",\"policy\":" << static_cast<int>(key.policy)
      << ",\"forced_micro_batch\":" << key.forced_micro_batch
      << ",\"engines\":" << static_cast<int>(key.engines)
      << ",\"seeded\":" << kernel.seeded() << ",\"algos\":[";
    for (size_t i = 0; i < kernel.algos().size(); ++i) {
      const ucudnn::CudnnAlgo& a = kernel.algos()[i];
      s << (i ? "," : "") << "[" << a.algo << "," << a.math_type << "," << a.deterministic;
      if (a.graph()) {
        s << "," << a.engine.id << "," << a.engine.transposed;
        for (const auto& [knob, value] : a.engine.knobs) s << "," << knob << "," << value;
      }
      s << "]";
    }
    s << "],\"table\":[";
    bool first_row = true;
    for (const auto& [size, perfs] : kernel.table()) {
      for (const ucudnn::AlgoPerf& perf : perfs) {
        s << (first_row ? "" : ",") << "[" << size << "," << perf.algo << "," << perf.time_ms
          << "," << perf.workspace_bytes << "]";
        first_row = false;
      }
    }
    s << "],\"planned_limit\":" << kernel.planned_limit() << ",\"plan\":";
    AppendPlanJson(s, kernel, kernel.plan());
    s << ",\"front\":[";
    for (size_t i = 0; i < front.size(); ++i) {
      if (i) s << ",";
      AppendPlanJson(s, kernel, front[i]);
    }
    s << "]}";
    first = false;
  }
#endif
  s << "]";
  return WriteString(s.str(), out, capacity);
}

// Seeds the benchmark results of one kernel (from the benchmark database):
// kernels created later with this key, on any GPU, plan from them instead of
// benchmarking. key: pass, the 20 ConvParams fields, allow_tf32,
// deterministic, workspace_limit, policy, forced_micro_batch, engines (27
// values). algos: n_algos entries of algo_lengths[i] values each, laid end to
// end in algo_values: (cuDNN algo, math type, deterministic) for a legacy
// algorithm, followed by (engine id, transposed, knob type, knob value, ...)
// for a graph-API engine. rows: (size, index into algos, time_ms, workspace_bytes).
// Returns 0, or -1 if the arguments are malformed.
int32_t ucudnn_seed_kernel(const int64_t* key, int64_t key_len, int64_t n_algos,
                           const int64_t* algo_lengths, const int64_t* algo_values,
                           int64_t n_rows, const int64_t* sizes, const int32_t* algo_index,
                           const double* times_ms, const int64_t* workspace_bytes) {
#if GOOGLE_CUDA
  if (key_len != 27 || n_algos < 0 || n_rows < 0 || key[0] < 0 || key[0] > 2) return -1;
  if (key[24] < 0 || key[24] > 2 || key[26] < 0 || key[26] > 2) return -1;
  ucudnn::KernelKey k;
  k.pass = static_cast<ucudnn::Pass>(key[0]);
  for (int i = 0; i < 20; ++i) k.conv[i] = key[1 + i];
  k.allow_tf32 = key[21] != 0;
  k.deterministic = key[22] != 0;
  k.workspace_limit = key[23];
  k.policy = static_cast<ucudnn::BatchSizePolicy>(key[24]);
  k.forced_micro_batch = key[25];
  k.engines = static_cast<ucudnn::EngineSet>(key[26]);
  std::vector<ucudnn::CudnnAlgo> algo_list;
  const int64_t* v = algo_values;
  for (int64_t i = 0; i < n_algos; ++i) {
    const int64_t len = algo_lengths[i];
    // 3 values, or 5 plus knob pairs.
    if (len != 3 && (len < 5 || (len - 5) % 2 != 0)) return -1;
    ucudnn::CudnnAlgo a;
    a.algo = static_cast<int>(v[0]);
    a.math_type = static_cast<int>(v[1]);
    a.deterministic = v[2] != 0;
    if (len >= 5) {
      if (v[3] < 0 || v[4] < 0 || v[4] > 1) return -1;
      a.engine.id = v[3];
      a.engine.transposed = v[4] != 0;
      for (int64_t j = 5; j < len; j += 2) a.engine.knobs.emplace_back(v[j], v[j + 1]);
    }
    algo_list.push_back(std::move(a));
    v += len;
  }
  ucudnn::PerfTable table;
  for (int64_t i = 0; i < n_rows; ++i) {
    if (algo_index[i] < 0 || algo_index[i] >= n_algos || sizes[i] <= 0) return -1;
    table[sizes[i]].push_back({algo_index[i], times_ms[i], workspace_bytes[i]});
  }
  ucudnn::SeedKernelTable(k, std::move(table), std::move(algo_list));
  return 0;
#else
  return -1;
#endif
}

// Workspace Division: replans kernel `id` (from ucudnn_kernels_json) within
// `workspace_limit` bytes from its benchmark table. Returns 0, or -1 with a
// message in `error` (NUL-terminated, at most `capacity` bytes).
int32_t ucudnn_set_kernel_limit(int64_t id, int64_t workspace_limit, char* error,
                                int64_t capacity) {
#if GOOGLE_CUDA
  std::pair<ucudnn::KernelKey, std::shared_ptr<ucudnn::CudnnKernel>> found;
  if (!FindKernel(id, &found, error, capacity)) return -1;
  const ucudnn::KernelKey& key = found.first;
  const ucudnn::CudnnKernel& kernel = *found.second;
  const ucudnn::Status status = found.second->Replan(workspace_limit);
  if (!status.ok()) {
    WriteString(status.message(), error, capacity);
    return -1;
  }
  // The new plan shows in tf_ucudnn.plans() like any other.
  const ucudnn::Plan plan = kernel.plan();
  ucudnn::PlanRecord r;
  r.device = "/device:GPU:" + std::to_string(key.device);
  r.pass = key.pass;
  r.params = kernel.params();
  r.workspace_limit = workspace_limit;
  r.policy = ucudnn::BatchSizePolicyName(key.policy);
  for (const ucudnn::MicroBatch& mb : plan.micro_batches) {
    r.micro_batches.push_back({mb.size, ucudnn::CudnnAlgoName(key.pass, kernel.algos()[mb.algo]),
                               mb.workspace_bytes, mb.time_ms});
  }
  r.workspace_bytes = plan.workspace_bytes;
  r.time_ms = plan.time_ms;
  r.note = "Workspace Division";
  ucudnn::RecordPlan(std::move(r));
  return 0;
#else
  WriteString("this library has no cuDNN kernels", error, capacity);
  return -1;
#endif
}

// Execution overhead of kernel `id` (from ucudnn_kernels_json), whose plan
// must be one micro-batch. times[5]: ms per call through the engine's Run, per
// direct cuDNN call, per filter transform, and the host's ms per call to
// enqueue Run and the direct call (see CudnnKernel::TimeOverhead). Returns 0,
// or -1 with a message in `error`.
int32_t ucudnn_time_overhead(int64_t id, int32_t iters, double* times, char* error,
                             int64_t capacity) {
#if GOOGLE_CUDA
  std::pair<ucudnn::KernelKey, std::shared_ptr<ucudnn::CudnnKernel>> found;
  if (!FindKernel(id, &found, error, capacity)) return -1;
  ucudnn::CudnnKernel::OverheadTimes t;
  const ucudnn::Status status = found.second->TimeOverhead(found.first.device, iters, &t);
  if (!status.ok()) {
    WriteString(status.message(), error, capacity);
    return -1;
  }
  const double values[5] = {t.plan_ms, t.direct_ms, t.transform_ms, t.plan_host_ms,
                            t.direct_host_ms};
  for (int i = 0; i < 5; ++i) times[i] = values[i];
  return 0;
#else
  WriteString("this library has no cuDNN kernels", error, capacity);
  return -1;
#endif
}

}  // extern "C"
