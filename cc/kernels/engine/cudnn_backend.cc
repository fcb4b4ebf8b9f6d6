#if GOOGLE_CUDA

#include "cc/kernels/engine/cudnn_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <sstream>
#include <thread>

#include "cc/kernels/engine/cuda_check.h"
#include "cc/kernels/engine/debug_output.h"
#include "cc/kernels/engine/executor.h"

namespace ucudnn {
namespace {

cudnnTensorFormat_t CudnnFormat(Layout layout) {
  return layout == Layout::kNHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

// RAII for the descriptor types used here.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { cudnnCreateTensorDescriptor(&d); }
  ~TensorDesc() { if (d) cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // A [n, c, h, w] view with explicit strides.
  Status Set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, const int64_t s[4]) {
    // The legacy descriptor takes int: a larger value would wrap silently.
    for (int64_t v : {n, c, h, w, s[0], s[1], s[2], s[3]}) {
      if (v > std::numeric_limits<int>::max()) {
        return Status::InvalidArgument("a tensor dimension or stride (" + std::to_string(v) +
                                       ") exceeds 2^31 - 1, which cuDNN's legacy API cannot "
                                       "describe");
      }
    }
    UCUDNN_CUDNN_OK(cudnnSetTensor4dDescriptorEx(
        d, CudnnDataType(dtype), static_cast<int>(n), static_cast<int>(c), static_cast<int>(h),
        static_cast<int>(w), static_cast<int>(s[0]), static_cast<int>(s[1]),
        static_cast<int>(s[2]), static_cast<int>(s[3])));
    return Status();
  }
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { cudnnCreateFilterDescriptor(&d); }
  ~FilterDesc() { if (d) cudnnDestroyFilterDescriptor(d); }
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { cudnnCreateConvolutionDescriptor(&d); }
  ~ConvDesc() { if (d) cudnnDestroyConvolutionDescriptor(d); }
};

struct OpTensorDesc {
  cudnnOpTensorDescriptor_t d = nullptr;
  OpTensorDesc() { cudnnCreateOpTensorDescriptor(&d); }
  ~OpTensorDesc() { if (d) cudnnDestroyOpTensorDescriptor(d); }
  OpTensorDesc(const OpTensorDesc&) = delete;
  OpTensorDesc& operator=(const OpTensorDesc&) = delete;
};

int MaxAlgoCount(Pass pass) {
  switch (pass) {
    case Pass::kForward: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case Pass::kBackwardData: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case Pass::kBackwardFilter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
  return 0;
}

const char* AlgoEnumName(Pass pass, int algo) {
  static const char* kForward[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                   "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* kBackwardData[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                        "WINOGRAD_NONFUSED"};
  static const char* kBackwardFilter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                          "WINOGRAD_NONFUSED", "FFT_TILING"};
  const char** names = pass == Pass::kForward        ? kForward
                       : pass == Pass::kBackwardData ? kBackwardData
                                                     : kBackwardFilter;
  const int count = pass == Pass::kForward ? 8 : pass == Pass::kBackwardData ? 6 : 7;
  return algo >= 0 && algo < count ? names[algo] : "UNKNOWN";
}

const char* MathTypeName(int math_type) {
  switch (math_type) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op-conversion";
    case CUDNN_FMA_MATH: return "fma";
  }
  return "?";
}

}  // namespace

std::string CudnnAlgoName(Pass pass, const CudnnAlgo& algo) {
  if (algo.graph()) return algo.engine.Name();
  return std::string(AlgoEnumName(pass, algo.algo)) + "/" + MathTypeName(algo.math_type);
}

std::string CudnnVersionString() {
  const size_t v = cudnnGetVersion();
  std::ostringstream s;
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  s << v / 10000 << "." << (v % 10000) / 100 << "." << v % 100;
  return s.str();
}

namespace {
// One handle per (device, stream, purpose): 0 the ops', 1 benchmarking for peers.
Status GetHandle(int device, cudaStream_t stream, int purpose, CudnnHandle** out) {
  static std::mutex mu;
  static auto* handles = new std::map<std::tuple<int, cudaStream_t, int>, CudnnHandle*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles->find({device, stream, purpose});
  if (it != handles->end()) {
    *out = it->second;
    return Status();
  }
  int current = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&current));
  if (current != device) UCUDNN_CUDA_OK(cudaSetDevice(device));
  auto* h = new CudnnHandle();  // lives as long as the process, like TF's own
  const cudnnStatus_t status = cudnnCreate(&h->handle);
  if (current != device) cudaSetDevice(current);
  if (status != CUDNN_STATUS_SUCCESS) {
    delete h;
    return Status::Internal(std::string("cudnnCreate failed: ") + cudnnGetErrorString(status));
  }
  (*handles)[{device, stream, purpose}] = h;
  *out = h;
  return Status();
}
}  // namespace

Status GetCudnnHandle(int device, cudaStream_t stream, CudnnHandle** out) {
  return GetHandle(device, stream, 0, out);
}

