// The OpKernels of Ucudnn>Conv2D and its two gradients, on CPU and GPU: read
// attributes and shapes, allocate, and hand the work to the engine.
#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "cc/kernels/conv_attrs.h"
#include "cc/kernels/engine/cpu_backend.h"
#include "cc/kernels/engine/debug_output.h"
#include "cc/kernels/engine/executor.h"
#include "cc/kernels/engine/plan_cache.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/util/work_sharder.h"

#if GOOGLE_CUDA
#include "cc/kernels/benchmark_peers.h"
#include "cc/kernels/engine/cudnn_backend.h"
#include "cc/kernels/engine/division_groups.h"
#include "tensorflow/core/util/determinism.h"
#include "tsl/platform/tensor_float_32_utils.h"
#include "xla/stream_executor/stream.h"
#include "xla/stream_executor/stream_executor.h"
#endif

namespace tensorflow {
namespace ucudnn_tf {

using ucudnn::ConvParams;
using ucudnn::Pass;
using ucudnn::Plan;

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

namespace {

absl::Status ToTfStatus(const ucudnn::Status& s) {
  switch (s.code()) {
    case ucudnn::Status::Code::kOk: return absl::OkStatus();
    case ucudnn::Status::Code::kInvalidArgument: return absl::InvalidArgumentError(s.message());
    case ucudnn::Status::Code::kResourceExhausted:
      return absl::ResourceExhaustedError(s.message());
    case ucudnn::Status::Code::kInternal: return absl::InternalError(s.message());
  }
  return absl::UnknownError(s.message());
}

void LogPlan(const ucudnn::PlanRecord& r) {
  if (!ucudnn::DebugOutput()) return;
  // Runs of equal micro-batches: "8x32 ALGO_1/tensor-op" is 8 micro-batches of 32.
  std::string steps;
  for (size_t i = 0; i < r.micro_batches.size();) {
    size_t j = i;
    while (j < r.micro_batches.size() && r.micro_batches[j].size == r.micro_batches[i].size &&
           r.micro_batches[j].algo == r.micro_batches[i].algo) {
      ++j;
    }
    absl::StrAppend(&steps, i == 0 ? "" : " + ", j - i, "x", r.micro_batches[i].size, " ",
                    r.micro_batches[i].algo);
    i = j;
  }
  std::fprintf(stderr, "tf_ucudnn: %s %s %s: %s (workspace %lld bytes, %.3f ms)%s%s\n",
               r.device.c_str(), ucudnn::PassName(r.pass), r.params.ToString().c_str(),
               steps.c_str(), static_cast<long long>(r.workspace_bytes), r.time_ms,
               r.note.empty() ? "" : "; ", r.note.c_str());
}

std::string PolicyLabel(const ConvAttrs& attrs) {
  return attrs.micro_batch_size > 0 ? absl::StrCat("forced ", attrs.micro_batch_size)
                                    : ucudnn::BatchSizePolicyName(attrs.policy);
}

}  // namespace

template <typename Device, typename T>
struct LaunchConv;

template <typename T>
struct LaunchConv<CPUDevice, T> {
  static absl::Status Run(OpKernelContext* ctx, Pass pass, const ConvAttrs& attrs,
                          const ConvParams& p, const Tensor& a, const Tensor& b, Tensor* out) {
    // On the CPU there is one algorithm and no workspace: micro-batches of
    // micro_batch_size if given, else the whole mini-batch.
    const Plan plan = ucudnn::UniformPlan(p.batch, attrs.micro_batch_size);
    RecordOnce(ctx, pass, attrs, p, plan);
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const ucudnn::ParallelFor parallel_for =
        [workers](int64_t units, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
          Shard(workers->num_threads, workers->workers, units, cost, fn);
        };
    const T* a_ptr = a.flat<T>().data();
    const T* b_ptr = b.flat<T>().data();
    T* out_ptr = out->flat<T>().data();
    // Backward-filter micro-batches add up in float32 (see CpuBackwardFilter):
    // in the output itself for float32, else in a temporary rounded to T once.
    float* filter_acc = nullptr;
    Tensor acc;
    if (pass == Pass::kBackwardFilter) {
      if constexpr (std::is_same_v<T, float>) {
        filter_acc = out_ptr;
      } else {
        TF_RETURN_IF_ERROR(ctx->allocate_temp(DT_FLOAT, out->shape(), &acc));
        filter_acc = acc.flat<float>().data();
      }
    }
    TF_RETURN_IF_ERROR(ToTfStatus(ucudnn::ExecutePlan(
        plan, pass, [&](int64_t offset, const ucudnn::MicroBatch& mb, bool accumulate) {
          const int64_t in_off = offset * p.input_sample_size();
          const int64_t out_off = offset * p.output_sample_size();
          switch (pass) {
            case Pass::kForward:
              ucudnn::CpuForward<T>(p, mb.size, a_ptr + in_off, b_ptr, out_ptr + out_off,
                                    parallel_for);
              break;
            case Pass::kBackwardData:
              ucudnn::CpuBackwardData<T>(p, mb.size, a_ptr + out_off, b_ptr, out_ptr + in_off,
                                         parallel_for);
              break;
            case Pass::kBackwardFilter:
              ucudnn::CpuBackwardFilter<T>(p, mb.size, a_ptr + in_off, b_ptr + out_off,
                                           filter_acc, accumulate, parallel_for);
              break;
          }
          return ucudnn::Status();
        })));
    if constexpr (!std::is_same_v<T, float>) {
      if (pass == Pass::kBackwardFilter) ucudnn::CpuStoreFilter<T>(p, filter_acc, out_ptr);
    }
    return absl::OkStatus();
  }

