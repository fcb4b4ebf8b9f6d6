#if GOOGLE_CUDA

#include "cc/engine/descriptor_cache.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "cc/engine/cuda_check.h"
#include "cc/engine/cudnn_handles.h"

namespace ucudnn {
namespace {

// TensorFlow aligns every tensor buffer to EIGEN_MAX_ALIGN_BYTES (64).
constexpr int64_t kBufferAlignment = 64;

// The largest power of two (at most kBufferAlignment) that divides `bytes`.
int64_t PowerOfTwoAlignment(int64_t bytes) {
  int64_t align = kBufferAlignment;
  while (align > 1 && bytes % align != 0) align /= 2;
  return align;
}

}  // namespace

Status DescriptorCache::GetDescriptors(int64_t size, int math_type, ConvDescriptors** out) {
  std::lock_guard<std::mutex> lock(mu_);  // callers hold the handle's mutex, not mu_
  auto key = std::make_pair(size, math_type);
  auto it = descriptors_.find(key);
  if (it != descriptors_.end()) {
    *out = it->second.get();
    return Status();
  }
  auto d = std::make_unique<ConvDescriptors>();
  const ConvParams& p = spec_.params;
  const int64_t padded_h = geometry_.padded_h, padded_w = geometry_.padded_w;
  int64_t s[4];
  LayoutStrides(p.layout, p.in_channels, padded_h, padded_w, s);
  UCUDNN_RETURN_IF_ERROR(d->x.Set(p.dtype, size, p.in_channels, padded_h, padded_w, s));
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, s);
  UCUDNN_RETURN_IF_ERROR(
      d->y.Set(p.dtype, size, p.out_channels, p.out_height, p.out_width, s));
  UCUDNN_CUDNN_OK(cudnnSetFilter4dDescriptor(
      d->w.d, CudnnDataType(p.dtype), CudnnFormat(p.layout), static_cast<int>(p.out_channels),
      static_cast<int>(p.group_in_channels()), static_cast<int>(p.filter_height),
      static_cast<int>(p.filter_width)));
  // Half and bfloat16 accumulate in float, as TensorFlow does.
  UCUDNN_CUDNN_OK(cudnnSetConvolution2dDescriptor(
      d->conv.d, static_cast<int>(geometry_.sym_pad_h), static_cast<int>(geometry_.sym_pad_w),
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
Status DescriptorCache::GetFilterDescriptors(FilterDescriptors** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (filter_descriptors_ == nullptr) {
    const ConvParams& p = spec_.params;
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
    UCUDNN_RETURN_IF_ERROR(made->bias.SetBias(p.dtype, k));
    filter_descriptors_ = std::move(made);
  }
  *out = filter_descriptors_.get();
  return Status();
}

ConvGraphSpec DescriptorCache::GraphSpec(int64_t size, bool accumulate, bool transposed) const {
  const ConvParams& p = spec_.params;
  ConvGraphSpec spec;
  spec.pass = spec_.pass;
  spec.data_type = CudnnDataType(p.dtype);
  spec.layout = p.layout;
  spec.graph_layout = !transposed ? p.layout
                      : p.layout == Layout::kNHWC ? Layout::kNCHW
                                                  : Layout::kNHWC;
  const int64_t x[4] = {size, p.in_channels, geometry_.padded_h, geometry_.padded_w};
  const int64_t y[4] = {size, p.out_channels, p.out_height, p.out_width};
  // The filter in cuDNN's layout (KCRS for NCHW, KRSC for NHWC), as Run makes it.
  const int64_t w[4] = {p.out_channels, p.group_in_channels(), p.filter_height, p.filter_width};
  std::copy(x, x + 4, spec.x);
  std::copy(y, y + 4, spec.y);
  std::copy(w, w + 4, spec.w);
  spec.pad[0] = geometry_.sym_pad_h;
  spec.pad[1] = geometry_.sym_pad_w;
  spec.stride[0] = p.stride_h;
  spec.stride[1] = p.stride_w;
  spec.dilation[0] = p.dilation_h;
  spec.dilation[1] = p.dilation_w;
  // Micro-batches start at whole samples of the caller's tensors, whose bases
  // TF aligns: the sample sizes bound the alignment, except for the whole
  // mini-batch, which always starts at the base. Some engines need more than
  // 16 bytes (MicroBatchRunner::RunGraph checks the pointers).
  const int64_t elem = DTypeSize(p.dtype);
  spec.alignment = size == p.batch
                       ? kBufferAlignment
                       : std::min({PowerOfTwoAlignment(p.input_sample_size() * elem),
                                   PowerOfTwoAlignment(geometry_.padded_sample_elems * elem),
                                   PowerOfTwoAlignment(p.output_sample_size() * elem)});
  spec.accumulate = accumulate;
  spec.fusion = p.fusion;
  return spec;
}

DescriptorCache::PlanEntry DescriptorCache::MakeEntry(cudnnHandle_t handle, int64_t size,
                                                      const GraphEngine& engine, bool accumulate,
                                                      GraphHostCosts* costs) const {
  PlanEntry entry;
  const Status made = GraphPlan::Make(handle, GraphSpec(size, accumulate, engine.transposed),
                                      engine, &entry.plan, costs);
  if (!made.ok()) {
    entry.plan.reset();
    entry.error = made.message();
  }
  return entry;
}

std::string DescriptorCache::NoPlan(const GraphEngine& engine, int64_t size,
                                    const std::string& why) const {
  return "cuDNN engine " + engine.Name() + " does not run " + PassName(spec_.pass) + " " +
         spec_.params.ToString() + " at " + std::to_string(size) + " samples" +
         (why.empty() ? "" : ": " + why);
}

Status DescriptorCache::GetGraphPlan(cudnnHandle_t handle, int64_t size,
                                     const GraphEngine& engine, bool accumulate,
                                     const GraphPlan** out, GraphHostCosts* costs) {
  std::lock_guard<std::mutex> lock(mu_);
  const PlanKey key = std::make_tuple(handle, size, engine.Name(), accumulate);
  auto it = graph_plans_.find(key);
  if (it == graph_plans_.end()) {
    it = graph_plans_.emplace(key, MakeEntry(handle, size, engine, accumulate, costs)).first;
  }
  if (it->second.plan == nullptr) return Status::Internal(NoPlan(engine, size, it->second.error));
  *out = it->second.plan.get();
  return Status();
}

Status DescriptorCache::BuildGraphPlans(cudnnHandle_t handle, int64_t size,
                                        const std::vector<GraphEngine>& engines,
                                        bool accumulate, int threads, GraphHostCosts* costs) {
  std::vector<const GraphEngine*> missing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> seen;
    for (const GraphEngine& e : engines) {
      if (!seen.insert(e.Name()).second) continue;
      if (!graph_plans_.count(std::make_tuple(handle, size, e.Name(), accumulate))) {
        missing.push_back(&e);
      }
    }
  }
  threads = std::min<int>(threads, static_cast<int>(missing.size()));
  if (threads < 2) return Status();
  int device = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&device));
  cudaStream_t stream = nullptr;
  UCUDNN_CUDNN_OK(cudnnGetStream(handle, &stream));
  std::vector<CudnnHandle*> builders;
  UCUDNN_RETURN_IF_ERROR(GetPlanBuildHandles(device, stream, threads, &builders));
  std::vector<PlanEntry> built(missing.size());
  std::vector<GraphHostCosts> thread_costs(builders.size());
  std::atomic<size_t> next{0};
  auto build = [&](size_t t) {
    CudnnHandle* builder = builders[t];
    std::lock_guard<std::mutex> lock(builder->mu);
    if (cudaSetDevice(device) != cudaSuccess ||
        cudnnSetStream(builder->handle, stream) != CUDNN_STATUS_SUCCESS) {
      return;  // its plans stay unbuilt: GetGraphPlan makes them
    }
    for (size_t i = next++; i < missing.size(); i = next++) {
      built[i] = MakeEntry(builder->handle, size, *missing[i], accumulate, &thread_costs[t]);
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < builders.size(); ++t) pool.emplace_back(build, t);
  build(0);
  for (std::thread& t : pool) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < missing.size(); ++i) {
    // Not built (its thread found no device): GetGraphPlan makes it.
    if (built[i].plan == nullptr && built[i].error.empty()) continue;
    graph_plans_.emplace(std::make_tuple(handle, size, missing[i]->Name(), accumulate),
                         std::move(built[i]));
  }
  if (costs != nullptr) {
    for (const GraphHostCosts& c : thread_costs) costs->Add(c);
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
