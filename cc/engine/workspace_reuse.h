// Workspace Reuse (WR, Oyama et al. §III-B): the fastest plan of one kernel
// within its own workspace limit, and the forced plans of a fixed
// micro-batch size. Pure C++, no TensorFlow, no GPU.
#ifndef TF_UCUDNN_ENGINE_WORKSPACE_REUSE_H_
#define TF_UCUDNN_ENGINE_WORKSPACE_REUSE_H_

#include <cstdint>

#include "cc/engine/plan.h"

namespace ucudnn {

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

// Workspace Reuse within `workspace_limit`, the accumulator counted: the
// faster of the best undivided plan and the best plan of several
// micro-batches whose cuDNN workspace fits in the limit less the accumulator.
Plan BestPlanWithAccumulator(const PerfTable& table, int64_t batch_size, int64_t workspace_limit,
                             int64_t accumulator_bytes);
// ForcedPlan with the accumulator counted where it fits; a forced plan that
// has no room for it is ForcedPlan's (it then accumulates in the element type).
Plan ForcedPlanWithAccumulator(const PerfTable& table, int64_t batch_size, int64_t max_size,
                               int64_t workspace_limit, int64_t accumulator_bytes);
}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_WORKSPACE_REUSE_H_
