// The stored benchmark table a kernel is seeded with (CudnnKernel::Seed: the
// benchmark database, or a kernel of the same convolution at another N), and
// its rows measured with room. Planning takes those rows as they are,
// benchmarks only the sizes the table lacks and again its pressured ones
// (SizesToBenchmark), and at a new size proposes its neighbours' candidates.
// Not thread-safe: the kernel's bench_mu_ guards it. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_KERNEL_SEED_H_
#define TF_UCUDNN_ENGINE_KERNEL_SEED_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <set>
#include <vector>

#include "cc/engine/benchmark_table.h"
#include "cc/engine/planner.h"

namespace ucudnn {

class KernelSeed {
 public:
  // Keeps the stored table: its rows, candidates, the sizes measured under
  // memory pressure and the graph engines pruned (with the size that pruned
  // them).
  void Set(PerfTable table, std::vector<CudnnAlgo> algos, std::set<int64_t> pressured,
           PrunedEngines pruned);
  bool seeded() const { return seeded_; }
  const BenchmarkTable& table() const { return seed_; }
  // table() without the sizes in table().pressured: the rows measured with
  // room (RoomyRows), which planning takes as they are (and new sizes their
  // neighbours from).
  const PerfTable& roomy() const { return seed_roomy_; }

 private:
  bool seeded_ = false;
  BenchmarkTable seed_;
  PerfTable seed_roomy_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_KERNEL_SEED_H_
