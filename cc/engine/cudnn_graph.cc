// Graph-API execution plans (cudnn_graph.h: GraphPlan) through cudnn-frontend's
// v0.x builder API (1.13, header-only, as the pip TensorFlow ships it;
// TensorFlow's stream executor uses the same builders): an engine config of
// the pass's operation graph (graph_operations.h) finalized into a plan, its
// variant packs, and ours, the transposed-layout copies through the
// workspace. The candidates are proposed in graph_heuristics.cc. See
// docs/design.md.
#if GOOGLE_CUDA

#include "cc/engine/cudnn_graph.h"

#include <algorithm>
#include <utility>

#include "cc/engine/cuda_check.h"
#include "cc/engine/graph_operations.h"

namespace ucudnn {

using namespace graph_internal;  // NOLINT: the graph helpers of this library

namespace {


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

// The frontend objects of a finalized plan (opaque to cudnn_graph.h).
struct GraphPlan::Built {
  std::unique_ptr<fe::OperationGraph> graph;
  EngineConfigDescriptors config;
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
                                                        .setEngineConfig(built->config.config)
                                                        .build());
  c.plans_s += watch.Lap();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(*built->plan, "the execution plan"));
  const int64_t workspace = built->plan->getWorkspaceSize();
  std::unique_ptr<GraphPlan> made(new GraphPlan());
  made->plan_ = built->plan->get_raw_desc();
  made->built_ = std::move(built);
  made->accumulate_ = spec.accumulate;
  made->bias_ = spec.fusion.bias();
  made->statistics_ = spec.fusion.statistics();
  made->prologue_ = spec.fusion.input_scale_bias();
  if ((made->statistics_ || made->prologue_) && spec.layout != spec.graph_layout) {
    return Status::InvalidArgument(
        "the statistics epilogue and the input prologue compute in their tensors' layout");
  }
  // A transposed plan's copies follow the engine's workspace, each at a
  // multiple of kBlockAlign bytes.
  int64_t end = AlignedBytes(workspace);
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
      end += AlignedBytes(dims[role][0] * dims[role][1] * dims[role][2] * dims[role][3] * elem);
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
                          void* workspace, const FusionPointers& fusion) const {
  if (bias_ && fusion.bias == nullptr) return Status::Internal("a bias plan ran without its bias");
  if (statistics_ && (fusion.sum == nullptr || fusion.sum_of_squares == nullptr)) {
    return Status::Internal("a statistics plan ran without its sums");
  }
  if (prologue_ && (fusion.input_scale == nullptr || fusion.input_bias == nullptr)) {
    return Status::Internal("a prologue plan ran without its scale and bias");
  }
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
  UCUDNN_RETURN_IF_ERROR(ExecuteGraph(handle, graph_ptrs, workspace, fusion));
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
                               void* workspace, const FusionPointers& fusion) const {
  int64_t uids[7] = {kUidX, kUidW, kUidY};
  void* pointers[7] = {pointers_in[0], pointers_in[1], pointers_in[2]};
  int64_t count = 3;
  if (prologue_) {
    uids[count] = kUidInputScale;
    pointers[count++] = const_cast<void*>(fusion.input_scale);
    uids[count] = kUidInputBias;
    pointers[count++] = const_cast<void*>(fusion.input_bias);
  }
  if (bias_) {
    uids[count] = kUidBias;
    pointers[count++] = const_cast<void*>(fusion.bias);
  }
  if (statistics_) {
    uids[count] = kUidSum;
    pointers[count++] = fusion.sum;
    uids[count] = kUidSumOfSquares;
    pointers[count++] = fusion.sum_of_squares;
  }
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
  if (bias_ || statistics_ || prologue_) {
    return Status::InvalidArgument("the direct-call comparison has no fused graphs");
  }
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
