// Graph-API candidates (cudnn_graph.h: ProposeGraphEngines): heuristics mode
// A and the fallback list through cudnn-frontend, the numerical and behaviour
// note filters, and the (engine id, knobs) encoding of the benchmark
// database. Ours: which configs become candidates. See docs/design.md.
#if GOOGLE_CUDA

#include <algorithm>
#include <sstream>

#include "cc/engine/cuda_check.h"
#include "cc/engine/cudnn_graph.h"
#include "cc/engine/graph_operations.h"

namespace ucudnn {

using namespace graph_internal;  // NOLINT: the graph helpers of this library

namespace {

// How many configs of each heuristics list become candidates, in the list's
// order (mode A ranks by predicted speed). Planning builds a plan and runs
// each candidate at every micro-batch size; mode A lists up to ~30 knob
// variants, and its tail is rarely fastest. Counted after numerics filtering.
constexpr size_t kModeAConfigs = 8;
constexpr size_t kFallbackConfigs = 4;
// Mode A's configs are fetched this many first: fetching makes and fills a
// backend descriptor per config, and the candidates are the first
// kModeAConfigs allowed ones. The rest are fetched only when the prefix holds
// fewer allowed configs, so the candidates are the same either way.
constexpr int64_t kModeAPrefix = 16;

// Reads the engine id and knob choices of a heuristics result. cudnn-frontend
// reads them only from a built execution plan (its tag), and planning builds
// plans only for the configs it keeps: kept as raw attribute reads.
Status ReadEngineConfig(cudnnBackendDescriptor_t config, GraphEngine* out) {
  fe::ManagedOpaqueDescriptor engine_desc = fe::make_shared_backend_pointer(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  UCUDNN_CUDNN_OK(engine_desc->get_status());
  cudnnBackendDescriptor_t engine = engine_desc->get_backend_descriptor();
  int64_t count = 0;
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine));
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                           CUDNN_TYPE_INT64, 1, &count, &out->id));
  std::vector<fe::ManagedOpaqueDescriptor> owned;
  std::vector<cudnnBackendDescriptor_t> choices(CUDNN_KNOB_TYPE_COUNTS);
  for (auto& c : choices) {
    owned.push_back(fe::make_shared_backend_pointer(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    UCUDNN_CUDNN_OK(owned.back()->get_status());
    c = owned.back()->get_backend_descriptor();
  }
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                           static_cast<int64_t>(choices.size()), &count,
                                           choices.data()));
  out->knobs.clear();
  for (int64_t i = 0; i < std::min<int64_t>(count, choices.size()); ++i) {
    cudnnBackendKnobType_t type;
    int64_t value = 0, n = 0;
    UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                             CUDNN_TYPE_KNOB_TYPE, 1, &n, &type));
    UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                             CUDNN_TYPE_INT64, 1, &n, &value));
    out->knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  std::sort(out->knobs.begin(), out->knobs.end());
  return Status();
}

// cuDNN's numerical notes by name, for the candidate log.
struct NoteTest {
  const char* name;
  bool (*has)(cudnnBackendDescriptor_t config);
};
constexpr NoteTest kNotes[] = {
    {"TENSOR_CORE", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_TENSOR_CORE>},
    {"DOWN_CONVERT_INPUTS", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS>},
    {"REDUCED_PRECISION_REDUCTION",
     fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION>},
    {"FFT", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_FFT>},
    {"NONDETERMINISTIC", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC>},
    {"WINOGRAD", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD>},
    {"WINOGRAD_TILE_4x4", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4>},
    {"WINOGRAD_TILE_6x6", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6>},
    {"WINOGRAD_TILE_13x13", fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13>},
};

