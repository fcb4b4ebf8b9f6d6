// The autotuner of one kernel: for every micro-batch size asked, the legacy
// algorithms (LegacyCandidates) and the graph-API engines (GraphCandidates)
// timed within the workspace limit (DeviceBenchmark), on this GPU and on peers
// (UCUDNN_BENCHMARK_DEVICES), into a BenchmarkTable: a value that planning
// then chooses plans from (cudnn_kernel.h). As XLA's conv_algorithm_picker
// and TF's autotuner, it chooses nothing itself. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_AUTOTUNE_H_
#define TF_UCUDNN_ENGINE_AUTOTUNE_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <set>
#include <vector>

#include "cuda_runtime_api.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/cudnn_handles.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/plan_runner.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

class Autotuner {
 public:
  // `runner`: the kernel's (descriptors, graph plans, operations). `seed`:
  // the stored table the kernel was seeded with (empty if none), and
  // `seed_roomy` its rows measured with room (RoomyRows): at a new size the
  // graph engines its measurements pruned below it are left out, and a size
  // between two stored ones tries their candidates. All outlive this.
  Autotuner(PlanRunner* runner, const BenchmarkTable& seed, const PerfTable& seed_roomy)
      : spec_(runner->spec()), runner_(runner), seed_(seed), seed_roomy_(seed_roomy) {}

  // Benchmarks every size of `sizes`, spread over this GPU and `peers` (each
  // in its own thread, on copies of the tensors; a DeviceBenchmark each),
  // into *out (table, algos, pressured sizes, pruned engines, devices).
  // small_sizes_where_limited (on one GPU only): see DeviceBenchmark::Run.
  Status Benchmark(CudnnHandle* handle, cudaStream_t stream, const std::vector<int64_t>& sizes,
                   int64_t workspace_limit, const PassTensors& t, ScratchAllocator* scratch,
                   const std::vector<BenchmarkPeer>& peers, bool small_sizes_where_limited,
                   BenchmarkTable* out);

 private:
  // Copies what `sizes` need of the tensors from this GPU to `peer`, then
  // benchmarks them there (DeviceBenchmark::Run's outputs).
  Status BenchmarkOnPeer(int own_device, const BenchmarkPeer& peer,
                         const std::vector<int64_t>& sizes, int64_t workspace_limit,
                         const PassTensors& t, MeasuredSizes* got,
                         std::set<int64_t>* pressured, PrunedEngines* pruned);
  // BenchmarkOnPeer's work once the peer is the current device.
  Status BenchmarkOnPeerDevice(int own_device, const BenchmarkPeer& peer,
                               const std::vector<int64_t>& sizes, int64_t workspace_limit,
                               const PassTensors& t, MeasuredSizes* got,
                               std::set<int64_t>* pressured, PrunedEngines* pruned);

  const KernelSpec& spec_;
  PlanRunner* const runner_;
  const BenchmarkTable& seed_;
  const PerfTable& seed_roomy_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_AUTOTUNE_H_
