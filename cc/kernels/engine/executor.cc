#include "cc/kernels/engine/executor.h"

#include <algorithm>

namespace ucudnn {

Plan UniformPlan(int64_t batch_size, int64_t max_size) {
  Plan plan;
  const int64_t k = max_size > 0 ? std::min(max_size, batch_size) : batch_size;
  for (int64_t done = 0; done < batch_size; done += k) {
    plan.micro_batches.push_back({std::min(k, batch_size - done), 0, 0.0, 0});
  }
  return plan;
}

}  // namespace ucudnn
