#include "cc/engine/screening.h"

#include <algorithm>

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

std::vector<size_t> NearBest(const std::vector<Timed>& measured, double window, int max_count) {
  std::vector<size_t> order(measured.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return measured[x].time_ms < measured[y].time_ms;
  });
  std::vector<size_t> near;
  for (size_t i : order) {
    if (static_cast<int>(near.size()) >= max_count) break;
    if (measured[i].time_ms > (1 + window) * measured[order[0]].time_ms) break;
    near.push_back(i);
  }
  if (near.size() < 2) near.clear();
  return near;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace ucudnn