Status GetBenchmarkHandle(int device, cudaStream_t stream, CudnnHandle** out) {
  return GetHandle(device, stream, 1, out);
}

// The descriptors of one micro-batch size and math type.
struct CudnnKernel::Descriptors {
  TensorDesc x, y;  // x: the input as cuDNN sees it (padded if asymmetric)
  FilterDesc w;
  ConvDesc conv;
};

CudnnKernel::CudnnKernel(Pass pass, const ConvParams& params, bool allow_tf32,
                         bool deterministic, EngineSet engines)
    : pass_(pass),
      params_(params),
      allow_tf32_(allow_tf32),
      deterministic_(deterministic),
      engines_(engines) {
  sym_pad_h_ = std::min(params.pad_top, params.pad_bottom);
  sym_pad_w_ = std::min(params.pad_left, params.pad_right);
  extra_top_ = params.pad_top - sym_pad_h_;
  extra_left_ = params.pad_left - sym_pad_w_;
  padded_h_ = params.in_height + (params.pad_top + params.pad_bottom - 2 * sym_pad_h_);
  padded_w_ = params.in_width + (params.pad_left + params.pad_right - 2 * sym_pad_w_);
}

CudnnKernel::~CudnnKernel() = default;

Status CudnnKernel::GetDescriptors(int64_t size, int math_type, Descriptors** out) {
  std::lock_guard<std::mutex> lock(mu_);  // callers hold the handle's mutex, not mu_
  auto key = std::make_pair(size, math_type);
  auto it = descriptors_.find(key);
  if (it != descriptors_.end()) {
    *out = it->second.get();
    return Status();
  }
  auto d = std::make_unique<Descriptors>();
  const ConvParams& p = params_;
  int64_t s[4];
  LayoutStrides(p.layout, p.in_channels, padded_h_, padded_w_, s);
  UCUDNN_RETURN_IF_ERROR(d->x.Set(p.dtype, size, p.in_channels, padded_h_, padded_w_, s));
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, s);
  UCUDNN_RETURN_IF_ERROR(
      d->y.Set(p.dtype, size, p.out_channels, p.out_height, p.out_width, s));
  UCUDNN_CUDNN_OK(cudnnSetFilter4dDescriptor(
      d->w.d, CudnnDataType(p.dtype), CudnnFormat(p.layout), static_cast<int>(p.out_channels),
      static_cast<int>(p.group_in_channels()), static_cast<int>(p.filter_height),
      static_cast<int>(p.filter_width)));
  // Half and bfloat16 accumulate in float, as TensorFlow does.
  UCUDNN_CUDNN_OK(cudnnSetConvolution2dDescriptor(
      d->conv.d, static_cast<int>(sym_pad_h_), static_cast<int>(sym_pad_w_),
      static_cast<int>(p.stride_h), static_cast<int>(p.stride_w),
      static_cast<int>(p.dilation_h), static_cast<int>(p.dilation_w),
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  UCUDNN_CUDNN_OK(cudnnSetConvolutionGroupCount(d->conv.d, static_cast<int>(p.groups)));
  UCUDNN_CUDNN_OK(
      cudnnSetConvolutionMathType(d->conv.d, static_cast<cudnnMathType_t>(math_type)));
  *out = d.get();
  descriptors_[key] = std::move(d);
  return Status();
}

// The filter as TF stores it (HWIO) and as cuDNN reads it, both viewed as
// [K, C, R, S]; made once per kernel, since every run transforms the filter.
// For the float32 accumulation of backward-filter (AccumulatorBytes): the
// cuDNN-layout filter in float32, a one-element zero in T and in float32 (the
// B operand of cudnnOpTensor, broadcast and scaled by 0), and the ADD op.
struct CudnnKernel::FilterDescriptors {
  TensorDesc tf, cudnn;
  TensorDesc cudnn_float, zero_t, zero_float;
  OpTensorDesc add;
};

Status CudnnKernel::GetFilterDescriptors(FilterDescriptors** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (filter_descriptors_ == nullptr) {
    const ConvParams& p = params_;
    const int64_t k = p.out_channels, c = p.group_in_channels(), r = p.filter_height,
                  s = p.filter_width;
    const int64_t hwio[4] = {1, k, s * c * k, c * k};
    const int64_t one[4] = {1, 1, 1, 1};
    int64_t packed[4];
    LayoutStrides(p.layout, c, r, s, packed);
    auto made = std::make_unique<FilterDescriptors>();
    UCUDNN_RETURN_IF_ERROR(made->tf.Set(p.dtype, k, c, r, s, hwio));
    UCUDNN_RETURN_IF_ERROR(made->cudnn.Set(p.dtype, k, c, r, s, packed));
    UCUDNN_RETURN_IF_ERROR(made->cudnn_float.Set(DType::kFloat, k, c, r, s, packed));
    UCUDNN_RETURN_IF_ERROR(made->zero_t.Set(p.dtype, 1, 1, 1, 1, one));
    UCUDNN_RETURN_IF_ERROR(made->zero_float.Set(DType::kFloat, 1, 1, 1, 1, one));
    UCUDNN_CUDNN_OK(cudnnSetOpTensorDescriptor(made->add.d, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                               CUDNN_PROPAGATE_NAN));
    filter_descriptors_ = std::move(made);
  }
  *out = filter_descriptors_.get();
  return Status();
}

Status CudnnKernel::TransformFilter(cudnnHandle_t handle, const void* src, void* dst,
                                    bool to_cudnn) {
  FilterDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetFilterDescriptors(&d));
  const float one = 1.0f, zero = 0.0f;
  if (to_cudnn) {
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, d->tf.d, src, &zero, d->cudnn.d, dst));
  } else {
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, d->cudnn.d, src, &zero, d->tf.d, dst));
  }
  return Status();
}

