// The plan a kernel's runs use now, the workspace limit it was chosen within,
// and whether Workspace Division set it (CudnnKernel::Replan with a share of
// the group's total; Oyama et al. 2018, section III-C). Thread-safe: runs read
// it while Workspace Division may replace it. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_CURRENT_PLAN_H_
#define TF_UCUDNN_ENGINE_CURRENT_PLAN_H_

#include <cstdint>
#include <mutex>

#include "cc/engine/planner.h"

namespace ucudnn {

class CurrentPlan {
 public:
  // The plan (a copy: Workspace Division may replace it).
  Plan plan() const;
  // The limit in bytes it was chosen within.
  int64_t limit() const;
  // True once SetDivided has set a Workspace Division share.
  bool divided() const;
  // The plan chosen when the kernel was planned, within `limit` bytes.
  void Set(Plan plan, int64_t limit);
  // The plan of a Workspace Division share of `limit` bytes.
  void SetDivided(Plan plan, int64_t limit);

 private:
  mutable std::mutex mu_;  // guards what follows
  Plan plan_;
  int64_t limit_ = 0;
  bool divided_ = false;
};

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_CURRENT_PLAN_H_
