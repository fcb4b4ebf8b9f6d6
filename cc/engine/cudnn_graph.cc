// cuDNN graph-API engines through cudnn-frontend's v0.x builder API (1.13,
// header-only, as the pip TensorFlow ships it; TensorFlow's stream executor
// uses the same builders): operation graphs, heuristics mode A and the
// fallback list, numerical and behaviour note filters, engines with knob
// choices, execution plans and variant packs. Ours: which configs become
// candidates, the transposed-layout copies through the workspace, and the
// (engine id, knobs) encoding of the benchmark database. See docs/design.md.
#if GOOGLE_CUDA

#include "cc/engine/cudnn_graph.h"

#include <algorithm>
#include <chrono>
#include <sstream>

// Errors are statuses, not exceptions (as TensorFlow builds the frontend).
#define NV_CUDNN_DISABLE_EXCEPTION
#include "cudnn_frontend.h"

#include "cc/engine/cuda_check.h"

namespace ucudnn {

namespace fe = cudnn_frontend;

namespace {

// Unique ids of the three tensors in every graph and variant pack, the bias
// of a forward graph with one, its virtual convolution result, and the
// virtual sum before a ReLU.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y', kUidBias = 'b', kUidConv = 'c',
                  kUidBiased = 'a';

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

// Internal unless a frontend object was built.
template <typename T>
Status FrontendOk(const T& object, const char* what) {
  if (object.get_status() == CUDNN_STATUS_SUCCESS) return Status();
  return Status::Internal(std::string(what) + " failed: " + cudnnGetErrorString(object.get_status()) +
                          " (" + object.get_error() + ")");
}

// A graph tensor of `dims` [n, c, h, w], packed in `layout` (virtual: an
// intermediate of the graph, in no buffer).
fe::Tensor MakeTensor(const int64_t dims[4], Layout layout, int64_t uid, cudnnDataType_t type,
                      int64_t alignment, bool is_virtual = false) {
  int64_t strides[4];
  LayoutStrides(layout, dims[1], dims[2], dims[3], strides);
  return fe::TensorBuilder()
      .setDim(4, dims)
      .setStride(4, strides)
      .setId(uid)
      .setAlignment(alignment)
      .setDataType(type)
      .setVirtual(is_virtual)
      .build();
}

// Whether a tensor of `dims` [n, c, h, w] is the same memory packed NHWC and
// NCHW: one channel, or one pixel.
bool LayoutsCoincide(const int64_t dims[4]) { return dims[1] == 1 || dims[2] * dims[3] == 1; }

// The pass's output among x (0), w (1), y (2).
int OutputRole(Pass pass) {
  return pass == Pass::kForward ? 2 : pass == Pass::kBackwardData ? 0 : 1;
}

// Whether the plan of `spec` transposes its output (then the graph itself
// never accumulates: the transpose back adds).
bool TransposesOutput(const ConvGraphSpec& spec) {
  const int64_t* dims[3] = {spec.x, spec.w, spec.y};
  return spec.layout != spec.graph_layout && !LayoutsCoincide(dims[OutputRole(spec.pass)]);
}

cudnnBackendDescriptorType_t OperationType(Pass pass) {
  switch (pass) {
    case Pass::kForward: return CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
    case Pass::kBackwardData: return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
    case Pass::kBackwardFilter: break;
  }
  return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
}

// A pointwise node of the forward epilogue, computing in float: y = x + b
// (CUDNN_POINTWISE_ADD, `b` given) or y = max(x, 0) (RELU_FWD, `b` null).
Status MakePointwise(cudnnPointwiseMode_t mode, const fe::Tensor& x, const fe::Tensor* b,
                     const fe::Tensor& y, const char* what, std::unique_ptr<fe::Operation>* out) {
  fe::PointWiseDesc desc =
      fe::PointWiseDescBuilder().setMode(mode).setComputeType(CUDNN_DATA_FLOAT).build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(desc, what));
  fe::OperationBuilder builder(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  builder.setxDesc(x).setyDesc(y).setpwDesc(desc);
  if (b != nullptr) builder.setbDesc(*b);
  *out = std::make_unique<fe::Operation>(builder.build());
  return FrontendOk(**out, what);
}

// The operation graph of one convolution node for `spec`. The graph holds
// (shared) every descriptor it was built from.
Status MakeOperationGraph(cudnnHandle_t handle, const ConvGraphSpec& spec,
                          std::unique_ptr<fe::OperationGraph>* graph) {
  const Layout l = spec.graph_layout;
  fe::Tensor x = MakeTensor(spec.x, l, kUidX, spec.data_type, spec.alignment);
  UCUDNN_RETURN_IF_ERROR(FrontendOk(x, "the graph's x tensor"));
  fe::Tensor w = MakeTensor(spec.w, l, kUidW, spec.data_type, spec.alignment);
  UCUDNN_RETURN_IF_ERROR(FrontendOk(w, "the graph's w tensor"));
  fe::Tensor y = MakeTensor(spec.y, l, kUidY, spec.data_type, spec.alignment);
  UCUDNN_RETURN_IF_ERROR(FrontendOk(y, "the graph's y tensor"));
  // With a bias, the convolution writes a float intermediate that a
  // pointwise add reads with the bias ([1, K, 1, 1]) and writes into y; with a
  // ReLU too, the add writes a second float intermediate that the ReLU reads.
  if (spec.fusion.bias() && spec.pass != Pass::kForward) {
    return Status::InvalidArgument(std::string("an epilogue needs the forward pass, not ") +
                                   PassName(spec.pass));
  }
  const bool add_bias = spec.fusion.bias(), relu = spec.fusion.relu();
  std::unique_ptr<fe::Tensor> conv_y, bias, biased;
  if (relu) {
    biased = std::make_unique<fe::Tensor>(MakeTensor(spec.y, l, kUidBiased, CUDNN_DATA_FLOAT,
                                                     spec.alignment, /*is_virtual=*/true));
    UCUDNN_RETURN_IF_ERROR(FrontendOk(*biased, "the graph's biased result"));
  }
  if (add_bias) {
    const int64_t bias_dims[4] = {1, spec.y[1], 1, 1};
    conv_y = std::make_unique<fe::Tensor>(MakeTensor(spec.y, l, kUidConv, CUDNN_DATA_FLOAT,
                                                     spec.alignment, /*is_virtual=*/true));
    UCUDNN_RETURN_IF_ERROR(FrontendOk(*conv_y, "the graph's convolution result"));
    bias = std::make_unique<fe::Tensor>(
        MakeTensor(bias_dims, l, kUidBias, spec.data_type, spec.alignment));
    UCUDNN_RETURN_IF_ERROR(FrontendOk(*bias, "the graph's bias tensor"));
  }
  fe::ConvDesc conv = fe::ConvDescBuilder()
                          .setComputeType(CUDNN_DATA_FLOAT)
                          .setMathMode(CUDNN_CROSS_CORRELATION)
                          .setSpatialDimCount(2)
                          .setSpatialStride(2, spec.stride)
                          .setPrePadding(2, spec.pad)
                          .setPostPadding(2, spec.pad)
                          .setDilation(2, spec.dilation)
                          .build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(conv, "the convolution descriptor"));
  // Backward-filter's later micro-batches add to dW (beta = 1), which the v1
  // graph API cannot say; the v0.x operation can.
  const float beta = spec.accumulate && !TransposesOutput(spec) ? 1.0f : 0.0f;
  fe::OperationBuilder builder(OperationType(spec.pass));
  switch (spec.pass) {
    case Pass::kForward: builder.setxDesc(x).setwDesc(w).setyDesc(add_bias ? *conv_y : y); break;
    case Pass::kBackwardData: builder.setdxDesc(x).setwDesc(w).setdyDesc(y); break;
    case Pass::kBackwardFilter: builder.setxDesc(x).setdwDesc(w).setdyDesc(y); break;
  }
  fe::Operation op = builder.setcDesc(conv).setAlpha(1.0f).setBeta(beta).build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(op, "the convolution operation"));
  std::vector<const fe::Operation*> ops = {&op};
  std::unique_ptr<fe::Operation> add_op, relu_op;
  if (add_bias) {
    UCUDNN_RETURN_IF_ERROR(MakePointwise(CUDNN_POINTWISE_ADD, *conv_y, bias.get(),
                                         relu ? *biased : y, "the bias add", &add_op));
    ops.push_back(add_op.get());
  }
  if (relu) {
    UCUDNN_RETURN_IF_ERROR(
        MakePointwise(CUDNN_POINTWISE_RELU_FWD, *biased, nullptr, y, "the ReLU", &relu_op));
    ops.push_back(relu_op.get());
  }
  auto made = std::make_unique<fe::OperationGraph>(
      fe::OperationGraphBuilder()
          .setHandle(handle)
          .setOperationGraph(static_cast<int64_t>(ops.size()), ops.data())
          .build());
  UCUDNN_RETURN_IF_ERROR(FrontendOk(*made, "the operation graph"));
  *graph = std::move(made);
  return Status();
}

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

