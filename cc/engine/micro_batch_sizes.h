// Micro-batch sizes: the batch-size policies of μ-cuDNN (which sizes a
// mini-batch of N samples may be cut into) and the sizes of a forced plan.
// Pure C++, no TensorFlow, no GPU.
#ifndef TF_UCUDNN_ENGINE_MICRO_BATCH_SIZES_H_
#define TF_UCUDNN_ENGINE_MICRO_BATCH_SIZES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ucudnn {

// Which micro-batch sizes the planner may use (μ-cuDNN's batch-size policy).
enum class BatchSizePolicy : int { kUndivided = 0, kPowerOfTwo = 1, kAll = 2 };

// Parses "undivided" | "powerOfTwo" | "all"; false on anything else.
bool ParseBatchSizePolicy(const std::string& name, BatchSizePolicy* policy);
const char* BatchSizePolicyName(BatchSizePolicy policy);

// Allowed micro-batch sizes for a mini-batch of `batch_size` samples, ascending:
// undivided {N}; powerOfTwo {1, 2, 4, ...} ∪ {N}; all {1..N}.
std::vector<int64_t> MicroBatchSizes(BatchSizePolicy policy, int64_t batch_size);
// How many sizes MicroBatchSizes would list, and whether it would list `size`,
// without listing them (policy all with N = 2^40 has 2^40).
int64_t MicroBatchSizeCount(BatchSizePolicy policy, int64_t batch_size);
bool AllowedMicroBatchSize(BatchSizePolicy policy, int64_t batch_size, int64_t size);

// The sizes a forced plan of micro-batches of at most `max_size` uses: {k}
// and, when k does not divide N, the remainder N mod k.
std::vector<int64_t> ForcedMicroBatchSizes(int64_t batch_size, int64_t max_size);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_MICRO_BATCH_SIZES_H_
