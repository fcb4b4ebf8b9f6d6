// What planning does with a graph-API candidate after its screening run at a
// micro-batch size, given the candidates already measured at that size: drop
// it, stop timing it at larger sizes, or time it further. Pure C++, tested
// without a GPU (screening_test.cc); graph_candidates.cc applies it.
#ifndef TF_UCUDNN_ENGINE_SCREENING_H_
#define TF_UCUDNN_ENGINE_SCREENING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ucudnn {

// A candidate measured at the size: ms per run and workspace bytes.
struct Timed {
  double time_ms;
  int64_t workspace_bytes;
};

// A screened candidate is dropped when another at the same size needs no more
// workspace and is faster by this factor (a margin for noise).
constexpr double kDominatedFactor = 0.9;
// "No more workspace" allows this much more: a plan never needs to save a few
// KiB (many engines ask for 131 bytes; cuDNN's slow generic engines for none,
// and without the slack they were timed at every size: docs/benchmarks.md,
// planning time).
constexpr int64_t kWorkspaceSlack = 64 << 10;
// A candidate this many times slower than the fastest at its size, whatever
// their workspace, is kept at this size on its screening run alone and not
// timed at larger sizes (where its time grows): cuDNN's generic engine for
// bfloat16 backward-filter needs no workspace, and no other engine does, so it
// was never dominated, and took 1.2-4.0 s a run at 64 samples, 69 s of VGG-16's
// planning (docs/benchmarks.md, planning time).
constexpr double kFarBehindFactor = 10;

struct ScreenVerdict {
  bool prune = false;        // not proposed at the kernel's larger sizes
  bool drop = false;         // not a candidate at this size
  bool screen_only = false;  // kept at this size with its screening time, not timed further
};

// `screen_ms` and `workspace_bytes`: the candidate's screening run; `measured`:
// the size's candidates so far; `prune_factor`: UCUDNN_GRAPH_PRUNE_FACTOR (0:
// never prune, and time every candidate that is not dropped).
ScreenVerdict Screen(double screen_ms, int64_t workspace_bytes, const std::vector<Timed>& measured,
                     double prune_factor);

// Re-timing near the best. A candidate's time is the mean of its screening
// run and two more: one slow run on a shared, noisy GPU could decide a plan
// that the benchmark database then keeps. So the candidates within
// kRetimeWindow of the fastest at a size are timed again, interleaved (one
// run of each per round, so that a drift of the GPU's clock hits them all),
// kRetimeRounds rounds, and keep the median (UCUDNN_GRAPH_RETIME=off: not).
// At most kRetimeMax of them: each size of each kernel pays at most
// kRetimeMax * kRetimeRounds more runs, at most 9 runs' worth of a training
// step's convolution time per size of a model, first step only. Not at a new
// size between two stored ones (a kernel of a new N planning from a stored
// table): its candidates are the neighbours' re-timed winners, and re-timing
// them was a third of that size's runs (docs/benchmarks.md, a new batch size).
constexpr double kRetimeWindow = 0.15;
constexpr int kRetimeMax = 3;
constexpr int kRetimeRounds = 3;

// Indices of `measured` whose time is within `window` of the fastest's
// (time <= (1 + window) * fastest), fastest first, at most `max_count`;
// empty when fewer than two are (a lone best needs no second look).
std::vector<size_t> NearBest(const std::vector<Timed>& measured, double window, int max_count);

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> values);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_SCREENING_H_