// Seconds between laps, for GraphHostCosts.
class Stopwatch {
 public:
  double Lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

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
  if (fe::hasBehaviorNote<CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION>(config)) {
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

// An engine of `graph` with global index `id` and the knob choices `knobs`
// (none: the engine's defaults), as an engine config.
Status MakeEngineConfig(fe::OperationGraph& graph, const GraphEngine& e,
                        std::unique_ptr<fe::EngineConfig>* out) {
  fe::Engine engine = fe::EngineBuilder().setOperationGraph(graph).setGlobalEngineIdx(e.id).build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(engine, "the engine"));
  // The frontend passes a choice for every knob of the engine once one is
  // set; ours come from a heuristics config (every knob), so they must
  // cover the engine's knobs exactly.
  auto& knobs = engine.getSupportedKnobs();
  size_t matched = 0;
  for (auto& knob : knobs) {
    for (const auto& [type, value] : e.knobs) {
      if (static_cast<int64_t>(knob.getKnobType()) == type) {
        knob.setChoice(static_cast<uint64_t>(value));
        ++matched;
      }
    }
  }
  if (!e.knobs.empty() && (matched != e.knobs.size() || matched != knobs.size())) {
    return Status::Internal("the knob choices of " + e.Name() + " are not the engine's " +
                            std::to_string(knobs.size()) + " knobs");
  }
  auto config = std::make_unique<fe::EngineConfig>(fe::EngineConfigBuilder().setEngine(engine).build());
  UCUDNN_RETURN_IF_ERROR(FrontendOk(*config, "the engine config"));
  *out = std::move(config);
  return Status();
}

// Transposed copies in a plan's workspace start at multiples of this many
// bytes (more than any engine's alignment needs).
constexpr int64_t kWorkspaceAlign = 256;
int64_t RoundUp(int64_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// A legacy tensor descriptor of `dims` packed in `layout`, for cudnnTransformTensor.
Status MakeTransposeDescriptor(cudnnDataType_t type, const int64_t dims[4], Layout layout,
                               cudnnTensorDescriptor_t* out) {
  int64_t s[4];
  LayoutStrides(layout, dims[1], dims[2], dims[3], s);
  UCUDNN_CUDNN_OK(cudnnCreateTensorDescriptor(out));  // the caller destroys it, set or not
  UCUDNN_CUDNN_OK(cudnnSetTensor4dDescriptorEx(
      *out, type, static_cast<int>(dims[0]), static_cast<int>(dims[1]),
      static_cast<int>(dims[2]), static_cast<int>(dims[3]), static_cast<int>(s[0]),
      static_cast<int>(s[1]), static_cast<int>(s[2]), static_cast<int>(s[3])));
  return Status();
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
      std::unique_ptr<fe::EngineConfig> config;
      if (!MakeEngineConfig(*graph, GraphEngine{id, {}}, &config).ok()) continue;
      consider(GraphEngine{id, {}}, config->get_raw_desc());
    }
  }
  return Status();
}

