#include "cc/engine/micro_batch_sizes.h"

#include <algorithm>

#include "cc/engine/names.h"

namespace ucudnn {

namespace {
constexpr Name<BatchSizePolicy> kPolicyNames[] = {{"undivided", BatchSizePolicy::kUndivided},
                                                  {"powerOfTwo", BatchSizePolicy::kPowerOfTwo},
                                                  {"all", BatchSizePolicy::kAll}};
}  // namespace

bool ParseBatchSizePolicy(const std::string& name, BatchSizePolicy* policy) {
  return ParseName(kPolicyNames, name, policy);
}

const char* BatchSizePolicyName(BatchSizePolicy policy) { return NameOf(kPolicyNames, policy); }

std::vector<int64_t> MicroBatchSizes(BatchSizePolicy policy, int64_t batch_size) {
  std::vector<int64_t> sizes;
  if (batch_size <= 0) return sizes;
  switch (policy) {
    case BatchSizePolicy::kUndivided:
      sizes.push_back(batch_size);
      break;
    case BatchSizePolicy::kPowerOfTwo:
      for (int64_t b = 1; b < batch_size; b *= 2) {
        sizes.push_back(b);
        if (b > batch_size / 2) break;  // b * 2 would pass batch_size (and could overflow)
      }
      sizes.push_back(batch_size);
      break;
    case BatchSizePolicy::kAll:
      for (int64_t b = 1; b <= batch_size; ++b) sizes.push_back(b);
      break;
  }
  return sizes;
}

bool AllowedMicroBatchSize(BatchSizePolicy policy, int64_t batch_size, int64_t size) {
  if (size <= 0 || size > batch_size) return false;
  switch (policy) {
    case BatchSizePolicy::kUndivided: return size == batch_size;
    case BatchSizePolicy::kPowerOfTwo: return size == batch_size || (size & (size - 1)) == 0;
    case BatchSizePolicy::kAll: return true;
  }
  return false;
}

int64_t MicroBatchSizeCount(BatchSizePolicy policy, int64_t batch_size) {
  if (batch_size <= 0) return 0;
  switch (policy) {
    case BatchSizePolicy::kUndivided: return 1;
    case BatchSizePolicy::kPowerOfTwo: {
      int64_t count = 1;  // batch_size itself
      for (int64_t b = 1; b < batch_size; b *= 2) {
        ++count;
        if (b > batch_size / 2) break;  // b * 2 would pass batch_size (and could overflow)
      }
      return count;
    }
    case BatchSizePolicy::kAll: return batch_size;
  }
  return 0;
}

std::vector<int64_t> ForcedMicroBatchSizes(int64_t batch_size, int64_t max_size) {
  std::vector<int64_t> sizes;
  if (batch_size <= 0 || max_size <= 0) return sizes;
  const int64_t k = std::min(max_size, batch_size);
  const int64_t remainder = batch_size % k;
  if (remainder != 0) sizes.push_back(remainder);
  sizes.push_back(k);
  return sizes;
}

}  // namespace ucudnn
