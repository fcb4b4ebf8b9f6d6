#if GOOGLE_CUDA

#include "cc/engine/kernel_seed.h"

#include <utility>

namespace ucudnn {

void KernelSeed::Set(PerfTable table, std::vector<CudnnAlgo> algos, std::set<int64_t> pressured,
                     PrunedEngines pruned) {
  seed_.table = std::move(table);
  seed_.algos = std::move(algos);
  seed_.pressured = std::move(pressured);
  seed_.pruned = std::move(pruned);
  seed_roomy_ = RoomyRows(seed_);
  seeded_ = true;
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