namespace {

// The float32 accumulator starts this aligned within the plan's workspace;
// its last kAccumulatorAlign bytes are zero (the zero element of OpTensor,
// and the one-element destination of the probe at kProbeOffset).
constexpr int64_t kAccumulatorAlign = 256;
constexpr int64_t kProbeOffset = 128;

int64_t RoundUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// A plan of several micro-batches with the accumulator after its workspace.
void AddAccumulator(Plan* plan, int64_t bytes) {
  plan->workspace_bytes = RoundUp(plan->workspace_bytes, kAccumulatorAlign) + bytes;
  plan->accumulator_bytes = bytes;
}

}  // namespace

int64_t CudnnKernel::AccumulatorBytes() const {
  if (pass_ != Pass::kBackwardFilter || params_.dtype == DType::kFloat ||
      float_accumulation_.load() < 0) {
    return 0;
  }
  return RoundUp(params_.filter_size() * 4, kAccumulatorAlign) + kAccumulatorAlign;
}

Plan CudnnKernel::PlanWithin(int64_t limit) const {
  const int64_t extra = AccumulatorBytes();
  if (extra == 0) return BestPlan(table_, params_.batch, limit);
  // One micro-batch needs no accumulator; several need it next to their
  // workspace, so their cuDNN workspace gets the limit less the accumulator.
  const Plan whole = BestPlan(RestrictTable(table_, {params_.batch}), params_.batch, limit);
  Plan split;
  if (limit >= extra) {
    split = BestPlan(table_, params_.batch,
                     (limit - extra) / kAccumulatorAlign * kAccumulatorAlign);
    if (split.micro_batches.size() == 1) split = Plan();  // `whole` has more room for it
  }
  if (split.empty() || (!whole.empty() && whole.time_ms <= split.time_ms)) return whole;
  AddAccumulator(&split, extra);
  return split;
}

Plan CudnnKernel::ForcedPlanWithin(int64_t max_size, int64_t limit) const {
  const int64_t extra = AccumulatorBytes();
  if (extra > 0 && max_size < params_.batch && limit >= extra) {
    Plan plan = ForcedPlan(table_, params_.batch, max_size,
                           (limit - extra) / kAccumulatorAlign * kAccumulatorAlign);
    if (!plan.empty()) {
      AddAccumulator(&plan, extra);
      return plan;
    }
  }
  // One micro-batch, float32, or no room for the accumulator: a forced plan
  // that does not fit it accumulates in the element type, as cuDNN does.
  return ForcedPlan(table_, params_.batch, max_size, limit);
}

std::vector<Plan> CudnnKernel::FrontWithAccumulator() const {
  std::vector<Plan> front = ucudnn::ParetoFront(table_, params_.batch);
  const int64_t extra = AccumulatorBytes();
  if (extra == 0) return front;
  std::vector<Plan> points;
  for (Plan& plan : front) {
    if (plan.micro_batches.size() > 1) AddAccumulator(&plan, extra);
    points.push_back(std::move(plan));
  }
  // Undivided plans dominated only by divided ones may be on the front now.
  auto whole = table_.find(params_.batch);
  if (whole != table_.end()) {
    for (const AlgoPerf& a : whole->second) {
      Plan plan;
      plan.micro_batches.push_back({params_.batch, a.algo, a.time_ms, a.workspace_bytes});
      plan.time_ms = a.time_ms;
      plan.workspace_bytes = a.workspace_bytes;
      points.push_back(std::move(plan));
    }
  }
  std::stable_sort(points.begin(), points.end(), [](const Plan& a, const Plan& b) {
    if (a.workspace_bytes != b.workspace_bytes) return a.workspace_bytes < b.workspace_bytes;
    if (a.time_ms != b.time_ms) return a.time_ms < b.time_ms;
    return a.micro_batches.size() < b.micro_batches.size();
  });
  std::vector<Plan> kept;
  for (Plan& plan : points) {
    if (kept.empty() || plan.time_ms < kept.back().time_ms) kept.push_back(std::move(plan));
  }
  return kept;
}

