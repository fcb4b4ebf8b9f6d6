#include "cc/engine/table_merging.h"

#include <algorithm>
#include <iterator>

namespace ucudnn {

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
