// What autotuning produces and planning reads, as values: the candidates of
// a kernel (legacy cuDNN algorithms and graph-API engine configs), their
// measurements, and the benchmark table with what was learnt while making
// it (sizes measured under memory pressure, graph engines pruned, the GPUs
// that benchmarked). No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_BENCHMARK_TABLE_H_
#define TF_UCUDNN_ENGINE_BENCHMARK_TABLE_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cc/engine/conv_params.h"
#include "cc/engine/cudnn_graph.h"
#include "cc/engine/planner.h"

namespace ucudnn {

// The smallest micro-batch size benchmarked with graph-API engines when legacy
// algorithms are candidates too (UCUDNN_ENGINES=all, auto).
constexpr int64_t kMinGraphMicroBatch = 8;

// Whether the kernel of `p` benchmarks the whole mini-batch first and smaller
// micro-batches only where the workspace limit binds there (one GPU, no forced
// size, no Workspace Division group): a fused kernel, with the statistics
// epilogue or the input prologue. Most of its engines are compiled at run
// time, about 0.5 s per plan and size on an H200 (ResNet-50's 3x3 at 56²: 27.6
// s at nine sizes), and they need no workspace, so a smaller micro-batch
// lets no faster engine in.
inline bool WholeBatchFirst(const ConvParams& p) {
  return p.fusion.statistics() || p.fusion.input_scale_bias();
}

// A candidate: a legacy algorithm (cuDNN's algorithm enum value and math
// type) or, when engine.id >= 0, a graph-API engine config.
struct CudnnAlgo {
  int algo = 0;
  int math_type = 0;
  bool deterministic = true;
  GraphEngine engine;
  bool graph() const { return engine.id >= 0; }
  bool operator==(const CudnnAlgo& o) const {
    return graph() ? o.graph() && engine == o.engine
                   : !o.graph() && algo == o.algo && math_type == o.math_type;
  }
};
std::string CudnnAlgoName(Pass pass, const CudnnAlgo& algo);

// One candidate measured at one micro-batch size, before it joins a table.
struct Measured {
  CudnnAlgo algo;
  double time_ms;
  int64_t workspace_bytes;
};
// Micro-batch size -> the candidates measured there.
using MeasuredSizes = std::map<int64_t, std::vector<Measured>>;

// A kernel's benchmark table: rows of AlgoPerf whose `algo` indexes `algos`.
struct BenchmarkTable {
  PerfTable table;
  std::vector<CudnnAlgo> algos;
  // Sizes measured under memory pressure: their search workspace could not
  // be allocated in full (less than their candidates could use within the
  // limit), so fast candidates may be missing.
  std::set<int64_t> pressured;
  // Graph engines pruned from larger sizes, with the size that pruned them.
  PrunedEngines pruned;
  // CUDA ordinals of the GPUs that benchmarked (empty if none did).
  std::vector<int> devices;
};

// Adds the rows of `measured` to `*table`, candidates numbered in order of
// first appearance by size.
void AddMeasured(const MeasuredSizes& measured, BenchmarkTable* table);

// The rows of `stored` measured with room (without its pressured sizes):
// planning takes them as they are, and new sizes their neighbours from them.
PerfTable RoomyRows(const BenchmarkTable& stored);

// The table a kernel plans from: the sizes it benchmarked (`measured`), the
// stored sizes of `seed` it did not (when `seeded`), restricted to `sizes`
// (a forced micro-batch size) or to what the policy allows for `batch`;
// pressured sizes: those measured so, and the seed's where its row stayed;
// pruned engines of both. *benchmarked_sizes counts the sizes of the result
// that `measured` holds.
BenchmarkTable PlanningTable(BenchmarkTable measured, bool seeded, const BenchmarkTable& seed,
                             bool forced, const std::vector<int64_t>& sizes,
                             BatchSizePolicy policy, int64_t batch, int* benchmarked_sizes);

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_BENCHMARK_TABLE_H_