cudnnStatus_t CudnnKernel::AccumulateFloat(cudnnHandle_t handle, const void* part, float* sum,
                                           const void* zero, bool probe) {
  FilterDescriptors* d = nullptr;
  if (!GetFilterDescriptors(&d).ok()) return CUDNN_STATUS_INTERNAL_ERROR;
  const float one = 1.0f, none = 0.0f;
  // sum = 1 * part + 0 * zero + 1 * sum: T + T -> float32.
  const cudnnStatus_t added = cudnnOpTensor(handle, d->add.d, &one, d->cudnn.d, part, &none,
                                            d->zero_t.d, zero, &one, d->cudnn_float.d, sum);
  if (added != CUDNN_STATUS_SUCCESS || !probe) return added;
  // StoreFloatSum's float32 -> T, tried on one element of the zero region
  // (it writes a zero there), so that a refusal is known before any
  // micro-batch depends on it.
  void* probe_out = static_cast<char*>(const_cast<void*>(zero)) + kProbeOffset;
  return cudnnOpTensor(handle, d->add.d, &one, d->zero_float.d, zero, &none, d->zero_float.d,
                       zero, &none, d->zero_t.d, probe_out);
}

Status CudnnKernel::StoreFloatSum(cudnnHandle_t handle, cudaStream_t stream, const float* sum,
                                  const void* zero, void* out) {
  FilterDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetFilterDescriptors(&d));
  // `out` holds the last micro-batch's gradient: cleared first, so that none
  // of it (an inf, say) can reach the result however beta = 0 is applied.
  UCUDNN_CUDA_OK(cudaMemsetAsync(out, 0, params_.filter_size() * DTypeSize(params_.dtype),
                                 stream));
  const float one = 1.0f, none = 0.0f;
  UCUDNN_CUDNN_OK(cudnnOpTensor(handle, d->add.d, &one, d->cudnn_float.d, sum, &none,
                                d->zero_float.d, zero, &none, d->cudnn.d, out));
  return Status();
}

Status CudnnKernel::CopyPadded(cudaStream_t stream, int64_t size, const void* src, void* dst,
                               bool into_padded) {
  // Contiguous runs: a row of W * C elements (NHWC) or of W elements (NCHW);
  // H of them per image (NHWC) or per channel plane (NCHW).
  const ConvParams& p = params_;
  const int64_t elem = DTypeSize(p.dtype);
  const bool nhwc = p.layout == Layout::kNHWC;
  const int64_t run = (nhwc ? p.in_width * p.in_channels : p.in_width) * elem;
  const int64_t padded_pitch = (nhwc ? padded_w_ * p.in_channels : padded_w_) * elem;
  const int64_t planes = nhwc ? size : size * p.in_channels;
  cudaPitchedPtr packed = make_cudaPitchedPtr(const_cast<void*>(into_padded ? src : dst), run,
                                              run, p.in_height);
  cudaPitchedPtr padded = make_cudaPitchedPtr(const_cast<void*>(into_padded ? dst : src),
                                              padded_pitch, padded_pitch, padded_h_);
  const cudaPos interior =
      make_cudaPos(extra_left_ * (nhwc ? p.in_channels : 1) * elem, extra_top_, 0);
  cudaMemcpy3DParms copy = {};
  if (into_padded) {
    copy.srcPtr = packed;
    copy.dstPtr = padded;
    copy.dstPos = interior;
  } else {
    copy.srcPtr = padded;
    copy.srcPos = interior;
    copy.dstPtr = packed;
  }
  copy.extent = make_cudaExtent(run, p.in_height, planes);
  copy.kind = cudaMemcpyDeviceToDevice;
  UCUDNN_CUDA_OK(cudaMemcpy3DAsync(&copy, stream));
  return Status();
}

