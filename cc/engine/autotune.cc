// CudnnKernel's autotuning: for every allowed micro-batch size, the legacy
// algorithms (cudnnFind*AlgorithmEx) and the graph-API engines
// (graph_candidates.cc) timed within the workspace limit, on this GPU and on
// peers (UCUDNN_BENCHMARK_DEVICES), into the benchmark table the plan is
// solved from (cudnn_kernel.cc).
#if GOOGLE_CUDA

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "cc/engine/benchmark_devices.h"
#include "cc/engine/cuda_check.h"
#include "cc/engine/cudnn_kernel.h"
#include "cc/engine/knobs.h"
#include "cc/engine/plan_execution.h"
#include "cc/engine/screening.h"

namespace ucudnn {

int CudnnKernel::BenchmarkMathType() const {
  // FP32 without TF32 must stay on FMA kernels; otherwise tensor cores may be used.
  return params_.dtype == DType::kFloat && !allow_tf32_ ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

Status CudnnKernel::MaxWorkspaceNeeded(cudnnHandle_t handle, int64_t size, int64_t* needed) {
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetDescriptors(size, BenchmarkMathType(), &d));
  *needed = 0;
  for (int algo = 0; algo < MaxAlgoCount(pass_); ++algo) {
    size_t bytes = 0;
    cudnnStatus_t s = CUDNN_STATUS_NOT_SUPPORTED;
    if (pass_ == Pass::kForward) {
      s = cudnnGetConvolutionForwardWorkspaceSize(handle, d->x.d, d->w.d, d->conv.d, d->y.d,
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
    } else if (pass_ == Pass::kBackwardData) {
      s = cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, d->w.d, d->y.d, d->conv.d, d->x.d,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
    } else {
      s = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, d->x.d, d->y.d, d->conv.d, d->w.d,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
    }
    if (s == CUDNN_STATUS_SUCCESS) *needed = std::max<int64_t>(*needed, bytes);
  }
  return Status();
}

Status CudnnKernel::BenchmarkSize(cudnnHandle_t handle, int64_t size, int64_t workspace_limit,
                                  const void* a, const void* b, void* out, void* ws,
                                  int64_t ws_bytes, std::vector<Measured>* got) {
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetDescriptors(size, BenchmarkMathType(), &d));
  const int max_count = MaxAlgoCount(pass_);
  int returned = 0;
  auto record = [&](int algo, cudnnStatus_t status, float time, size_t memory,
                    cudnnDeterminism_t determinism, cudnnMathType_t math) {
    if (status != CUDNN_STATUS_SUCCESS || time < 0) return;
    if (static_cast<int64_t>(memory) > workspace_limit) return;
    const bool deterministic = determinism == CUDNN_DETERMINISTIC;
    if (deterministic_ && !deterministic) return;
    got->push_back({{algo, static_cast<int>(math), deterministic}, static_cast<double>(time),
                    static_cast<int64_t>(memory)});
  };
  if (pass_ == Pass::kForward) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max_count);
    UCUDNN_CUDNN_OK(cudnnFindConvolutionForwardAlgorithmEx(
        handle, d->x.d, a, d->w.d, b, d->conv.d, d->y.d, out, max_count, &returned, perf.data(),
        ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      record(perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
             perf[i].mathType);
  } else if (pass_ == Pass::kBackwardData) {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(max_count);
    UCUDNN_CUDNN_OK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        handle, d->w.d, b, d->y.d, a, d->conv.d, d->x.d, out, max_count, &returned, perf.data(),
        ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      record(perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
             perf[i].mathType);
  } else {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(max_count);
    UCUDNN_CUDNN_OK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        handle, d->x.d, a, d->y.d, b, d->conv.d, d->w.d, out, max_count, &returned, perf.data(),
        ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      record(perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
             perf[i].mathType);
  }
  return Status();
}

Status CudnnKernel::TimeAddBias(cudnnHandle_t handle, cudaStream_t stream, int64_t size,
                                const void* bias, void* y, double* ms) {
  constexpr int kRuns = 3;
  const int math_type = BenchmarkMathType();
  UCUDNN_RETURN_IF_ERROR(AddBias(handle, size, math_type, bias, y));  // descriptors, warm-up
  Status failed;
  EventPair events;
  UCUDNN_RETURN_IF_ERROR(events.TimeRuns(
      stream, kRuns,
      [&] {
        failed = AddBias(handle, size, math_type, bias, y);
        return failed.ok();
      },
      ms));
  return failed;
}

Status CudnnKernel::BenchmarkOn(CudnnHandle* handle, cudaStream_t stream,
                                const std::vector<int64_t>& sizes, int64_t workspace_limit,
                                const PassTensors& t, ScratchAllocator* scratch,
                                bool small_sizes_where_limited, MeasuredSizes* got) {
  std::lock_guard<std::mutex> handle_lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, stream));
  const int gate_timeouts_before = EventPair::GateTimeouts();  // this thread's, for the log
  const ConvParams& p = params_;
  const bool asymmetric = !p.symmetric_padding();
  const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  PassScratch ps;
  UCUDNN_RETURN_IF_ERROR(AllocateFilter(p, t, scratch, &ps));
  UCUDNN_RETURN_IF_ERROR(
      AllocatePadded(p, asymmetric, max_size, padded_sample_elems(), stream, scratch, &ps));
  const void* a = t.a;
  const void* b = nullptr;
  void* out = nullptr;
  UCUDNN_RETURN_IF_ERROR(FilterOperands(handle->handle, t, ps, &b, &out));
  // One search workspace for every size: what the hungriest legacy algorithm
  // asks for, capped by the limit, halved until it can be allocated; grown
  // when a graph plan needs more.
  const bool legacy = engines_ != EngineSet::kGraph;  // at some size, at least
  int64_t ws_bytes = 0;
  std::map<int64_t, int64_t> legacy_needed;  // per size, capped by the limit
  if (legacy) {
    for (int64_t size : sizes) {
      int64_t needed = 0;
      UCUDNN_RETURN_IF_ERROR(MaxWorkspaceNeeded(handle->handle, size, &needed));
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
  const int64_t first_graph_size = std::min(kMinGraphMicroBatch, params_.batch);
  auto graph_at = [&](int64_t size) {
    return engines_ != EngineSet::kLegacy &&
           (size >= first_graph_size || engines_ == EngineSet::kGraph);
  };
  // kAuto with small_sizes_where_limited: the graph sizes first, then the
  // smaller (legacy) sizes only where they can help. A micro-batch below
  // kMinGraphMicroBatch samples pays a launch (or more) for little work; it
  // helps only by letting in an algorithm the workspace limit keeps out of the
  // larger ones, or by covering a remainder of such a plan. So the small sizes
  // are benchmarked only where, at some graph size, the limit kept an engine
  // out or no engine ran. (Plans of DeepBench's 29 layers, VGG-16, ResNet-50
  // and InceptionV3 at 64 MiB used no micro-batch below 8 samples.)
  const bool small_sizes_last = engines_ == EngineSet::kAuto && small_sizes_where_limited;
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
    if (asymmetric && pass_ != Pass::kBackwardData) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, size, t.a, ps.padded, /*into_padded=*/true));
      bench_a = ps.padded;
    } else if (asymmetric) {
      bench_out = ps.padded;
    }
    auto time_legacy = [&]() -> Status {
      const Clock::time_point start = Clock::now();
      std::vector<Measured>& row = (*got)[size];
      const size_t before = row.size();
      if (legacy_needed[size] > ws_bytes) pressured.insert(size);
      UCUDNN_RETURN_IF_ERROR(BenchmarkSize(handle->handle, size, workspace_limit, bench_a, b,
                                           bench_out, ws, ws_bytes, &row));
      if (params_.bias && row.size() > before) {
        // cudnnFind times the convolution; the legacy plan also adds the bias.
        double add_ms = 0;
        UCUDNN_RETURN_IF_ERROR(TimeAddBias(handle->handle, stream, size, t.bias, bench_out,
                                           &add_ms));
        for (size_t i = before; i < row.size(); ++i) row[i].time_ms += add_ms;
      }
      legacy_s += seconds_since(start);
      return Status();
    };
    const bool graph_here = graph_at(size);
    // kAll and kLegacy: legacy algorithms at every size, before the engines
    // (whose screening then counts them); kAuto: only where no engine is timed.
    if (engines_ == EngineSet::kAll || engines_ == EngineSet::kLegacy || !graph_here) {
      UCUDNN_RETURN_IF_ERROR(time_legacy());
    }
    if (!graph_here) continue;
    Clock::time_point start = Clock::now();
    std::vector<GraphTrial> trials;
    std::string size_log;
    int over_limit = 0;
    // Engines the stored table's measurements pruned below this size (a
    // seeded kernel benchmarking new sizes), as if its sizes were all timed here.
    for (const std::string& name : PrunedBelow(seed_pruned_, size)) pruned.insert(name);
    const std::set<std::string> pruned_before = pruned;
    // A new size between two stored ones: their candidates, not the heuristics'.
    std::vector<GraphCandidate> neighbours;
    for (int i : NeighbourCandidates(seed_roomy_, size, kWorkspaceSlack)) {
      const CudnnAlgo& algo = seed_algos_[i];
      if (algo.graph()) neighbours.push_back({algo.engine, algo.deterministic, "stored"});
    }
    UCUDNN_RETURN_IF_ERROR(ProposeGraphTrials(handle->handle, size, workspace_limit, pruned,
                                              &trials, DebugOutput() ? &size_log : nullptr,
                                              &host, &over_limit,
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
    UCUDNN_RETURN_IF_ERROR(TimeGraphTrials(handle->handle, stream, trials, bench_a, b, bench_out,
                                           t.bias, ws, ws_bytes, &(*got)[size], &pruned, &runs,
                                           DebugOutput() ? &log : nullptr));
    for (const std::string& name : pruned) {
      if (!pruned_before.count(name)) pruned_here.emplace(name, size);
    }
    // Not at a new size between two stored ones (screening.h: re-timing).
    if (retime && neighbours.empty()) {
      UCUDNN_RETURN_IF_ERROR(RetimeNearBest(handle->handle, stream, trials, bench_a, b, bench_out,
                                            t.bias, ws, ws_bytes, &(*got)[size], &runs,
                                            DebugOutput() ? &log : nullptr));
    }
    runs_s += seconds_since(start);
    // kAuto: a size at which no engine ran (none proposed, fitted or ran)
    // falls back to the legacy algorithms.
    if (engines_ == EngineSet::kAuto && (*got)[size].empty()) {
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
                 PassName(pass_), p.ToString().c_str(), sizes.size(), legacy_s, plans, propose_s,
                 runs, runs_s, pruned.size(), EventPair::GateTimeouts() - gate_timeouts_before,
                 host.op_graphs, host.op_graphs_s, host.queries,
                 host.heuristics_s, host.heuristics_configs_s, host.fallback_s, host.builds,
                 host.engine_configs_s,
                 host.plans_s, log.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(pressured_mu_);
    pressured_.insert(pressured.begin(), pressured.end());
    MergePrunedEngines(&pruned_, pruned_here);
  }
  // Back to the allocator while the handle is still held: kernels benchmark one
  // at a time, so their search workspaces never coexist.
  scratch->ReleaseAll();
  return Status();
}

Status CudnnKernel::BenchmarkOnPeer(int own_device, const BenchmarkPeer& peer,
                                    const std::vector<int64_t>& sizes, int64_t workspace_limit,
                                    const PassTensors& t, MeasuredSizes* got) {
  UCUDNN_CUDA_OK(cudaSetDevice(peer.device));
  const Status status = BenchmarkOnPeerDevice(own_device, peer, sizes, workspace_limit, t, got);
  // Whatever was queued is done before the peer's memory goes back to its allocator.
  const cudaError_t synced = cudaStreamSynchronize(peer.stream);
  UCUDNN_RETURN_IF_ERROR(status);
  if (synced != cudaSuccess) {
    return Status::Internal(std::string("CUDA error after benchmarking on GPU ") +
                            std::to_string(peer.device) + ": " + cudaGetErrorString(synced));
  }
  return Status();
}

Status CudnnKernel::BenchmarkOnPeerDevice(int own_device, const BenchmarkPeer& peer,
                                          const std::vector<int64_t>& sizes,
                                          int64_t workspace_limit, const PassTensors& t,
                                          MeasuredSizes* got) {
  CudnnHandle* handle = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetBenchmarkHandle(peer.device, peer.stream, &handle));
  // The first max_size samples of the batched tensors, and the whole filter.
  // Backward-filter benchmarks into its own cuDNN-layout filter (no `out`),
  // unless the filter comes in that layout (XLA's custom calls).
  const PassBytes bytes =
      PassTensorBytes(pass_, params_, *std::max_element(sizes.begin(), sizes.end()));
  const int64_t a_bytes = bytes.a, b_bytes = bytes.b;
  const int64_t result_bytes =
      pass_ == Pass::kBackwardFilter && !t.filter_in_cudnn_layout ? 0 : bytes.out;
  const int64_t bias_bytes = params_.bias ? params_.out_channels * DTypeSize(params_.dtype) : 0;
  PassTensors copy;
  void* a = peer.scratch->Allocate(a_bytes);
  void* b = peer.scratch->Allocate(b_bytes);
  copy.out = result_bytes > 0 ? peer.scratch->Allocate(result_bytes) : nullptr;
  void* bias = bias_bytes > 0 ? peer.scratch->Allocate(bias_bytes) : nullptr;
  if (a == nullptr || b == nullptr || (result_bytes > 0 && copy.out == nullptr) ||
      (bias_bytes > 0 && bias == nullptr)) {
    return Status::ResourceExhausted("could not allocate " +
                                     std::to_string(a_bytes + b_bytes + result_bytes + bias_bytes) +
                                     " bytes on GPU " + std::to_string(peer.device) +
                                     " to benchmark there");
  }
  UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(a, peer.device, t.a, own_device, a_bytes, peer.stream));
  UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(b, peer.device, t.b, own_device, b_bytes, peer.stream));
  if (bias != nullptr) {
    UCUDNN_CUDA_OK(
        cudaMemcpyPeerAsync(bias, peer.device, t.bias, own_device, bias_bytes, peer.stream));
  }
  copy.a = a;
  copy.b = b;
  copy.bias = bias;
  copy.filter_in_cudnn_layout = t.filter_in_cudnn_layout;
  return BenchmarkOn(handle, peer.stream, sizes, workspace_limit, copy, peer.scratch,
                     /*small_sizes_where_limited=*/false, got);
}

