#include "cc/engine/workspace_reuse.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "cc/engine/table_merging.h"

namespace ucudnn {

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

Plan UniformPlan(int64_t batch_size, int64_t max_size) {
  Plan plan;
  const int64_t k = max_size > 0 ? std::min(max_size, batch_size) : batch_size;
  for (int64_t done = 0; done < batch_size; done += k) {
    plan.micro_batches.push_back({std::min(k, batch_size - done), 0, 0.0, 0});
  }
  return plan;
}

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

}  // namespace ucudnn
