// Execution overhead of a one-micro-batch plan against one direct cuDNN call
// (`tf-ucudnn bench` overhead mode; the aim: at most 3 % more). Benchmark
// code, not in the op library: built into _ucudnn_overhead.so (`make
// build-bench`), which takes the engine (its kernel cache, runners and
// descriptors) from the _ucudnn_ops.so loaded in the same process. Its C
// entry point, ucudnn_overhead_time, answers in JSON as the op library's
// C interface does (freed with ucudnn_free).
#if GOOGLE_CUDA

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cc/engine/cudnn_kernel.h"
#include "cc/engine/graph_timing.h"
#include "cc/engine/kernel_cache.h"
#include "nlohmann/json.hpp"

namespace ucudnn {

// What TimeOverhead measures, in ms per call: wall-clock from a synced stream
// to a synced stream, and the host's time to enqueue the calls.
struct OverheadTimes {
  double plan_ms = 0, direct_ms = 0, transform_ms = 0;
  double plan_host_ms = 0, direct_host_ms = 0;
};

namespace {

// cudaMalloc'd buffers handed out in order and reused on the next round, so
// that Run's allocations cost what a warm caching allocator's do.
class RoundScratch : public ScratchAllocator {
 public:
  ~RoundScratch() override {
    for (auto& [ptr, bytes] : buffers_) cudaFree(ptr);
  }
  void* Allocate(int64_t bytes) override {
    if (bytes <= 0) return nullptr;
    if (next_ < buffers_.size() && buffers_[next_].second >= bytes) return buffers_[next_++].first;
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    buffers_.insert(buffers_.begin() + next_, {p, bytes});
    return buffers_[next_++].first;
  }
  void NextRound() { next_ = 0; }

 private:
  std::vector<std::pair<void*, int64_t>> buffers_;
  size_t next_ = 0;
};

// Wall-clock ms per call of `iters` calls, from a synced stream to a synced
// stream, and the host's ms per call to enqueue them.
Status TimeCalls(cudaStream_t stream, int iters, const std::function<Status()>& call,
                 double* ms, double* host_ms) {
  if (cudaStreamSynchronize(stream) != cudaSuccess) return Status::Internal("sync failed");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) UCUDNN_RETURN_IF_ERROR(call());
  const auto enqueued = std::chrono::steady_clock::now();
  if (cudaStreamSynchronize(stream) != cudaSuccess) return Status::Internal("sync failed");
  const auto done = std::chrono::steady_clock::now();
  *ms = std::chrono::duration<double, std::milli>(done - start).count() / iters;
  *host_ms = std::chrono::duration<double, std::milli>(enqueued - start).count() / iters;
  return Status();
}

}  // namespace

