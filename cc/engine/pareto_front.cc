#include "cc/engine/pareto_front.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "cc/engine/workspace_reuse.h"

namespace ucudnn {

namespace {

// One point of a desirable set D(n), linked to the point of D(n - size) it extends.
struct FrontPoint {
  double time_ms;
  int64_t workspace_bytes;
  int64_t size;        // the last micro-batch; 0 for the empty plan
  AlgoPerf perf;       // its algorithm
  int64_t prev_n;      // n - size
  int prev_index;      // index into D(n - size)
};

// Keeps the non-dominated points, by workspace ascending with strictly
// decreasing time.
std::vector<FrontPoint> Prune(std::vector<FrontPoint> points) {
  std::sort(points.begin(), points.end(), [](const FrontPoint& a, const FrontPoint& b) {
    if (a.workspace_bytes != b.workspace_bytes) return a.workspace_bytes < b.workspace_bytes;
    if (a.time_ms != b.time_ms) return a.time_ms < b.time_ms;
    return a.size > b.size;  // equal points: keep the larger micro-batch
  });
  std::vector<FrontPoint> front;
  for (const FrontPoint& p : points) {
    if (front.empty() || p.time_ms < front.back().time_ms) front.push_back(p);
  }
  return front;
}

}  // namespace

std::vector<Plan> ParetoFront(const PerfTable& table, int64_t batch_size) {
  std::vector<Plan> plans;
  if (batch_size <= 0) return plans;
  if (batch_size > kSmallBatch) {
    // No desirable set per n (hundreds of bytes per sample): the front is the
    // Workspace Reuse plan of each workspace cap the table holds, keeping
    // those faster than every smaller cap's. WR's plan within a cap is the
    // fastest within it with the least workspace, so these are exactly the
    // non-dominated (time, workspace) points.
    std::vector<int64_t> caps;
    for (const auto& [b, perfs] : table) {
      if (b <= 0 || b > batch_size) continue;
      for (const AlgoPerf& p : perfs) caps.push_back(p.workspace_bytes);
    }
    std::sort(caps.begin(), caps.end());
    caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
    for (int64_t cap : caps) {
      Plan plan = BestPlan(table, batch_size, cap);
      if (plan.empty()) continue;
      if (plans.empty() || plan.time_ms < plans.back().time_ms) plans.push_back(std::move(plan));
    }
    return plans;
  }
  // Per size, only the algorithms on that size's own front can matter.
  std::vector<std::pair<int64_t, std::vector<AlgoPerf>>> per_size;
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    if (it->first <= 0 || it->first > batch_size) continue;
    std::vector<FrontPoint> pts;
    for (const AlgoPerf& p : it->second) {
      pts.push_back({p.time_ms, p.workspace_bytes, it->first, p, 0, 0});
    }
    std::vector<AlgoPerf> algos;
    for (const FrontPoint& p : Prune(pts)) algos.push_back(p.perf);
    if (!algos.empty()) per_size.emplace_back(it->first, algos);
  }
  std::vector<std::vector<FrontPoint>> fronts(batch_size + 1);
  fronts[0].push_back({0.0, 0, 0, AlgoPerf(), 0, 0});
  for (int64_t n = 1; n <= batch_size; ++n) {
    std::vector<FrontPoint> candidates;
    for (const auto& entry : per_size) {
      const int64_t b = entry.first;
      if (b > n) continue;
      const std::vector<FrontPoint>& rest = fronts[n - b];
      for (int i = 0; i < static_cast<int>(rest.size()); ++i) {
        for (const AlgoPerf& perf : entry.second) {
          candidates.push_back({rest[i].time_ms + perf.time_ms,
                                std::max(rest[i].workspace_bytes, perf.workspace_bytes), b,
                                perf, n - b, i});
        }
      }
    }
    fronts[n] = Prune(std::move(candidates));
  }
  for (const FrontPoint& end : fronts[batch_size]) {
    Plan plan;
    const FrontPoint* p = &end;
    while (p->size > 0) {
      AppendMicroBatch(&plan, p->size, p->perf);
      p = &fronts[p->prev_n][p->prev_index];
    }
    SortLargerFirst(&plan);
    // Keep the front's own totals: the same sums, taken in the recurrence's order.
    plan.time_ms = end.time_ms;
    plan.workspace_bytes = end.workspace_bytes;
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::vector<Plan> ParetoFrontWithAccumulator(const PerfTable& table, int64_t batch_size,
                                             int64_t accumulator_bytes) {
  std::vector<Plan> front = ParetoFront(table, batch_size);
  if (accumulator_bytes == 0) return front;
  std::vector<Plan> points;
  for (Plan& plan : front) {
    if (plan.micro_batches.size() > 1) AddAccumulator(&plan, accumulator_bytes);
    points.push_back(std::move(plan));
  }
  // Undivided plans dominated only by divided ones may be on the front now.
  auto whole = table.find(batch_size);
  if (whole != table.end()) {
    for (const AlgoPerf& a : whole->second) {
      Plan plan;
      plan.micro_batches.push_back({batch_size, a.algo, a.time_ms, a.workspace_bytes});
      plan.time_ms = a.time_ms;
      plan.workspace_bytes = a.workspace_bytes;
      points.push_back(std::move(plan));
    }
  }
  std::stable_sort(points.begin(), points.end(), [](const Plan& a, const Plan& b) {
    if (a.workspace_bytes != b.workspace_bytes) return a.workspace_bytes < b.workspace_bytes;
    if (a.time_ms != b.time_ms) return a.time_ms < b.time_ms;
    return a.micro_batches.size() < b.micro_batches.size();
  });
  std::vector<Plan> kept;
  for (Plan& plan : points) {
    if (kept.empty() || plan.time_ms < kept.back().time_ms) kept.push_back(std::move(plan));
  }
  return kept;
}

}  // namespace ucudnn
