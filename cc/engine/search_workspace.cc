// SearchWorkspace: one search workspace for every size of a DeviceBenchmark
// run (see search_workspace.h).
#if GOOGLE_CUDA

#include "cc/engine/search_workspace.h"

#include <algorithm>

namespace ucudnn {

Status SearchWorkspace::SizeForLegacy(cudnnHandle_t handle, LegacyCandidates* legacy,
                                      const std::vector<int64_t>& sizes) {
  for (int64_t size : sizes) {
    int64_t needed = 0;
    UCUDNN_RETURN_IF_ERROR(legacy->MaxWorkspaceNeeded(handle, size, &needed));
    legacy_needed_[size] = std::min(needed, workspace_limit_);
    ws_bytes_ = std::max(ws_bytes_, legacy_needed_[size]);
  }
  return Status();
}

void SearchWorkspace::Allocate() {
  while (ws_bytes_ > 0 && (ws_ = scratch_->AllocateWorkspace(ws_bytes_)) == nullptr) ws_bytes_ /= 2;
  if (ws_ == nullptr) ws_bytes_ = 0;
}

void SearchWorkspace::NoteLegacy(int64_t size) {
  if (legacy_needed_[size] > ws_bytes_) pressured_.insert(size);
}

void SearchWorkspace::GrowForGraph(int64_t size, const std::vector<GraphTrial>& trials) {
  int64_t needed = 0;
  for (const GraphTrial& trial : trials) needed = std::max(needed, trial.plan->workspace_bytes());
  needed = std::min(needed, workspace_limit_);
  if (needed > ws_bytes_) {
    // The smaller buffer goes back first, so that benchmarking holds one
    // search workspace within the limit (where the allocator can give one
    // back: TF's), not the legacy algorithms' and the graph plans' both.
    if (ws_ != nullptr) scratch_->Release(ws_);
    ws_ = scratch_->AllocateWorkspace(needed);
    if (ws_ != nullptr) {
      ws_bytes_ = needed;
    } else if (ws_bytes_ > 0 && (ws_ = scratch_->AllocateWorkspace(ws_bytes_)) == nullptr) {
      ws_bytes_ = 0;
    }
  }
  if (needed > ws_bytes_) pressured_.insert(size);
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