// Whether the engine config's notes allow it under `numerics` (else *why
// says which note forbids it); *deterministic and *names from its notes.
void EngineAllowed(cudnnBackendDescriptor_t config, const GraphNumerics& numerics, bool* allowed,
                   bool* deterministic, std::string* names, std::string* why) {
  names->clear();
  for (const NoteTest& note : kNotes) {
    if (note.has(config)) *names += (names->empty() ? "" : ",") + std::string(note.name);
  }
  *allowed = true;
  *deterministic = !fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC>(config);
  auto forbid = [&](const char* reason) {
    if (*allowed) *why = reason;
    *allowed = false;
  };
  if (numerics.strict_float && fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_TENSOR_CORE>(config)) {
    forbid("tensor cores (TF32) with TF32 off");
  }
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS>(config) ||
      fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION>(config)) {
    forbid("reduced precision");
  }
  if (numerics.deterministic && !*deterministic) forbid("nondeterministic under op determinism");
  if (!numerics.runtime_compilation &&
      fe::hasBehaviorNote<CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION>(config)) {
    forbid("runtime compilation");
  }
}

// `e`, the engine of `config` (its layout already set in e.transposed), as a
// candidate if `numerics` allow it; else false, and with `log` a line saying
// why it was dropped (a kept one is logged where it joins the list).
bool AllowedCandidate(GraphEngine e, cudnnBackendDescriptor_t config,
                      const GraphNumerics& numerics, GraphCandidate* out, std::string* log) {
  bool allowed = false, deterministic = true;
  std::string notes, why;
  EngineAllowed(config, numerics, &allowed, &deterministic, &notes, &why);
  if (!allowed) {
    if (log != nullptr) *log += "  " + e.Name() + " [" + notes + "] dropped: " + why + "\n";
    return false;
  }
  *out = {std::move(e), deterministic, std::move(notes)};
  return true;
}

}  // namespace

std::string GraphEngine::Name() const {
  std::ostringstream s;
  s << "eng" << id << "{";
  for (size_t i = 0; i < knobs.size(); ++i) {
    s << (i ? "," : "") << "k" << knobs[i].first << "=" << knobs[i].second;
  }
  s << "}" << (transposed ? "/transposed" : "");
  return s.str();
}

