#include "cc/engine/current_plan.h"

#include <utility>

namespace ucudnn {

Plan CurrentPlan::plan() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_;
}

int64_t CurrentPlan::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

bool CurrentPlan::divided() const {
  std::lock_guard<std::mutex> lock(mu_);
  return divided_;
}

void CurrentPlan::Set(Plan plan, int64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  plan_ = std::move(plan);
  limit_ = limit;
}

void CurrentPlan::SetDivided(Plan plan, int64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  plan_ = std::move(plan);
  limit_ = limit;
  divided_ = true;
}

}  // namespace ucudnn
