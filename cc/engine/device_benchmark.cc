// DeviceBenchmark: the candidates of a kernel timed per micro-batch size on
// one GPU (see device_benchmark.h).
#if GOOGLE_CUDA

#include "cc/engine/device_benchmark.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "cc/engine/cuda_check.h"
#include "cc/engine/knobs.h"
#include "cc/engine/screening.h"

namespace ucudnn {

Status DeviceBenchmark::Run(CudnnHandle* handle, cudaStream_t stream,
                            const std::vector<int64_t>& sizes, int64_t workspace_limit,
                            const PassTensors& t, ScratchAllocator* scratch,
                            bool small_sizes_where_limited, MeasuredSizes* got,
                            std::set<int64_t>* pressured_out, PrunedEngines* pruned_out) {
  std::lock_guard<std::mutex> handle_lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, stream));
  const int gate_timeouts_before = EventPair::GateTimeouts();  // this thread's, for the log
  const ConvParams& p = spec_.params;
  const Pass pass = spec_.pass;
  const EngineSet engines = spec_.engines;
  PassOperations& ops = runner_->operations();
  const bool asymmetric = !p.symmetric_padding();
  const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  PassScratch ps;
  UCUDNN_RETURN_IF_ERROR(AllocateFilter(p, t, scratch, &ps));
  UCUDNN_RETURN_IF_ERROR(
      AllocatePadded(p, asymmetric, max_size, runner_->geometry().padded_sample_elems,
                     stream, scratch, &ps));
  const void* a = t.a;
  const void* b = nullptr;
  void* out = nullptr;
  UCUDNN_RETURN_IF_ERROR(ops.FilterOperands(handle->handle, t, ps, &b, &out));
  // One search workspace for every size: what the hungriest legacy algorithm
  // asks for, capped by the limit, halved until it can be allocated; grown
  // when a graph plan needs more.
  const bool legacy = engines != EngineSet::kGraph;  // at some size, at least
  int64_t ws_bytes = 0;
  std::map<int64_t, int64_t> legacy_needed;  // per size, capped by the limit
  if (legacy) {
    for (int64_t size : sizes) {
      int64_t needed = 0;
      UCUDNN_RETURN_IF_ERROR(legacy_.MaxWorkspaceNeeded(handle->handle, size, &needed));
      legacy_needed[size] = std::min(needed, workspace_limit);
      ws_bytes = std::max(ws_bytes, legacy_needed[size]);
    }
  }
  // Sizes timed with less search workspace than their candidates could use
  // within the limit (memory pressure): their rows may lack fast candidates.
  std::set<int64_t> pressured;
  PrunedEngines pruned_here;  // engines this call's screening pruned, at their size
  bool retime = true;
  UCUDNN_RETURN_IF_ERROR(ReadGraphRetime(&retime));
  void* ws = nullptr;
  while (ws_bytes > 0 && (ws = scratch->AllocateWorkspace(ws_bytes)) == nullptr) ws_bytes /= 2;
  if (ws == nullptr) ws_bytes = 0;
  // Ascending sizes: graph engines far behind at one size are pruned from the
  // larger ones (GraphSearchKnobs::prune_factor).
  std::vector<int64_t> ascending = sizes;
  std::sort(ascending.begin(), ascending.end());
  // Graph engines from micro-batches of kMinGraphMicroBatch samples up (or
  // the whole mini-batch): planning builds an execution plan per engine and
  // size, and no DeepBench plan at 64 or 256 MiB used smaller micro-batches
  // (too little work per launch); the legacy algorithms still cover them.
  const int64_t first_graph_size = std::min(kMinGraphMicroBatch, p.batch);
  auto graph_at = [&](int64_t size) {
    return engines != EngineSet::kLegacy &&
           (size >= first_graph_size || engines == EngineSet::kGraph);
  };
  // kAuto with small_sizes_where_limited: the graph sizes first, then the
  // smaller (legacy) sizes only where they can help. A micro-batch below
  // kMinGraphMicroBatch samples pays a launch (or more) for little work; it
  // helps only by letting in an algorithm the workspace limit keeps out of the
  // larger ones, or by covering a remainder of such a plan. So the small sizes
  // are benchmarked only where, at some graph size, the limit kept an engine
  // out or no engine ran. (Plans of DeepBench's 29 layers, VGG-16, ResNet-50
  // and InceptionV3 at 64 MiB used no micro-batch below 8 samples.)
  const bool small_sizes_last = engines == EngineSet::kAuto && small_sizes_where_limited;
  if (small_sizes_last) {
    std::stable_partition(ascending.begin(), ascending.end(), graph_at);
  }
  bool limit_binds = false;  // at some graph size: an engine over the limit, or none ran
  std::vector<int64_t> skipped;
  std::set<std::string> pruned;
  using Clock = std::chrono::steady_clock;
  double legacy_s = 0, propose_s = 0, runs_s = 0;
  int plans = 0, runs = 0;
  GraphHostCosts host;
  std::string log;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  for (int64_t size : ascending) {
    if (small_sizes_last && !graph_at(size) && !limit_binds) {
      skipped.push_back(size);
      continue;
    }
    const void* bench_a = a;
    void* bench_out = out;
    if (asymmetric && pass != Pass::kBackwardData) {
      UCUDNN_RETURN_IF_ERROR(ops.CopyPadded(stream, size, t.a, ps.padded, /*into_padded=*/true));
      bench_a = ps.padded;
    } else if (asymmetric) {
      bench_out = ps.padded;
    }
    auto time_legacy = [&]() -> Status {
      const Clock::time_point start = Clock::now();
      std::vector<Measured>& row = (*got)[size];
      const size_t before = row.size();
      if (legacy_needed[size] > ws_bytes) pressured.insert(size);
      UCUDNN_RETURN_IF_ERROR(legacy_.Find(handle->handle, size, workspace_limit, bench_a, b,
                                          bench_out, ws, ws_bytes, &row));
      if (p.fusion.bias() && row.size() > before) {
        // cudnnFind times the convolution; the legacy plan also adds the bias.
        double add_ms = 0;
        UCUDNN_RETURN_IF_ERROR(legacy_.TimeAddBias(handle->handle, stream, size, t.bias,
                                                   bench_out, &add_ms));
        for (size_t i = before; i < row.size(); ++i) row[i].time_ms += add_ms;
      }
      legacy_s += seconds_since(start);
      return Status();
    };
    const bool graph_here = graph_at(size);
    // kAll and kLegacy: legacy algorithms at every size, before the engines
    // (whose screening then counts them); kAuto: only where no engine is timed.
    if (engines == EngineSet::kAll || engines == EngineSet::kLegacy || !graph_here) {
      UCUDNN_RETURN_IF_ERROR(time_legacy());
    }
    if (!graph_here) continue;
    Clock::time_point start = Clock::now();
    std::vector<GraphTrial> trials;
    std::string size_log;
    int over_limit = 0;
    // Engines the stored table's measurements pruned below this size (a
    // seeded kernel benchmarking new sizes), as if its sizes were all timed here.
    for (const std::string& name : PrunedBelow(seed_.pruned, size)) pruned.insert(name);
    const std::set<std::string> pruned_before = pruned;
    // A new size between two stored ones: their candidates, not the heuristics'.
    std::vector<GraphCandidate> neighbours;
    for (int i : NeighbourCandidates(seed_roomy_, size, kWorkspaceSlack)) {
      const CudnnAlgo& algo = seed_.algos[i];
      if (algo.graph()) neighbours.push_back({algo.engine, algo.deterministic, "stored"});
    }
    UCUDNN_RETURN_IF_ERROR(graph_.Propose(handle->handle, size, workspace_limit, pruned, &trials,
                                          DebugOutput() ? &size_log : nullptr, &host,
                                          &over_limit,
                                          neighbours.empty() ? nullptr : &neighbours));
    if (over_limit > 0) limit_binds = true;
    if (!size_log.empty()) log += " size " + std::to_string(size) + ":\n" + size_log;
    int64_t needed = 0;
    for (const GraphTrial& trial : trials) needed = std::max(needed, trial.plan->workspace_bytes());
    needed = std::min(needed, workspace_limit);
    if (needed > ws_bytes) {
      // The smaller buffer goes back first, so that benchmarking holds one
      // search workspace within the limit (where the allocator can give one
      // back: TF's), not the legacy algorithms' and the graph plans' both.
      if (ws != nullptr) scratch->Release(ws);
      ws = scratch->AllocateWorkspace(needed);
      if (ws != nullptr) {
        ws_bytes = needed;
      } else if (ws_bytes > 0 && (ws = scratch->AllocateWorkspace(ws_bytes)) == nullptr) {
        ws_bytes = 0;
      }
    }
    if (needed > ws_bytes) pressured.insert(size);
    plans += static_cast<int>(trials.size());
    propose_s += seconds_since(start);
    start = Clock::now();
    if (DebugOutput() && !trials.empty()) log += " timed at " + std::to_string(size) + ":\n";
    UCUDNN_RETURN_IF_ERROR(timing_.Time(handle->handle, stream, trials, bench_a, b, bench_out,
                                       t.bias, ws, ws_bytes, &(*got)[size], &pruned, &runs,
                                       DebugOutput() ? &log : nullptr));
    for (const std::string& name : pruned) {
      if (!pruned_before.count(name)) pruned_here.emplace(name, size);
    }
    // Not at a new size between two stored ones (screening.h: re-timing).
    if (retime && neighbours.empty()) {
      UCUDNN_RETURN_IF_ERROR(timing_.RetimeNearBest(handle->handle, stream, trials, bench_a, b,
                                                   bench_out, t.bias, ws, ws_bytes,
                                                   &(*got)[size], &runs,
                                                   DebugOutput() ? &log : nullptr));
    }
    runs_s += seconds_since(start);
    // kAuto: a size at which no engine ran (none proposed, fitted or ran)
    // falls back to the legacy algorithms.
    if (engines == EngineSet::kAuto && (*got)[size].empty()) {
      if (DebugOutput()) log += " size " + std::to_string(size) + ": no engine ran; legacy\n";
      limit_binds = true;
      UCUDNN_RETURN_IF_ERROR(time_legacy());
    }
  }
  if (DebugOutput() && !skipped.empty()) {
    log += " sizes";
    for (int64_t size : skipped) log += " " + std::to_string(size);
    log += " not benchmarked: the limit kept no engine out at any size of " +
           std::to_string(first_graph_size) + " samples or more\n";
  }
  if (DebugOutput()) {
    std::fprintf(stderr,
                 "tf_ucudnn: benchmarked %s %s at %zu sizes: legacy %.3f s; graph: %d candidates "
                 "(heuristics and plans %.3f s), %d runs %.3f s, %zu engines pruned, %d gates "
                 "opened by themselves\n"
                 " host: %d op graphs %.3f s, %d heuristics queries %.3f s (configs fetched "
                 "%.3f s), fallback lists %.3f s, %d plan builds: engine configs %.3f s, plans "
                 "%.3f s\n%s",
                 PassName(pass), p.ToString().c_str(), sizes.size(), legacy_s, plans, propose_s,
                 runs, runs_s, pruned.size(), EventPair::GateTimeouts() - gate_timeouts_before,
                 host.op_graphs, host.op_graphs_s, host.queries,
                 host.heuristics_s, host.heuristics_configs_s, host.fallback_s, host.builds,
                 host.engine_configs_s,
                 host.plans_s, log.c_str());
  }
  pressured_out->insert(pressured.begin(), pressured.end());
  MergePrunedEngines(pruned_out, pruned_here);
  // Back to the allocator while the handle is still held: kernels benchmark one
  // at a time, so their search workspaces never coexist.
  scratch->ReleaseAll();
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