  static void RecordOnce(OpKernelContext* ctx, Pass pass, const ConvAttrs& attrs,
                         const ConvParams& p, const Plan& plan) {
    static std::mutex mu;
    static auto* seen = new std::set<ucudnn::KernelKey>();
    ucudnn::KernelKey key;
    key.pass = pass;
    key.conv = p.Fields();
    key.device = -1 - ctx->device()->parsed_name().id;  // CPU devices: -1, -2, ...
    key.forced_micro_batch = attrs.micro_batch_size;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!seen->insert(key).second) return;
    }
    ucudnn::PlanRecord r;
    r.device = ctx->device()->name();
    r.pass = pass;
    r.params = p;
    r.workspace_limit = attrs.workspace_limit;
    r.policy = attrs.micro_batch_size > 0 ? PolicyLabel(attrs) : "undivided (CPU)";
    for (const auto& mb : plan.micro_batches) {
      r.micro_batches.push_back({mb.size, "im2col-gemm", 0, std::nan("")});
    }
    r.time_ms = std::nan("");
    ucudnn::RecordPlan(r);
    LogPlan(r);
  }
};

#if GOOGLE_CUDA

namespace {

// Workspace and scratch from TF's allocator (BFC, stream-ordered), held until
// Compute returns. A failed allocation returns nullptr so the engine can fall
// back to a plan that needs less.
class TfScratchAllocator : public ucudnn::ScratchAllocator {
 public:
  explicit TfScratchAllocator(OpKernelContext* ctx) : ctx_(ctx) {}
  void* Allocate(int64_t bytes) override {
    if (bytes <= 0) return nullptr;
    Tensor t;
    AllocationAttributes alloc_attrs;
    alloc_attrs.retry_on_failure = false;
    const absl::Status s = ctx_->allocate_temp(DT_UINT8, TensorShape({bytes}), &t,
                                               AllocatorAttributes(), alloc_attrs);
    if (!s.ok()) return nullptr;
    tensors_.push_back(t);
    return t.flat<uint8>().data();
  }
  void ReleaseAll() override { tensors_.clear(); }

 private:
  OpKernelContext* ctx_;
  std::vector<Tensor> tensors_;
};

// Logs once per kernel that its plan's workspace could not be allocated.
void LogFallbackOnce(const ucudnn::KernelKey& key, const std::string& what) {
  static std::mutex mu;
  static auto* seen = new std::set<ucudnn::KernelKey>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen->insert(key).second) return;
  }
  LOG(WARNING) << "tf_ucudnn: " << what;
}

ucudnn::PlanRecord MakeRecord(OpKernelContext* ctx, const ucudnn::CudnnKernel& kernel,
                              const ConvAttrs& attrs, const Plan& plan) {
  ucudnn::PlanRecord r;
  r.device = ctx->device()->name();
  r.pass = kernel.pass();
  r.params = kernel.params();
  r.workspace_limit = attrs.workspace_limit;
  r.policy = PolicyLabel(attrs);
  if (attrs.total_workspace > 0) {
    r.note = absl::StrCat("Workspace Division group of ", attrs.total_workspace,
                          " bytes: benchmarked within the whole budget, divided after a step");
  }
  for (const auto& mb : plan.micro_batches) {
    r.micro_batches.push_back({mb.size, ucudnn::CudnnAlgoName(kernel.pass(), kernel.algos()[mb.algo]),
                               mb.workspace_bytes, mb.time_ms});
  }
  r.workspace_bytes = plan.workspace_bytes;
  r.time_ms = plan.time_ms;
  return r;
}

}  // namespace

