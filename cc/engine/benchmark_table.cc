#if GOOGLE_CUDA

#include "cc/engine/benchmark_table.h"

#include <iterator>
#include <utility>

#include "cc/engine/cudnn_descriptors.h"

namespace ucudnn {

std::string CudnnAlgoName(Pass pass, const CudnnAlgo& algo) {
  if (algo.graph()) return algo.engine.Name();
  return std::string(AlgoEnumName(pass, algo.algo)) + "/" + MathTypeName(algo.math_type);
}

void AddMeasured(const MeasuredSizes& measured, BenchmarkTable* out) {
  for (const auto& [size, rows] : measured) {
    std::vector<AlgoPerf>& row = out->table[size];
    for (const Measured& m : rows) {
      int index = -1;
      for (size_t i = 0; i < out->algos.size(); ++i) {
        if (out->algos[i] == m.algo) index = static_cast<int>(i);
      }
      if (index < 0) {
        index = static_cast<int>(out->algos.size());
        out->algos.push_back(m.algo);
      }
      row.push_back({index, m.time_ms, m.workspace_bytes});
    }
  }
}

PerfTable RoomyRows(const BenchmarkTable& stored) {
  PerfTable roomy = stored.table;
  for (int64_t size : stored.pressured) roomy.erase(size);
  return roomy;
}

BenchmarkTable PlanningTable(BenchmarkTable measured, bool seeded, const BenchmarkTable& seed,
                             bool forced, const std::vector<int64_t>& sizes,
                             BatchSizePolicy policy, int64_t batch, int* benchmarked_sizes) {
  BenchmarkTable out = std::move(measured);
  std::set<int64_t> fresh;
  for (const auto& row : out.table) fresh.insert(row.first);
  if (seeded) MergeTables(&out.table, &out.algos, seed.table, seed.algos);
  // Only the sizes this kernel's policy (or forced size) allows for its N.
  out.table = forced ? RestrictTable(out.table, sizes) : RestrictTable(out.table, policy, batch);
  for (int64_t size : seed.pressured) {
    if (!fresh.count(size)) out.pressured.insert(size);  // the stored row stays
  }
  for (auto it = out.pressured.begin(); it != out.pressured.end();) {
    it = out.table.count(*it) ? std::next(it) : out.pressured.erase(it);
  }
  MergePrunedEngines(&out.pruned, seed.pruned);
  *benchmarked_sizes = 0;
  for (const auto& row : out.table) *benchmarked_sizes += fresh.count(row.first) ? 1 : 0;
  return out;
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
