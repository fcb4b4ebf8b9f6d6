#if GOOGLE_CUDA

#include "cc/kernels/engine/cudnn_graph.h"

#include <algorithm>
#include <sstream>

#include "cc/kernels/engine/cuda_check.h"

namespace ucudnn {
namespace {

// Unique ids of the three tensors in every graph and variant pack.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';

// How many configs of each heuristics list become candidates, in the list's
// order (mode A ranks by predicted speed). Planning builds a plan and runs
// each candidate at every micro-batch size; mode A lists up to ~30 knob
// variants, and its tail is rarely fastest. Counted after numerics filtering.
constexpr size_t kModeAConfigs = 8;
constexpr size_t kFallbackConfigs = 4;

// Backend descriptors created for one graph or plan; destroyed together
// unless handed over (Release) to a GraphPlan.
class Descriptors {
 public:
  ~Descriptors() {
    for (cudnnBackendDescriptor_t d : owned_) cudnnBackendDestroyDescriptor(d);
  }
  Status Create(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* out) {
    UCUDNN_CUDNN_OK(cudnnBackendCreateDescriptor(type, out));
    owned_.push_back(*out);
    return Status();
  }
  std::vector<cudnnBackendDescriptor_t> Release() { return std::move(owned_); }

 private:
  std::vector<cudnnBackendDescriptor_t> owned_;
};

// A graph tensor of `dims` [n, c, h, w], packed in `layout`.
Status MakeTensor(Descriptors* ds, const int64_t dims[4], Layout layout, int64_t uid,
                  cudnnDataType_t type, int64_t alignment, cudnnBackendDescriptor_t* out) {
  int64_t strides[4];
  LayoutStrides(layout, dims[1], dims[2], dims[3], strides);
  UCUDNN_RETURN_IF_ERROR(ds->Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
  UCUDNN_CUDNN_OK(
      cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  UCUDNN_CUDNN_OK(
      cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
  UCUDNN_CUDNN_OK(
      cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
  UCUDNN_CUDNN_OK(
      cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
                                           CUDNN_TYPE_INT64, 1, &alignment));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(*out));
  return Status();
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

// The operation graph of one convolution node for `spec`.
Status MakeOperationGraph(cudnnHandle_t handle, const ConvGraphSpec& spec, Descriptors* ds,
                          cudnnBackendDescriptor_t* graph) {
  cudnnBackendDescriptor_t x, w, y, conv, op;
  const Layout l = spec.graph_layout;
  UCUDNN_RETURN_IF_ERROR(MakeTensor(ds, spec.x, l, kUidX, spec.data_type, spec.alignment, &x));
  UCUDNN_RETURN_IF_ERROR(MakeTensor(ds, spec.w, l, kUidW, spec.data_type, spec.alignment, &w));
  UCUDNN_RETURN_IF_ERROR(MakeTensor(ds, spec.y, l, kUidY, spec.data_type, spec.alignment, &y));

  UCUDNN_RETURN_IF_ERROR(ds->Create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv));
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial_dims = 2;
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
                                           CUDNN_TYPE_DATA_TYPE, 1, &compute));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                           CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS,
                                           CUDNN_TYPE_INT64, 1, &spatial_dims));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS,
                                           CUDNN_TYPE_INT64, 2, spec.dilation));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
                                           CUDNN_TYPE_INT64, 2, spec.stride));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
                                           CUDNN_TYPE_INT64, 2, spec.pad));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
                                           CUDNN_TYPE_INT64, 2, spec.pad));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(conv));

  const float alpha = 1.0f, beta = spec.accumulate && !TransposesOutput(spec) ? 1.0f : 0.0f;
  // Attribute names of the pass's node: alpha, beta, conv, and its x/w/y roles.
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t a_alpha, a_beta, a_conv, a_x, a_w, a_y;
  switch (spec.pass) {
    case Pass::kForward:
      type = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
      a_alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA;
      a_beta = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
      a_conv = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC;
      a_x = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X;
      a_w = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W;
      a_y = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y;
      break;
    case Pass::kBackwardData:
      type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
      a_alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA;
      a_beta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
      a_conv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
      a_x = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
      a_w = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
      a_y = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
      break;
    default:
      type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
      a_alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
      a_beta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
      a_conv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
      a_x = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
      a_w = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
      a_y = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
      break;
  }
  UCUDNN_RETURN_IF_ERROR(ds->Create(type, &op));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(op, a_alpha, CUDNN_TYPE_FLOAT, 1, &alpha));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(op, a_beta, CUDNN_TYPE_FLOAT, 1, &beta));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(op, a_conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(op, a_x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(op, a_w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(op, a_y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(op));

  UCUDNN_RETURN_IF_ERROR(ds->Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
                                           CUDNN_TYPE_HANDLE, 1, &handle));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(*graph));
  return Status();
}