int CudnnKernel::BenchmarkMathType() const {
  // FP32 without TF32 must stay on FMA kernels; otherwise tensor cores may be used.
  return params_.dtype == DType::kFloat && !allow_tf32_ ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

Status CudnnKernel::MaxWorkspaceNeeded(cudnnHandle_t handle, int64_t size, int64_t* needed) {
  Descriptors* d = nullptr;
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
  Descriptors* d = nullptr;
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

namespace {
// The smallest micro-batch size benchmarked with graph-API engines when legacy
// algorithms are candidates too (UCUDNN_ENGINES=all).
constexpr int64_t kMinGraphMicroBatch = 8;

// Buffers a pass needs besides workspace: the filter in cuDNN's layout, and a
// padded input (or input gradient) micro-batch when padding is asymmetric.
struct PassScratch {
  void* filter = nullptr;
  void* padded = nullptr;
};
}  // namespace

// The filter's copy in cuDNN's layout.
static Status AllocateFilter(const ConvParams& p, ScratchAllocator* scratch, PassScratch* ps) {
  const int64_t filter_bytes = p.filter_size() * DTypeSize(p.dtype);
  ps->filter = scratch->Allocate(filter_bytes);
  if (ps->filter == nullptr) {
    return Status::ResourceExhausted("could not allocate " + std::to_string(filter_bytes) +
                                     " bytes for the filter in cuDNN layout");
  }
  return Status();
}

// The zeroed buffer of one explicitly padded micro-batch of up to `max_size`
// samples, when padding is asymmetric.
static Status AllocatePadded(const ConvParams& p, bool asymmetric, int64_t max_size,
                             int64_t padded_sample_elems, cudaStream_t stream,
                             ScratchAllocator* scratch, PassScratch* ps) {
  if (asymmetric) {
    const int64_t bytes = max_size * padded_sample_elems * DTypeSize(p.dtype);
    ps->padded = scratch->Allocate(bytes);
    if (ps->padded == nullptr) {
      return Status::ResourceExhausted("could not allocate " + std::to_string(bytes) +
                                       " bytes for the explicitly padded micro-batch");
    }
    UCUDNN_CUDA_OK(cudaMemsetAsync(ps->padded, 0, bytes, stream));
  }
  return Status();
}

Status CudnnKernel::BenchmarkOn(CudnnHandle* handle, cudaStream_t stream,
                                const std::vector<int64_t>& sizes, int64_t workspace_limit,
                                const PassTensors& t, ScratchAllocator* scratch,
                                MeasuredSizes* got) {
  std::lock_guard<std::mutex> handle_lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, stream));
  const ConvParams& p = params_;
  const bool asymmetric = !p.symmetric_padding();
  const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  PassScratch ps;
  UCUDNN_RETURN_IF_ERROR(AllocateFilter(p, scratch, &ps));
  UCUDNN_RETURN_IF_ERROR(
      AllocatePadded(p, asymmetric, max_size, padded_sample_elems(), stream, scratch, &ps));
  const void* a = t.a;
  const void* b = t.b;
  void* out = t.out;
  if (pass_ == Pass::kBackwardFilter) {
    out = ps.filter;
  } else {
    UCUDNN_RETURN_IF_ERROR(TransformFilter(handle->handle, t.b, ps.filter, /*to_cudnn=*/true));
    b = ps.filter;
  }
  // One search workspace for every size: what the hungriest legacy algorithm
  // asks for, capped by the limit, halved until it can be allocated; grown
  // when a graph plan needs more.
  const bool legacy = engines_ != EngineSet::kGraph;
  int64_t ws_bytes = 0;
  if (legacy) {
    for (int64_t size : sizes) {
      int64_t needed = 0;
      UCUDNN_RETURN_IF_ERROR(MaxWorkspaceNeeded(handle->handle, size, &needed));
      ws_bytes = std::max(ws_bytes, std::min(needed, workspace_limit));
    }
  }
  void* ws = nullptr;
  while (ws_bytes > 0 && (ws = scratch->Allocate(ws_bytes)) == nullptr) ws_bytes /= 2;
  if (ws == nullptr) ws_bytes = 0;
  // Ascending sizes: graph engines far behind at one size are pruned from the
  // larger ones (GraphPruneFactor).
  std::vector<int64_t> ascending = sizes;
  std::sort(ascending.begin(), ascending.end());
  std::set<std::string> pruned;
  using Clock = std::chrono::steady_clock;
  double legacy_s = 0, propose_s = 0, runs_s = 0;
  int plans = 0, runs = 0;
  std::string log;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  for (int64_t size : ascending) {
    const void* bench_a = a;
    void* bench_out = out;
    if (asymmetric && pass_ != Pass::kBackwardData) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, size, t.a, ps.padded, /*into_padded=*/true));
      bench_a = ps.padded;
    } else if (asymmetric) {
      bench_out = ps.padded;
    }
    Clock::time_point start = Clock::now();
    if (legacy) {
      UCUDNN_RETURN_IF_ERROR(BenchmarkSize(handle->handle, size, workspace_limit, bench_a, b,
                                           bench_out, ws, ws_bytes, &(*got)[size]));
    }
    legacy_s += seconds_since(start);
    // Graph engines from micro-batches of kMinGraphMicroBatch samples up (or
    // the whole mini-batch): planning builds an execution plan per engine and
    // size, and no DeepBench plan at 64 or 256 MiB used smaller micro-batches
    // (too little work per launch); the legacy algorithms still cover them.
    const bool graph_size = size >= std::min(kMinGraphMicroBatch, params_.batch) ||
                            engines_ == EngineSet::kGraph;
    if (engines_ == EngineSet::kLegacy || !graph_size) continue;
    start = Clock::now();
    std::vector<GraphTrial> trials;
    std::string size_log;
    UCUDNN_RETURN_IF_ERROR(ProposeGraphTrials(handle->handle, size, workspace_limit, pruned,
                                              &trials, DebugOutput() ? &size_log : nullptr));
    if (!size_log.empty()) log += " size " + std::to_string(size) + ":\n" + size_log;
    int64_t needed = 0;
    for (const GraphTrial& trial : trials) needed = std::max(needed, trial.plan->workspace_bytes());
    needed = std::min(needed, workspace_limit);
    if (needed > ws_bytes) {
      // The smaller buffer stays with the allocator until ReleaseAll.
      if (void* bigger = scratch->Allocate(needed)) {
        ws = bigger;
        ws_bytes = needed;
      }
    }
    plans += static_cast<int>(trials.size());
    propose_s += seconds_since(start);
    start = Clock::now();
    UCUDNN_RETURN_IF_ERROR(TimeGraphTrials(handle->handle, stream, trials, bench_a, b, bench_out,
                                           ws, ws_bytes, &(*got)[size], &pruned, &runs));
    runs_s += seconds_since(start);
  }
  if (DebugOutput()) {
    std::fprintf(stderr,
                 "tf_ucudnn: benchmarked %s %s at %zu sizes: legacy %.3f s; graph: %d candidates "
                 "(heuristics and plans %.3f s), %d runs %.3f s, %zu engines pruned\n%s",
                 PassName(pass_), p.ToString().c_str(), sizes.size(), legacy_s, plans, propose_s,
                 runs, runs_s, pruned.size(), log.c_str());
  }
  // Back to the allocator while the handle is still held: kernels benchmark one
  // at a time, so their search workspaces never coexist.
  scratch->ReleaseAll();
  return Status();
}

