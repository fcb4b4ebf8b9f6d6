// DeviceBenchmark: the candidates of a kernel timed per micro-batch size on
// one GPU (see device_benchmark.h).
#if GOOGLE_CUDA

#include "cc/engine/device_benchmark.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cc/engine/cuda_check.h"
#include "cc/engine/knobs.h"
#include "cc/engine/screening.h"
#include "cc/engine/search_workspace.h"

namespace ucudnn {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The order DeviceBenchmark::Run takes its sizes in, and the sizes it leaves
// out (the small-sizes-where-limited rule; for a fused kernel, the sizes below
// the whole mini-batch: WholeBatchFirst).
class SizeOrder {
 public:
  SizeOrder(const std::vector<int64_t>& sizes, EngineSet engines, const ConvParams& p,
            bool small_sizes_where_limited)
      : engines_(engines),
        batch_(p.batch),
        whole_batch_first_(small_sizes_where_limited && WholeBatchFirst(p)),
        // Graph engines from micro-batches of kMinGraphMicroBatch samples up (or
        // the whole mini-batch): planning builds an execution plan per engine and
        // size, and no DeepBench plan at 64 or 256 MiB used smaller micro-batches
        // (too little work per launch); the legacy algorithms still cover them.
        first_graph_size_(std::min(kMinGraphMicroBatch, p.batch)),
        // kAuto with small_sizes_where_limited: the graph sizes first, then the
        // smaller (legacy) sizes only where they can help. A micro-batch below
        // kMinGraphMicroBatch samples pays a launch (or more) for little work; it
        // helps only by letting in an algorithm the workspace limit keeps out of the
        // larger ones, or by covering a remainder of such a plan. So the small sizes
        // are benchmarked only where, at some graph size, the limit kept an engine
        // out or no engine ran. (Plans of DeepBench's 29 layers, VGG-16, ResNet-50
        // and InceptionV3 at 64 MiB used no micro-batch below 8 samples.)
        small_sizes_last_(engines == EngineSet::kAuto && small_sizes_where_limited),
        ascending_(sizes) {
    // Ascending sizes: graph engines far behind at one size are pruned from the
    // larger ones (GraphSearchKnobs::prune_factor).
    std::sort(ascending_.begin(), ascending_.end());
    if (small_sizes_last_) {
      std::stable_partition(ascending_.begin(), ascending_.end(),
                            [this](int64_t size) { return graph_at(size); });
    }
    if (whole_batch_first_) {
      std::stable_partition(ascending_.begin(), ascending_.end(),
                            [this](int64_t size) { return size == batch_; });
    }
  }

  // The sizes in the order they are benchmarked.
  const std::vector<int64_t>& sizes() const { return ascending_; }
  // Whether graph engines are timed at `size`.
  bool graph_at(int64_t size) const {
    return engines_ != EngineSet::kLegacy &&
           (size >= first_graph_size_ || engines_ == EngineSet::kGraph);
  }
  // True (and `size` recorded as skipped) where a rule leaves it out while the
  // limit bound at no graph size so far: a small size, or for a fused kernel
  // any size below the whole mini-batch.
  bool Skip(int64_t size) {
    if (((small_sizes_last_ && !graph_at(size)) || (whole_batch_first_ && size < batch_)) &&
        !limit_binds_) {
      skipped_.push_back(size);
      return true;
    }
    return false;
  }
  // At a graph size, an engine was over the limit or none ran.
  void LimitBinds() { limit_binds_ = true; }
  // The least size that the skipped sizes' rule benchmarks unconditionally.
  int64_t first_graph_size() const { return whole_batch_first_ ? batch_ : first_graph_size_; }
  const std::vector<int64_t>& skipped() const { return skipped_; }

