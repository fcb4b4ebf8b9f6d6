// Runs a plan over its micro-batches. Shared by the CPU and cuDNN backends.
// Header-only; no TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_EXECUTOR_H_
#define TF_UCUDNN_ENGINE_EXECUTOR_H_

#include <cstdint>

#include "cc/engine/conv_params.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

// Calls run(offset, micro_batch, accumulate) for each micro-batch of `plan`,
// where offset is the index of its first sample. Forward and backward-data
// micro-batches write disjoint slices of the output; backward-filter
// micro-batches all write the whole filter gradient, so every one after the
// first must accumulate (cuDNN beta = 1). The original μ-cuDNN passed the
// caller's beta each time, keeping only the last micro-batch's share.
template <typename RunMicroBatch>
Status ExecutePlan(const Plan& plan, Pass pass, RunMicroBatch&& run) {
  int64_t offset = 0;
  bool first = true;
  for (const MicroBatch& mb : plan.micro_batches) {
    const bool accumulate = pass == Pass::kBackwardFilter && !first;
    UCUDNN_RETURN_IF_ERROR(run(offset, mb, accumulate));
    offset += mb.size;
    first = false;
  }
  return Status();
}

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_EXECUTOR_H_
