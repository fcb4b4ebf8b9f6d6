// The C interface of the engine for tf_ucudnn's Python side (ctypes on the
// same shared library; tf_ucudnn/_engine.py is its only caller).
//
// Records cross as JSON with named fields, never as positional arrays:
// functions that return `char*` return a malloc'd NUL-terminated JSON document
// that the caller frees with ucudnn_free; a failure is {"error": "message"}.
// Requests are JSON too. The names are those of the C++ structs (ConvParams,
// KernelKey, CudnnAlgo, AlgoPerf, MicroBatch, Plan); enums cross as their
// names ("forward", "NHWC", "float32", "powerOfTwo", "all").
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cc/engine/division_groups.h"
#include "cc/engine/plan_records.h"
#include "cc/engine/planner.h"
#include "nlohmann/json.hpp"

#if GOOGLE_CUDA
#include "cc/engine/kernel_cache.h"
#endif

namespace {

using json = nlohmann::json;

char* Copy(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

char* Dump(const json& j) { return Copy(j.dump()); }

char* Error(const std::string& message) { return Dump({{"error", message}}); }

// The enum value whose name is j[field]; throws naming the field otherwise.
template <typename T>
T EnumField(const json& j, const char* field, const char* (*name_of)(T), int count) {
  const std::string text = j.at(field).get<std::string>();
  for (int i = 0; i < count; ++i) {
    if (text == name_of(static_cast<T>(i))) return static_cast<T>(i);
  }
  throw std::invalid_argument(std::string(field) + ": unknown name '" + text + "'");
}

ucudnn::BatchSizePolicy PolicyField(const json& j, const char* field) {
  ucudnn::BatchSizePolicy policy;
  const std::string text = j.at(field).get<std::string>();
  if (!ucudnn::ParseBatchSizePolicy(text, &policy)) {
    throw std::invalid_argument(std::string(field) + ": unknown batch-size policy '" + text + "'");
  }
  return policy;
}

json PlanJson(const ucudnn::Plan& plan) {
  json micro_batches = json::array();
  for (const ucudnn::MicroBatch& mb : plan.micro_batches) {
    micro_batches.push_back({{"size", mb.size}, {"algo", mb.algo}});
  }
  return {{"micro_batches", std::move(micro_batches)},
          {"workspace_bytes", plan.workspace_bytes},
          {"accumulator_bytes", plan.accumulator_bytes}};
}

}  // namespace

extern "C" {

// Frees a JSON document returned by this interface.
void ucudnn_free(char* json_text) { std::free(json_text); }

// The TensorFlow major.minor this library was compiled against. Plain
// integers: the loader checks them before anything else, so this signature
// stays as it is across versions.
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

// The micro-batch sizes that `policy` ("undivided", "powerOfTwo", "all")
// allows for `batch_size` samples, ascending; returns how many (-1 for an
// unknown policy) and writes at most `capacity`, so a caller can ask with
// capacity 0 first. Lists nothing it does not write: policy all with
// N = 2^40 has 2^40 sizes.
int64_t ucudnn_micro_batch_sizes(const char* policy_name, int64_t batch_size, int64_t* out,
                                 int64_t capacity) {
  ucudnn::BatchSizePolicy policy;
  if (!ucudnn::ParseBatchSizePolicy(policy_name, &policy)) return -1;
  const int64_t count = ucudnn::MicroBatchSizeCount(policy, batch_size);
  if (policy == ucudnn::BatchSizePolicy::kAll) {
    for (int64_t i = 0; i < count && i < capacity; ++i) out[i] = i + 1;
  } else if (capacity > 0) {
    const std::vector<int64_t> sizes = ucudnn::MicroBatchSizes(policy, batch_size);  // <= 64
    for (int64_t i = 0; i < count && i < capacity; ++i) out[i] = sizes[i];
  }
  return count;
}

// Bytes of the float32 accumulator of a float16/bfloat16 backward-filter plan
// of several micro-batches, for a filter of `filter_elements` (planner.h,
// FloatAccumulatorBytes); -1 for a count below 0 or too large.
int64_t ucudnn_float_accumulator_bytes(int64_t filter_elements) {
  if (filter_elements < 0 || filter_elements > (int64_t{1} << 60)) return -1;
  return ucudnn::FloatAccumulatorBytes(filter_elements);
}

// Plans over a benchmark table, restricted to the policy's sizes. Request:
//   {"table": [{"size", "algo", "time_ms", "workspace_bytes"}, ...],
//    "batch_size", "policy", "workspace_limit",
//    "mode": "best" (the Workspace Reuse plan within workspace_limit: 0 or 1
//            plan) | "front" (the Pareto front),
//    "accumulator_bytes" (optional, default 0: a float32 accumulator that
//            plans of several micro-batches hold in their workspace;
//            planner.h, BestPlanWithAccumulator)}
// "algo" is the caller's index, handed back in the plans. Answer:
//   {"plans": [{"micro_batches": [{"size", "algo"}, ...], "workspace_bytes",
//               "accumulator_bytes"}, ...]}, or
//   {"too_large": true} when batch_size is too large for the table
//   (ucudnn::PlanTooLarge).
char* ucudnn_plan(const char* request) {
  try {
    const json r = json::parse(request);
    ucudnn::PerfTable table;
    for (const json& row : r.at("table")) {
      table[row.at("size").get<int64_t>()].push_back(
          {row.at("algo").get<int>(), row.at("time_ms").get<double>(),
           row.at("workspace_bytes").get<int64_t>()});
    }
    const int64_t batch_size = r.at("batch_size").get<int64_t>();
    const std::string mode = r.at("mode").get<std::string>();
    if (mode != "best" && mode != "front") throw std::invalid_argument("mode: " + mode);
    table = ucudnn::RestrictTable(table, PolicyField(r, "policy"), batch_size);
    if (ucudnn::PlanTooLarge(table, batch_size)) return Dump({{"too_large", true}});
    const int64_t accumulator = r.value("accumulator_bytes", int64_t{0});
    if (accumulator < 0) throw std::invalid_argument("accumulator_bytes must be >= 0");
    std::vector<ucudnn::Plan> plans;
    if (mode == "best") {
      const ucudnn::Plan plan = ucudnn::BestPlanWithAccumulator(
          table, batch_size, r.at("workspace_limit").get<int64_t>(), accumulator);
      if (!plan.empty()) plans.push_back(plan);
    } else {
      plans = ucudnn::ParetoFrontWithAccumulator(table, batch_size, accumulator);
    }
    json out = json::array();
    for (const ucudnn::Plan& plan : plans) out.push_back(PlanJson(plan));
    return Dump({{"plans", std::move(out)}});
  } catch (const std::exception& e) {
    return Error(e.what());
  }
}

// The plans chosen so far: a JSON array of plan records (plan_records.h).
char* ucudnn_plan_records() { return Copy(ucudnn::PlanRecordsJson()); }

void ucudnn_clear_plan_records() { ucudnn::ClearPlanRecords(); }

// {"cudnn": "9.19.0"} ("" without cuDNN); loads cuDNN on the first call.
char* ucudnn_cudnn_version() {
#if GOOGLE_CUDA
  return Dump({{"cudnn", ucudnn::CudnnVersionString()}});
#else
  return Dump({{"cudnn", ""}});
#endif
}

}  // extern "C"

#if GOOGLE_CUDA
namespace {

json ConvJson(const ucudnn::ConvParams& p) {
  return {{"batch", p.batch},
          {"in_channels", p.in_channels},
          {"in_height", p.in_height},
          {"in_width", p.in_width},
          {"out_channels", p.out_channels},
          {"filter_height", p.filter_height},
          {"filter_width", p.filter_width},
          {"groups", p.groups},
          {"stride_h", p.stride_h},
          {"stride_w", p.stride_w},
          {"dilation_h", p.dilation_h},
          {"dilation_w", p.dilation_w},
          {"pad_top", p.pad_top},
          {"pad_bottom", p.pad_bottom},
          {"pad_left", p.pad_left},
          {"pad_right", p.pad_right},
          {"out_height", p.out_height},
          {"out_width", p.out_width},
          {"layout", ucudnn::LayoutName(p.layout)},
          {"dtype", ucudnn::DTypeName(p.dtype)},
          {"bias", p.fusion.bias()},
          {"relu", p.fusion.relu()}};
}

// The fusion of a convolution's JSON: its "bias" and "relu" bools, as
// ConvJson writes them (absent in what was written before the bias
// epilogue: none). A ReLU without the bias is refused.
ucudnn::Fusion FusionFromJson(const json& j) {
  const bool bias = j.contains("bias") && j.at("bias").get<bool>();
  const bool relu = j.contains("relu") && j.at("relu").get<bool>();
  if (relu && !bias) throw std::invalid_argument("a ReLU epilogue needs the bias");
  ucudnn::Fusion fusion;
  fusion.epilogue = relu ? ucudnn::Epilogue::kBiasRelu
                         : bias ? ucudnn::Epilogue::kBias : ucudnn::Epilogue::kNone;
  return fusion;
}

ucudnn::ConvParams ConvFromJson(const json& j) {
  ucudnn::ConvParams p;
  const auto i64 = [&](const char* field) { return j.at(field).get<int64_t>(); };
  p.batch = i64("batch");
  p.in_channels = i64("in_channels");
  p.in_height = i64("in_height");
  p.in_width = i64("in_width");
  p.out_channels = i64("out_channels");
  p.filter_height = i64("filter_height");
  p.filter_width = i64("filter_width");
  p.groups = i64("groups");
  p.stride_h = i64("stride_h");
  p.stride_w = i64("stride_w");
  p.dilation_h = i64("dilation_h");
  p.dilation_w = i64("dilation_w");
  p.pad_top = i64("pad_top");
  p.pad_bottom = i64("pad_bottom");
  p.pad_left = i64("pad_left");
  p.pad_right = i64("pad_right");
  p.out_height = i64("out_height");
  p.out_width = i64("out_width");
  p.layout = EnumField(j, "layout", ucudnn::LayoutName, 2);
  p.dtype = EnumField(j, "dtype", ucudnn::DTypeName, 3);
  p.fusion = FusionFromJson(j);
  return p;
}

// What the benchmark database stores a kernel's tables under: the kernel's
// key without its device and Workspace Division total (seeds hold for any).
// "graph" holds the UCUDNN_GRAPH_* knobs, which change the candidates timed;
// "workspace_limit" the limit the kernel is benchmarked within
// (PlanningKnobs::BenchmarkLimit: a Workspace Division group's total).
json KeyJson(const ucudnn::KernelKey& key, const ucudnn::ConvParams& params) {
  const ucudnn::PlanningKnobs& k = key.knobs;
  return {{"pass", ucudnn::PassName(key.pass)},
          {"conv", ConvJson(params)},
          {"allow_tf32", k.allow_tf32},
          {"deterministic", k.deterministic},
          {"workspace_limit", k.BenchmarkLimit()},
          {"policy", ucudnn::BatchSizePolicyName(k.policy)},
          {"forced_micro_batch", k.micro_batch_size},
          {"engines", ucudnn::EngineSetName(k.engines)},
          {"graph",
           {{"search", ucudnn::GraphSearchName(k.graph.search)},
            {"layouts", ucudnn::GraphLayoutsName(k.graph.layouts)},
            {"prune_factor", k.graph.prune_factor}}}};
}

ucudnn::GraphSearchKnobs GraphKnobsFromJson(const json& j) {
  ucudnn::GraphSearchKnobs graph;
  graph.search = EnumField(j, "search", ucudnn::GraphSearchName, ucudnn::kGraphSearchCount);
  graph.layouts = EnumField(j, "layouts", ucudnn::GraphLayoutsName, ucudnn::kGraphLayoutsCount);
  graph.prune_factor = j.at("prune_factor").get<double>();
  if (!ucudnn::ValidGraphPruneFactor(graph.prune_factor)) {
    throw std::invalid_argument("graph.prune_factor must be 0 or a number >= 1; got " +
                                j.at("prune_factor").dump());
  }
  return graph;
}

ucudnn::KernelKey KeyFromJson(const json& j) {
  ucudnn::KernelKey key;
  key.pass = EnumField(j, "pass", ucudnn::PassName, 3);
  key.conv = ConvFromJson(j.at("conv")).Fields();
  ucudnn::PlanningKnobs& k = key.knobs;
  k.allow_tf32 = j.at("allow_tf32").get<bool>();
  k.deterministic = j.at("deterministic").get<bool>();
  k.workspace_limit = j.at("workspace_limit").get<int64_t>();
  k.total_workspace = 0;  // a table's key (TableKey)
  k.policy = PolicyField(j, "policy");
  k.micro_batch_size = j.at("forced_micro_batch").get<int64_t>();
  k.engines = EnumField(j, "engines", ucudnn::EngineSetName, ucudnn::kEngineSetCount);
  k.graph = GraphKnobsFromJson(j.at("graph"));
  return key;
}

// A candidate: {"algo", "math_type", "deterministic"} for a legacy
// algorithm, plus "engine": {"id", "transposed", "knobs": [[knob, value], ...]}
// for a graph-API engine.
json AlgoJson(const ucudnn::CudnnAlgo& a) {
  json j = {{"algo", a.algo}, {"math_type", a.math_type}, {"deterministic", a.deterministic}};
  if (a.graph()) {
    json knobs = json::array();
    for (const auto& [knob, value] : a.engine.knobs) knobs.push_back({knob, value});
    j["engine"] = {{"id", a.engine.id}, {"transposed", a.engine.transposed}, {"knobs", knobs}};
  }
  return j;
}

ucudnn::CudnnAlgo AlgoFromJson(const json& j) {
  ucudnn::CudnnAlgo a;
  a.algo = j.at("algo").get<int>();
  a.math_type = j.at("math_type").get<int>();
  a.deterministic = j.at("deterministic").get<bool>();
  if (j.contains("engine")) {
    const json& e = j.at("engine");
    a.engine.id = e.at("id").get<int64_t>();
    if (a.engine.id < 0) throw std::invalid_argument("engine.id must be >= 0");
    a.engine.transposed = e.at("transposed").get<bool>();
    for (const json& knob : e.at("knobs")) {
      a.engine.knobs.emplace_back(knob.at(0).get<int64_t>(), knob.at(1).get<int64_t>());
    }
  }
  return a;
}

// A plan with each micro-batch's algorithm named, its time and workspace.
json NamedPlanJson(const ucudnn::CudnnKernel& kernel, const ucudnn::Plan& plan) {
  json micro_batches = json::array();
  for (const ucudnn::MicroBatch& mb : plan.micro_batches) {
    micro_batches.push_back({{"size", mb.size},
                             {"algo", ucudnn::CudnnAlgoName(kernel.pass(), kernel.algos()[mb.algo])},
                             {"workspace_bytes", mb.workspace_bytes},
                             {"time_ms", mb.time_ms}});
  }
  return {{"time_ms", plan.time_ms},
          {"workspace_bytes", plan.workspace_bytes},
          {"micro_batches", std::move(micro_batches)}};
}

// Kernel `id` (from ucudnn_kernels); throws for an unknown id.
std::pair<ucudnn::KernelKey, std::shared_ptr<ucudnn::CudnnKernel>> FindKernel(int64_t id) {
  const auto kernels = ucudnn::AllKernels();
  if (id < 0 || id >= static_cast<int64_t>(kernels.size())) {
    throw std::invalid_argument("no kernel with id " + std::to_string(id));
  }
  return kernels[id];
}

}  // namespace
#endif

extern "C" {

// Every planned GPU kernel with its benchmark table and Pareto front, as a
// JSON array of {"id" (the argument of ucudnn_set_kernel_limit), "device",
// "pass", "shape", "key" (pass, conv, allow_tf32, deterministic,
// workspace_limit (the op's), policy, forced_micro_batch, engines, graph:
// search, layouts, prune_factor),
// "total_workspace", "seeded", "pressured_sizes", "pruned_engines" ({engine name: the size
// that pruned it from larger sizes}), "algos" (candidates), "table" ([{"size",
// "algo" (index into algos), "time_ms", "workspace_bytes"}]), "planned_limit"
// (the limit its plan now uses), "plan", "front"}.
char* ucudnn_kernels() {
  json out = json::array();
#if GOOGLE_CUDA
  try {
    const auto kernels = ucudnn::AllKernels();
    for (size_t id = 0; id < kernels.size(); ++id) {
      const ucudnn::KernelKey& key = kernels[id].first;
      const ucudnn::CudnnKernel& kernel = *kernels[id].second;
      const std::vector<ucudnn::Plan> front = kernel.ParetoFront();
      if (front.empty()) continue;  // created but not planned (an error, or in flight)
      json algos = json::array();
      for (const ucudnn::CudnnAlgo& a : kernel.algos()) algos.push_back(AlgoJson(a));
      json table = json::array();
      for (const auto& [size, perfs] : kernel.table()) {
        for (const ucudnn::AlgoPerf& perf : perfs) {
          table.push_back({{"size", size}, {"algo", perf.algo}, {"time_ms", perf.time_ms},
                           {"workspace_bytes", perf.workspace_bytes}});
        }
      }
      json front_json = json::array();
      for (const ucudnn::Plan& plan : front) front_json.push_back(NamedPlanJson(kernel, plan));
      out.push_back({{"id", id},
                     {"device", key.device},
                     {"pass", ucudnn::PassName(key.pass)},
                     {"shape", kernel.params().ToString()},
                     {"key", KeyJson(key, kernel.params())},
                     {"total_workspace", key.knobs.total_workspace},
                     {"seeded", kernel.seeded()},
                     {"pressured_sizes", kernel.pressured_sizes()},
                     {"pruned_engines", kernel.pruned_engines()},
                     {"algos", std::move(algos)},
                     {"table", std::move(table)},
                     {"planned_limit", kernel.planned_limit()},
                     {"plan", NamedPlanJson(kernel, kernel.plan())},
                     {"front", std::move(front_json)}});
    }
  } catch (const std::exception& e) {
    return Error(e.what());
  }
#endif
  return Dump(out);
}

// Every stored benchmark table (one per convolution and settings, whatever
// N: TableKey), as a JSON array of {"shape" (the convolution without N),
// "key" (as ucudnn_kernels writes it, with conv.batch 0; policy and
// forced_micro_batch hold for any), "algos", "table", "pressured_sizes"
// (sizes measured under memory pressure), "pruned_engines"}.
char* ucudnn_tables() {
  json out = json::array();
#if GOOGLE_CUDA
  try {
    for (const ucudnn::ConvolutionTable& stored : ucudnn::AllTables()) {
      json algos = json::array();
      for (const ucudnn::CudnnAlgo& a : stored.algos) algos.push_back(AlgoJson(a));
      json table = json::array();
      for (const auto& [size, perfs] : stored.table) {
        for (const ucudnn::AlgoPerf& perf : perfs) {
          table.push_back({{"size", size}, {"algo", perf.algo}, {"time_ms", perf.time_ms},
                           {"workspace_bytes", perf.workspace_bytes}});
        }
      }
      std::string shape = stored.params.ToString();
      if (shape.rfind("N=0 ", 0) == 0) shape = shape.substr(4);
      out.push_back({{"shape", shape},
                     {"key", KeyJson(stored.key, stored.params)},
                     {"algos", std::move(algos)},
                     {"table", std::move(table)},
                     {"pressured_sizes", stored.pressured},
                     {"pruned_engines", stored.pruned}});
    }
  } catch (const std::exception& e) {
    return Error(e.what());
  }
#endif
  return Dump(out);
}

// Seeds the stored benchmark table of a convolution (from the benchmark
// database): kernels created later with this key, whatever their N, policy
// or GPU, plan from its sizes and benchmark only the ones it lacks (and again
// those of the optional "pressured_sizes", measured under memory pressure;
// graph engines in the optional "pruned_engines" are left out above their size).
// Request: {"key", "algos", "table"} as ucudnn_kernels writes them. Answer:
// {} or {"error": ...} for a malformed request.
char* ucudnn_seed_kernel(const char* request) {
#if GOOGLE_CUDA
  try {
    const json r = json::parse(request);
    const ucudnn::KernelKey key = KeyFromJson(r.at("key"));
    std::vector<ucudnn::CudnnAlgo> algos;
    for (const json& a : r.at("algos")) algos.push_back(AlgoFromJson(a));
    ucudnn::PerfTable table;
    for (const json& row : r.at("table")) {
      const int64_t size = row.at("size").get<int64_t>();
      const int algo = row.at("algo").get<int>();
      if (algo < 0 || algo >= static_cast<int64_t>(algos.size()) || size <= 0) {
        throw std::invalid_argument("table row " + row.dump() + ": size <= 0 or algo not an "
                                    "index into algos");
      }
      table[size].push_back(
          {algo, row.at("time_ms").get<double>(), row.at("workspace_bytes").get<int64_t>()});
    }
    std::set<int64_t> pressured;
    if (r.contains("pressured_sizes")) {
      for (const json& size : r.at("pressured_sizes")) pressured.insert(size.get<int64_t>());
    }
    ucudnn::PrunedEngines pruned;
    if (r.contains("pruned_engines")) {
      for (const auto& item : r.at("pruned_engines").items()) {
        const int64_t size = item.value().get<int64_t>();
        if (size <= 0) {
          throw std::invalid_argument("pruned engine " + item.key() + ": size <= 0");
        }
        pruned[item.key()] = size;
      }
    }
    ucudnn::SeedKernelTable(key, std::move(table), std::move(algos), std::move(pressured),
                            std::move(pruned));
    return Dump(json::object());
  } catch (const std::exception& e) {
    return Error(e.what());
  }
#else
  return Error("this library has no cuDNN kernels");
#endif
}

// Workspace Division: replans kernel `id` (from ucudnn_kernels) within
// `workspace_limit` bytes from its benchmark table, and records the new plan
// for tf_ucudnn.plans(). Answer: {} or {"error": ...}.
char* ucudnn_set_kernel_limit(int64_t id, int64_t workspace_limit) {
#if GOOGLE_CUDA
  try {
    const auto [key, kernel] = FindKernel(id);
    const ucudnn::Status status = kernel->Replan(workspace_limit);
    if (!status.ok()) return Error(status.message());
    ucudnn::PlanRecord r = ucudnn::MakePlanRecord(
        "/device:GPU:" + std::to_string(key.device), key.pass, kernel->params(), key.knobs,
        kernel->plan(), [&](const ucudnn::MicroBatch& mb) {
          return ucudnn::CudnnAlgoName(key.pass, kernel->algos()[mb.algo]);
        });
    r.workspace_limit = workspace_limit;  // the kernel's share of the group's total
    r.note = "Workspace Division";
    ucudnn::RecordPlan(std::move(r));
    return Dump(json::object());
  } catch (const std::exception& e) {
    return Error(e.what());
  }
#else
  return Error("this library has no cuDNN kernels");
#endif
}

}  // extern "C"