 private:
  const EngineSet engines_;
  const int64_t batch_;
  const bool whole_batch_first_;
  const int64_t first_graph_size_;
  const bool small_sizes_last_;
  bool limit_binds_ = false;  // at some graph size: an engine over the limit, or none ran
  std::vector<int64_t> ascending_;
  std::vector<int64_t> skipped_;
};

// What one DeviceBenchmark::Run spent, for UCUDNN_DEBUG_OUTPUT: seconds of
// legacy timing, graph proposal (heuristics and plans) and graph runs, graph
// candidates and runs, the host's graph costs, and the per-size log.
struct BenchmarkCosts {
  double legacy_s = 0, propose_s = 0, runs_s = 0;
  int plans = 0, runs = 0;
  GraphHostCosts host;
  std::string log;
};

// The UCUDNN_DEBUG_OUTPUT lines of one DeviceBenchmark::Run of `sizes` sizes:
// the sizes the small-sizes rule left out, the costs, `pruned` engines, the
// gates that opened by themselves since `gate_timeouts_before`, and the log.
void LogBenchmark(Pass pass, const ConvParams& p, size_t sizes, const SizeOrder& order,
                  size_t pruned, int gate_timeouts_before, BenchmarkCosts* costs) {
  const GraphHostCosts& host = costs->host;
  std::string& log = costs->log;
  if (DebugOutput() && !order.skipped().empty()) {
    log += " sizes";
    for (int64_t size : order.skipped()) log += " " + std::to_string(size);
    log += " not benchmarked: the limit kept no engine out at any size of " +
           std::to_string(order.first_graph_size()) + " samples or more\n";
  }
  if (DebugOutput()) {
    std::fprintf(stderr,
                 "tf_ucudnn: benchmarked %s %s at %zu sizes: legacy %.3f s; graph: %d candidates "
                 "(heuristics and plans %.3f s), %d runs %.3f s, %zu engines pruned, %d gates "
                 "opened by themselves\n"
                 " host: %d op graphs %.3f s, %d heuristics queries %.3f s (configs fetched "
                 "%.3f s), fallback lists %.3f s, %d plan builds: engine configs %.3f s, plans "
                 "%.3f s\n%s",
                 PassName(pass), p.ToString().c_str(), sizes, costs->legacy_s, costs->plans,
                 costs->propose_s, costs->runs, costs->runs_s, pruned,
                 EventPair::GateTimeouts() - gate_timeouts_before, host.op_graphs,
                 host.op_graphs_s, host.queries, host.heuristics_s, host.heuristics_configs_s,
                 host.fallback_s, host.builds, host.engine_configs_s, host.plans_s, log.c_str());
  }
}

}  // namespace

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
  // One search workspace for every size (SearchWorkspace).
  const bool legacy = engines != EngineSet::kGraph;  // at some size, at least
  // The fusion's tensors, the caller's sums as the graphs' scratch (the
  // plan's run writes them again).
  const FusionPointers fusion = t.fusion();
  SearchWorkspace search(scratch, workspace_limit);
  if (legacy) {
    UCUDNN_RETURN_IF_ERROR(search.SizeForLegacy(handle->handle, &legacy_, sizes));
  }
  PrunedEngines pruned_here;  // engines this call's screening pruned, at their size
  bool retime = true;
  UCUDNN_RETURN_IF_ERROR(ReadGraphRetime(&retime));
  search.Allocate();
  SizeOrder order(sizes, engines, p, small_sizes_where_limited);
  std::set<std::string> pruned;
  BenchmarkCosts costs;
  std::string& log = costs.log;
  for (int64_t size : order.sizes()) {
    if (order.Skip(size)) continue;
    const void* bench_a = a;
    void* bench_out = out;
    if (asymmetric && pass != Pass::kBackwardData) {
      UCUDNN_RETURN_IF_ERROR(ops.CopyPadded(stream, size, t.a, ps.padded, /*into_padded=*/true));
      bench_a = ps.padded;
    } else if (asymmetric) {
      bench_out = ps.padded;
    }
    // `retime`: graph engines are timed at this size too, with CUDA events;
    // the legacy algorithms then are as well (LegacyCandidates::Retime).
    auto time_legacy = [&](bool retime) -> Status {
      const Clock::time_point start = Clock::now();
      std::vector<Measured>& row = (*got)[size];
      const size_t before = row.size();
      search.NoteLegacy(size);
      UCUDNN_RETURN_IF_ERROR(legacy_.Find(handle->handle, size, workspace_limit, bench_a, b,
                                          bench_out, search.workspace(), search.bytes(), &row));
      if (p.fusion.bias() && row.size() > before) {
        // cudnnFind times the convolution; the legacy plan also adds the bias.
        double add_ms = 0;
        UCUDNN_RETURN_IF_ERROR(legacy_.TimeAddBias(handle->handle, stream, size, t.bias,
                                                   bench_out, &add_ms));
        for (size_t i = before; i < row.size(); ++i) row[i].time_ms += add_ms;
      }
      if (retime) {
        std::string retimed;
        UCUDNN_RETURN_IF_ERROR(legacy_.Retime(handle->handle, stream, size, bench_a, b, bench_out,
                                              fusion, search.workspace(), before, &row,
                                              DebugOutput() ? &retimed : nullptr));
        if (!retimed.empty()) {
          log += " legacy timed again at " + std::to_string(size) + ":\n" + retimed;
        }
      }
      costs.legacy_s += SecondsSince(start);
      return Status();
    };
    const bool graph_here = order.graph_at(size);
    // kAll and kLegacy: legacy algorithms at every size, before the engines
    // (whose screening then counts them); kAuto: only where no engine is timed.
    if (engines == EngineSet::kAll || engines == EngineSet::kLegacy || !graph_here) {
      UCUDNN_RETURN_IF_ERROR(time_legacy(/*retime=*/graph_here));
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
                                          DebugOutput() ? &size_log : nullptr, &costs.host,
                                          &over_limit,
                                          neighbours.empty() ? nullptr : &neighbours));
    if (over_limit > 0) order.LimitBinds();
    if (!size_log.empty()) log += " size " + std::to_string(size) + ":\n" + size_log;
    if (over_limit > 0 && DebugOutput()) {
      log += " size " + std::to_string(size) + ": " + std::to_string(over_limit) +
             " candidates over the workspace limit\n";
    }
    search.GrowForGraph(size, trials);
    costs.plans += static_cast<int>(trials.size());
    costs.propose_s += SecondsSince(start);
    start = Clock::now();
    if (DebugOutput() && !trials.empty()) log += " timed at " + std::to_string(size) + ":\n";
    UCUDNN_RETURN_IF_ERROR(timing_.Time(handle->handle, stream, trials, bench_a, b, bench_out,
                                       fusion, search.workspace(), search.bytes(),
                                       &(*got)[size], &pruned, &costs.runs,
                                       DebugOutput() ? &log : nullptr));
    for (const std::string& name : pruned) {
      if (!pruned_before.count(name)) pruned_here.emplace(name, size);
    }
    // Not at a new size between two stored ones (screening.h: re-timing).
    if (retime && neighbours.empty()) {
      UCUDNN_RETURN_IF_ERROR(timing_.RetimeNearBest(handle->handle, stream, trials, bench_a, b,
                                                   bench_out, fusion, search.workspace(),
                                                   search.bytes(), &(*got)[size], &costs.runs,
                                                   DebugOutput() ? &log : nullptr));
    }
    costs.runs_s += SecondsSince(start);
    // kAuto: a size at which no engine ran (none proposed, fitted or ran)
    // falls back to the legacy algorithms.
    if (engines == EngineSet::kAuto && (*got)[size].empty()) {
      if (DebugOutput()) log += " size " + std::to_string(size) + ": no engine ran; legacy\n";
      order.LimitBinds();
      UCUDNN_RETURN_IF_ERROR(time_legacy(/*retime=*/false));
    }
  }
  LogBenchmark(pass, p, sizes.size(), order, pruned.size(), gate_timeouts_before, &costs);
  pressured_out->insert(search.pressured().begin(), search.pressured().end());
  MergePrunedEngines(pruned_out, pruned_here);
  // Back to the allocator while the handle is still held: kernels benchmark one
  // at a time, so their search workspaces never coexist.
  scratch->ReleaseAll();
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