// The frontend objects of a finalized plan (opaque to cudnn_graph.h).
struct GraphPlan::Built {
  std::unique_ptr<fe::OperationGraph> graph;
  std::unique_ptr<fe::EngineConfig> config;
  std::unique_ptr<fe::ExecutionPlan> plan;
};

Status GraphPlan::Make(cudnnHandle_t handle, const ConvGraphSpec& spec, const GraphEngine& e,
                       std::unique_ptr<GraphPlan>* out, GraphHostCosts* costs) {
  auto built = std::make_unique<Built>();
  Stopwatch watch;
  GraphHostCosts none;
  GraphHostCosts& c = costs != nullptr ? *costs : none;
  ++c.builds;
  ++c.op_graphs;
  const Status graph_made = MakeOperationGraph(handle, spec, &built->graph);
  c.op_graphs_s += watch.Lap();
  UCUDNN_RETURN_IF_ERROR(graph_made);
  const Status config_made = MakeEngineConfig(*built->graph, e, &built->config);
  c.engine_configs_s += watch.Lap();
  UCUDNN_RETURN_IF_ERROR(config_made);
  built->plan = std::make_unique<fe::ExecutionPlan>(fe::ExecutionPlanBuilder()
                                                        .setHandle(handle)
                                                        .setEngineConfig(*built->config)
                                                        .build());
  c.plans_s += watch.Lap();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(*built->plan, "the execution plan"));
  const int64_t workspace = built->plan->getWorkspaceSize();
  std::unique_ptr<GraphPlan> made(new GraphPlan());
  made->plan_ = built->plan->get_raw_desc();
  made->built_ = std::move(built);
  made->accumulate_ = spec.accumulate;
  made->bias_ = spec.fusion.bias();
  // A transposed plan's copies follow the engine's workspace, each at a
  // multiple of kWorkspaceAlign bytes.
  int64_t end = RoundUp(workspace);
  if (spec.layout != spec.graph_layout) {
    const int64_t* dims[3] = {spec.x, spec.w, spec.y};
    const int64_t elem = spec.data_type == CUDNN_DATA_FLOAT ? 4 : 2;
    for (int role = 0; role < 3; ++role) {
      if (LayoutsCoincide(dims[role])) continue;
      made->transposes_.emplace_back();  // the plan destroys its descriptors
      Transpose& t = made->transposes_.back();
      t.role = role;
      t.in = role != OutputRole(spec.pass);
      t.offset = end;
      UCUDNN_RETURN_IF_ERROR(
          MakeTransposeDescriptor(spec.data_type, dims[role], spec.layout, &t.caller));
      UCUDNN_RETURN_IF_ERROR(
          MakeTransposeDescriptor(spec.data_type, dims[role], spec.graph_layout, &t.graph));
      end += RoundUp(dims[role][0] * dims[role][1] * dims[role][2] * dims[role][3] * elem);
    }
  }
  made->workspace_bytes_ = made->transposes_.empty() ? workspace : end;
  *out = std::move(made);
  return Status();
}

