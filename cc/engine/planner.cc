#include "cc/engine/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <set>
#include <utility>

#include "cc/engine/names.h"

namespace ucudnn {

namespace {
constexpr Name<BatchSizePolicy> kPolicyNames[] = {{"undivided", BatchSizePolicy::kUndivided},
                                                  {"powerOfTwo", BatchSizePolicy::kPowerOfTwo},
                                                  {"all", BatchSizePolicy::kAll}};
}  // namespace

bool ParseBatchSizePolicy(const std::string& name, BatchSizePolicy* policy) {
  return ParseName(kPolicyNames, name, policy);
}

const char* BatchSizePolicyName(BatchSizePolicy policy) { return NameOf(kPolicyNames, policy); }

Plan UniformPlan(int64_t batch_size, int64_t max_size) {
  Plan plan;
  const int64_t k = max_size > 0 ? std::min(max_size, batch_size) : batch_size;
  for (int64_t done = 0; done < batch_size; done += k) {
    plan.micro_batches.push_back({std::min(k, batch_size - done), 0, 0.0, 0});
  }
  return plan;
}

std::vector<int64_t> MicroBatchSizes(BatchSizePolicy policy, int64_t batch_size) {
  std::vector<int64_t> sizes;
  if (batch_size <= 0) return sizes;
  switch (policy) {
    case BatchSizePolicy::kUndivided:
      sizes.push_back(batch_size);
      break;
    case BatchSizePolicy::kPowerOfTwo:
      for (int64_t b = 1; b < batch_size; b *= 2) {
        sizes.push_back(b);
        if (b > batch_size / 2) break;  // b * 2 would pass batch_size (and could overflow)
      }
      sizes.push_back(batch_size);
      break;
    case BatchSizePolicy::kAll:
      for (int64_t b = 1; b <= batch_size; ++b) sizes.push_back(b);
      break;
  }
  return sizes;
}

bool AllowedMicroBatchSize(BatchSizePolicy policy, int64_t batch_size, int64_t size) {
  if (size <= 0 || size > batch_size) return false;
  switch (policy) {
    case BatchSizePolicy::kUndivided: return size == batch_size;
    case BatchSizePolicy::kPowerOfTwo: return size == batch_size || (size & (size - 1)) == 0;
    case BatchSizePolicy::kAll: return true;
  }
  return false;
}

int64_t MicroBatchSizeCount(BatchSizePolicy policy, int64_t batch_size) {
  if (batch_size <= 0) return 0;
  switch (policy) {
    case BatchSizePolicy::kUndivided: return 1;
    case BatchSizePolicy::kPowerOfTwo: {
      int64_t count = 1;  // batch_size itself
      for (int64_t b = 1; b < batch_size; b *= 2) {
        ++count;
        if (b > batch_size / 2) break;  // b * 2 would pass batch_size (and could overflow)
      }
      return count;
    }
    case BatchSizePolicy::kAll: return batch_size;
  }
  return 0;
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

PerfTable RestrictTable(const PerfTable& table, BatchSizePolicy policy, int64_t batch_size) {
  PerfTable out;
  for (const auto& [b, perfs] : table) {
    if (AllowedMicroBatchSize(policy, batch_size, b)) out[b] = perfs;
  }
  return out;
}

namespace {

// One usable micro-batch size of Workspace Reuse: its fastest algorithm within
// the limit.
struct Candidate {
  int64_t size;
  const AlgoPerf* perf;
};

// Per size of the table in (0, batch_size], its fastest algorithm within the
// limit; larger sizes first, so that a tie keeps the larger micro-batch.
std::vector<Candidate> Candidates(const PerfTable& table, int64_t batch_size, int64_t limit) {
  std::vector<Candidate> candidates;
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    if (it->first <= 0 || it->first > batch_size) continue;
    const AlgoPerf* best = FastestWithin(it->second, limit);
    if (best != nullptr) candidates.push_back({it->first, best});
  }
  return candidates;
}

bool IsPowerOfTwo(int64_t b) { return b > 0 && (b & (b - 1)) == 0; }

// The recurrence over every n in [0, batch_size]: 20 bytes per sample.
Plan DenseBestPlan(const std::vector<Candidate>& candidates, int64_t batch_size) {
  Plan plan;
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> time(batch_size + 1, kInf);
  std::vector<int64_t> workspace(batch_size + 1, 0);
  std::vector<int> choice(batch_size + 1, -1);
  time[0] = 0;
  for (int64_t n = 1; n <= batch_size; ++n) {
    for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
      const int64_t b = candidates[i].size;
      if (b > n || time[n - b] == kInf) continue;
      const AlgoPerf& perf = *candidates[i].perf;
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
    const Candidate& c = candidates[choice[n]];
    AppendMicroBatch(&plan, c.size, *c.perf);
    n -= c.size;
  }
  SortLargerFirst(&plan);
  return plan;
}

// The fastest multiset of power-of-two sizes (and the whole batch) adding up
// to N, by the micro-batch counts of each power of two. See
// PowerOfTwoMinTime.
struct PowerOfTwoSolution {
  bool feasible = false;
  double time_ms = 0;
  bool whole = false;              // one micro-batch of N (N not a power of two)
  std::vector<int64_t> counts;     // counts[j]: micro-batches of 2^j
};

// Minimum time of a plan of `candidates`, whose sizes are powers of two or N,
// in O(k^2) for powers up to 2^(k-1), whatever N. With c_j micro-batches of
// 2^j, let q_j 2^j be what the sizes below 2^j contribute beyond N mod 2^j
// (the "carry" into bit j; q_0 = 0, q_k = N >> k since there is no larger
// size). Then c_j = 2 q_(j+1) + bit_j(N) - q_j >= 0, c_j = 0 for a size
// without an algorithm, and the time sum_j c_j t_j is linear in the q's over a
// chain of intervals 0 <= q_j <= 2 q_(j+1) + bit_j(N): an optimum lies at a
// vertex, where each q_j is 0 or 2 q_(j+1) + bit_j(N). The q values such
// vertices reach at bit j are N >> j or (N mod 2^i) >> j for i > j, at most
// k + 1 of them, so a DP over bits with those states is exact. Among equally
// fast plans it keeps the larger micro-batches (the most micro-batches of the
// largest size, then of the next, ...); one micro-batch of N wins ties.
PowerOfTwoSolution PowerOfTwoMinTime(const std::vector<Candidate>& candidates, int64_t n) {
  PowerOfTwoSolution best;
  double whole_time = -1;
  int levels = 0;  // k: sizes up to 2^(k-1)
  std::vector<double> t(63, -1);
  for (const Candidate& c : candidates) {
    if (IsPowerOfTwo(c.size)) {
      const int j = 63 - __builtin_clzll(static_cast<uint64_t>(c.size));
      t[j] = c.perf->time_ms;
      levels = std::max(levels, j + 1);
    } else if (c.size == n) {
      whole_time = c.perf->time_ms;
    }
  }
  if (levels > 0) {
    struct State {
      int64_t q;
      double time;
      std::vector<int64_t> counts;
    };
    // Larger micro-batches first: compare counts from the largest size down.
    auto larger_first = [levels](const State& a, const State& b) {
      for (int j = levels - 1; j >= 0; --j) {
        if (a.counts[j] != b.counts[j]) return a.counts[j] > b.counts[j];
      }
      return false;
    };
    std::vector<State> states = {{levels >= 63 ? 0 : n >> levels, 0.0,
                                  std::vector<int64_t>(levels, 0)}};
    for (int j = levels - 1; j >= 0; --j) {
      std::vector<State> next;
      auto offer = [&](State s) {
        for (State& o : next) {
          if (o.q != s.q) continue;
          if (s.time < o.time || (s.time == o.time && larger_first(s, o))) o = std::move(s);
          return;
        }
        next.push_back(std::move(s));
      };
      const int64_t bit = (n >> j) & 1;
      for (const State& s : states) {
        const int64_t full = 2 * s.q + bit;  // <= n >> j: no overflow
        if (t[j] >= 0) {
          // All of it as micro-batches of 2^j: q_j = 0.
          State use = s;
          use.q = 0;
          use.counts[j] = full;
          use.time += static_cast<double>(full) * t[j];
          offer(std::move(use));
        }
        // None of 2^j: everything is carried to the smaller sizes; nothing
        // is left to carry below the smallest (q_0 = 0).
        if (j > 0 || full == 0) {
          State carry = s;
          carry.q = j > 0 ? full : 0;
          offer(std::move(carry));
        }
      }
      states = std::move(next);
    }
    for (State& s : states) {
      if (s.q != 0) continue;
      best.feasible = true;
      best.time_ms = s.time;
      best.counts = std::move(s.counts);
    }
  }
  if (whole_time >= 0 && (!best.feasible || whole_time <= best.time_ms)) {
    best.feasible = true;
    best.whole = true;
    best.time_ms = whole_time;
    best.counts.clear();
  }
  return best;
}

// BestPlan of a table whose candidate sizes are powers of two or N: the
// fastest plan, and among those the one with the least workspace (the
// smallest workspace cap that still reaches the fastest time), then larger
// micro-batches. Memory: the candidates, and the plan it returns.
Plan PowerOfTwoBestPlanOf(const std::vector<Candidate>& candidates, int64_t n) {
  const PowerOfTwoSolution fastest = PowerOfTwoMinTime(candidates, n);
  if (!fastest.feasible) return Plan();
  std::vector<int64_t> caps;
  for (const Candidate& c : candidates) caps.push_back(c.perf->workspace_bytes);
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  for (int64_t cap : caps) {
    std::vector<Candidate> within;
    for (const Candidate& c : candidates) {
      if (c.perf->workspace_bytes <= cap) within.push_back(c);
    }
    const PowerOfTwoSolution s = PowerOfTwoMinTime(within, n);
    if (!s.feasible || s.time_ms != fastest.time_ms) continue;
    Plan plan;
    for (const Candidate& c : within) {  // larger first
      if (s.whole) {
        if (c.size == n) AppendMicroBatch(&plan, c.size, *c.perf);
      } else if (IsPowerOfTwo(c.size)) {
        const int j = 63 - __builtin_clzll(static_cast<uint64_t>(c.size));
        for (int64_t i = 0; i < s.counts[j]; ++i) AppendMicroBatch(&plan, c.size, *c.perf);
      }
    }
    return plan;
  }
  return Plan();  // not reached: the largest cap admits every candidate
}

}  // namespace

bool PowerOfTwoTable(const PerfTable& table, int64_t batch_size) {
  for (const auto& [b, perfs] : table) {
    if (b > 0 && b <= batch_size && b != batch_size && !IsPowerOfTwo(b)) return false;
  }
  return true;
}

bool PlanTooLarge(const PerfTable& table, int64_t batch_size) {
  return batch_size > kMaxDenseBatch && !PowerOfTwoTable(table, batch_size);
}

Plan PowerOfTwoBestPlan(const PerfTable& table, int64_t batch_size, int64_t workspace_limit) {
  if (batch_size <= 0 || !PowerOfTwoTable(table, batch_size)) return Plan();
  return PowerOfTwoBestPlanOf(Candidates(table, batch_size, workspace_limit), batch_size);
}

Plan BestPlan(const PerfTable& table, int64_t batch_size, int64_t workspace_limit) {
  if (batch_size <= 0) return Plan();
  const std::vector<Candidate> candidates = Candidates(table, batch_size, workspace_limit);
  // Mini-batches of realistic size: the recurrence over every n, as always.
  // Larger ones must not cost memory per sample: power-of-two tables (the
  // default policy's) are solved over bits; other tables up to kMaxDenseBatch.
  if (batch_size <= kSmallBatch) return DenseBestPlan(candidates, batch_size);
  if (PowerOfTwoTable(table, batch_size)) return PowerOfTwoBestPlanOf(candidates, batch_size);
  if (batch_size <= kMaxDenseBatch) return DenseBestPlan(candidates, batch_size);
  return Plan();  // PlanTooLarge
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

namespace {

int64_t RoundUpTo(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// A plan of several micro-batches with the accumulator after its workspace.
void AddAccumulator(Plan* plan, int64_t bytes) {
  plan->workspace_bytes = RoundUpTo(plan->workspace_bytes, kAccumulatorAlign) + bytes;
  plan->accumulator_bytes = bytes;
}

// The limit left to the cuDNN workspace of a plan with the accumulator.
int64_t LimitBeside(int64_t workspace_limit, int64_t accumulator_bytes) {
  return (workspace_limit - accumulator_bytes) / kAccumulatorAlign * kAccumulatorAlign;
}

}  // namespace

int64_t FloatAccumulatorBytes(int64_t filter_elements) {
  return RoundUpTo(filter_elements * 4, kAccumulatorAlign) + kAccumulatorAlign;
}

Plan BestPlanWithAccumulator(const PerfTable& table, int64_t batch_size, int64_t workspace_limit,
                             int64_t accumulator_bytes) {
  if (accumulator_bytes == 0) return BestPlan(table, batch_size, workspace_limit);
  // One micro-batch needs no accumulator; several need it next to their
  // workspace, so their cuDNN workspace gets the limit less the accumulator.
  const Plan whole = BestPlan(RestrictTable(table, {batch_size}), batch_size, workspace_limit);
  Plan split;
  if (workspace_limit >= accumulator_bytes) {
    split = BestPlan(table, batch_size, LimitBeside(workspace_limit, accumulator_bytes));
    if (split.micro_batches.size() == 1) split = Plan();  // `whole` has more room for it
  }
  if (split.empty() || (!whole.empty() && whole.time_ms <= split.time_ms)) return whole;
  AddAccumulator(&split, accumulator_bytes);
  return split;
}

Plan ForcedPlanWithAccumulator(const PerfTable& table, int64_t batch_size, int64_t max_size,
                               int64_t workspace_limit, int64_t accumulator_bytes) {
  if (accumulator_bytes > 0 && max_size < batch_size && workspace_limit >= accumulator_bytes) {
    Plan plan = ForcedPlan(table, batch_size, max_size,
                           LimitBeside(workspace_limit, accumulator_bytes));
    if (!plan.empty()) {
      AddAccumulator(&plan, accumulator_bytes);
      return plan;
    }
  }
  // One micro-batch, no accumulator, or no room for it: a forced plan that
  // does not fit it accumulates in the element type, as cuDNN does.
  return ForcedPlan(table, batch_size, max_size, workspace_limit);
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

std::vector<int64_t> SizesToBenchmark(const PerfTable& stored, const std::vector<int64_t>& sizes,
                                      int64_t first_graph_size, bool small_sizes_where_limited) {
  std::vector<int64_t> missing;
  bool large_missing = false;
  for (int64_t size : sizes) {
    if (stored.count(size)) continue;
    missing.push_back(size);
    if (size >= first_graph_size) large_missing = true;
  }
  if (small_sizes_where_limited && !large_missing) return {};
  return missing;
}

void MergePrunedEngines(PrunedEngines* into, const PrunedEngines& from) {
  for (const auto& [name, size] : from) {
    auto [it, added] = into->emplace(name, size);
    if (!added) it->second = std::min(it->second, size);
  }
}

std::vector<int> NeighbourCandidates(const PerfTable& stored, int64_t size,
                                     int64_t workspace_slack) {
  const auto above = stored.upper_bound(size);
  if (above == stored.end() || above == stored.begin()) return {};
  auto below = std::prev(above);
  if (below->first == size) {  // stored already: its neighbours are the sizes around it
    if (below == stored.begin()) return {};
    below = std::prev(below);
  }
  std::vector<int> out;
  for (const auto* row : {&below->second, &above->second}) {
    for (const AlgoPerf& perf : *row) {
      const bool beaten = std::any_of(row->begin(), row->end(), [&](const AlgoPerf& other) {
        return other.time_ms < perf.time_ms &&
               other.workspace_bytes <= perf.workspace_bytes + workspace_slack;
      });
      if (!beaten && std::find(out.begin(), out.end(), perf.algo) == out.end()) {
        out.push_back(perf.algo);
      }
    }
  }
  return out;
}

std::set<std::string> PrunedBelow(const PrunedEngines& pruned, int64_t size) {
  std::set<std::string> out;
  for (const auto& [name, at] : pruned) {
    if (at < size) out.insert(name);
  }
  return out;
}

}  // namespace ucudnn
