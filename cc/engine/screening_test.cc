// The screening verdicts of screening.h, on times from VGG-16's planning on
// an H200 (docs/results/planning/).
#include "cc/engine/screening.h"

#include "cc/engine/test_checks.h"

using ucudnn_test::Check;

int main() {
  using namespace ucudnn;
  const double kPrune = 2;  // UCUDNN_GRAPH_PRUNE_FACTOR's default

  // float32 backward-data at 8 samples: the generic engine (no workspace,
  // 61.6 ms) against an engine of 131 bytes at 0.2 ms.
  const std::vector<Timed> fast_131 = {{0.2, 131}};
  ScreenVerdict v = Screen(61.6, 0, fast_131, kPrune);
  Check(v.drop && v.prune && !v.screen_only,
        "131 bytes more is within the slack: the slow engine is dropped and pruned");

  // bfloat16 backward-filter at 8 samples: the generic engine (no workspace,
  // 171 ms) against engines of several MiB at 0.5 ms.
  const std::vector<Timed> fast_mib = {{0.5, 4 << 20}, {0.7, 2 << 20}};
  v = Screen(171.2, 0, fast_mib, kPrune);
  Check(!v.drop && v.prune && v.screen_only,
        "far behind but needing less workspace: kept on its screening run, pruned");
  v = Screen(171.2, 0, fast_mib, 0);
  Check(!v.drop && !v.prune && !v.screen_only,
        "UCUDNN_GRAPH_PRUNE_FACTOR=0 times every candidate that is not dropped");

  v = Screen(1.2, 0, fast_mib, kPrune);
  Check(!v.drop && !v.prune && !v.screen_only,
        "2.4x slower with less workspace (beyond the slack) stays on the Pareto front");
  v = Screen(1.2, 8 << 20, fast_mib, kPrune);
  Check(v.drop && v.prune && !v.screen_only, "slower and needing more workspace: dominated");
  v = Screen(0.53, 4 << 20, fast_mib, kPrune);
  Check(!v.drop && !v.prune, "6% slower than the fastest is within noise: timed further");
  v = Screen(0.6, 4 << 20, fast_mib, kPrune);
  Check(v.drop && !v.prune, "20% slower with no less workspace: dropped, not pruned");
  v = Screen(0.3, 0, fast_mib, kPrune);
  Check(!v.drop && !v.prune && !v.screen_only, "the fastest so far is timed further");
  v = Screen(500, 0, {}, kPrune);
  Check(!v.drop && !v.prune && !v.screen_only, "the first candidate at a size is timed");

  // Re-timing near the best: ResNet-50's backward-data 1x1 128->512 at 28²
  // chose eng71 in two processes and eng63 in one, each ahead by >= 7 %.
  const std::vector<Timed> row = {{0.300, 0}, {0.280, 1 << 20}, {0.500, 0}, {0.310, 0}};
  Check(NearBest(row, kRetimeWindow, 4) == std::vector<size_t>({1, 0, 3}),
        "the candidates within 15 % of the fastest, fastest first");
  Check(NearBest(row, kRetimeWindow, 2) == std::vector<size_t>({1, 0}), "at most max_count");
  Check(NearBest({{0.2, 0}, {0.5, 0}}, kRetimeWindow, kRetimeMax).empty() &&
            NearBest({{0.2, 0}}, kRetimeWindow, kRetimeMax).empty() &&
            NearBest({}, kRetimeWindow, kRetimeMax).empty(),
        "a lone best is not timed again");
  Check(Median({3, 1, 2}) == 2 && Median({4, 1, 3, 2}) == 2.5 && Median({}) == 0 &&
            Median({0.31, 0.30, 0.95, 0.29, 0.30}) == 0.30,
        "the median: one slow run does not move it");

  return ucudnn_test::Summary("screening_test");
}
