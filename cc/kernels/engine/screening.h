// What planning does with a graph-API candidate after its screening run at a
// micro-batch size, given the candidates already measured at that size: drop
// it, stop timing it at larger sizes, or time it further. Pure C++, tested
// without a GPU (screening_test.cc); graph_candidates.cc applies it.
#ifndef TF_UCUDNN_ENGINE_SCREENING_H_
#define TF_UCUDNN_ENGINE_SCREENING_H_

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

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_SCREENING_H_
