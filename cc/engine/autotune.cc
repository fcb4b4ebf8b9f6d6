// The Autotuner: micro-batch sizes spread over this GPU and peers, each
// benchmarked by a DeviceBenchmark, into one BenchmarkTable (see autotune.h).
#if GOOGLE_CUDA

#include "cc/engine/autotune.h"

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "cc/engine/benchmark_devices.h"
#include "cc/engine/cuda_check.h"
#include "cc/engine/device_benchmark.h"

namespace ucudnn {

Status Autotuner::BenchmarkOnPeer(int own_device, const BenchmarkPeer& peer,
                                  const std::vector<int64_t>& sizes, int64_t workspace_limit,
                                  const PassTensors& t, MeasuredSizes* got,
                                  std::set<int64_t>* pressured, PrunedEngines* pruned) {
  UCUDNN_CUDA_OK(cudaSetDevice(peer.device));
  const Status status = BenchmarkOnPeerDevice(own_device, peer, sizes, workspace_limit, t, got,
                                              pressured, pruned);
  // Whatever was queued is done before the peer's memory goes back to its allocator.
  const cudaError_t synced = cudaStreamSynchronize(peer.stream);
  UCUDNN_RETURN_IF_ERROR(status);
  if (synced != cudaSuccess) {
    return Status::Internal(std::string("CUDA error after benchmarking on GPU ") +
                            std::to_string(peer.device) + ": " + cudaGetErrorString(synced));
  }
  return Status();
}

Status Autotuner::BenchmarkOnPeerDevice(int own_device, const BenchmarkPeer& peer,
                                        const std::vector<int64_t>& sizes,
                                        int64_t workspace_limit, const PassTensors& t,
                                        MeasuredSizes* got, std::set<int64_t>* pressured,
                                        PrunedEngines* pruned) {
  CudnnHandle* handle = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetBenchmarkHandle(peer.device, peer.stream, &handle));
  // The first max_size samples of the batched tensors, and the whole filter.
  // Backward-filter benchmarks into its own cuDNN-layout filter (no `out`),
  // unless the filter comes in that layout (XLA's custom calls).
  const PassBytes bytes =
      PassTensorBytes(spec_.pass, spec_.params, *std::max_element(sizes.begin(), sizes.end()));
  const int64_t a_bytes = bytes.a, b_bytes = bytes.b;
  const int64_t result_bytes =
      spec_.pass == Pass::kBackwardFilter && !t.filter_in_cudnn_layout ? 0 : bytes.out;
  const ConvParams& p = spec_.params;
  const int64_t bias_bytes = p.fusion.bias() ? p.out_channels * DTypeSize(p.dtype) : 0;
  const int64_t sums_bytes = p.fusion.statistics() ? 2 * p.out_channels * 4 : 0;
  // The prologue's scale and bias, one block (in_channels elements each).
  const int64_t channel_bytes = p.in_channels * DTypeSize(p.dtype);
  const int64_t prologue_bytes = p.fusion.input_scale_bias() ? 2 * AlignedBytes(channel_bytes) : 0;
  PassTensors copy;
  void* a = peer.scratch->Allocate(a_bytes);
  void* b = peer.scratch->Allocate(b_bytes);
  copy.out = result_bytes > 0 ? peer.scratch->Allocate(result_bytes) : nullptr;
  void* bias = bias_bytes > 0 ? peer.scratch->Allocate(bias_bytes) : nullptr;
  // The statistics the benchmark writes, never read.
  void* sums = sums_bytes > 0 ? peer.scratch->Allocate(sums_bytes) : nullptr;
  char* prologue =
      prologue_bytes > 0 ? static_cast<char*>(peer.scratch->Allocate(prologue_bytes)) : nullptr;
  if (a == nullptr || b == nullptr || (result_bytes > 0 && copy.out == nullptr) ||
      (bias_bytes > 0 && bias == nullptr) || (sums_bytes > 0 && sums == nullptr) ||
      (prologue_bytes > 0 && prologue == nullptr)) {
    return Status::ResourceExhausted("could not allocate " +
                                     std::to_string(a_bytes + b_bytes + result_bytes + bias_bytes +
                                                    sums_bytes + prologue_bytes) +
                                     " bytes on GPU " + std::to_string(peer.device) +
                                     " to benchmark there");
  }
  UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(a, peer.device, t.a, own_device, a_bytes, peer.stream));
  UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(b, peer.device, t.b, own_device, b_bytes, peer.stream));
  if (bias != nullptr) {
    UCUDNN_CUDA_OK(
        cudaMemcpyPeerAsync(bias, peer.device, t.bias, own_device, bias_bytes, peer.stream));
  }
  if (prologue != nullptr) {
    char* input_bias = prologue + AlignedBytes(channel_bytes);
    UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(prologue, peer.device, t.prologue_scale, own_device,
                                       channel_bytes, peer.stream));
    UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(input_bias, peer.device, t.prologue_bias, own_device,
                                       channel_bytes, peer.stream));
    copy.input_scale = t.input_scale;  // for Fusion::Check; the peer reads the copies
    copy.input_bias = t.input_bias;
    copy.prologue_scale = prologue;
    copy.prologue_bias = input_bias;
  }
  copy.a = a;
  copy.b = b;
  copy.bias = bias;
  if (sums != nullptr) {
    copy.sum = static_cast<float*>(sums);
    copy.sum_of_squares = copy.sum + p.out_channels;
  }
  copy.filter_in_cudnn_layout = t.filter_in_cudnn_layout;
  return DeviceBenchmark(runner_, seed_, seed_roomy_)
      .Run(handle, peer.stream, sizes, workspace_limit, copy, peer.scratch,
           /*small_sizes_where_limited=*/false, got, pressured, pruned);
}