CudnnKernel::PassBytes CudnnKernel::TensorBytes(int64_t samples) const {
  const ConvParams& p = params_;
  const int64_t elem = DTypeSize(p.dtype);
  const int64_t in = samples * p.input_sample_size() * elem;
  const int64_t out = samples * p.output_sample_size() * elem;
  const int64_t filter = p.filter_size() * elem;
  switch (pass_) {
    case Pass::kForward: return {in, filter, out};
    case Pass::kBackwardData: return {out, filter, in};
    case Pass::kBackwardFilter: return {in, out, filter};
  }
  return {0, 0, 0};
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
  // Backward-filter benchmarks into its own cuDNN-layout filter: no `out`.
  const PassBytes bytes = TensorBytes(*std::max_element(sizes.begin(), sizes.end()));
  const int64_t a_bytes = bytes.a, b_bytes = bytes.b;
  const int64_t result_bytes = pass_ == Pass::kBackwardFilter ? 0 : bytes.out;
  PassTensors copy;
  void* a = peer.scratch->Allocate(a_bytes);
  void* b = peer.scratch->Allocate(b_bytes);
  copy.out = result_bytes > 0 ? peer.scratch->Allocate(result_bytes) : nullptr;
  if (a == nullptr || b == nullptr || (result_bytes > 0 && copy.out == nullptr)) {
    return Status::ResourceExhausted("could not allocate " +
                                     std::to_string(a_bytes + b_bytes + result_bytes) +
                                     " bytes on GPU " + std::to_string(peer.device) +
                                     " to benchmark there");
  }
  UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(a, peer.device, t.a, own_device, a_bytes, peer.stream));
  UCUDNN_CUDA_OK(cudaMemcpyPeerAsync(b, peer.device, t.b, own_device, b_bytes, peer.stream));
  copy.a = a;
  copy.b = b;
  return BenchmarkOn(handle, peer.stream, sizes, workspace_limit, copy, peer.scratch, got);
}

