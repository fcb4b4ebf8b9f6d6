#include "cc/kernels/engine/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>

namespace ucudnn {

namespace {

// A knob's values and their names, in one table for parsing and printing.
template <typename T>
using Name = std::pair<const char*, T>;

constexpr Name<BatchSizePolicy> kPolicyNames[] = {{"undivided", BatchSizePolicy::kUndivided},
                                                  {"powerOfTwo", BatchSizePolicy::kPowerOfTwo},
                                                  {"all", BatchSizePolicy::kAll}};
constexpr Name<EngineSet> kEngineSetNames[] = {
    {"all", EngineSet::kAll}, {"legacy", EngineSet::kLegacy}, {"graph", EngineSet::kGraph}};
constexpr Name<bool> kGraphSearchNames[] = {{"default", false}, {"exhaustive", true}};
constexpr Name<GraphLayouts> kGraphLayoutNames[] = {{"both", GraphLayouts::kBoth},
                                                    {"native", GraphLayouts::kNative},
                                                    {"transposed", GraphLayouts::kTransposed}};

// Sets *out to the value named `text`; false (leaving *out) if none is.
template <typename T, size_t N>
bool ParseName(const Name<T> (&names)[N], const std::string& text, T* out) {
  for (const auto& [name, value] : names) {
    if (text == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

template <typename T, size_t N>
const char* NameOf(const Name<T> (&names)[N], T value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}

}  // namespace

bool ParseBatchSizePolicy(const std::string& name, BatchSizePolicy* policy) {
  return ParseName(kPolicyNames, name, policy);
}

const char* BatchSizePolicyName(BatchSizePolicy policy) { return NameOf(kPolicyNames, policy); }

bool ParseGraphPruneFactor(const std::string& text, double* factor) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(v == 0 || v >= 1) || !std::isfinite(v)) return false;
  *factor = v;
  return true;
}

bool ParseGraphSearch(const std::string& text, bool* exhaustive) {
  return ParseName(kGraphSearchNames, text, exhaustive);
}

bool ParseGraphLayouts(const std::string& text, GraphLayouts* layouts) {
  return ParseName(kGraphLayoutNames, text, layouts);
}

bool ParseEngineSet(const std::string& name, EngineSet* engines) {
  return ParseName(kEngineSetNames, name, engines);
}

const char* EngineSetName(EngineSet engines) { return NameOf(kEngineSetNames, engines); }

std::vector<int64_t> MicroBatchSizes(BatchSizePolicy policy, int64_t batch_size) {
  std::vector<int64_t> sizes;
  if (batch_size <= 0) return sizes;
  switch (policy) {
    case BatchSizePolicy::kUndivided:
      sizes.push_back(batch_size);
      break;
    case BatchSizePolicy::kPowerOfTwo:
      for (int64_t b = 1; b < batch_size; b *= 2) sizes.push_back(b);
      sizes.push_back(batch_size);
      break;
    case BatchSizePolicy::kAll:
      for (int64_t b = 1; b <= batch_size; ++b) sizes.push_back(b);
      break;
  }
  return sizes;
}

std::vector<int64_t> ForcedMicroBatchSizes(int64_t batch_size, int64_t max_size) {
  std::vector<int64_t> sizes;
  if (batch_size <= 0 || max_size <= 0) return sizes;
  const int64_t k = std::min(max_size, batch_size);
  const int64_t remainder = batch_size % k;
  if (remainder != 0) sizes.push_back(remainder);
  sizes.push_back(k);
  return sizes;
}

namespace {

// The fastest algorithm at one size within the limit; ties go to less workspace.
const AlgoPerf* FastestWithin(const std::vector<AlgoPerf>& perfs, int64_t limit) {
  const AlgoPerf* best = nullptr;
  for (const AlgoPerf& p : perfs) {
    if (p.workspace_bytes > limit) continue;
    if (best == nullptr || p.time_ms < best->time_ms ||
        (p.time_ms == best->time_ms && p.workspace_bytes < best->workspace_bytes)) {
      best = &p;
    }
  }
  return best;
}

void AppendMicroBatch(Plan* plan, int64_t size, const AlgoPerf& perf) {
  plan->micro_batches.push_back({size, perf.algo, perf.time_ms, perf.workspace_bytes});
  plan->time_ms += perf.time_ms;
  plan->workspace_bytes = std::max(plan->workspace_bytes, perf.workspace_bytes);
}

void SortLargerFirst(Plan* plan) {
  std::stable_sort(plan->micro_batches.begin(), plan->micro_batches.end(),
                   [](const MicroBatch& a, const MicroBatch& b) { return a.size > b.size; });
}

}  // namespace

PerfTable RestrictTable(const PerfTable& table, const std::vector<int64_t>& sizes) {
  PerfTable out;
  for (int64_t b : sizes) {
    auto it = table.find(b);
    if (it != table.end()) out[b] = it->second;
  }
  return out;
}

Plan BestPlan(const PerfTable& table, int64_t batch_size, int64_t workspace_limit) {
  Plan plan;
  if (batch_size <= 0) return plan;
  // Candidates: per size, its fastest algorithm within the limit; larger first
  // so that a tie keeps the larger micro-batch.
  std::vector<std::pair<int64_t, const AlgoPerf*>> candidates;
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    if (it->first <= 0 || it->first > batch_size) continue;
    const AlgoPerf* best = FastestWithin(it->second, workspace_limit);
    if (best != nullptr) candidates.emplace_back(it->first, best);
  }
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> time(batch_size + 1, kInf);
  std::vector<int64_t> workspace(batch_size + 1, 0);
  std::vector<int> choice(batch_size + 1, -1);
  time[0] = 0;
  for (int64_t n = 1; n <= batch_size; ++n) {
    for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
      const int64_t b = candidates[i].first;
      if (b > n || time[n - b] == kInf) continue;
      const AlgoPerf& perf = *candidates[i].second;
      const double t = time[n - b] + perf.time_ms;
      const int64_t w = std::max(workspace[n - b], perf.workspace_bytes);
      if (t < time[n] || (t == time[n] && w < workspace[n])) {
        time[n] = t;
        workspace[n] = w;
        choice[n] = i;
      }
    }
  }
  if (time[batch_size] == kInf) return plan;
  for (int64_t n = batch_size; n > 0;) {
    const auto& c = candidates[choice[n]];
    AppendMicroBatch(&plan, c.first, *c.second);
    n -= c.first;
  }
  SortLargerFirst(&plan);
  return plan;
}

Plan ForcedPlan(const PerfTable& table, int64_t batch_size, int64_t max_size,
                int64_t workspace_limit) {
  Plan plan;
  if (batch_size <= 0 || max_size <= 0) return plan;
  const int64_t k = std::min(max_size, batch_size);
  for (int64_t done = 0; done < batch_size;) {
    const int64_t b = std::min(k, batch_size - done);
    auto it = table.find(b);
    const AlgoPerf* best =
        it == table.end() ? nullptr : FastestWithin(it->second, workspace_limit);
    if (best == nullptr) return Plan();
    AppendMicroBatch(&plan, b, *best);
    done += b;
  }
  return plan;
}

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

}  // namespace ucudnn
