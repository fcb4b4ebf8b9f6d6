// Planner checks that build and run with no TensorFlow and no GPU:
//   bazel test //cc/kernels/engine:planner_test
#include <cstdio>
#include <string>
#include <vector>

#include "cc/kernels/engine/benchmark_devices.h"
#include "cc/kernels/engine/executor.h"
#include "cc/kernels/engine/planner.h"

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  using namespace ucudnn;
  Check(MicroBatchSizes(BatchSizePolicy::kPowerOfTwo, 6) == std::vector<int64_t>({1, 2, 4, 6}),
        "powerOfTwo sizes of 6 are {1, 2, 4, 6}");
  Check(MicroBatchSizes(BatchSizePolicy::kUndivided, 6) == std::vector<int64_t>({6}),
        "undivided sizes of 6 are {6}");
  Check(MicroBatchSizes(BatchSizePolicy::kAll, 3) == std::vector<int64_t>({1, 2, 3}),
        "all sizes of 3 are {1, 2, 3}");

  EngineSet engines = EngineSet::kAll;
  Check(ParseEngineSet("graph", &engines) && engines == EngineSet::kGraph &&
            std::string(EngineSetName(engines)) == "graph",
        "UCUDNN_ENGINES=graph parses and names itself");
  Check(ParseEngineSet("legacy", &engines) && engines == EngineSet::kLegacy,
        "UCUDNN_ENGINES=legacy parses");
  Check(!ParseEngineSet("Graph", &engines) && !ParseEngineSet("", &engines),
        "UCUDNN_ENGINES rejects other spellings");

  double factor = -1;
  Check(ParseGraphPruneFactor("0", &factor) && factor == 0 &&
            ParseGraphPruneFactor("2.5", &factor) && factor == 2.5,
        "UCUDNN_GRAPH_PRUNE_FACTOR takes 0 and numbers >= 1");
  Check(!ParseGraphPruneFactor("0.5", &factor) && !ParseGraphPruneFactor("-2", &factor) &&
            !ParseGraphPruneFactor("two", &factor) && !ParseGraphPruneFactor("", &factor) &&
            !ParseGraphPruneFactor("3x", &factor) && !ParseGraphPruneFactor("inf", &factor) &&
            factor == 2.5,
        "UCUDNN_GRAPH_PRUNE_FACTOR rejects fractions below 1, negatives and non-numbers, "
        "leaving the factor as it was");
  bool exhaustive = true;
  Check(ParseGraphSearch("default", &exhaustive) && !exhaustive &&
            ParseGraphSearch("exhaustive", &exhaustive) && exhaustive &&
            !ParseGraphSearch("full", &exhaustive),
        "UCUDNN_GRAPH_SEARCH is default or exhaustive");
  GraphLayouts layouts = GraphLayouts::kBoth;
  Check(ParseGraphLayouts("native", &layouts) && layouts == GraphLayouts::kNative &&
            ParseGraphLayouts("transposed", &layouts) && layouts == GraphLayouts::kTransposed &&
            ParseGraphLayouts("both", &layouts) && layouts == GraphLayouts::kBoth &&
            !ParseGraphLayouts("NCHW", &layouts) && layouts == GraphLayouts::kBoth,
        "UCUDNN_GRAPH_LAYOUTS is both, native or transposed, and a bad value leaves it");

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

  // UCUDNN_BENCHMARK_DEVICES.
  bool all = false;
  std::vector<int> ids;
  std::string error;
  Check(ParseBenchmarkDevices("", &all, &ids, &error) && !all && ids.empty(), "empty: off");
  Check(ParseBenchmarkDevices(" all ", &all, &ids, &error) && all, "'all'");
  Check(ParseBenchmarkDevices("1, 0,1", &all, &ids, &error) && !all &&
            ids == std::vector<int>({0, 1}),
        "'1, 0,1' is GPUs 0 and 1");
  for (const char* bad : {"0,", "gpu0", "-1", "0;1", "1.5", ",", "alll"}) {
    Check(!ParseBenchmarkDevices(bad, &all, &ids, &error) &&
              error.find("comma-separated GPU ids") != std::string::npos && ids.empty(),
          bad);
  }
  const std::vector<int64_t> sizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  const auto shares = SpreadSizes(sizes, 2);
  Check(shares.size() == 2 && shares[0] == std::vector<int64_t>({256}) &&
            shares[1] == std::vector<int64_t>({1, 2, 4, 8, 16, 32, 64, 128}),
        "powerOfTwo sizes of 256 over two GPUs: 256 | the rest");
  const auto one = SpreadSizes(sizes, 1);
  Check(one.size() == 1 && one[0] == sizes, "one GPU gets every size");
  const auto many = SpreadSizes({3, 5}, 4);
  Check(many.size() == 4 && many[0] == std::vector<int64_t>({5}) &&
            many[1] == std::vector<int64_t>({3}) && many[2].empty() && many[3].empty(),
        "more GPUs than sizes leaves some idle");

  std::printf("%s\n", failures == 0 ? "planner_test: all checks passed" : "planner_test: FAILED");
  return failures == 0 ? 0 : 1;
}
