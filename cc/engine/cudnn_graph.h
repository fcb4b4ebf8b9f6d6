// cuDNN graph-API (backend) engines as plan candidates: for one micro-batch
// size and pass, the operation graph, the engine configs cuDNN's heuristics
// propose (mode A, then the fallback list), and finalized execution plans run
// with cudnnBackendExecute. These are the engines TensorFlow itself uses; at
// some layers and limits they beat every legacy algorithm. A plan may also
// compute in the other layout than its tensors' (a transposed candidate):
// TensorFlow runs some NHWC convolutions in NCHW, where an engine can need no
// workspace that needs much in NHWC. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_CUDNN_GRAPH_H_
#define TF_UCUDNN_ENGINE_CUDNN_GRAPH_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cudnn.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/cudnn_descriptors.h"
#include "cc/engine/knobs.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/status.h"

namespace ucudnn {

// One engine configuration: cuDNN's global engine index and its knob choices
// (knob type, value), and whether the graph computes in the other layout than
// the tensors' (transposed). Rebuilt from these numbers for every micro-batch
// size, so that it can be stored in the benchmark database.
struct GraphEngine {
  int64_t id = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;
  bool transposed = false;
  // As TensorFlow logs engine configs, "eng34{k2=1,k3=0}", with
  // "/transposed" appended for a transposed candidate.
  std::string Name() const;
  bool operator==(const GraphEngine& o) const {
    return id == o.id && knobs == o.knobs && transposed == o.transposed;
  }
};

// One convolution pass at one micro-batch size. x and y are the pass's input
// and output of the forward convolution (for backward-data, y is dy and x is
// dx; for backward-filter, w is dw), as dims [n, c, h, w] (filter [k,
// c/groups, r, s]), packed in `layout` (filter KRSC for NHWC, KCRS for NCHW).
// The graph computes in `graph_layout`; where it differs from `layout`, the
// plan transposes each tensor whose two layouts are not the same memory (more
// than one channel and more than one pixel) through its workspace: the
// pass's inputs in before, its output back after (cudnnTransformTensor).
// Float accumulation, as TensorFlow does.
struct ConvGraphSpec {
  Pass pass = Pass::kForward;
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;
  Layout layout = Layout::kNHWC;
  Layout graph_layout = Layout::kNHWC;
  int64_t x[4] = {0, 0, 0, 0}, w[4] = {0, 0, 0, 0}, y[4] = {0, 0, 0, 0};
  int64_t pad[2] = {0, 0};       // symmetric (h, w)
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t alignment = 16;        // bytes every data pointer (and the workspace) is aligned to
  bool accumulate = false;       // backward-filter: beta = 1 (later micro-batches)
  // What the graph computes around the convolution (forward only): with a
  // bias epilogue, y = conv(x, w) + b, b of y[1] elements broadcast over the
  // batch and pixels (a pointwise add after the convolution, its
  // intermediate in float); with bias and ReLU, y = max(conv(x, w) + b, 0) (a
  // pointwise ReLU after the add, the sum in float); with the statistics
  // epilogue, y = conv(x, w) and its per-channel sum and sum of squares over
  // the micro-batch (float32, y[1] each).
  Fusion fusion;
};

// Which engines may run, from TensorFlow's numerics settings. Engines that
// down-convert inputs or reduce in reduced precision are never proposed (the
// legacy path accumulates in float), nor engines compiled at run time (their
// NVRTC compile costs seconds per plan).
struct GraphNumerics {
  // Float32 with TF32 off: no engine with the TENSOR_CORE note (TF32), the
  // filter TensorFlow applies to its own graph-API candidates.
  bool strict_float = false;
  bool deterministic = false;     // op determinism: drop nondeterministic engines
  // Engines compiled at run time are allowed: the statistics epilogue's
  // reductions have no other engine (docs/benchmarks.md, the fused graphs).
  bool runtime_compilation = false;
};

// Host seconds of graph planning by step, summed over the calls given it (the
// planning cost lines of UCUDNN_DEBUG_OUTPUT).
struct GraphHostCosts {
  double op_graphs_s = 0;       // operation graphs finalized (ProposeGraphEngines and Make)
  double heuristics_s = 0;      // heuristics mode A queries (count and configs)
  double heuristics_configs_s = 0;  // of which configs fetched and read (a prefix first)
  double fallback_s = 0;        // fallback lists
  double engine_configs_s = 0;  // engines and engine configs of plans (Make)
  double plans_s = 0;           // execution plans finalized (Make)
  int op_graphs = 0, queries = 0, builds = 0;

