// The search workspace of one DeviceBenchmark::Run, one buffer for every
// micro-batch size: what the hungriest legacy algorithm asks for, capped by
// the workspace limit, halved until it can be allocated; grown when a graph
// plan needs more. It records the sizes timed with less search workspace than
// their candidates could use within the limit (memory pressure): their rows
// may lack fast candidates (BenchmarkTable::pressured). The buffer goes back
// with the caller's ScratchAllocator::ReleaseAll. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_SEARCH_WORKSPACE_H_
#define TF_UCUDNN_ENGINE_SEARCH_WORKSPACE_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "cudnn.h"
#include "cc/engine/graph_candidates.h"
#include "cc/engine/legacy_candidates.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/status.h"

namespace ucudnn {

class SearchWorkspace {
 public:
  // `scratch` outlives this; `workspace_limit` in bytes.
  SearchWorkspace(ScratchAllocator* scratch, int64_t workspace_limit)
      : scratch_(scratch), workspace_limit_(workspace_limit) {}

  // Sizes the workspace for the legacy algorithms at `sizes` (before
  // Allocate): the most any of them asks for, capped by the limit.
  Status SizeForLegacy(cudnnHandle_t handle, LegacyCandidates* legacy,
                       const std::vector<int64_t>& sizes);
  // Allocates the workspace, halving its size until it can be (none: 0 bytes).
  void Allocate();
  // Before the legacy algorithms are timed at `size`: pressured if they asked
  // for more than the workspace holds.
  void NoteLegacy(int64_t size);
  // Before the graph `trials` are timed at `size`: grows the workspace to what
  // their plans need (capped by the limit), keeping one buffer; pressured if
  // it could not.
  void GrowForGraph(int64_t size, const std::vector<GraphTrial>& trials);

  void* workspace() const { return ws_; }
  int64_t bytes() const { return ws_bytes_; }
  // The sizes timed under memory pressure.
  const std::set<int64_t>& pressured() const { return pressured_; }

 private:
  ScratchAllocator* const scratch_;
  const int64_t workspace_limit_;
  int64_t ws_bytes_ = 0;
  void* ws_ = nullptr;
  std::map<int64_t, int64_t> legacy_needed_;  // per size, capped by the limit
  std::set<int64_t> pressured_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_SEARCH_WORKSPACE_H_