Status Autotuner::Benchmark(CudnnHandle* handle, cudaStream_t stream,
                            const std::vector<int64_t>& sizes, int64_t workspace_limit,
                            const PassTensors& t, ScratchAllocator* scratch,
                            const std::vector<BenchmarkPeer>& peers,
                            bool small_sizes_where_limited, BenchmarkTable* out) {
  const std::vector<std::vector<int64_t>> shares =
      SpreadSizes(sizes, static_cast<int>(peers.size()) + 1);
  std::vector<MeasuredSizes> got(shares.size());
  // Per GPU: sizes measured under memory pressure, graph engines pruned.
  std::vector<std::set<int64_t>> pressured(shares.size());
  std::vector<PrunedEngines> pruned(shares.size());
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
                                    &got[i], &pressured[i], &pruned[i]);
      });
    }
  }
  if (!shares[0].empty()) {
    // Sizes spread over GPUs: each benchmarks all of its share (the rule
    // needs the graph sizes' results before the smaller ones).
    status[0] = DeviceBenchmark(runner_, seed_, seed_roomy_)
                    .Run(handle, stream, shares[0], workspace_limit, t, scratch,
                         small_sizes_where_limited && shares.size() == 1, &got[0], &pressured[0],
                         &pruned[0]);
  }
  for (std::thread& thread : threads) thread.join();
  for (const Status& s : status) UCUDNN_RETURN_IF_ERROR(s);
  out->devices.clear();
  for (size_t i = 0; i < shares.size(); ++i) {
    if (!shares[i].empty()) out->devices.push_back(i == 0 ? own_device : peers[i - 1].device);
  }
  // One table, algorithms numbered in order of first appearance by size.
  MeasuredSizes all;
  for (MeasuredSizes& g : got) {
    for (auto& [size, measured] : g) all[size] = std::move(measured);
  }
  AddMeasured(all, out);
  for (size_t i = 0; i < shares.size(); ++i) {
    out->pressured.insert(pressured[i].begin(), pressured[i].end());
    MergePrunedEngines(&out->pruned, pruned[i]);
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
