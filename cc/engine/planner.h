// Micro-batch planning: Workspace Reuse (WR) and the Pareto front used by
// Workspace Division (WD). Pure C++, no TensorFlow, no GPU: the Python
// planner (tf_ucudnn.planner) calls these same functions through c_api.cc.
//
// Reference: Oyama, Ben-Nun, Hoefler, Matsuoka, "Accelerating Deep Learning
// Frameworks with Micro-batches", IEEE CLUSTER 2018 (arXiv:1804.04806), §III.
#ifndef TF_UCUDNN_ENGINE_PLANNER_H_
#define TF_UCUDNN_ENGINE_PLANNER_H_

#include <cstdint>
#include <map>
#include <set>
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

// One benchmarked algorithm at one micro-batch size.
struct AlgoPerf {
  int algo = 0;                 // index into the caller's candidate list
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};

// Micro-batch size -> the algorithms measured at that size.
using PerfTable = std::map<int64_t, std::vector<AlgoPerf>>;

struct MicroBatch {
  int64_t size = 0;
  int algo = 0;
  double time_ms = 0;
  int64_t workspace_bytes = 0;
};

struct Plan {
  std::vector<MicroBatch> micro_batches;  // in execution order, larger first
  double time_ms = 0;                     // sum over micro-batches
  int64_t workspace_bytes = 0;            // max over micro-batches (+ accumulator_bytes)
  // Bytes at the end of the workspace that hold a float32 accumulator: a
  // float16/bfloat16 backward-filter plan of several micro-batches adds them
  // up in float32 (see CudnnKernel), counted against the workspace limit.
  // 0 otherwise; the planner itself never sets it.
  int64_t accumulator_bytes = 0;
  bool empty() const { return micro_batches.empty(); }
};

// Planning memory. Mini-batches up to kSmallBatch samples are planned by the
// recurrences below over every n in [0, N]. Larger ones never allocate per
// sample of N: tables whose sizes are powers of two or N itself (the
// powerOfTwo and undivided policies) are solved in O(k^2) for k sizes
// (PowerOfTwoBestPlan); other tables by the recurrence (20 bytes per sample)
// up to kMaxDenseBatch samples, and not at all beyond (PlanTooLarge). Every
// path allocates what its answer holds: a plan lists each micro-batch.
constexpr int64_t kSmallBatch = int64_t{1} << 16;
constexpr int64_t kMaxDenseBatch = int64_t{1} << 24;

// True when every size of `table` in (0, batch_size) is a power of two.
bool PowerOfTwoTable(const PerfTable& table, int64_t batch_size);
// True when BestPlan / ParetoFront give no plan only because batch_size is
// too large for `table` (beyond kMaxDenseBatch, sizes not powers of two).
bool PlanTooLarge(const PerfTable& table, int64_t batch_size);

// Workspace Reuse: the fastest plan whose every micro-batch needs at most
// `workspace_limit` bytes, using only the sizes present in `table`:
//   T(0) = 0,  T(n) = min_{b <= n} t*(b) + T(n - b),
// where t*(b) is the fastest algorithm at size b within the limit. Among equally
// fast plans the one with less workspace wins, then the larger micro-batch. Returns an empty plan when
// no combination of the table's sizes within the limit sums to batch_size.
Plan BestPlan(const PerfTable& table, int64_t batch_size, int64_t workspace_limit);

// BestPlan of a power-of-two table (see PowerOfTwoTable; else an empty plan)
// over bits instead of samples: O(k^2) time and memory for k sizes, whatever
// batch_size. Among equally fast plans, the least workspace, then the most
// micro-batches of the largest size, then of the next. BestPlan uses it above
// kSmallBatch; exposed so that tests can compare it with the recurrence.
Plan PowerOfTwoBestPlan(const PerfTable& table, int64_t batch_size, int64_t workspace_limit);

// The forced plan: micro-batches of exactly `max_size` (the last one holds the
// remainder), each with its fastest algorithm within the limit. Empty when a
// needed size is missing from the table or has no algorithm within the limit.
Plan ForcedPlan(const PerfTable& table, int64_t batch_size, int64_t max_size,
                int64_t workspace_limit);

// A plan of micro-batches of at most `max_size` samples with algorithm 0, for
// backends that have a single algorithm (the CPU).
Plan UniformPlan(int64_t batch_size, int64_t max_size);

// Workspace Division's desirable set: every plan over the table's sizes that no
// other plan beats in both time and workspace, sorted by workspace ascending
// with strictly decreasing time (Oyama et al. §III-C).
std::vector<Plan> ParetoFront(const PerfTable& table, int64_t batch_size);

// Float32 accumulation of float16/bfloat16 backward-filter plans (see
// CudnnKernel::AccumulatorBytes): a plan of several micro-batches adds their
// filter gradients in a float32 sum kept at the end of its workspace, after
// the cuDNN workspace rounded up to kAccumulatorAlign; a plan of one
// micro-batch needs none. The functions below count that sum against the
// limit and set Plan::accumulator_bytes; with accumulator_bytes = 0 they are
// BestPlan, ForcedPlan and ParetoFront.
constexpr int64_t kAccumulatorAlign = 256;
// The accumulator of a filter of `filter_elements`: the float32 sum, rounded
// up to kAccumulatorAlign, and one zeroed block of kAccumulatorAlign bytes.
int64_t FloatAccumulatorBytes(int64_t filter_elements);
// Workspace Reuse within `workspace_limit`, the accumulator counted: the
// faster of the best undivided plan and the best plan of several
// micro-batches whose cuDNN workspace fits in the limit less the accumulator.
Plan BestPlanWithAccumulator(const PerfTable& table, int64_t batch_size, int64_t workspace_limit,
                             int64_t accumulator_bytes);
// ForcedPlan with the accumulator counted where it fits; a forced plan that
// has no room for it is ForcedPlan's (it then accumulates in the element type).
Plan ForcedPlanWithAccumulator(const PerfTable& table, int64_t batch_size, int64_t max_size,
                               int64_t workspace_limit, int64_t accumulator_bytes);
// ParetoFront with the accumulator counted in every plan of several
// micro-batches (undivided plans that only those dominated may join it).
std::vector<Plan> ParetoFrontWithAccumulator(const PerfTable& table, int64_t batch_size,
                                             int64_t accumulator_bytes);

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

#endif  // TF_UCUDNN_ENGINE_PLANNER_H_