template <typename T>
struct LaunchConv<GPUDevice, T> {
  static absl::Status Run(OpKernelContext* ctx, Pass pass, const ConvAttrs& attrs,
                          const ConvParams& p, const Tensor& a, const Tensor& b, Tensor* out) {
    se::Stream* se_stream = ctx->op_device_context()->stream();
    if (se_stream == nullptr) return absl::InternalError("no GPU stream for tf_ucudnn");
    const int device = se_stream->parent()->device_ordinal();
    cudaStream_t stream = ctx->eigen_gpu_device().stream();
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current != device) cudaSetDevice(device);

    ucudnn::CudnnHandle* handle = nullptr;
    TF_RETURN_IF_ERROR(ToTfStatus(ucudnn::GetCudnnHandle(device, stream, &handle)));
    ucudnn::KernelKey key;
    key.pass = pass;
    key.conv = p.Fields();
    key.device = device;
    key.allow_tf32 = tsl::tensor_float_32_execution_enabled();
    key.deterministic = OpDeterminismRequired();
    key.workspace_limit = attrs.workspace_limit;
    key.policy = attrs.policy;
    key.forced_micro_batch = attrs.micro_batch_size;
    key.total_workspace = attrs.total_workspace;
    key.engines = attrs.engines;
    std::shared_ptr<ucudnn::CudnnKernel> kernel = ucudnn::GetOrCreateKernel(key, p);

    ucudnn::PassTensors tensors;
    tensors.a = a.tensor_data().data();
    tensors.b = b.tensor_data().data();
    tensors.out = const_cast<char*>(out->tensor_data().data());
    bool planned_now = false;
    double planning_ms = 0;
    if (!kernel->planned()) {
      const auto planning_start = std::chrono::steady_clock::now();
      // Benchmark buffers go back to TF's allocator before the plan's own
      // workspace is taken (stream-ordered, so no synchronisation is needed).
      TfScratchAllocator bench_scratch(ctx);
      std::unique_ptr<BenchmarkPeers> peers;
      if (!kernel->seeded()) TF_RETURN_IF_ERROR(BenchmarkPeers::Make(ctx, device, &peers));
      static const std::vector<ucudnn::BenchmarkPeer> kNoPeers;
      TF_RETURN_IF_ERROR(ToTfStatus(kernel->EnsurePlanned(
          handle, stream, attrs.policy, attrs.micro_batch_size, attrs.workspace_limit, tensors,
          &bench_scratch, peers ? peers->peers() : kNoPeers, &planned_now)));
      planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              planning_start)
                        .count();
    }
    if (planned_now) {
      ucudnn::PlanRecord r = MakeRecord(ctx, *kernel, attrs, kernel->plan());
      r.planning_ms = planning_ms;
      std::string note;
      const std::vector<int> bench_devices = kernel->benchmark_devices();
      if (kernel->seeded()) {
        note = "benchmarks from the database";
      } else if (bench_devices.size() > 1) {
        note = "benchmarked on GPUs " + absl::StrJoin(bench_devices, ", ");
      }
      if (!note.empty()) r.note = r.note.empty() ? note : r.note + "; " + note;
      LogPlan(r);
      ucudnn::RecordPlan(std::move(r));
    }
    Plan ran;
    // A Workspace Division group's kernel runs its least-workspace plan until
    // the group is first divided (after one step): meanwhile its members
    // benchmark one at a time within the whole budget and run holding (next
    // to) no workspace, so the budget holds from the first step on.
    const Plan plan = attrs.total_workspace > 0 && !kernel->divided()
                          ? kernel->LeastWorkspacePlan()
                          : kernel->plan();
    TfScratchAllocator scratch(ctx);
    TF_RETURN_IF_ERROR(ToTfStatus(kernel->Run(handle, stream, plan, tensors, &scratch, &ran)));
    if (ran.workspace_bytes != plan.workspace_bytes) {
      LogFallbackOnce(key, absl::StrCat("could not allocate ", plan.workspace_bytes,
                                        " bytes of workspace for ", ucudnn::PassName(pass), " ",
                                        p.ToString(), "; running a plan that needs ",
                                        ran.workspace_bytes, " bytes instead"));
    }
    if (attrs.total_workspace > 0) {
      ucudnn::NoteGroupRun(device, attrs.total_workspace, kernel.get());
    }
    return absl::OkStatus();
  }
};