// A finalized engine of `graph` with global index `id`.
Status MakeEngine(Descriptors* ds, cudnnBackendDescriptor_t graph, int64_t id,
                  cudnnBackendDescriptor_t* engine) {
  UCUDNN_RETURN_IF_ERROR(ds->Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, engine));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(*engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(*engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                           CUDNN_TYPE_INT64, 1, &id));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(*engine));
  return Status();
}

// Reads the engine id and knob choices of a heuristics result.
Status ReadEngineConfig(cudnnBackendDescriptor_t config, GraphEngine* out) {
  Descriptors ds;
  cudnnBackendDescriptor_t engine;
  UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine));
  int64_t count = 0;
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine));
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                           CUDNN_TYPE_INT64, 1, &count, &out->id));
  std::vector<cudnnBackendDescriptor_t> choices(CUDNN_KNOB_TYPE_COUNTS);
  for (auto& c : choices) UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &c));
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

// The heuristics' engine configs for `graph` in `mode`, in their order.
Status Heuristics(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                  std::vector<GraphEngine>* out) {
  Descriptors ds;
  cudnnBackendDescriptor_t heur;
  UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  UCUDNN_CUDNN_OK(
      cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(heur));
  int64_t count = 0;
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<cudnnBackendDescriptor_t> configs(count);
  for (auto& c : configs) UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c));
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count,
                                           configs.data()));
  for (int64_t i = 0; i < count; ++i) {
    GraphEngine e;
    if (ReadEngineConfig(configs[i], &e).ok()) out->push_back(std::move(e));
  }
  return Status();
}

const char* NoteName(cudnnBackendNumericalNote_t note) {
  switch (note) {
    case CUDNN_NUMERICAL_NOTE_TENSOR_CORE: return "TENSOR_CORE";
    case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS: return "DOWN_CONVERT_INPUTS";
    case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: return "REDUCED_PRECISION_REDUCTION";
    case CUDNN_NUMERICAL_NOTE_FFT: return "FFT";
    case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: return "NONDETERMINISTIC";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD: return "WINOGRAD";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4: return "WINOGRAD_TILE_4x4";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6: return "WINOGRAD_TILE_6x6";
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: return "WINOGRAD_TILE_13x13";
    default: return "OTHER";
  }
}

// Whether the engine's notes allow it under `numerics` (else *why says which
// note forbids it); *deterministic and *names from its notes.
Status EngineAllowed(cudnnBackendDescriptor_t engine, const GraphNumerics& numerics,
                     bool* allowed, bool* deterministic, std::string* names, std::string* why) {
  std::vector<cudnnBackendNumericalNote_t> notes(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  int64_t n = 0;
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                           CUDNN_TYPE_NUMERICAL_NOTE,
                                           static_cast<int64_t>(notes.size()), &n, notes.data()));
  std::vector<cudnnBackendBehaviorNote_t> behaviour(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
  int64_t nb = 0;
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                           CUDNN_TYPE_BEHAVIOR_NOTE,
                                           static_cast<int64_t>(behaviour.size()), &nb,
                                           behaviour.data()));
  *allowed = true;
  *deterministic = true;
  names->clear();
  auto forbid = [&](const char* reason) {
    if (*allowed) *why = reason;
    *allowed = false;
  };
  for (int64_t i = 0; i < std::min<int64_t>(n, notes.size()); ++i) {
    *names += (names->empty() ? "" : ",") + std::string(NoteName(notes[i]));
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        if (numerics.strict_float) forbid("tensor cores (TF32) with TF32 off");
        break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        forbid("reduced precision");
        break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        *deterministic = false;
        if (numerics.deterministic) forbid("nondeterministic under op determinism");
        break;
      default:
        break;
    }
  }
  for (int64_t i = 0; i < std::min<int64_t>(nb, behaviour.size()); ++i) {
    if (behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) forbid("runtime compilation");
  }
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
                           const GraphNumerics& numerics, bool exhaustive,
                           std::vector<GraphCandidate>* out, std::string* log) {
  out->clear();
  Descriptors ds;
  cudnnBackendDescriptor_t graph;
  // A graph cuDNN cannot express (e.g. beyond its size limits) has no engines.
  if (!MakeOperationGraph(handle, spec, &ds, &graph).ok()) return Status();
  // Adds `e` if new and allowed; false if it was not added.
  auto consider = [&](GraphEngine e) {
    e.transposed = spec.graph_layout != spec.layout;
    const bool seen = std::any_of(out->begin(), out->end(),
                                  [&](const GraphCandidate& c) { return c.engine == e; });
    if (seen) return false;
    Descriptors engine_ds;
    cudnnBackendDescriptor_t engine;
    if (!MakeEngine(&engine_ds, graph, e.id, &engine).ok()) return false;
    bool allowed = false, deterministic = true;
    std::string notes, why;
    if (!EngineAllowed(engine, numerics, &allowed, &deterministic, &notes, &why).ok()) {
      return false;
    }
    if (log != nullptr) {
      *log += "  " + e.Name() + " [" + notes + "] " + (allowed ? "candidate" : "dropped: " + why) +
              "\n";
    }
    if (!allowed) return false;
    out->push_back({std::move(e), deterministic, notes});
    return true;
  };
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<GraphEngine> got;
    if (!Heuristics(graph, mode, &got).ok()) continue;
    // Exhaustive: every config of both lists, as TF's autotuner takes them.
    const size_t cap = exhaustive ? got.size()
                       : mode == CUDNN_HEUR_MODE_A ? kModeAConfigs : kFallbackConfigs;
    size_t taken = 0;
    for (GraphEngine& e : got) {
      if (taken == cap) break;
      if (consider(std::move(e))) ++taken;
    }
  }
  if (exhaustive) {
    int64_t count = 0, n = 0;
    UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                             CUDNN_TYPE_INT64, 1, &n, &count));
    for (int64_t id = 0; id < count; ++id) {
      const bool listed = std::any_of(out->begin(), out->end(),
                                      [&](const GraphCandidate& c) { return c.engine.id == id; });
      if (!listed) consider(GraphEngine{id, {}});
    }
  }
  return Status();
}

