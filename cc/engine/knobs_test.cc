// Knob checks (UCUDNN_ENGINES, UCUDNN_GRAPH_*, UCUDNN_XLA_*, UCUDNN_BENCHMARK_DEVICES) that
// build and run with no TensorFlow and no GPU:
//   bazel build //cc/engine:knobs_test && ./bazel-bin/cc/engine/knobs_test
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cc/engine/benchmark_devices.h"
#include "cc/engine/knobs.h"
#include "cc/engine/test_checks.h"

using ucudnn_test::Check;

namespace {

// Sets `name` to the bad `value`, checks that `read` refuses it with
// `message` (the variable, the values allowed and the value found), and
// unsets it again.
template <typename Read>
void CheckRefused(const char* name, const char* value, Read read, const std::string& message) {
  setenv(name, value, 1);
  const ucudnn::Status status = read();
  const std::string what = std::string("a bad ") + name + " is refused with: " + message;
  Check(!status.ok() && status.message() == message, what.c_str());
  unsetenv(name);
}

}  // namespace

int main() {
  using namespace ucudnn;
  EngineSet engines = EngineSet::kAll;
  Check(ParseEngineSet("graph", &engines) && engines == EngineSet::kGraph &&
            std::string(EngineSetName(engines)) == "graph",
        "UCUDNN_ENGINES=graph parses and names itself");
  Check(ParseEngineSet("legacy", &engines) && engines == EngineSet::kLegacy,
        "UCUDNN_ENGINES=legacy parses");
  Check(ParseEngineSet("auto", &engines) && engines == EngineSet::kAuto &&
            ParseEngineSet("all", &engines) && engines == EngineSet::kAll,
        "UCUDNN_ENGINES=auto and =all parse");
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
  GraphSearch search = GraphSearch::kExhaustive;
  Check(ParseGraphSearch("default", &search) && search == GraphSearch::kDefault &&
            ParseGraphSearch("wide", &search) && search == GraphSearch::kWide &&
            ParseGraphSearch("exhaustive", &search) && search == GraphSearch::kExhaustive &&
            !ParseGraphSearch("full", &search) && search == GraphSearch::kExhaustive,
        "UCUDNN_GRAPH_SEARCH is default, wide or exhaustive");
  GraphLayouts layouts = GraphLayouts::kBoth;
  Check(ParseGraphLayouts("native", &layouts) && layouts == GraphLayouts::kNative &&
            ParseGraphLayouts("transposed", &layouts) && layouts == GraphLayouts::kTransposed &&
            ParseGraphLayouts("both", &layouts) && layouts == GraphLayouts::kBoth &&
            !ParseGraphLayouts("NCHW", &layouts) && layouts == GraphLayouts::kBoth,
        "UCUDNN_GRAPH_LAYOUTS is both, native or transposed, and a bad value leaves it");


  // Read when a kernel is created: the environment as it is then.
  setenv("UCUDNN_ENGINES", "graph", 1);
  setenv("UCUDNN_GRAPH_PRUNE_FACTOR", "3", 1);
  setenv("UCUDNN_GRAPH_SEARCH", "exhaustive", 1);
  setenv("UCUDNN_GRAPH_LAYOUTS", "both", 1);
  PlanningKnobs knobs;
  Check(ReadEngineKnobs(&knobs).ok() && knobs.engines == EngineSet::kGraph &&
            knobs.graph.prune_factor == 3 && knobs.graph.search == GraphSearch::kExhaustive &&
            knobs.graph.layouts == GraphLayouts::kBoth,
        "ReadEngineKnobs reads UCUDNN_ENGINES and UCUDNN_GRAPH_*");
  setenv("UCUDNN_GRAPH_LAYOUTS", "NCHW", 1);
  const Status bad = ReadEngineKnobs(&knobs);
  Check(!bad.ok() && bad.message() ==
                         "UCUDNN_GRAPH_LAYOUTS must be one of both, native, transposed; got 'NCHW'",
        "a bad UCUDNN_GRAPH_LAYOUTS names the variable, the values and the value found");
  for (const char* name : {"UCUDNN_ENGINES", "UCUDNN_GRAPH_PRUNE_FACTOR", "UCUDNN_GRAPH_SEARCH",
                           "UCUDNN_GRAPH_LAYOUTS"}) {
    unsetenv(name);
  }
  Check(ReadEngineKnobs(&knobs).ok() && knobs.engines == EngineSet::kAuto &&
            knobs.graph == GraphSearchKnobs(),
        "unset knobs read as the defaults");
  XlaWorkspace where = XlaWorkspace::kBuffer;
  Check(ParseXlaWorkspace("scratch", &where) && where == XlaWorkspace::kScratch &&
            ParseXlaWorkspace("buffer", &where) && where == XlaWorkspace::kBuffer &&
            !ParseXlaWorkspace("arena", &where) && where == XlaWorkspace::kBuffer,
        "UCUDNN_XLA_WORKSPACE is scratch or buffer, and a bad value leaves it");
  setenv("UCUDNN_XLA_WORKSPACE", "buffer", 1);
  Check(ReadXlaWorkspace(&where).ok() && where == XlaWorkspace::kBuffer,
        "ReadXlaWorkspace reads UCUDNN_XLA_WORKSPACE");
  CheckRefused("UCUDNN_XLA_WORKSPACE", "arena", [&] { return ReadXlaWorkspace(&where); },
               "UCUDNN_XLA_WORKSPACE must be one of scratch, buffer; got 'arena'");
  Check(ReadXlaWorkspace(&where).ok() && where == XlaWorkspace::kScratch, "unset: scratch");
  bool pad = false;
  Check(ReadXlaPadChannels(&pad).ok() && pad, "UCUDNN_XLA_PAD_CHANNELS unset: on");
  setenv("UCUDNN_XLA_PAD_CHANNELS", "off", 1);
  Check(ReadXlaPadChannels(&pad).ok() && !pad, "ReadXlaPadChannels reads off");
  CheckRefused("UCUDNN_XLA_PAD_CHANNELS", "8", [&] { return ReadXlaPadChannels(&pad); },
               "UCUDNN_XLA_PAD_CHANNELS must be one of on, off; got '8'");
  StatisticsMode statistics = StatisticsMode::kTimed;
  Check(ReadStatisticsMode(&statistics).ok() && statistics == StatisticsMode::kFused,
        "UCUDNN_STATISTICS unset: fused");
  setenv("UCUDNN_STATISTICS", "unfused", 1);
  Check(ReadStatisticsMode(&statistics).ok() && statistics == StatisticsMode::kUnfused,
        "ReadStatisticsMode reads unfused");
  Check(ParseStatisticsMode("timed", &statistics) && statistics == StatisticsMode::kTimed &&
            !ParseStatisticsMode("auto", &statistics) && statistics == StatisticsMode::kTimed,
        "UCUDNN_STATISTICS is fused, timed or unfused, and a bad value leaves it");
  CheckRefused("UCUDNN_STATISTICS", "after", [&] { return ReadStatisticsMode(&statistics); },
               "UCUDNN_STATISTICS must be one of fused, timed, unfused; got 'after'");
  CheckRefused("UCUDNN_STATISTICS", "after", [&] { return ReadEngineKnobs(&knobs); },
               "UCUDNN_STATISTICS must be one of fused, timed, unfused; got 'after'");
  bool retime = false;
  Check(ReadGraphRetime(&retime).ok() && retime, "UCUDNN_GRAPH_RETIME unset: on");
  setenv("UCUDNN_GRAPH_RETIME", "off", 1);
  Check(ReadGraphRetime(&retime).ok() && !retime, "ReadGraphRetime reads off");
  CheckRefused("UCUDNN_GRAPH_RETIME", "5", [&] { return ReadGraphRetime(&retime); },
               "UCUDNN_GRAPH_RETIME must be one of on, off; got '5'");
  int threads = 0;
  Check(ReadPlanBuildThreads(&threads).ok() && threads >= 1 &&
            threads <= kDefaultPlanBuildThreads,
        "UCUDNN_PLAN_BUILD_THREADS unset: the default, at most the host's threads");
  setenv("UCUDNN_PLAN_BUILD_THREADS", " 3 ", 1);
  Check(ReadPlanBuildThreads(&threads).ok() && threads == 3, "ReadPlanBuildThreads reads 3");
  Check(ParsePlanBuildThreads("64", &threads) && threads == 64 &&
            !ParsePlanBuildThreads("0", &threads) && !ParsePlanBuildThreads("65", &threads) &&
            !ParsePlanBuildThreads("2.5", &threads) && !ParsePlanBuildThreads("-1", &threads) &&
            !ParsePlanBuildThreads("", &threads) && !ParsePlanBuildThreads("100", &threads) &&
            threads == 64,
        "UCUDNN_PLAN_BUILD_THREADS is a whole number from 1 to 64, and a bad value leaves it");
  CheckRefused("UCUDNN_PLAN_BUILD_THREADS", "0", [&] { return ReadPlanBuildThreads(&threads); },
               "UCUDNN_PLAN_BUILD_THREADS must be a whole number from 1 to 64; got '0'");
  CheckRefused("UCUDNN_PLAN_BUILD_THREADS", "many", [&] { return ReadEngineKnobs(&knobs); },
               "UCUDNN_PLAN_BUILD_THREADS must be a whole number from 1 to 64; got 'many'");
  int64_t limit = 0;
  setenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", " 1024 ", 1);
  Check(ReadDefaultWorkspaceLimit(&limit).ok() && limit == 1024, "a workspace limit in bytes");
  setenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "-1", 1);
  Check(!ReadDefaultWorkspaceLimit(&limit).ok(), "a negative workspace limit is refused");
  setenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", " auto ", 1);
  Check(ReadDefaultWorkspaceLimit(&limit).ok() && limit == kAutoWorkspaceLimit,
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT=auto follows free memory");
  CheckRefused("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "autos",
               [&] { return ReadDefaultWorkspaceLimit(&limit); },
               "UCUDNN_DEFAULT_WORKSPACE_LIMIT must be a byte count such as 67108864, 64MiB or "
               "1GiB (binary units B, KiB, MiB, GiB) or auto; got 'autos'");
  // The byte forms of tf_ucudnn/units.py's parse_bytes, in both variables.
  setenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "64MiB", 1);
  Check(ReadDefaultWorkspaceLimit(&limit).ok() && limit == 64LL << 20,
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT=64MiB is 64 MiB");
  setenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "AUTO", 1);
  Check(ReadDefaultWorkspaceLimit(&limit).ok() && limit == kAutoWorkspaceLimit,
        "auto in any case, as the Python argument");
  setenv("UCUDNN_TOTAL_WORKSPACE_SIZE", " 1 GiB ", 1);
  int64_t total = 0;
  Check(ReadTotalWorkspaceSize(&total).ok() && total == 1LL << 30,
        "UCUDNN_TOTAL_WORKSPACE_SIZE=' 1 GiB ' is 1 GiB");
  CheckRefused("UCUDNN_TOTAL_WORKSPACE_SIZE", "64MB", [&] { return ReadTotalWorkspaceSize(&total); },
               "UCUDNN_TOTAL_WORKSPACE_SIZE must be a byte count such as 67108864, 64MiB or "
               "1GiB (binary units B, KiB, MiB, GiB); got '64MB'");
  unsetenv("UCUDNN_TOTAL_WORKSPACE_SIZE");
  const std::pair<const char*, int64_t> good[] = {
      {"67108864", 64LL << 20}, {"64mib", 64LL << 20}, {"64 M", 64LL << 20},
      {"1.5KiB", 1536},         {"100B", 100},         {"2g", 2LL << 30},
      {"0", 0},                 {"0.5K", 512},         {"9223372036854775807", INT64_MAX}};
  for (const auto& [text, want] : good) {
    int64_t got = -7;
    Check(ParseByteCount(text, &got) && got == want, text);
  }
  for (const char* bad : {"", "lots", "-1", "64MB", "1.3B", "0.1K", "1e6", "8GiB8",
                          "9223372036854775808", "8589934592GiB", "1.", ".5K", "+5"}) {
    int64_t got = -7;
    Check(!ParseByteCount(bad, &got) && got == -7, bad);
  }
  unsetenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT");
  Check(ReadDefaultWorkspaceLimit(&limit).ok() && limit == kDefaultWorkspaceLimit,
        "unset: 64 MiB");

  // The op attributes' sentinels, resolved in one place.
  {
    setenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "32MiB", 1);
    setenv("UCUDNN_TOTAL_WORKSPACE_SIZE", "1GiB", 1);
    PlanningKnobs k;
    KnobAttributes from_env;  // workspace_limit and total_workspace -1, policy ""
    Check(ResolvePlanningKnobs(from_env, &k).ok() && k.workspace_limit == 32LL << 20 &&
              k.total_workspace == 1LL << 30 && k.BenchmarkLimit() == 1LL << 30 &&
              k.policy == BatchSizePolicy::kPowerOfTwo,
          "-1 takes both defaults from the environment; the group is benchmarked within its total");
    KnobAttributes own_limit;
    own_limit.workspace_limit = 4096;
    Check(ResolvePlanningKnobs(own_limit, &k).ok() && k.workspace_limit == 4096 &&
              k.total_workspace == 0 && k.BenchmarkLimit() == 4096,
          "an op's own limit keeps it out of the environment's group");
    KnobAttributes automatic;
    automatic.workspace_limit = kAutoWorkspaceLimit;
    automatic.total_workspace = 0;
    automatic.batch_size_policy = "all";
    Check(ResolvePlanningKnobs(automatic, &k).ok() && k.workspace_limit == kAutoWorkspaceLimit &&
              k.policy == BatchSizePolicy::kAll,
          "-2 stays auto, resolved when the kernel is planned");
    KnobAttributes forced;
    forced.total_workspace = 2048;
    forced.micro_batch_size = 8;
    Check(ResolvePlanningKnobs(forced, &k).ok() && k.workspace_limit == 2048 &&
              k.total_workspace == 0 && k.micro_batch_size == 8,
          "a forced micro-batch size takes the total as its per-kernel limit");
    KnobAttributes both;
    both.workspace_limit = 100;
    both.total_workspace = 5;
    const Status s = ResolvePlanningKnobs(both, &k);
    Check(!s.ok() && s.message().find("not both") != std::string::npos, "limit and total: refused");
    KnobAttributes bad_policy;
    bad_policy.batch_size_policy = "bogus";
    Check(!ResolvePlanningKnobs(bad_policy, &k).ok(), "an unknown policy is refused");
    unsetenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT");
    unsetenv("UCUDNN_TOTAL_WORKSPACE_SIZE");
  }

  // workspace_limit=auto: free memory less a margin, within [0, 8 GiB].
  const int64_t MiB = 1 << 20, GiB = 1LL << 30;
  Check(AutoWorkspaceLimit(-1, 16 * GiB) == kDefaultWorkspaceLimit,
        "auto with free memory unknown: the fixed default");
  Check(AutoWorkspaceLimit(4 * GiB, 16 * GiB) == 3 * GiB,
        "auto keeps 1/16 of a 16 GiB pool free: 4 GiB free gives 3 GiB");
  Check(AutoWorkspaceLimit(512 * MiB, 512 * MiB) == 448 * MiB,
        "auto keeps at least 64 MiB free");
  Check(AutoWorkspaceLimit(32 * MiB, 8 * GiB) == 0, "auto with less free than the margin: 0");
  Check(AutoWorkspaceLimit(100 * GiB, 140 * GiB) == kAutoWorkspaceCap,
        "auto never exceeds TF's default limit, 8 GiB");
  Check(WorkspaceLimitName(kAutoWorkspaceLimit) == "auto" && WorkspaceLimitName(1024) == "1024",
        "WorkspaceLimitName");

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


  return ucudnn_test::Summary("knobs_test");
}