  void Add(const GraphHostCosts& o) {
    op_graphs_s += o.op_graphs_s;
    heuristics_s += o.heuristics_s;
    heuristics_configs_s += o.heuristics_configs_s;
    fallback_s += o.fallback_s;
    engine_configs_s += o.engine_configs_s;
    plans_s += o.plans_s;
    op_graphs += o.op_graphs;
    queries += o.queries;
    builds += o.builds;
  }
};

// An engine the heuristics proposed and the numerics allow.
struct GraphCandidate {
  GraphEngine engine;
  bool deterministic = true;
  std::string notes;  // cuDNN's numerical notes, e.g. "TENSOR_CORE,WINOGRAD_TILE_4x4"
};

// The allowed configs of cuDNN's fallback heuristics list for one kind of
// convolution, in the list's order. Querying the list costs about 10 ms of
// host time (H200, cuDNN 9.19: ResNet-50's 295 queries took 2.9 of its 4.4 s
// of heuristics and plans; fetching fewer of its configs saved nothing), and
// it is mostly cuDNN's generic engines in a fixed order, so it is queried once
// per kind (device, pass, data type, layouts, numerics, grouped, dilated;
// graph_candidates.cc) and reused at every size of every kernel of that kind.
// An engine that does not run a shape fails its plan there and is left out;
// the few size-specific knob variants of the list are not proposed elsewhere
// (docs/benchmarks.md §7: no plan of ResNet-50 or InceptionV3 used one).
struct FallbackEngines {
  bool listed = false;                  // queried
  std::vector<GraphCandidate> allowed;  // what `numerics` allows, in the list's order
};

// The engine configs cuDNN's heuristics propose for `spec` that `numerics`
// allows: the first 8 of mode A, then the first 4 new ones of the fallback
// list (queried into *fallback unless it is listed already). GraphSearch::kWide:
// every config of both lists (the set TensorFlow's autotuner times);
// kExhaustive: those, then every other engine of the graph that finalizes,
// with its default knobs. The engines are
// transposed when the spec's graph_layout differs from its layout. An operation
// graph that no engine supports gives an empty list, not an error. With
// `log`, one line per engine considered (kept or dropped, with its notes) is
// appended to it.
Status ProposeGraphEngines(cudnnHandle_t handle, const ConvGraphSpec& spec,
                           const GraphNumerics& numerics, GraphSearch search,
                           FallbackEngines* fallback, std::vector<GraphCandidate>* out,
                           std::string* log = nullptr, GraphHostCosts* costs = nullptr);

// A finalized execution plan of one engine config for one spec and handle.
class GraphPlan {
 public:
  // Fails (Status::Internal) when the engine does not support the spec.
  // With `costs`, its host time is added there.
  static Status Make(cudnnHandle_t handle, const ConvGraphSpec& spec, const GraphEngine& engine,
                     std::unique_ptr<GraphPlan>* out, GraphHostCosts* costs = nullptr);
  ~GraphPlan();
  GraphPlan(const GraphPlan&) = delete;
  GraphPlan& operator=(const GraphPlan&) = delete;

  // Bytes of workspace the plan needs: the engine's, and the transposed
  // tensors' when the graph computes in the other layout.
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // Enqueues the plan on the handle's stream. x, w, y as in ConvGraphSpec, in
  // the spec's layout, and the fusion's tensors where the spec has them (the
  // bias; the statistics' sums, written); the pass's output is written
  // (backward-filter with accumulate: added to). Every pointer, the
  // workspace's included, must be aligned to the spec's alignment.
  Status Execute(cudnnHandle_t handle, const void* x, const void* w, const void* y,
                 void* workspace, const FusionPointers& fusion = FusionPointers()) const;
  // The graph's own call, for timing a direct cuDNN call against the engine
  // (bench --overhead): a variant pack of the graph's x, w, y and workspace,
  // which the caller destroys (cudnnBackendDestroyDescriptor), and
  // cudnnBackendExecute with it. Transposes nothing.
  Status MakeVariantPack(void* const pointers[3], void* workspace,
                         cudnnBackendDescriptor_t* pack) const;
  Status ExecutePack(cudnnHandle_t handle, cudnnBackendDescriptor_t pack) const;

 private:
  // cudnnBackendExecute with the graph's x, w, y (and the fusion's tensors,
  // where it has them).
  Status ExecuteGraph(cudnnHandle_t handle, void* const pointers[3], void* workspace,
                      const FusionPointers& fusion) const;
  // A tensor the plan transposes: from the spec's layout to the graph's
  // (`in`) or back, through `offset` bytes into the workspace.
  struct Transpose {
    int role = 0;  // 0 x, 1 w, 2 y
    bool in = true;
    int64_t offset = 0;
    cudnnTensorDescriptor_t caller = nullptr, graph = nullptr;
  };
  GraphPlan();
  // cudnn-frontend's graph, engine config and plan (cudnn_graph.cc); every
  // descriptor the plan was built from lives as long as the plan.
  struct Built;
  std::unique_ptr<Built> built_;
  cudnnBackendDescriptor_t plan_ = nullptr;  // built_'s plan
  int64_t workspace_bytes_ = 0;
  std::vector<Transpose> transposes_;
  bool accumulate_ = false;  // the pass's output is added to (backward-filter, beta = 1)
  bool bias_ = false;        // the graph reads a bias (Fusion::bias)
  bool statistics_ = false;  // the graph writes the sums (Fusion::statistics)
  bool prologue_ = false;    // the graph reads an input scale and bias (Fusion::input_scale_bias)
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDNN_GRAPH_H_
