// The operation graph of one convolution pass and what runs around it
// (ConvParams::fusion), and the cudnn-frontend helpers that both the
// heuristics (graph_heuristics.cc: ProposeGraphEngines) and the plans
// (cudnn_graph.cc: GraphPlan) build on. Internal to cudnn_graph; includes
// cudnn-frontend (header-only, as the pip TensorFlow ships it).
#ifndef TF_UCUDNN_ENGINE_GRAPH_OPERATIONS_H_
#define TF_UCUDNN_ENGINE_GRAPH_OPERATIONS_H_

#if GOOGLE_CUDA

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

// Errors are statuses, not exceptions (as TensorFlow builds the frontend).
#define NV_CUDNN_DISABLE_EXCEPTION
#include "cudnn_frontend.h"

#include "cc/engine/cudnn_graph.h"
#include "cc/engine/status.h"

namespace ucudnn {
namespace graph_internal {

namespace fe = cudnn_frontend;

// Unique ids of the three tensors in every graph and variant pack, the bias
// of a forward graph with one, its virtual convolution result, the virtual
// sum before a ReLU, the statistics epilogue's two sums and its virtual
// squares.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y', kUidBias = 'b', kUidConv = 'c',
                  kUidBiased = 'a', kUidSum = 's', kUidSumOfSquares = 'q', kUidSquares = 'm',
                  kUidInputScale = 'i', kUidInputBias = 'j', kUidScaled = 'k', kUidShifted = 'l',
                  kUidPrologue = 'p';

// Whether the graph of `spec` computes the statistics with cuDNN's genstats
// node (float16: the precompiled batch-norm engines take it) rather than as
// two reductions (sum; square, then sum), which cuDNN's runtime fusion engine
// compiles for every type.
bool StatisticsAsGenstats(const ConvGraphSpec& spec);

// Internal unless a frontend object was built.
template <typename T>
inline Status FrontendOk(const T& object, const char* what) {
  if (object.get_status() == CUDNN_STATUS_SUCCESS) return Status();
  return Status::Internal(std::string(what) + " failed: " + cudnnGetErrorString(object.get_status()) +
                          " (" + object.get_error() + ")");
}

// Whether a tensor of `dims` [n, c, h, w] is the same memory packed NHWC and
// NCHW: one channel, or one pixel.
inline bool LayoutsCoincide(const int64_t dims[4]) { return dims[1] == 1 || dims[2] * dims[3] == 1; }

// The backend operation of the pass's convolution node.
cudnnBackendDescriptorType_t OperationType(Pass pass);
// The pass's output among x (0), w (1), y (2).
int OutputRole(Pass pass);
// Whether the plan of `spec` transposes its output (then the graph itself
// never accumulates: the transpose back adds).
bool TransposesOutput(const ConvGraphSpec& spec);

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

// The operation graph of one convolution node for `spec`, with the nodes of
// its fusion after it (spec.fusion: the bias add, the ReLU; or the
// statistics of the output, per channel, as float32 [1, K, 1, 1]). The graph holds
// (shared) every descriptor it was built from.
Status MakeOperationGraph(cudnnHandle_t handle, const ConvGraphSpec& spec,
                          std::unique_ptr<fe::OperationGraph>* graph);

// An engine config as cuDNN's backend holds it: the config, and the engine
// and knob-choice descriptors it refers to, kept alive with it.
struct EngineConfigDescriptors {
  fe::ManagedOpaqueDescriptor engine;
  std::vector<fe::ManagedOpaqueDescriptor> choices;
  fe::ManagedOpaqueDescriptor config;
};

// An engine of `graph` with global index `e.id` and exactly the knob choices
// `e.knobs` (none: the engine's defaults), as an engine config. A heuristics
// config may choose fewer knobs than the engine lists (the run-time compiled
// engines list several and are given one): the others keep their defaults.
Status MakeEngineConfig(fe::OperationGraph& graph, const GraphEngine& e,
                        EngineConfigDescriptors* out);

}  // namespace graph_internal
}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_GRAPH_OPERATIONS_H_