Status ProposeGraphEngines(cudnnHandle_t handle, const ConvGraphSpec& spec,
                           const GraphNumerics& numerics, GraphSearch search,
                           FallbackEngines* fallback, std::vector<GraphCandidate>* out,
                           std::string* log, GraphHostCosts* costs) {
  out->clear();
  std::unique_ptr<fe::OperationGraph> graph;
  Stopwatch watch;
  // A graph cuDNN cannot express (e.g. beyond its size limits) has no engines.
  const bool expressed = MakeOperationGraph(handle, spec, &graph).ok();
  if (costs != nullptr) {
    costs->op_graphs_s += watch.Lap();
    ++costs->op_graphs;
    ++costs->queries;
  }
  if (!expressed) return Status();
  const bool transposed = spec.graph_layout != spec.layout;
  // Whether `e` is listed in *out already.
  auto listed = [&](const GraphEngine& e) {
    return std::any_of(out->begin(), out->end(),
                       [&](const GraphCandidate& c) { return c.engine == e; });
  };
  // Appends a candidate to *out, logged.
  auto add = [&](GraphCandidate c) {
    if (log != nullptr) *log += "  " + c.engine.Name() + " [" + c.notes + "] candidate\n";
    out->push_back(std::move(c));
  };
  // Adds `e` (whose config is `config`) if new and allowed; false if it was not added.
  auto consider = [&](GraphEngine e, cudnnBackendDescriptor_t config) {
    e.transposed = transposed;
    GraphCandidate c;
    if (listed(e) || !AllowedCandidate(std::move(e), config, numerics, &c, log)) {
      return false;
    }
    add(std::move(c));
    return true;
  };
  // Takes allowed configs of a heuristics list from index `from` on, in its
  // order, until `*taken` reaches `cap`.
  auto take = [&](fe::EngineConfigList& configs, size_t from, size_t cap, size_t* taken) {
    for (size_t i = from; i < configs.size() && *taken < cap; ++i) {
      fe::ManagedOpaqueDescriptor& config = configs[i];
      if (config == nullptr || config->get_status() != CUDNN_STATUS_SUCCESS) continue;
      GraphEngine e;
      const cudnnBackendDescriptor_t desc = config->get_backend_descriptor();
      if (!ReadEngineConfig(desc, &e).ok()) continue;
      if (consider(std::move(e), desc)) ++*taken;
    }
  };
  // Wide and exhaustive: every config of both lists, as TF's autotuner takes them.
  const bool every_config = search != GraphSearch::kDefault;
  fe::EngineHeuristics heuristics =
      fe::EngineHeuristicsBuilder().setOperationGraph(*graph).setHeurMode(CUDNN_HEUR_MODE_A).build();
  if (heuristics.get_status() == CUDNN_STATUS_SUCCESS) {
    const int64_t count = heuristics.getEngineConfigCount();
    const double query_s = watch.Lap();
    if (costs != nullptr) costs->heuristics_s += query_s;
    const size_t cap =
        every_config ? static_cast<size_t>(std::max<int64_t>(count, 0)) : kModeAConfigs;
    size_t taken = 0;
    const int64_t prefix = every_config ? count : std::min(count, kModeAPrefix);
    if (prefix > 0) {
      // The frontend refills its list on a second fetch: the prefix's
      // descriptors come back first, in the same order.
      fe::EngineConfigList* configs = &heuristics.getEngineConfig(prefix);
      if (heuristics.get_status() == CUDNN_STATUS_SUCCESS) take(*configs, 0, cap, &taken);
      if (taken < cap && prefix < count && heuristics.get_status() == CUDNN_STATUS_SUCCESS) {
        const size_t fetched = configs->size();
        configs = &heuristics.getEngineConfig(count);
        if (heuristics.get_status() == CUDNN_STATUS_SUCCESS) take(*configs, fetched, cap, &taken);
      }
    }
  }
  if (costs != nullptr) {
    const double configs_s = watch.Lap();
    costs->heuristics_s += configs_s;
    costs->heuristics_configs_s += configs_s;
  }
  // The fallback list, queried once per kind of convolution (see
  // FallbackEngines): its allowed configs in order.
  if (!fallback->listed) {
    fe::EngineFallbackList list = fe::EngineFallbackListBuilder()
                                      .setOperationGraph(*graph)
                                      .setOperation(OperationType(spec.pass))
                                      .build();
    if (list.get_status() == CUDNN_STATUS_SUCCESS) {
      for (fe::ManagedOpaqueDescriptor& config : list.getFallbackList()) {
        if (config == nullptr || config->get_status() != CUDNN_STATUS_SUCCESS) continue;
        GraphEngine e;
        const cudnnBackendDescriptor_t desc = config->get_backend_descriptor();
        GraphCandidate c;
        if (!ReadEngineConfig(desc, &e).ok()) continue;
        e.transposed = transposed;
        if (AllowedCandidate(std::move(e), desc, numerics, &c, log)) {
          fallback->allowed.push_back(std::move(c));
        }
      }
    }
    fallback->listed = true;
  } else if (log != nullptr) {
    *log += "  (the fallback list of an earlier size or kernel of this kind)\n";
  }
  size_t taken = 0;
  for (const GraphCandidate& c : fallback->allowed) {
    if (!every_config && taken == kFallbackConfigs) break;
    if (listed(c.engine)) continue;
    add(c);
    ++taken;
  }
  if (costs != nullptr) costs->fallback_s += watch.Lap();
  if (search == GraphSearch::kExhaustive) {
    const int64_t count = graph->getEngineCount();
    if (count < 0) return Status::Internal("cuDNN did not say how many engines the graph has");
    for (int64_t id = 0; id < count; ++id) {
      const bool id_listed = std::any_of(out->begin(), out->end(),
                                         [&](const GraphCandidate& c) { return c.engine.id == id; });
      if (id_listed) continue;
      EngineConfigDescriptors config;
      if (!MakeEngineConfig(*graph, GraphEngine{id, {}}, &config).ok()) continue;
      consider(GraphEngine{id, {}}, config.config->get_backend_descriptor());
    }
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
