// The kernel cache: KernelKey -> CudnnKernel, one per (pass, convolution,
// device, numerics, planning knobs), and the benchmark tables that seed
// kernels created afterwards (the benchmark database). No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_KERNEL_CACHE_H_
#define TF_UCUDNN_ENGINE_KERNEL_CACHE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "cc/engine/conv_params.h"
#include "cc/engine/knobs.h"
#include "cc/engine/planner.h"

#if GOOGLE_CUDA
#include "cc/engine/cudnn_kernel.h"
#endif

namespace ucudnn {

// Everything that defines a planned kernel: the convolution (batch included),
// the pass, the device, the numerics and the planning knobs.
struct KernelKey {
  Pass pass = Pass::kForward;
  std::array<int64_t, 21> conv{};  // ConvParams::Fields()
  int device = 0;
  // The planning knobs whole (the request's); knobs.graph holds the defaults
  // when knobs.engines is kLegacy (they change nothing then).
  PlanningKnobs knobs;

  bool operator<(const KernelKey& o) const;
};

#if GOOGLE_CUDA

// What one benchmark table is kept under: the kernel's key without its N
// (conv[0] = 0), batch-size policy, forced micro-batch size, device and
// Workspace Division total, its knobs.workspace_limit the limit it was
// benchmarked within (PlanningKnobs::BenchmarkLimit). Kernels of any N, policy, GPU and group plan
// from it (the sizes each allows: RestrictTable).
KernelKey TableKey(KernelKey key);

// The per-device cache of planned kernels, one per KernelKey; thread-safe.
// A new kernel takes the stored table of its convolution (TableKey) as its
// seed, if there is one: it benchmarks only the sizes that table lacks.
std::shared_ptr<CudnnKernel> GetOrCreateKernel(const KernelKey& key, const ConvParams& params);
// Adds the sizes of a benchmark table (from the benchmark database, or a
// kernel just benchmarked) that the stored table of its convolution lacks,
// and replaces the stored rows measured under memory pressure by rows of
// `table` measured with room (sizes not in `pressured`), and adds the graph
// engines `pruned` (MergePrunedEngines); kernels created afterwards, on any
// device, plan from the result.
void SeedKernelTable(const KernelKey& key, PerfTable table, std::vector<CudnnAlgo> algos,
                     std::set<int64_t> pressured = {}, PrunedEngines pruned = {});
// Every kernel created so far, with its key, in creation order.
std::vector<std::pair<KernelKey, std::shared_ptr<CudnnKernel>>> AllKernels();

// One stored table: its key (TableKey), the convolution (N = 0), the
// candidates and the rows, as the benchmark database keeps them.
struct ConvolutionTable {
  KernelKey key;
  ConvParams params;
  PerfTable table;
  std::vector<CudnnAlgo> algos;
  std::set<int64_t> pressured;  // sizes measured under memory pressure
  PrunedEngines pruned;         // graph engines pruned from larger sizes
};
// Every stored table, in the order their convolutions were first stored.
std::vector<ConvolutionTable> AllTables();

#endif  // GOOGLE_CUDA

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_KERNEL_CACHE_H_