// Execution overhead (the benchmark's overhead mode): times `iters` calls of
// the kernel's Run with its current plan, which must be one micro-batch,
// against `iters` direct cuDNN calls with the same algorithm, descriptors and
// workspace and the filter already in cuDNN's layout. Wall-clock ms per call
// from a synced stream to a synced stream, median of 5 repeats. Allocates its
// buffers with cudaMalloc on `device` (the process must leave that memory
// free, e.g. with TensorFlow's memory growth), on a stream of its own.
// transform_ms is the filter transform alone that Run does on every call
// (into cuDNN's layout; for backward-filter, the gradient back into TF's HWIO).
Status TimeOverhead(CudnnKernel& kernel, int device, int iters, OverheadTimes* times) {
  const Plan plan = kernel.plan();
  PlanRunner& runner = kernel.runner();
  PassOperations& ops = runner.operations();
  const Pass pass = kernel.pass();
  if (kernel.params().fusion.bias()) {
    return Status::InvalidArgument("the overhead measurement takes convolutions without a bias");
  }
  if (plan.micro_batches.size() != 1) {
    return Status::InvalidArgument(
        "the overhead is measured on a plan of one micro-batch; this kernel's has " +
        std::to_string(plan.micro_batches.size()));
  }
  if (iters < 1) return Status::InvalidArgument("iters must be at least 1");
  if (cudaSetDevice(device) != cudaSuccess) return Status::InvalidArgument("no such GPU");
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) return Status::Internal("cudaStreamCreate failed");
  CudnnHandle* handle = nullptr;
  Status status = GetCudnnHandle(device, stream, &handle);
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(handle->mu);
    if (cudnnSetStream(handle->handle, stream) != CUDNN_STATUS_SUCCESS) {
      status = Status::Internal("cudnnSetStream failed");
    }
  }
  RoundScratch scratch;  // Run's filter copy and workspace
  const ConvParams& p = kernel.params();
  const int64_t elem = DTypeSize(p.dtype);
  const int64_t filter_bytes = p.filter_size() * elem;
  const PassBytes bytes = PassTensorBytes(pass, p, p.batch);
  std::vector<void*> buffers;
  // Inputs hold small finite values (bytes 0x3c: about 0.0115 in float32, 1.06
  // in half); the padded buffer's border must be zero.
  auto buffer = [&](int64_t n, int fill = 0x3c) -> void* {
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, std::max<int64_t>(n, 1)) != cudaSuccess) return nullptr;
    buffers.push_back(ptr);
    cudaMemsetAsync(ptr, fill, n, stream);
    return ptr;
  };
  PassTensors t;
  t.a = buffer(bytes.a);
  t.b = buffer(bytes.b);
  t.out = buffer(bytes.out);
  void* filter = buffer(filter_bytes);  // the direct call's filter, already in cuDNN's layout
  void* workspace = plan.workspace_bytes > 0 ? buffer(plan.workspace_bytes) : nullptr;
  void* padded = nullptr;
  if (!p.symmetric_padding()) {
    padded = buffer(p.batch * runner.geometry().padded_sample_elems * elem, 0);
  }
  const bool allocated = t.a && t.b && t.out && filter &&
                         (plan.workspace_bytes == 0 || workspace) &&
                         (p.symmetric_padding() || padded);
  if (status.ok() && !allocated) {
    status = Status::ResourceExhausted("could not cudaMalloc the overhead measurement's buffers");
  }
  if (status.ok() && pass != Pass::kBackwardFilter) {
    std::lock_guard<std::mutex> lock(handle->mu);
    status = ops.TransformFilter(handle->handle, t.b, filter, /*to_cudnn=*/true);
  }
  const MicroBatch mb = plan.micro_batches[0];
  const void* direct_b = pass == Pass::kBackwardFilter ? t.b : filter;
  void* direct_out = pass == Pass::kBackwardFilter ? filter : t.out;
  auto run_plan = [&]() -> Status {
    scratch.NextRound();
    Plan ran;
    return kernel.Run(handle, stream, plan, t, &scratch, &ran);
  };
  // A graph-API engine's direct call is cudnnBackendExecute with a variant
  // pack built beforehand (the engine builds one per call). Transposed plans
  // and asymmetric padding (explicitly padded copies) run RunMicroBatch as
  // the direct call instead.
  const CudnnAlgo& algo = kernel.algos()[mb.algo];
  const bool graph_direct = algo.graph() && !algo.engine.transposed && p.symmetric_padding();
  const GraphPlan* graph_plan = nullptr;
  cudnnBackendDescriptor_t pack = nullptr;
  if (status.ok() && graph_direct) {
    status = runner.descriptors().GetGraphPlan(handle->handle, mb.size, algo.engine, false,
                                               &graph_plan);
    const void *x = nullptr, *w = nullptr, *y = nullptr;
    GraphTiming::GraphRoles(pass, t.a, direct_b, direct_out, &x, &w, &y);
    void* pointers[3] = {const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y)};
    if (status.ok()) status = graph_plan->MakeVariantPack(pointers, workspace, &pack);
  }
  auto run_direct = [&]() -> Status {
    std::lock_guard<std::mutex> lock(handle->mu);
    if (graph_direct) return graph_plan->ExecutePack(handle->handle, pack);
    return runner.RunMicroBatch(handle->handle, stream, mb, algo, 0, false, t.a, direct_b,
                                direct_out, FusionPointers(), workspace, padded);
  };
  // Warm up both, then alternate so that drift (clocks, heat) hits both alike.
  for (int i = 0; status.ok() && i < 3; ++i) status = run_plan();
  for (int i = 0; status.ok() && i < 3; ++i) status = run_direct();
  // The filter transform Run does on every call: into cuDNN's layout, or for
  // backward-filter the gradient back into TF's.
  const bool to_cudnn = pass != Pass::kBackwardFilter;
  auto run_transform = [&]() -> Status {
    std::lock_guard<std::mutex> lock(handle->mu);
    return to_cudnn ? ops.TransformFilter(handle->handle, t.b, filter, true)
                    : ops.TransformFilter(handle->handle, filter, t.out, false);
  };
  std::vector<double> plan_times, direct_times, transform_times, plan_host, direct_host;
  for (int round = 0; status.ok() && round < 5; ++round) {
    double ms = 0, host_ms = 0;
    status = TimeCalls(stream, iters, run_plan, &ms, &host_ms);
    plan_times.push_back(ms);
    plan_host.push_back(host_ms);
    if (status.ok()) status = TimeCalls(stream, iters, run_direct, &ms, &host_ms);
    direct_times.push_back(ms);
    direct_host.push_back(host_ms);
    if (status.ok()) status = TimeCalls(stream, iters, run_transform, &ms, &host_ms);
    transform_times.push_back(ms);
  }
  cudaStreamSynchronize(stream);
  if (pack != nullptr) cudnnBackendDestroyDescriptor(pack);
  for (void* ptr : buffers) cudaFree(ptr);
  cudaStreamDestroy(stream);
  UCUDNN_RETURN_IF_ERROR(status);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  times->plan_ms = median(plan_times);
  times->direct_ms = median(direct_times);
  times->transform_ms = median(transform_times);
  times->plan_host_ms = median(plan_host);
  times->direct_host_ms = median(direct_host);
  return Status();
}

