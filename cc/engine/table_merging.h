// Benchmark tables across mini-batch sizes, policies and processes: a
// table restricted to what a kernel may use, the sizes a kernel must still
// benchmark, merging a stored table (the benchmark database, a kernel of
// another N) with new measurements, and the graph engines pruned at small
// sizes. Pure C++, no TensorFlow, no GPU.
#ifndef TF_UCUDNN_ENGINE_TABLE_MERGING_H_
#define TF_UCUDNN_ENGINE_TABLE_MERGING_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cc/engine/micro_batch_sizes.h"
#include "cc/engine/plan.h"

namespace ucudnn {

// Keeps only the sizes in `sizes` (and drops sizes > batch_size).
PerfTable RestrictTable(const PerfTable& table, const std::vector<int64_t>& sizes);
// Keeps only the sizes the policy allows for batch_size (AllowedMicroBatchSize).
PerfTable RestrictTable(const PerfTable& table, BatchSizePolicy policy, int64_t batch_size);

// One benchmark table per convolution, whatever N: the time of a micro-batch
// of b samples does not depend on the mini-batch it was cut from, so a kernel
// of a new N plans from the sizes already measured and benchmarks only the
// ones missing (Workspace Reuse, and Workspace Division's fronts, then run on
// the sizes its policy allows: RestrictTable).

// The sizes of `sizes` that `stored` lacks and a kernel must benchmark. With
// small_sizes_where_limited (the candidate set's rule that sizes below
// `first_graph_size` are timed only where the limit binds at a larger size),
// missing small sizes are left out when no size >= first_graph_size is
// missing: the stored larger sizes decided about them already (they are in
// `stored` where the limit bound).
std::vector<int64_t> SizesToBenchmark(const PerfTable& stored, const std::vector<int64_t>& sizes,
                                      int64_t first_graph_size, bool small_sizes_where_limited);

// Adds the sizes of `from` that `into` lacks; their candidates are found in
// `into_algos` (by ==) or appended to it, and the rows' indices renumbered.
// Sizes present in both keep `into`'s rows. Algo: any type with ==.
template <typename Algo>
void MergeTables(PerfTable* into, std::vector<Algo>* into_algos, const PerfTable& from,
                 const std::vector<Algo>& from_algos) {
  std::vector<int> index(from_algos.size(), -1);
  for (const auto& [size, rows] : from) {
    if (into->count(size)) continue;
    std::vector<AlgoPerf>& out = (*into)[size];
    for (const AlgoPerf& row : rows) {
      if (row.algo < 0 || row.algo >= static_cast<int>(from_algos.size())) continue;
      int& i = index[row.algo];
      if (i < 0) {
        for (size_t j = 0; j < into_algos->size() && i < 0; ++j) {
          if ((*into_algos)[j] == from_algos[row.algo]) i = static_cast<int>(j);
        }
        if (i < 0) {
          i = static_cast<int>(into_algos->size());
          into_algos->push_back(from_algos[row.algo]);
        }
      }
      out.push_back({i, row.time_ms, row.workspace_bytes});
    }
  }
}

// MergeTables with memory pressure: `*into_pressured` and `from_pressured`
// are the sizes each table measured while its search workspace could not be
// allocated in full (fast candidates may be missing). A size `into` holds
// only as pressured takes `from`'s rows where `from` measured it with room;
// a pressured row never replaces a roomy one; added sizes keep their mark.
template <typename Algo>
void MergeTablesWithPressure(PerfTable* into, std::vector<Algo>* into_algos,
                             std::set<int64_t>* into_pressured, const PerfTable& from,
                             const std::vector<Algo>& from_algos,
                             const std::set<int64_t>& from_pressured) {
  for (auto p = into_pressured->begin(); p != into_pressured->end();) {
    if (from.count(*p) && !from_pressured.count(*p)) {
      into->erase(*p);
      p = into_pressured->erase(p);
    } else {
      ++p;
    }
  }
  for (const auto& row : from) {
    if (!into->count(row.first) && from_pressured.count(row.first)) {
      into_pressured->insert(row.first);
    }
  }
  MergeTables(into, into_algos, from, from_algos);
}

// Graph engines that screening pruned from a convolution's larger sizes, by
// name, with the micro-batch size at which it pruned them (the smallest where
// several measurements did). A kernel that benchmarks new sizes of a stored
// table leaves out, at each size, the engines pruned below it, as one
// benchmarking every size in ascending order would.
using PrunedEngines = std::map<std::string, int64_t>;
// Adds `from` to `*into`, keeping the smaller size of an engine in both.
void MergePrunedEngines(PrunedEngines* into, const PrunedEngines& from);
// The engines pruned at sizes below `size`.
std::set<std::string> PrunedBelow(const PrunedEngines& pruned, int64_t size);

// The candidates (indices into the table's algos, in order of first
// appearance) on the time-workspace Pareto front of each of the stored sizes
// nearest below and above `size`: those that no other candidate of the row
// beats in time with no more workspace (`workspace_slack` bytes allowed);
// empty unless both rows exist. A kernel benchmarking a new size between two
// stored ones times these instead of asking cuDNN's heuristics again: a
// candidate that both neighbours measured behind a faster one needing no more
// workspace is not expected to win between them, as pruning expects engines
// to keep their rank as sizes grow. (The whole rows, whose many engine configs
// measure within a few percent of one another, took twice the candidates for
// 0.3-0.8 % of the size's convolution time: docs/benchmarks.md, a new batch
// size.)
std::vector<int> NeighbourCandidates(const PerfTable& stored, int64_t size,
                                     int64_t workspace_slack);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_TABLE_MERGING_H_