Status GraphPlan::Make(cudnnHandle_t handle, const ConvGraphSpec& spec, const GraphEngine& e,
                       std::unique_ptr<GraphPlan>* out) {
  Descriptors ds;
  cudnnBackendDescriptor_t graph, engine, config, plan;
  UCUDNN_RETURN_IF_ERROR(MakeOperationGraph(handle, spec, &ds, &graph));
  UCUDNN_RETURN_IF_ERROR(MakeEngine(&ds, graph, e.id, &engine));
  std::vector<cudnnBackendDescriptor_t> choices;
  for (const auto& [type, value] : e.knobs) {
    cudnnBackendDescriptor_t c;
    UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &c));
    const auto knob = static_cast<cudnnBackendKnobType_t>(type);
    UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                             CUDNN_TYPE_KNOB_TYPE, 1, &knob));
    UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(c, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                             CUDNN_TYPE_INT64, 1, &value));
    UCUDNN_CUDNN_OK(cudnnBackendFinalize(c));
    choices.push_back(c);
  }
  UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &config));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine));
  if (!choices.empty()) {
    UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                             static_cast<int64_t>(choices.size()),
                                             choices.data()));
  }
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(config));
  UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                           CUDNN_TYPE_HANDLE, 1, &handle));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(plan));
  int64_t workspace = 0, n = 0;
  UCUDNN_CUDNN_OK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                           CUDNN_TYPE_INT64, 1, &n, &workspace));
  std::unique_ptr<GraphPlan> made(new GraphPlan());
  made->plan_ = plan;
  made->owned_ = ds.Release();
  made->accumulate_ = spec.accumulate;
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

GraphPlan::~GraphPlan() {
  for (const Transpose& t : transposes_) {
    if (t.caller) cudnnDestroyTensorDescriptor(t.caller);
    if (t.graph) cudnnDestroyTensorDescriptor(t.graph);
  }
  // Destroyed in reverse order of creation: the plan before what it refers to.
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
}

Status GraphPlan::Execute(cudnnHandle_t handle, const void* x, const void* w, const void* y,
                          void* workspace) const {
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
  UCUDNN_RETURN_IF_ERROR(ExecuteGraph(handle, graph_ptrs, workspace));
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

Status GraphPlan::ExecuteGraph(cudnnHandle_t handle, void* const pointers[3],
                               void* workspace) const {
  cudnnBackendDescriptor_t pack = nullptr;
  const Status made = MakeVariantPack(pointers, workspace, &pack);
  const Status ran = made.ok() ? ExecutePack(handle, pack) : made;
  if (pack != nullptr) cudnnBackendDestroyDescriptor(pack);
  return ran;
}

Status GraphPlan::MakeVariantPack(void* const pointers_in[3], void* workspace,
                                  cudnnBackendDescriptor_t* out) const {
  Descriptors ds;
  cudnnBackendDescriptor_t pack;
  UCUDNN_RETURN_IF_ERROR(ds.Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* pointers[3] = {pointers_in[0], pointers_in[1], pointers_in[2]};
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                           CUDNN_TYPE_INT64, 3, uids));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                           CUDNN_TYPE_VOID_PTR, 3, pointers));
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                           CUDNN_TYPE_VOID_PTR, 1, &workspace));
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(pack));
  *out = ds.Release().front();
  return Status();
}

Status GraphPlan::ExecutePack(cudnnHandle_t handle, cudnnBackendDescriptor_t pack) const {
  UCUDNN_CUDNN_OK(cudnnBackendExecute(handle, plan_, pack));
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