GraphPlan::GraphPlan() = default;

GraphPlan::~GraphPlan() {
  for (const Transpose& t : transposes_) {
    if (t.caller) cudnnDestroyTensorDescriptor(t.caller);
    if (t.graph) cudnnDestroyTensorDescriptor(t.graph);
  }
}

Status GraphPlan::Execute(cudnnHandle_t handle, const void* x, const void* w, const void* y,
                          void* workspace, const void* bias) const {
  if (bias_ && bias == nullptr) return Status::Internal("a bias plan ran without its bias");
  // The graph's view of each tensor: the caller's, or its transposed copy.
  void* graph_ptrs[3] = {const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y)};
  const float one = 1.0f, zero = 0.0f;
  for (const Transpose& t : transposes_) {
    void* copy = static_cast<char*>(workspace) + t.offset;
    if (t.in) {
      UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, t.caller, graph_ptrs[t.role], &zero,
                                           t.graph, copy));
    }
    graph_ptrs[t.role] = copy;
  }
  UCUDNN_RETURN_IF_ERROR(ExecuteGraph(handle, graph_ptrs, workspace, bias));
  const void* caller_ptrs[3] = {x, w, y};
  for (const Transpose& t : transposes_) {
    if (t.in) continue;
    // The output back into the caller's layout (backward-filter: added to).
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, t.graph, graph_ptrs[t.role],
                                         accumulate_ ? &one : &zero, t.caller,
                                         const_cast<void*>(caller_ptrs[t.role])));
  }
  return Status();
}

Status GraphPlan::ExecuteGraph(cudnnHandle_t handle, void* const pointers_in[3],
                               void* workspace, const void* bias) const {
  int64_t uids[4] = {kUidX, kUidW, kUidY, kUidBias};
  void* pointers[4] = {pointers_in[0], pointers_in[1], pointers_in[2], const_cast<void*>(bias)};
  const int64_t count = bias_ ? 4 : 3;
  fe::VariantPack pack = fe::VariantPackBuilder()
                             .setWorkspacePointer(workspace)
                             .setDataPointers(count, pointers)
                             .setUids(count, uids)
                             .build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(pack, "the variant pack"));
  UCUDNN_CUDNN_OK(cudnnBackendExecute(handle, plan_, pack.get_raw_desc()));
  return Status();
}

// The direct call that bench --overhead times the engine against: a raw
// variant pack made beforehand, so that the direct call is cudnnBackendExecute
// alone.
Status GraphPlan::MakeVariantPack(void* const pointers_in[3], void* workspace,
                                  cudnnBackendDescriptor_t* out) const {
  if (bias_) return Status::InvalidArgument("the direct-call comparison has no bias graphs");
  cudnnBackendDescriptor_t pack = nullptr;
  UCUDNN_CUDNN_OK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* pointers[3] = {pointers_in[0], pointers_in[1], pointers_in[2]};
  cudnnStatus_t s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                             CUDNN_TYPE_INT64, 3, uids);
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                 3, pointers);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                 &workspace);
  }
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(pack);
  if (s != CUDNN_STATUS_SUCCESS) {
    cudnnBackendDestroyDescriptor(pack);
    return Status::Internal(std::string("a variant pack failed: ") + cudnnGetErrorString(s));
  }
  *out = pack;
  return Status();
}

Status GraphPlan::ExecutePack(cudnnHandle_t handle, cudnnBackendDescriptor_t pack) const {
  UCUDNN_CUDNN_OK(cudnnBackendExecute(handle, plan_, pack));
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
