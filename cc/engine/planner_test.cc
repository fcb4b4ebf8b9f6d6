// Planner checks that build and run with no TensorFlow and no GPU:
//   bazel test //cc/engine:planner_test
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cc/engine/planner.h"
#include "cc/engine/test_checks.h"

using ucudnn_test::Check;

int main() {
  using namespace ucudnn;
  Check(MicroBatchSizes(BatchSizePolicy::kPowerOfTwo, 6) == std::vector<int64_t>({1, 2, 4, 6}),
        "powerOfTwo sizes of 6 are {1, 2, 4, 6}");
  Check(MicroBatchSizes(BatchSizePolicy::kUndivided, 6) == std::vector<int64_t>({6}),
        "undivided sizes of 6 are {6}");
  Check(MicroBatchSizes(BatchSizePolicy::kAll, 3) == std::vector<int64_t>({1, 2, 3}),
        "all sizes of 3 are {1, 2, 3}");

  // Sizes are counted, and checked, without being listed.
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{64}, int64_t{1000}}) {
    for (BatchSizePolicy policy :
         {BatchSizePolicy::kUndivided, BatchSizePolicy::kPowerOfTwo, BatchSizePolicy::kAll}) {
      const std::vector<int64_t> sizes = MicroBatchSizes(policy, n);
      bool same = MicroBatchSizeCount(policy, n) == static_cast<int64_t>(sizes.size());
      for (int64_t b = 0; b <= n + 1; ++b) {
        const bool listed = std::find(sizes.begin(), sizes.end(), b) != sizes.end();
        same = same && AllowedMicroBatchSize(policy, n, b) == listed;
      }
      Check(same, "MicroBatchSizeCount and AllowedMicroBatchSize agree with MicroBatchSizes");
    }
  }
  const int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  Check(MicroBatchSizes(BatchSizePolicy::kPowerOfTwo, int64_t{1} << 40).size() == 41 &&
            MicroBatchSizeCount(BatchSizePolicy::kPowerOfTwo, kInt64Max) == 64 &&
            MicroBatchSizes(BatchSizePolicy::kPowerOfTwo, kInt64Max).back() == kInt64Max &&
            MicroBatchSizeCount(BatchSizePolicy::kAll, int64_t{1} << 40) == int64_t{1} << 40,
        "powerOfTwo sizes of 2^40 are 41; of 2^63 - 1, 64 without overflow; all of 2^40 counted");

  // Size 4 with a fast algorithm that needs 100 bytes; size 8 only fits slowly.
  PerfTable table;
  table[8] = {{0, 10.0, 0}, {1, 2.0, 400}};
  table[4] = {{0, 6.0, 0}, {1, 1.5, 100}};
  Plan wide = BestPlan(table, 8, 1000);
  Check(wide.micro_batches.size() == 1 && wide.time_ms == 2.0, "no limit: one fast micro-batch");
  Plan tight = BestPlan(table, 8, 100);
  Check(tight.micro_batches.size() == 2 && tight.time_ms == 3.0 && tight.workspace_bytes == 100,
        "limit 100: two micro-batches of 4 with the fast algorithm");
  Check(BestPlan(table, 8, 0).time_ms == 10.0, "limit 0: undivided slow algorithm wins over 2x6");

  std::vector<Plan> front = ParetoFront(table, 8);
  Check(front.size() == 3, "front has (0, 10), (100, 3), (400, 2)");
  for (size_t i = 1; i < front.size(); ++i) {
    Check(front[i].workspace_bytes > front[i - 1].workspace_bytes &&
              front[i].time_ms < front[i - 1].time_ms,
          "front is sorted by workspace with strictly decreasing time");
  }

  Plan forced = ForcedPlan(table, 8, 4, 1000);
  Check(forced.micro_batches.size() == 2 && forced.time_ms == 3.0, "forced 4: two micro-batches");

  Plan uniform = UniformPlan(10, 4);
  Check(uniform.micro_batches.size() == 3 && uniform.micro_batches[2].size == 2,
        "uniform 10 by 4 is 4 + 4 + 2");

  // Planning large mini-batches: over bits (power-of-two tables), never per
  // sample of N. First the bit DP against the recurrence on random
  // power-of-two tables (integer times: exact ties; continuous: none).
  std::mt19937_64 rng(19);
  int compared = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const bool integer_times = trial % 2 == 0;
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    PerfTable t;
    for (int64_t b = 1; b <= n; b = b <= n / 2 ? b * 2 : n + 1) {
      if (rng() % 5 == 0) continue;
      for (int a = 0; a < 1 + static_cast<int>(rng() % 3); ++a) {
        const double ms = integer_times ? static_cast<double>(1 + rng() % (2 * b + 1))
                                        : b * (0.2 + 1.8 * (rng() % 100000) / 1e5);
        t[b].push_back({a, ms, rng() % 3 == 0 ? 0 : static_cast<int64_t>(1 + rng() % 8) * 256});
      }
    }
    if (rng() % 2 == 0) t[n].push_back({7, static_cast<double>(1 + rng() % (2 * n + 1)), 512});
    for (int64_t limit : {int64_t{0}, int64_t{256}, int64_t{1024}, int64_t{1} << 40}) {
      const Plan dense = BestPlan(t, n, limit);  // n <= kSmallBatch: the recurrence
      const Plan bits = PowerOfTwoBestPlan(t, n, limit);
      int64_t sum = 0;
      for (const MicroBatch& mb : bits.micro_batches) sum += mb.size;
      const bool same_time =
          integer_times ? dense.time_ms == bits.time_ms
                        : std::fabs(dense.time_ms - bits.time_ms) <= 1e-9 * dense.time_ms;
      const bool ok = dense.empty() == bits.empty() &&
                      (dense.empty() || (same_time && sum == n &&
                                         dense.workspace_bytes == bits.workspace_bytes &&
                                         bits.workspace_bytes <= limit));
      if (!ok) {
        std::fprintf(stderr, "trial %d N=%lld limit %lld: recurrence %.9g ms %lld B (%zu), "
                     "bits %.9g ms %lld B (%zu, sum %lld)\n", trial, static_cast<long long>(n),
                     static_cast<long long>(limit), dense.time_ms,
                     static_cast<long long>(dense.workspace_bytes), dense.micro_batches.size(),
                     bits.time_ms, static_cast<long long>(bits.workspace_bytes),
                     bits.micro_batches.size(), static_cast<long long>(sum));
      }
      Check(ok, "the bit DP finds the recurrence's time and workspace");
      ++compared;
    }
  }
  Check(compared == 2400, "every random table compared");

  // N = 2^40: the whole batch is slow, 2^39 fast. Memory and time do not
  // depend on N.
  const auto start = std::chrono::steady_clock::now();
  const int64_t huge = int64_t{1} << 40;
  PerfTable pow2;
  for (int64_t b = 1; b < huge; b *= 2) pow2[b] = {{0, static_cast<double>(b) * 1.5 + 1, 0}};
  pow2[huge / 2] = {{1, 1.0, 4096}, {0, 1e12, 0}};
  pow2[huge] = {{0, 5.0, 0}};
  const Plan two = BestPlan(pow2, huge, 1 << 20);
  Check(two.micro_batches.size() == 2 && two.micro_batches[0].size == huge / 2 &&
            two.time_ms == 2.0 && two.workspace_bytes == 4096,
        "N = 2^40: two micro-batches of 2^39");
  Check(BestPlan(pow2, huge, 0).micro_batches.size() == 1, "N = 2^40 within 0 bytes: undivided");
  // A batch that is not a power of two: 10^12 + 7 by 2^39s and its low bits.
  const int64_t odd = 1000000000007;
  const Plan mixed = BestPlan(pow2, odd, 1 << 20);
  int64_t mixed_sum = 0;
  for (const MicroBatch& mb : mixed.micro_batches) mixed_sum += mb.size;
  Check(mixed_sum == odd && mixed.micro_batches.front().size == huge / 2 &&
            mixed.micro_batches.size() < 64,
        "N = 10^12 + 7: micro-batches of 2^39 and the binary remainder");
  const std::vector<Plan> huge_front = ParetoFront(pow2, huge);
  Check(huge_front.size() == 2 && huge_front[0].workspace_bytes == 0 &&
            huge_front[0].time_ms == 5.0 && huge_front[1].time_ms == 2.0,
        "N = 2^40: front (0 B, 5 ms), (4096 B, 2 ms)");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Check(seconds < 2.0, "planning N = 2^40 takes well under a second");
  // Tables of other sizes keep the recurrence, up to kMaxDenseBatch samples.
  PerfTable threes = {{3, {{0, 1.0, 0}}}};
  Check(PlanTooLarge(threes, int64_t{1} << 30) && BestPlan(threes, int64_t{1} << 30, 0).empty() &&
            ParetoFront(threes, int64_t{1} << 30).empty() && !PlanTooLarge(pow2, huge),
        "a table of size 3 for N = 2^30 is too large to plan, not a 20 GB allocation");
  Check(BestPlan(threes, 3 * (kSmallBatch + 1), 0).micro_batches.size() ==
            static_cast<size_t>(kSmallBatch + 1),
        "above kSmallBatch, other tables still plan by the recurrence");

  // Float32 accumulation of float16/bfloat16 backward-filter plans: the sum
  // counts against the limit for plans of several micro-batches only.
  Check(FloatAccumulatorBytes(64) == 512 && FloatAccumulatorBytes(65) == 768,
        "the accumulator is the float32 filter rounded up to 256 bytes, plus 256 zero bytes");
  {
    PerfTable acc;
    acc[4] = {{0, 5.0, 200}};  // undivided: 5 ms, 200 bytes
    acc[2] = {{1, 2.0, 100}};  // 2 x 2: 4 ms, 100 bytes
    Check(BestPlanWithAccumulator(acc, 4, 1000, 0).micro_batches.size() == 2 &&
              BestPlanWithAccumulator(acc, 4, 1000, 0).workspace_bytes == 100,
          "without an accumulator, BestPlanWithAccumulator is BestPlan");
    const Plan split = BestPlanWithAccumulator(acc, 4, 1000, 512);
    Check(split.micro_batches.size() == 2 && split.accumulator_bytes == 512 &&
              split.workspace_bytes == 256 + 512,
          "a plan of several micro-batches holds the accumulator after its aligned workspace");
    const Plan whole = BestPlanWithAccumulator(acc, 4, 700, 512);
    Check(whole.micro_batches.size() == 1 && whole.accumulator_bytes == 0 &&
              whole.workspace_bytes == 200,
          "when the accumulator leaves no room for the split, the undivided plan runs");
    Check(BestPlanWithAccumulator(acc, 4, 150, 512).empty(),
          "no plan when neither the undivided plan nor the split with its accumulator fits");
    const Plan forced = ForcedPlanWithAccumulator(acc, 4, 2, 1000, 512);
    Check(forced.micro_batches.size() == 2 && forced.accumulator_bytes == 512,
          "a forced split counts the accumulator where it fits");
    const Plan forced_tight = ForcedPlanWithAccumulator(acc, 4, 2, 300, 512);
    Check(forced_tight.micro_batches.size() == 2 && forced_tight.accumulator_bytes == 0 &&
              forced_tight.workspace_bytes == 100,
          "a forced split with no room for the accumulator accumulates in the element type");
    const std::vector<Plan> front = ParetoFrontWithAccumulator(acc, 4, 512);
    Check(ParetoFront(acc, 4).size() == 1 && front.size() == 2 &&
              front[0].micro_batches.size() == 1 && front[0].workspace_bytes == 200 &&
              front[1].micro_batches.size() == 2 && front[1].workspace_bytes == 768,
          "with the accumulator counted, the undivided plan joins the Pareto front");
  }

  // One table per convolution: a new N benchmarks only the sizes missing.
  {
    PerfTable stored;
    stored[8] = {{0, 1.0, 0}};
    stored[16] = {{0, 2.0, 0}};
    stored[128] = {{0, 9.0, 0}};
    const std::vector<int64_t> n100 = MicroBatchSizes(BatchSizePolicy::kPowerOfTwo, 100);
    Check(SizesToBenchmark(stored, n100, 8, false) ==
              std::vector<int64_t>({1, 2, 4, 32, 64, 100}),
          "every allowed size the table lacks is benchmarked");
    Check(SizesToBenchmark(stored, n100, 8, true) == std::vector<int64_t>({1, 2, 4, 32, 64, 100}),
          "with a new size of 8 or more, the small ones go to the benchmark, which decides");
    const std::vector<int64_t> n16 = MicroBatchSizes(BatchSizePolicy::kPowerOfTwo, 16);
    Check(SizesToBenchmark(stored, n16, 8, true).empty(),
          "with no new size of 8 or more, the small sizes the limit did not need stay out");
    Check(SizesToBenchmark(stored, n16, 8, false) == std::vector<int64_t>({1, 2, 4}),
          "a kernel that needs every size (Workspace Division) benchmarks the small ones");
    Check(SizesToBenchmark(stored, {8, 16}, 8, false).empty(), "nothing missing, nothing timed");
    // A fused kernel (WholeBatchFirst): the whole mini-batch is its one
    // unconditional size.
    Check(SizesToBenchmark(stored, n16, 16, true).empty(),
          "a fused kernel with its whole mini-batch stored benchmarks nothing more");
    Check(SizesToBenchmark(stored, MicroBatchSizes(BatchSizePolicy::kPowerOfTwo, 32), 32, true) ==
              std::vector<int64_t>({1, 2, 4, 32}),
          "a fused kernel at a new mini-batch hands the benchmark every missing size, which "
          "times the whole one first");

    // Candidates are renumbered into the merged list; shared sizes keep the first rows.
    PerfTable into;
    std::vector<std::string> into_algos = {"a", "b"};
    into[4] = {{0, 2.0, 10}, {1, 2.5, 20}};
    PerfTable from;
    std::vector<std::string> from_algos = {"c", "b", "unused"};
    from[4] = {{0, 0.5, 5}};
    from[8] = {{0, 3.0, 30}, {1, 4.0, 40}};
    MergeTables(&into, &into_algos, from, from_algos);
    Check(into_algos == std::vector<std::string>({"a", "b", "c"}),
          "a new candidate is appended, a known one found, an unused one left out");
    Check(into.size() == 2 && into[4].size() == 2 && into[4][0].time_ms == 2.0,
          "a size both tables hold keeps the first table's rows");
    Check(into[8].size() == 2 && into[8][0].algo == 2 && into[8][1].algo == 1 &&
              into[8][0].time_ms == 3.0 && into[8][1].workspace_bytes == 40,
          "rows of an added size point at the merged candidates");
    const Plan plan = BestPlan(RestrictTable(into, BatchSizePolicy::kPowerOfTwo, 12), 12, 100);
    Check(plan.micro_batches.size() == 2 && plan.time_ms == 3.0 + 2.0,
          "a merged table plans an N it was not measured for (8 + 4 of 12)");
  }

  // Memory pressure: a roomy measurement replaces a pressured one, never the reverse.
  {
    PerfTable into;
    std::vector<int> into_algos = {10, 11};
    std::set<int64_t> into_pressured = {8};
    into[8] = {{0, 5.0, 0}};   // pressured: the fast candidate could not be timed
    into[16] = {{1, 2.0, 0}};  // with room
    PerfTable from;
    std::vector<int> from_algos = {12};
    from[8] = {{0, 1.0, 64}};
    from[16] = {{0, 9.0, 0}};
    from[32] = {{0, 3.0, 0}};
    MergeTablesWithPressure(&into, &into_algos, &into_pressured, from, from_algos,
                            std::set<int64_t>({16, 32}));
    Check(into[8].size() == 1 && into[8][0].time_ms == 1.0 && into_algos[into[8][0].algo] == 12,
          "a size measured with room replaces the same size measured under pressure");
    Check(into[16].size() == 1 && into[16][0].time_ms == 2.0,
          "a size measured under pressure never replaces one measured with room");
    Check(into.count(32) && into_pressured == std::set<int64_t>({32}),
          "an added size keeps its pressure mark; the replaced size loses it");
  }

  // Pruned graph engines of a stored table: the smaller size wins, and a new
  // size leaves out the engines pruned below it.
  {
    PrunedEngines into = {{"eng1", 16}, {"eng2", 8}};
    MergePrunedEngines(&into, {{"eng1", 8}, {"eng2", 32}, {"eng3", 64}});
    Check(into == PrunedEngines({{"eng1", 8}, {"eng2", 8}, {"eng3", 64}}),
          "merged pruned engines keep the size that pruned them first");
    Check(PrunedBelow(into, 64) == std::set<std::string>({"eng1", "eng2"}) &&
              PrunedBelow(into, 100).size() == 3 && PrunedBelow(into, 8).empty(),
          "a size leaves out the engines pruned below it, not at it");
  }

  // A new size between two stored ones: the Pareto fronts of both neighbours.
  {
    PerfTable stored;
    // At 64: 0 needs more workspace than 2 and is slower (off the front); 4 is
    // faster than 2 with 100 bytes more, which the slack discounts (2 is off).
    stored[64] = {{2, 1.0, 0}, {0, 1.1, 8 << 20}, {4, 0.95, 100}};
    // At 128: 0 is fastest with more workspace, 3 the fastest with none.
    stored[128] = {{0, 2.0, 8 << 20}, {3, 2.1, 0}, {6, 2.3, 0}};
    stored[8] = {{5, 0.2, 0}};
    stored[32] = {{5, 0.5, 0}, {2, 0.6, 0}};
    Check(NeighbourCandidates(stored, 100, 1024) == std::vector<int>({4, 0, 3}),
          "N = 100 between 64 and 128: each row's Pareto front, each candidate once");
    Check(NeighbourCandidates(stored, 100, 0) == std::vector<int>({2, 4, 0, 3}),
          "without the slack, the candidate needing 100 bytes less stays on the front");
    Check(NeighbourCandidates(stored, 256, 1024).empty() &&
              NeighbourCandidates(stored, 4, 1024).empty(),
          "a size above or below every stored one asks the heuristics");
    Check(NeighbourCandidates(stored, 64, 1024) == std::vector<int>({5, 0, 3}),
          "a stored size (measured again) takes the sizes around it");
  }

  return ucudnn_test::Summary("planner_test");
}