Status CudnnKernel::Benchmark(CudnnHandle* handle, cudaStream_t stream,
                              const std::vector<int64_t>& sizes, int64_t workspace_limit,
                              const PassTensors& t, ScratchAllocator* scratch,
                              const std::vector<BenchmarkPeer>& peers,
                              bool small_sizes_where_limited) {
  const std::vector<std::vector<int64_t>> shares =
      SpreadSizes(sizes, static_cast<int>(peers.size()) + 1);
  std::vector<MeasuredSizes> got(shares.size());
  std::vector<Status> status(shares.size());
  std::vector<std::thread> threads;
  int own_device = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&own_device));
  if (!peers.empty()) {
    // The peers copy the op's inputs, which this stream produces.
    UCUDNN_CUDA_OK(cudaStreamSynchronize(stream));
    for (size_t i = 1; i < shares.size(); ++i) {
      if (shares[i].empty()) continue;
      threads.emplace_back([&, i] {
        status[i] = BenchmarkOnPeer(own_device, peers[i - 1], shares[i], workspace_limit, t,
                                    &got[i]);
      });
    }
  }
  if (!shares[0].empty()) {
    // Sizes spread over GPUs: each benchmarks all of its share (the rule
    // needs the graph sizes' results before the smaller ones).
    status[0] = BenchmarkOn(handle, stream, shares[0], workspace_limit, t, scratch,
                            small_sizes_where_limited && shares.size() == 1, &got[0]);
  }
  for (std::thread& thread : threads) thread.join();
  for (const Status& s : status) UCUDNN_RETURN_IF_ERROR(s);
  benchmark_devices_.clear();
  for (size_t i = 0; i < shares.size(); ++i) {
    if (!shares[i].empty()) benchmark_devices_.push_back(i == 0 ? own_device : peers[i - 1].device);
  }
  // One table, algorithms numbered in order of first appearance by size.
  MeasuredSizes all;
  for (MeasuredSizes& g : got) {
    for (auto& [size, measured] : g) all[size] = std::move(measured);
  }
  for (const auto& [size, measured] : all) {
    std::vector<AlgoPerf>& row = table_[size];
    for (const Measured& m : measured) {
      int index = -1;
      for (size_t i = 0; i < algos_.size(); ++i) {
        if (algos_[i] == m.algo) index = static_cast<int>(i);
      }
      if (index < 0) {
        index = static_cast<int>(algos_.size());
        algos_.push_back(m.algo);
      }
      row.push_back({index, m.time_ms, m.workspace_bytes});
    }
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
