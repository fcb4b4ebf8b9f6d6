// cuDNN graph-API (backend) engines as plan candidates: for one micro-batch
// size and pass, the operation graph, the engine configs cuDNN's heuristics
// propose (mode A, then the fallback list), and finalized execution plans run
// with cudnnBackendExecute. These are the engines TensorFlow itself uses; at
// some layers and limits they beat every legacy algorithm. No TensorFlow
// includes.
#ifndef TF_UCUDNN_ENGINE_CUDNN_GRAPH_H_
#define TF_UCUDNN_ENGINE_CUDNN_GRAPH_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cudnn.h"
#include "cc/kernels/engine/conv_params.h"
#include "cc/kernels/engine/status.h"

namespace ucudnn {

// cuDNN's data type of a DType.
cudnnDataType_t CudnnDataType(DType dtype);

// One engine configuration: cuDNN's global engine index and its knob choices
// (knob type, value). Rebuilt from these numbers for every micro-batch size,
// so that it can be stored in the benchmark database.
struct GraphEngine {
  int64_t id = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;
  // As TensorFlow logs engine configs: "eng34{k2=1,k3=0}".
  std::string Name() const;
  bool operator==(const GraphEngine& o) const { return id == o.id && knobs == o.knobs; }
};

// A 4-D tensor as the graph sees it: dims [n, c, h, w] (filter [k, c/groups,
// r, s]) and element strides in the same order.
struct GraphTensor {
  int64_t dims[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};
};

// One convolution pass at one micro-batch size. x and y are the pass's input
// and output of the forward convolution (for backward-data, y is dy and x is
// dx; for backward-filter, w is dw). Float accumulation, as TensorFlow does.
struct ConvGraphSpec {
  Pass pass = Pass::kForward;
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;
  GraphTensor x, w, y;
  int64_t pad[2] = {0, 0};       // symmetric (h, w)
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t alignment = 16;        // bytes every data pointer (and the workspace) is aligned to
  bool accumulate = false;       // backward-filter: beta = 1 (later micro-batches)
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
};

// An engine the heuristics proposed and the numerics allow.
struct GraphCandidate {
  GraphEngine engine;
  bool deterministic = true;
  std::string notes;  // cuDNN's numerical notes, e.g. "TENSOR_CORE,WINOGRAD_TILE_4x4"
};

// The engine configs cuDNN's heuristics propose for `spec` that `numerics`
// allows: the first 8 of mode A, then the first 4 new ones of the fallback
// list. With `exhaustive`: every config of both lists, then every other
// engine of the graph that finalizes, with its default knobs. An operation
// graph that no engine supports gives an empty list, not an error. With
// `log`, one line per engine considered (kept or dropped, with its notes) is
// appended to it.
Status ProposeGraphEngines(cudnnHandle_t handle, const ConvGraphSpec& spec,
                           const GraphNumerics& numerics, bool exhaustive,
                           std::vector<GraphCandidate>* out, std::string* log = nullptr);

// A finalized execution plan of one engine config for one spec and handle.
class GraphPlan {
 public:
  // Fails (Status::Internal) when the engine does not support the spec.
  static Status Make(cudnnHandle_t handle, const ConvGraphSpec& spec, const GraphEngine& engine,
                     std::unique_ptr<GraphPlan>* out);
  ~GraphPlan();
  GraphPlan(const GraphPlan&) = delete;
  GraphPlan& operator=(const GraphPlan&) = delete;

  // Bytes of workspace the plan needs.
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // Enqueues the plan on the handle's stream. x, w, y as in ConvGraphSpec;
  // the pass's output is written (backward-filter with accumulate: added to).
  // Every pointer must be aligned to the spec's alignment.
  Status Execute(cudnnHandle_t handle, const void* x, const void* w, const void* y,
                 void* workspace) const;

 private:
  GraphPlan() = default;
  // Every descriptor the plan was built from lives as long as the plan.
  std::vector<cudnnBackendDescriptor_t> owned_;
  cudnnBackendDescriptor_t plan_ = nullptr;
  int64_t workspace_bytes_ = 0;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDNN_GRAPH_H_
