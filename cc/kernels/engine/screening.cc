#include "cc/kernels/engine/screening.h"

namespace ucudnn {
namespace {

// Whether a measured candidate within the slack of `bytes` is faster than `ms` by `factor`.
bool Dominated(double ms, int64_t bytes, const std::vector<Timed>& measured, double factor) {
  for (const Timed& m : measured) {
    if (m.workspace_bytes <= bytes + kWorkspaceSlack && m.time_ms * factor < ms) return true;
  }
  return false;
}

bool FarBehind(double ms, const std::vector<Timed>& measured) {
  for (const Timed& m : measured) {
    if (m.time_ms * kFarBehindFactor < ms) return true;
  }
  return false;
}

}  // namespace

ScreenVerdict Screen(double screen_ms, int64_t workspace_bytes, const std::vector<Timed>& measured,
                     double prune_factor) {
  ScreenVerdict v;
  const bool far_behind = prune_factor > 0 && FarBehind(screen_ms, measured);
  v.prune = prune_factor > 0 &&
            (far_behind || Dominated(screen_ms, workspace_bytes, measured, prune_factor));
  v.drop = Dominated(screen_ms, workspace_bytes, measured, 1 / kDominatedFactor);
  v.screen_only = far_behind && !v.drop;
  return v;
}

}  // namespace ucudnn
