// The OpKernels of Ucudnn>Conv2D (and Ucudnn>Conv2DWithBias) and its two
// gradients, on CPU and GPU: read attributes and shapes, allocate, and hand
// the work to the engine.
#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cc/kernels/conv_attrs.h"
#include "cc/kernels/device_memory.h"
#include "cc/engine/conv_runner.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/util/work_sharder.h"

#if GOOGLE_CUDA
#include "cc/kernels/benchmark_peers.h"
#include "tensorflow/core/util/determinism.h"
#include "tsl/platform/tensor_float_32_utils.h"
#include "xla/stream_executor/stream.h"
#include "xla/stream_executor/stream_executor.h"
#endif

namespace tensorflow {
namespace ucudnn_tf {

using ucudnn::ConvParams;
using ucudnn::Pass;

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

template <typename Device, typename T>
struct LaunchConv;

// The tensors of a forward pass's fusion: the bias it reads, the statistics
// it writes (out_channels float32 each), the input prologue's scale and
// offset it reads (in_channels float32 each); null where it has none.
struct FusionOperands {
  const Tensor* bias = nullptr;
  Tensor* sum = nullptr;
  Tensor* sum_of_squares = nullptr;
  const Tensor* input_scale = nullptr;
  const Tensor* input_bias = nullptr;
};

template <typename Tensors>
void SetFusionPointers(const FusionOperands& f, Tensors* t) {
  if (f.bias != nullptr) t->bias = f.bias->tensor_data().data();
  if (f.sum != nullptr) {
    t->sum = f.sum->flat<float>().data();
    t->sum_of_squares = f.sum_of_squares->flat<float>().data();
  }
  if (f.input_scale != nullptr) {
    t->input_scale = f.input_scale->flat<float>().data();
    t->input_bias = f.input_bias->flat<float>().data();
  }
}

// Runs one pass: `a`, `b` and `out` as in ucudnn::PassTensors; `bias` for
// a forward pass with a bias (p.fusion). An empty convolution with a bias (an
// input of no rows whose explicit padding still gives output rows, say) gets
// the bias in every output element. Planned and run by the engine
// (ucudnn::RunConvPassCpu) on TF's CPU worker threads.
template <typename T>
struct LaunchConv<CPUDevice, T> {
  static absl::Status Run(OpKernelContext* ctx, Pass pass, const ConvAttrs& attrs,
                          const ConvParams& p, const Tensor& a, const Tensor& b,
                          const FusionOperands& fusion, Tensor* out) {
    ucudnn::ConvRequest q;
    q.pass = pass;
    q.params = p;
    q.device = -1 - ctx->device()->parsed_name().id;  // CPU devices: -1, -2, ...
    q.device_name = ctx->device()->name();
    q.knobs = attrs.knobs;
    ucudnn::CpuPassTensors tensors;
    tensors.a = a.tensor_data().data();
    tensors.b = b.tensor_data().data();
    tensors.out = const_cast<char*>(out->tensor_data().data());
    SetFusionPointers(fusion, &tensors);
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const ucudnn::ParallelFor parallel_for =
        [workers](int64_t units, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
          Shard(workers->num_threads, workers->workers, units, cost, fn);
        };
    return EngineStatusToTf(ucudnn::RunConvPassCpu(q, tensors, parallel_for));
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
  ucudnn::FreeDeviceMemory FreeMemory() override {
    return FreeMemoryOf(ctx_->device()->GetAllocator(AllocatorAttributes()));
  }
  void Release(void* block) override {
    for (auto it = tensors_.begin(); it != tensors_.end(); ++it) {
      if (it->tensor_data().data() == block) {
        tensors_.erase(it);
        return;
      }
    }
  }

 private:
  OpKernelContext* ctx_;
  std::vector<Tensor> tensors_;
};

}  // namespace

template <typename T>
struct LaunchConv<GPUDevice, T> {
  static absl::Status Run(OpKernelContext* ctx, Pass pass, const ConvAttrs& attrs,
                          const ConvParams& p, const Tensor& a, const Tensor& b,
                          const FusionOperands& fusion, Tensor* out) {
    se::Stream* se_stream = ctx->op_device_context()->stream();
    if (se_stream == nullptr) return absl::InternalError("no GPU stream for tf_ucudnn");
    ucudnn::ConvRequest q;
    q.pass = pass;
    q.params = p;
    q.device = se_stream->parent()->device_ordinal();
    q.stream = ctx->eigen_gpu_device().stream();
    q.device_name = ctx->device()->name();
    q.knobs = attrs.knobs;
    q.knobs.allow_tf32 = tsl::tensor_float_32_execution_enabled();
    q.knobs.deterministic = OpDeterminismRequired();
    ucudnn::PassTensors tensors;
    tensors.a = a.tensor_data().data();
    tensors.b = b.tensor_data().data();
    tensors.out = const_cast<char*>(out->tensor_data().data());
    SetFusionPointers(fusion, &tensors);
    TfScratchAllocator scratch(ctx);
    std::unique_ptr<BenchmarkPeers> peers;
    return EngineStatusToTf(ucudnn::RunConvPass(
        q, tensors, &scratch, [&](std::vector<ucudnn::BenchmarkPeer>* list) {
          const absl::Status s = BenchmarkPeers::Make(ctx, q.device, &peers);
          if (!s.ok()) {
            // UCUDNN_BENCHMARK_DEVICES names GPUs this process cannot use.
            return absl::IsInvalidArgument(s)
                       ? ucudnn::Status::InvalidArgument(std::string(s.message()))
                       : ucudnn::Status::Internal(std::string(s.message()));
          }
          if (peers) *list = peers->peers();
          return ucudnn::Status();
        }));
  }
};

#endif  // GOOGLE_CUDA

// What a forward op fuses: nothing (Ucudnn>Conv2D), a bias
// (Ucudnn>Conv2DWithBias), the statistics (Ucudnn>Conv2DWithStatistics), or
// an input prologue and the statistics (Ucudnn>NormalizedConv2DWithStatistics).
enum class Fused { kNone, kBias, kStatistics, kPrologueStatistics };

// One kernel class for the three passes and the fused forward ops.
template <typename Device, typename T, Pass kPass, Fused kFused = Fused::kNone>
class UcudnnConvOp : public OpKernel {
  static constexpr bool kBias = kFused == Fused::kBias;
  static constexpr bool kPrologue = kFused == Fused::kPrologueStatistics;
  static constexpr bool kStatistics = kFused == Fused::kStatistics || kPrologue;
  static_assert(kFused == Fused::kNone || kPass == Pass::kForward,
                "only the forward pass fuses");
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
    FusionOperands fusion;
    if (kBias) {
      fusion.bias = &ctx->input(2);
      OP_REQUIRES_OK(ctx, CheckBias(fusion.bias->shape(), params));
      params.fusion = attrs_.fusion;
    }
    if (kPrologue) {
      fusion.input_scale = &ctx->input(2);
      fusion.input_bias = &ctx->input(3);
      OP_REQUIRES_OK(ctx, CheckInputScaleBias(fusion.input_scale->shape(),
                                              fusion.input_bias->shape(), params));
      params.fusion.prologue = attrs_.fusion.prologue;
    }
    if (kStatistics) {
      params.fusion.epilogue = ucudnn::Epilogue::kStatistics;
      const TensorShape sums({params.out_channels});
      OP_REQUIRES_OK(ctx, ctx->allocate_output(1, sums, &fusion.sum));
      OP_REQUIRES_OK(ctx, ctx->allocate_output(2, sums, &fusion.sum_of_squares));
    }
    const TensorShape output_shape = OutputShape(params);
    if (kPass != Pass::kForward) {
      OP_REQUIRES_OK(ctx, CheckOutBackprop(ctx->input(2).shape(), output_shape));
    }
    const TensorShape& result_shape =
        PassResultShape(kPass, input_shape, filter_shape, output_shape);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, result_shape, &out));
    if (params.empty() && !(kBias && out->NumElements() > 0)) {
      // Zero-size tensors (batch 0, an empty spatial dimension, 0 output
      // channels), as tf.nn.conv2d: the result has its shape and, where it has
      // elements (e.g. the filter gradient of an empty batch), is zero, as are
      // the statistics (sums over nothing). No planning, no engine call.
      // (With a bias, the engine broadcasts it.)
      for (Tensor* t : {out, fusion.sum, fusion.sum_of_squares}) {
        if (t != nullptr && t->NumElements() > 0) {
          ctx->eigen_device<Device>().memset(t->data(), 0, t->TotalBytes());
        }
      }
      return;
    }
    OP_REQUIRES_OK(ctx,
                   LaunchConv<Device, T>::Run(ctx, kPass, attrs_, params, *a, *b, fusion, out));
  }

 private:
  ConvAttrs attrs_;
};

#define UCUDNN_REGISTER(DEV, DEVICE, T)                                                     \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("Ucudnn>Conv2D").Device(DEVICE_##DEV).TypeConstraint<T>("T"),                    \
      UcudnnConvOp<DEVICE, T, Pass::kForward>);                                             \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("Ucudnn>Conv2DWithBias").Device(DEVICE_##DEV).TypeConstraint<T>("T"),            \
      UcudnnConvOp<DEVICE, T, Pass::kForward, Fused::kBias>);                               \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("Ucudnn>Conv2DWithStatistics").Device(DEVICE_##DEV).TypeConstraint<T>("T"),      \
      UcudnnConvOp<DEVICE, T, Pass::kForward, Fused::kStatistics>);                         \
  REGISTER_KERNEL_BUILDER(                                                                  \
      Name("Ucudnn>NormalizedConv2DWithStatistics").Device(DEVICE_##DEV).TypeConstraint<T>("T"), \
      UcudnnConvOp<DEVICE, T, Pass::kForward, Fused::kPrologueStatistics>);                 \
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