#endif  // GOOGLE_CUDA

// One kernel class for the three passes.
template <typename Device, typename T, Pass kPass>
class UcudnnConvOp : public OpKernel {
 public:
  explicit UcudnnConvOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ParseConvAttrs(ctx, &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    TensorShape input_shape, filter_shape;
    const Tensor* a = nullptr;  // see ucudnn::PassTensors for which tensor is which
    const Tensor* b = nullptr;
    switch (kPass) {
      case Pass::kForward:
        input_shape = ctx->input(0).shape();
        filter_shape = ctx->input(1).shape();
        a = &ctx->input(0);
        b = &ctx->input(1);
        break;
      case Pass::kBackwardData:
        OP_REQUIRES_OK(ctx, ShapeFromSizesTensor(ctx->input(0), "input_sizes", &input_shape));
        filter_shape = ctx->input(1).shape();
        a = &ctx->input(2);
        b = &ctx->input(1);
        break;
      case Pass::kBackwardFilter:
        input_shape = ctx->input(0).shape();
        OP_REQUIRES_OK(ctx, ShapeFromSizesTensor(ctx->input(1), "filter_sizes", &filter_shape));
        a = &ctx->input(0);
        b = &ctx->input(2);
        break;
    }
    ConvParams params;
    OP_REQUIRES_OK(ctx, MakeConvParams(attrs_, input_shape, filter_shape, DataTypeToEnum<T>::v(),
                                       &params));
    const TensorShape output_shape = OutputShape(params);
    if (kPass != Pass::kForward) {
      const TensorShape& got = ctx->input(2).shape();
      OP_REQUIRES(ctx, got == output_shape,
                  errors::InvalidArgument("out_backprop has shape ", got.DebugString(),
                                          " but the convolution's output shape is ",
                                          output_shape.DebugString()));
    }
    const TensorShape& result_shape = kPass == Pass::kForward        ? output_shape
                                      : kPass == Pass::kBackwardData ? input_shape
                                                                     : filter_shape;
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, result_shape, &out));
    if (params.empty()) {
      // Zero-size tensors (batch 0, an empty spatial dimension, 0 output
      // channels), as tf.nn.conv2d: the result has its shape and, where it has
      // elements (e.g. the filter gradient of an empty batch), is zero. No
      // planning, no engine call.
      if (out->NumElements() > 0) {
        ctx->eigen_device<Device>().memset(out->data(), 0, out->TotalBytes());
      }
      return;
    }
    OP_REQUIRES_OK(ctx, LaunchConv<Device, T>::Run(ctx, kPass, attrs_, params, *a, *b, out));
  }

 private:
  ConvAttrs attrs_;
};

#define UCUDNN_REGISTER(DEV, DEVICE, T)                                                     \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("Ucudnn>Conv2D").Device(DEVICE_##DEV).TypeConstraint<T>("T"),                    \
      UcudnnConvOp<DEVICE, T, Pass::kForward>);                                             \
  REGISTER_KERNEL_BUILDER(Name("Ucudnn>Conv2DBackpropInput")                                \
                              .Device(DEVICE_##DEV)                                         \
                              .TypeConstraint<T>("T")                                       \
                              .HostMemory("input_sizes"),                                   \
                          UcudnnConvOp<DEVICE, T, Pass::kBackwardData>);                    \
  REGISTER_KERNEL_BUILDER(Name("Ucudnn>Conv2DBackpropFilter")                               \
                              .Device(DEVICE_##DEV)                                         \
                              .TypeConstraint<T>("T")                                       \
                              .HostMemory("filter_sizes"),                                  \
                          UcudnnConvOp<DEVICE, T, Pass::kBackwardFilter>);

UCUDNN_REGISTER(CPU, CPUDevice, float)
UCUDNN_REGISTER(CPU, CPUDevice, Eigen::half)
UCUDNN_REGISTER(CPU, CPUDevice, bfloat16)
#if GOOGLE_CUDA
UCUDNN_REGISTER(GPU, GPUDevice, float)
UCUDNN_REGISTER(GPU, GPUDevice, Eigen::half)
UCUDNN_REGISTER(GPU, GPUDevice, bfloat16)
#endif

}  // namespace ucudnn_tf
}  // namespace tensorflow