Status CudnnKernel::Benchmark(CudnnHandle* handle, cudaStream_t stream,
                              const std::vector<int64_t>& sizes, int64_t workspace_limit,
                              const PassTensors& t, ScratchAllocator* scratch,
                              const std::vector<BenchmarkPeer>& peers) {
  table_.clear();  // a failed earlier attempt may have left rows behind
  algos_.clear();
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
    status[0] = BenchmarkOn(handle, stream, shares[0], workspace_limit, t, scratch, &got[0]);
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

Status CudnnKernel::EnsurePlanned(CudnnHandle* handle, cudaStream_t stream,
                                  BatchSizePolicy policy, int64_t forced_micro_batch,
                                  int64_t workspace_limit, const PassTensors& t,
                                  ScratchAllocator* scratch,
                                  const std::vector<BenchmarkPeer>& peers, bool* planned_now) {
  std::unique_lock<std::mutex> bench_lock(bench_mu_);
  *planned_now = false;
  if (benchmarked_) return Status();
  if (params_.empty()) {
    // Front ends return the empty or zero result of a zero-size convolution
    // themselves (ConvParams::empty()); there is nothing to benchmark.
    return Status::InvalidArgument("zero-size convolution " + params_.ToString() +
                                   " reached the cuDNN engine");
  }
  const std::vector<int64_t> sizes =
      forced_micro_batch > 0 ? ForcedMicroBatchSizes(params_.batch, forced_micro_batch)
                             : MicroBatchSizes(policy, params_.batch);
  if (seeded_) {
    // Benchmark results of an earlier process (the benchmark database).
    table_ = seed_table_;
    algos_ = seed_algos_;
  } else {
    UCUDNN_RETURN_IF_ERROR(Benchmark(handle, stream, sizes, workspace_limit, t, scratch, peers));
  }
  const ConvParams& p = params_;
  Plan plan = forced_micro_batch > 0 ? ForcedPlanWithin(forced_micro_batch, workspace_limit)
                                     : PlanWithin(workspace_limit);
  if (plan.empty()) {
    return Status::Internal("no cuDNN algorithm ran for " + std::string(PassName(pass_)) + " " +
                            p.ToString() + " within a workspace limit of " +
                            std::to_string(workspace_limit) + " bytes");
  }
  {
    std::lock_guard<std::mutex> lock(plan_mu_);
    plan_ = std::move(plan);
    limit_ = workspace_limit;
  }
  benchmarked_ = true;
  *planned_now = true;
  return Status();
}

Status CudnnKernel::RunMicroBatch(cudnnHandle_t handle, cudaStream_t stream,
                                  const MicroBatch& mb, int64_t offset,
                                  bool accumulate, const void* a, const void* b, void* out,
                                  void* workspace, void* padded) {
  const ConvParams& p = params_;
  const CudnnAlgo& algo = algos_[mb.algo];
  if (algo.graph()) {
    return RunGraphMicroBatch(handle, stream, mb, algo.engine, offset, accumulate, a, b, out,
                              workspace, padded);
  }
  Descriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetDescriptors(mb.size, algo.math_type, &d));
  const int elem = DTypeSize(p.dtype);
  const int64_t in_off = offset * p.input_sample_size() * elem;
  const int64_t out_off = offset * p.output_sample_size() * elem;
  const bool asymmetric = padded != nullptr;
  const float one = 1.0f, zero = 0.0f;
  const size_t ws = mb.workspace_bytes;
  if (pass_ == Pass::kForward) {
    const void* x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
      x = padded;
    }
    UCUDNN_CUDNN_OK(cudnnConvolutionForward(
        handle, &one, d->x.d, x, d->w.d, b, d->conv.d,
        static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo), workspace, ws, &zero, d->y.d,
        static_cast<char*>(out) + out_off));
  } else if (pass_ == Pass::kBackwardData) {
    void* dx = asymmetric ? padded : static_cast<char*>(out) + in_off;
    UCUDNN_CUDNN_OK(cudnnConvolutionBackwardData(
        handle, &one, d->w.d, b, d->y.d, static_cast<const char*>(a) + out_off, d->conv.d,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo), workspace, ws, &zero, d->x.d, dx));
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, padded,
                                        static_cast<char*>(out) + in_off, /*into_padded=*/false));
    }
  } else {
    const void* x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
      x = padded;
    }
    // Every micro-batch writes the whole filter gradient: accumulate after the first.
    UCUDNN_CUDNN_OK(cudnnConvolutionBackwardFilter(
        handle, &one, d->x.d, x, d->y.d, static_cast<const char*>(b) + out_off, d->conv.d,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo.algo), workspace, ws,
        accumulate ? &one : &zero, d->w.d, out));
  }
  return Status();
}

void CudnnKernel::Seed(PerfTable table, std::vector<CudnnAlgo> algos) {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (benchmarked_) return;
  seed_table_ = std::move(table);
  seed_algos_ = std::move(algos);
  seeded_ = true;
}

bool CudnnKernel::planned() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return benchmarked_;
}

std::vector<int> CudnnKernel::benchmark_devices() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return benchmark_devices_;
}

bool CudnnKernel::seeded() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return seeded_;
}

Plan CudnnKernel::plan() const {
  std::lock_guard<std::mutex> lock(plan_mu_);
  return plan_;
}

int64_t CudnnKernel::planned_limit() const {
  std::lock_guard<std::mutex> lock(plan_mu_);
  return limit_;
}

Status CudnnKernel::Replan(int64_t workspace_limit) {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (!benchmarked_) {
    return Status::InvalidArgument("the kernel has not been benchmarked yet: run it once first");
  }
  Plan plan = PlanWithin(workspace_limit);
  if (plan.empty()) {
    return Status::InvalidArgument("no benchmarked plan of " + params_.ToString() +
                                   " fits in " + std::to_string(workspace_limit) + " bytes");
  }
  std::lock_guard<std::mutex> lock(plan_mu_);
  plan_ = std::move(plan);
  limit_ = workspace_limit;
  divided_ = true;
  return Status();
}

bool CudnnKernel::divided() const {
  std::lock_guard<std::mutex> lock(plan_mu_);
  return divided_;
}

Plan CudnnKernel::LeastWorkspacePlan() const {
  const std::vector<Plan> front = ParetoFront();
  return front.empty() ? Plan() : front.front();
}

std::vector<Plan> CudnnKernel::ParetoFront() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (!benchmarked_) return {};
  return FrontWithAccumulator();
}

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
// benchmarked within a per-kernel limit or the same total budget.
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
                                         key.engines);
    auto seed = Seeds().find(AnyDevice(key));
    if (seed != Seeds().end()) slot->Seed(seed->second.table, seed->second.algos);
    KernelList().emplace_back(key, slot);
  }
  return slot;
}