namespace {

char* Answer(const nlohmann::json& answer) {
  const std::string text = answer.dump();
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

}  // namespace
}  // namespace ucudnn

extern "C" {

// Execution overhead of kernel `id` (an id of the op library's
// ucudnn_kernels), whose plan must be one micro-batch, over `iters` calls
// (TimeOverhead). Answer, in ms per call: {"plan_ms" (through the engine's
// Run), "direct_ms" (a direct cuDNN call), "transform_ms" (the filter
// transform), "plan_host_ms", "direct_host_ms" (host time to enqueue each)},
// or {"error": ...}; malloc'd (the op library's ucudnn_free frees it).
__attribute__((visibility("default"))) char* ucudnn_overhead_time(int64_t id, int32_t iters) {
  try {
    const auto kernels = ucudnn::AllKernels();
    if (id < 0 || id >= static_cast<int64_t>(kernels.size())) {
      return ucudnn::Answer({{"error", "no kernel with id " + std::to_string(id)}});
    }
    const auto& [key, kernel] = kernels[id];
    ucudnn::OverheadTimes t;
    const ucudnn::Status status = ucudnn::TimeOverhead(*kernel, key.device, iters, &t);
    if (!status.ok()) return ucudnn::Answer({{"error", status.message()}});
    return ucudnn::Answer({{"plan_ms", t.plan_ms},
                           {"direct_ms", t.direct_ms},
                           {"transform_ms", t.transform_ms},
                           {"plan_host_ms", t.plan_host_ms},
                           {"direct_host_ms", t.direct_host_ms}});
  } catch (const std::exception& e) {
    return ucudnn::Answer({{"error", e.what()}});
  }
}

}  // extern "C"

#endif  // GOOGLE_CUDA
