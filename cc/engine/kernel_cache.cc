#include "cc/engine/kernel_cache.h"

#include <map>
#include <mutex>
#include <tuple>

namespace ucudnn {

bool KernelKey::operator<(const KernelKey& o) const {
  return std::tie(pass, conv, device, knobs) < std::tie(o.pass, o.conv, o.device, o.knobs);
}

KernelKey TableKey(KernelKey key) {
  key.conv[0] = 0;
  key.knobs.workspace_limit = key.knobs.BenchmarkLimit();
  key.knobs.total_workspace = 0;
  key.knobs.policy = BatchSizePolicy::kPowerOfTwo;
  key.knobs.micro_batch_size = 0;
  key.device = -1;
  return key;
}

#if GOOGLE_CUDA

namespace {
std::mutex& KernelsMutex() {
  static std::mutex mu;
  return mu;
}
std::vector<std::pair<KernelKey, std::shared_ptr<CudnnKernel>>>& KernelList() {
  static auto* kernels = new std::vector<std::pair<KernelKey, std::shared_ptr<CudnnKernel>>>();
  return *kernels;
}
}  // namespace

namespace {

// The stored tables by TableKey, and their keys in the order first stored.
std::map<KernelKey, ConvolutionTable>& Tables() {
  static auto* tables = new std::map<KernelKey, ConvolutionTable>();
  return *tables;
}
std::vector<KernelKey>& TableOrder() {
  static auto* order = new std::vector<KernelKey>();
  return *order;
}

}  // namespace

void SeedKernelTable(const KernelKey& key, PerfTable table, std::vector<CudnnAlgo> algos,
                     std::set<int64_t> pressured, PrunedEngines pruned) {
  const KernelKey table_key = TableKey(key);
  std::lock_guard<std::mutex> lock(KernelsMutex());
  auto [it, added] = Tables().try_emplace(table_key);
  ConvolutionTable& stored = it->second;
  if (added) {
    TableOrder().push_back(table_key);
    stored.key = table_key;
    stored.params = ConvParams::FromFields(table_key.conv);
  }
  MergeTablesWithPressure(&stored.table, &stored.algos, &stored.pressured, table, algos,
                          pressured);
  MergePrunedEngines(&stored.pruned, pruned);
}

std::shared_ptr<CudnnKernel> GetOrCreateKernel(const KernelKey& key, const ConvParams& params) {
  static auto* index = new std::map<KernelKey, std::shared_ptr<CudnnKernel>>();
  std::lock_guard<std::mutex> lock(KernelsMutex());
  auto& slot = (*index)[key];
  if (!slot) {
    slot = std::make_shared<CudnnKernel>(key.pass, params, key.knobs.allow_tf32,
                                         key.knobs.deterministic, key.knobs.engines,
                                         key.knobs.graph);
    auto stored = Tables().find(TableKey(key));
    if (stored != Tables().end() && !stored->second.table.empty()) {
      slot->Seed(stored->second.table, stored->second.algos, stored->second.pressured,
                 stored->second.pruned);
    }
    KernelList().emplace_back(key, slot);
  }
  return slot;
}

std::vector<ConvolutionTable> AllTables() {
  std::lock_guard<std::mutex> lock(KernelsMutex());
  std::vector<ConvolutionTable> out;
  for (const KernelKey& key : TableOrder()) out.push_back(Tables().at(key));
  return out;
}

std::vector<std::pair<KernelKey, std::shared_ptr<CudnnKernel>>> AllKernels() {
  std::lock_guard<std::mutex> lock(KernelsMutex());
  return KernelList();
}
#endif  // GOOGLE_CUDA

}  // namespace ucudnn