std::vector<std::pair<KernelKey, std::shared_ptr<CudnnKernel>>> AllKernels() {
  std::lock_guard<std::mutex> lock(KernelsMutex());
  return KernelList();
}

Status CudnnKernel::Run(CudnnHandle* handle, cudaStream_t stream, const Plan& plan,
                        const PassTensors& t, ScratchAllocator* scratch, Plan* ran) {
  // The filter copy every plan needs comes first; then the workspace: if the
  // plan's does not fit, take the fastest plan that does.
  PassScratch ps;
  UCUDNN_RETURN_IF_ERROR(AllocateFilter(params_, scratch, &ps));
  Plan chosen = plan;
  void* workspace = nullptr;
  while (true) {
    workspace = chosen.workspace_bytes > 0 ? scratch->Allocate(chosen.workspace_bytes) : nullptr;
    if (workspace != nullptr || chosen.workspace_bytes == 0) break;
    Plan smaller = PlanWithin(chosen.workspace_bytes - 1);
    if (smaller.empty()) {
      return Status::ResourceExhausted(
          "could not allocate " + std::to_string(chosen.workspace_bytes) +
          " bytes of workspace and no benchmarked plan needs less");
    }
    chosen = smaller;
  }
  int64_t max_size = 0;
  for (const MicroBatch& mb : chosen.micro_batches) max_size = std::max(max_size, mb.size);
  const bool asymmetric = !params_.symmetric_padding();
  UCUDNN_RETURN_IF_ERROR(AllocatePadded(params_, asymmetric, max_size, padded_sample_elems(),
                                        stream, scratch, &ps));
  std::lock_guard<std::mutex> handle_lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, stream));
  const void* b = t.b;
  void* out = t.out;
  if (pass_ == Pass::kBackwardFilter) {
    out = ps.filter;
  } else {
    UCUDNN_RETURN_IF_ERROR(TransformFilter(handle->handle, t.b, ps.filter, /*to_cudnn=*/true));
    b = ps.filter;
  }
  // Float32 accumulation (see AccumulatorBytes): the sum and the zero
  // region at the end of the plan's workspace, cleared on the stream.
  bool float_sum = chosen.accumulator_bytes > 0 && float_accumulation_.load() >= 0;
  float* sum = nullptr;
  const void* zero = nullptr;
  if (float_sum) {
    char* base = static_cast<char*>(workspace) + chosen.workspace_bytes - chosen.accumulator_bytes;
    sum = reinterpret_cast<float*>(base);
    zero = base + chosen.accumulator_bytes - kAccumulatorAlign;
    UCUDNN_CUDA_OK(cudaMemsetAsync(base, 0, chosen.accumulator_bytes, stream));
  }
  UCUDNN_RETURN_IF_ERROR(ExecutePlan(
      chosen, pass_, [&](int64_t offset, const MicroBatch& mb, bool accumulate) -> Status {
        if (!float_sum) {
          return RunMicroBatch(handle->handle, stream, mb, offset, accumulate, t.a, b, out,
                               workspace, ps.padded);
        }
        // This micro-batch's own gradient (beta = 0), added in float32.
        UCUDNN_RETURN_IF_ERROR(RunMicroBatch(handle->handle, stream, mb, offset,
                                             /*accumulate=*/false, t.a, b, out, workspace,
                                             ps.padded));
        const bool probe = !accumulate && float_accumulation_.load() == 0;
        const cudnnStatus_t added = AccumulateFloat(handle->handle, out, sum, zero, probe);
        if (added == CUDNN_STATUS_SUCCESS) {
          if (probe) float_accumulation_.store(1);
          return Status();
        }
        if (probe) {
          // cuDNN refuses the type mix: `out` holds this first micro-batch, and
          // the others add to it in the element type (beta = 1), as before.
          int unknown = 0;
          if (float_accumulation_.compare_exchange_strong(unknown, -1)) {
            std::fprintf(stderr,
                         "tf_ucudnn: cudnnOpTensor does not add %s into float32 here (%s); "
                         "%s %s accumulates its micro-batches in %s\n",
                         DTypeName(params_.dtype), cudnnGetErrorString(added), PassName(pass_),
                         params_.ToString().c_str(), DTypeName(params_.dtype));
          }
          float_sum = false;
          return Status();
        }
        return Status::Internal(std::string("cudnnOpTensor (float32 accumulation) failed: ") +
                                cudnnGetErrorString(added));
      }));
  if (float_sum) UCUDNN_RETURN_IF_ERROR(StoreFloatSum(handle->handle, stream, sum, zero, out));
  if (pass_ == Pass::kBackwardFilter) {
    UCUDNN_RETURN_IF_ERROR(TransformFilter(handle->handle, ps.filter, t.out, /*to_cudnn=*/false));
  }
  *ran = chosen;
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
