#include "cc/kernels/engine/kernel_cache.h"

#include <map>
#include <mutex>
#include <tuple>

namespace ucudnn {

bool KernelKey::operator<(const KernelKey& o) const {
  return std::tie(pass, conv, device, allow_tf32, deterministic, workspace_limit, policy,
                  forced_micro_batch, total_workspace, engines, graph) <
         std::tie(o.pass, o.conv, o.device, o.allow_tf32, o.deterministic, o.workspace_limit,
                  o.policy, o.forced_micro_batch, o.total_workspace, o.engines, o.graph);
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

struct SeedEntry {
  PerfTable table;
  std::vector<CudnnAlgo> algos;
};

std::map<KernelKey, SeedEntry>& Seeds() {
  static auto* seeds = new std::map<KernelKey, SeedEntry>();
  return *seeds;
}

// Seeds are benchmark tables: the same for any device and for a kernel
// benchmarked within a per-kernel limit or the same total budget (but a
// Workspace Division kernel takes only a table of every size: TableCoversSizes).
KernelKey AnyDevice(KernelKey key) {
  key.device = -1;
  key.total_workspace = 0;
  return key;
}

}  // namespace

void SeedKernelTable(const KernelKey& key, PerfTable table, std::vector<CudnnAlgo> algos) {
  std::lock_guard<std::mutex> lock(KernelsMutex());
  Seeds()[AnyDevice(key)] = {std::move(table), std::move(algos)};
}

std::shared_ptr<CudnnKernel> GetOrCreateKernel(const KernelKey& key, const ConvParams& params) {
  static auto* index = new std::map<KernelKey, std::shared_ptr<CudnnKernel>>();
  std::lock_guard<std::mutex> lock(KernelsMutex());
  auto& slot = (*index)[key];
  if (!slot) {
    slot = std::make_shared<CudnnKernel>(key.pass, params, key.allow_tf32, key.deterministic,
                                         key.engines, key.graph);
    auto seed = Seeds().find(AnyDevice(key));
    if (seed != Seeds().end() &&
        (key.total_workspace == 0 || TableCoversSizes(seed->second.table, key.policy,
                                                      params.batch, key.forced_micro_batch))) {
      slot->Seed(seed->second.table, seed->second.algos);
    }
    KernelList().emplace_back(key, slot);
  }
  return slot;
}


std::vector<std::pair<KernelKey, std::shared_ptr<CudnnKernel>>> AllKernels() {
  std::lock_guard<std::mutex> lock(KernelsMutex());
  return KernelList();
}
#endif  // GOOGLE_CUDA

}  // namespace ucudnn
