#include "cc/kernels/conv_attrs.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tensorflow {
namespace ucudnn_tf {
namespace {

// Spatial indices (h, w) of a 4-vector in the given layout.
void SpatialIndices(ucudnn::Layout layout, int* h, int* w, int* c) {
  if (layout == ucudnn::Layout::kNHWC) {
    *h = 1; *w = 2; *c = 3;
  } else {
    *c = 1; *h = 2; *w = 3;
  }
}

absl::Status EnvWorkspaceLimit(int64_t* limit) {
  const char* env = std::getenv("UCUDNN_DEFAULT_WORKSPACE_LIMIT");
  *limit = kDefaultWorkspaceLimit;
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  int64_t value = 0;
  if (!absl::SimpleAtoi(env, &value) || value < 0) {
    return errors::InvalidArgument(
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT must be a non-negative number of bytes, got '", env,
        "'");
  }
  *limit = value;
  return absl::OkStatus();
}

// UCUDNN_TOTAL_WORKSPACE_SIZE: bytes, or 0 when unset.
absl::Status EnvTotalWorkspace(int64_t* total) {
  const char* env = std::getenv("UCUDNN_TOTAL_WORKSPACE_SIZE");
  *total = 0;
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  if (!absl::SimpleAtoi(env, total) || *total < 0) {
    return errors::InvalidArgument(
        "UCUDNN_TOTAL_WORKSPACE_SIZE must be a non-negative number of bytes, got '", env, "'");
  }
  return absl::OkStatus();
}

absl::Status EnvBatchSizePolicy(ucudnn::BatchSizePolicy* policy) {
  const char* env = std::getenv("UCUDNN_BATCH_SIZE_POLICY");
  *policy = ucudnn::BatchSizePolicy::kPowerOfTwo;
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  if (!ucudnn::ParseBatchSizePolicy(env, policy)) {
    return errors::InvalidArgument("UCUDNN_BATCH_SIZE_POLICY must be one of undivided, ",
                                   "powerOfTwo, all; got '", env, "'");
  }
  return absl::OkStatus();
}

absl::Status EnvEngineSet(ucudnn::EngineSet* engines) {
  const char* env = std::getenv("UCUDNN_ENGINES");
  *engines = ucudnn::EngineSet::kAll;
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  if (!ucudnn::ParseEngineSet(env, engines)) {
    return errors::InvalidArgument("UCUDNN_ENGINES must be one of all, legacy, graph; got '", env,
                                   "'");
  }
  return absl::OkStatus();
}

// The graph-engine search knobs, read by the engine when it benchmarks; checked
// here so that a bad value is an error when the kernel is created.
absl::Status CheckEnvGraphSearch() {
  const char* factor = std::getenv("UCUDNN_GRAPH_PRUNE_FACTOR");
  double f = 0;
  if (factor != nullptr && *factor != '\0' && !ucudnn::ParseGraphPruneFactor(factor, &f)) {
    return errors::InvalidArgument(
        "UCUDNN_GRAPH_PRUNE_FACTOR must be 0 (never prune) or a number >= 1; got '", factor, "'");
  }
  const char* search = std::getenv("UCUDNN_GRAPH_SEARCH");
  bool exhaustive = false;
  if (search != nullptr && *search != '\0' && !ucudnn::ParseGraphSearch(search, &exhaustive)) {
    return errors::InvalidArgument("UCUDNN_GRAPH_SEARCH must be one of default, exhaustive; got '",
                                   search, "'");
  }
  const char* layouts = std::getenv("UCUDNN_GRAPH_LAYOUTS");
  ucudnn::GraphLayouts l;
  if (layouts != nullptr && *layouts != '\0' && !ucudnn::ParseGraphLayouts(layouts, &l)) {
    return errors::InvalidArgument(
        "UCUDNN_GRAPH_LAYOUTS must be one of both, native, transposed; got '", layouts, "'");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseConvAttrs(OpKernelConstruction* ctx, ConvAttrs* attrs) {
  std::string data_format;
  TF_RETURN_IF_ERROR(ctx->GetAttr("data_format", &data_format));
  if (data_format == "NHWC") {
    attrs->layout = ucudnn::Layout::kNHWC;
  } else if (data_format == "NCHW") {
    attrs->layout = ucudnn::Layout::kNCHW;
  } else {
    return errors::InvalidArgument("data_format must be NHWC or NCHW, got ", data_format);
  }
  int h, w, c;
  SpatialIndices(attrs->layout, &h, &w, &c);

  std::vector<int32> strides, dilations;
  TF_RETURN_IF_ERROR(ctx->GetAttr("strides", &strides));
  TF_RETURN_IF_ERROR(ctx->GetAttr("dilations", &dilations));
  for (const auto& [name, v] : {std::make_pair("strides", &strides),
                                std::make_pair("dilations", &dilations)}) {
    if (v->size() != 4) {
      return errors::InvalidArgument(name, " must have 4 elements (in ", data_format,
                                     " order), got ", v->size());
    }
    if ((*v)[0] != 1 || (*v)[c] != 1) {
      return errors::InvalidArgument(name, " in the batch and channel dimensions must be 1, got [",
                                     absl::StrJoin(*v, ", "), "]");
    }
    if ((*v)[h] < 1 || (*v)[w] < 1) {
      return errors::InvalidArgument(name, " must be positive, got [", absl::StrJoin(*v, ", "),
                                     "]");
    }
  }
  attrs->stride_h = strides[h];
  attrs->stride_w = strides[w];
  attrs->dilation_h = dilations[h];
  attrs->dilation_w = dilations[w];

  TF_RETURN_IF_ERROR(ctx->GetAttr("padding", &attrs->padding));
  std::vector<int64_t> explicit_paddings;
  TF_RETURN_IF_ERROR(ctx->GetAttr("explicit_paddings", &explicit_paddings));
  if (attrs->padding == "EXPLICIT") {
    if (explicit_paddings.size() != 8) {
      return errors::InvalidArgument(
          "explicit_paddings must have 8 elements (before and after for each dimension, in ",
          data_format, " order) when padding is EXPLICIT, got ", explicit_paddings.size());
    }
    for (int64_t p : explicit_paddings) {
      if (p < 0) {
        return errors::InvalidArgument("explicit_paddings must be non-negative, got [",
                                       absl::StrJoin(explicit_paddings, ", "), "]");
      }
    }
    if (explicit_paddings[0] || explicit_paddings[1] || explicit_paddings[2 * c] ||
        explicit_paddings[2 * c + 1]) {
      return errors::InvalidArgument(
          "explicit_paddings in the batch and channel dimensions must be 0, got [",
          absl::StrJoin(explicit_paddings, ", "), "]");
    }
    attrs->pad_top = explicit_paddings[2 * h];
    attrs->pad_bottom = explicit_paddings[2 * h + 1];
    attrs->pad_left = explicit_paddings[2 * w];
    attrs->pad_right = explicit_paddings[2 * w + 1];
  } else if (!explicit_paddings.empty()) {
    return errors::InvalidArgument("explicit_paddings must be empty unless padding is EXPLICIT");
  }

  int64_t limit = 0;
  TF_RETURN_IF_ERROR(ctx->GetAttr("workspace_limit", &limit));
  if (limit < -1) {
    return errors::InvalidArgument(
        "workspace_limit must be a non-negative number of bytes (or -1 for "
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT), got ",
        limit);
  }
  int64_t total = 0;
  TF_RETURN_IF_ERROR(ctx->GetAttr("total_workspace", &total));
  if (total < -1) {
    return errors::InvalidArgument(
        "total_workspace must be a non-negative number of bytes (0 = no Workspace Division, "
        "-1 = UCUDNN_TOTAL_WORKSPACE_SIZE), got ", total);
  }
  if (total > 0 && limit >= 0) {
    return errors::InvalidArgument(
        "set either workspace_limit (", limit, " bytes per kernel) or total_workspace (", total,
        " bytes shared by all kernels), not both");
  }
  // The environment's total applies to ops that leave both knobs to it.
  if (total == -1) {
    total = 0;
    if (limit == -1) TF_RETURN_IF_ERROR(EnvTotalWorkspace(&total));
  }
  if (limit == -1) {
    TF_RETURN_IF_ERROR(EnvWorkspaceLimit(&limit));
  }
  attrs->total_workspace = total;
  attrs->workspace_limit = total > 0 ? total : limit;

  std::string policy;
  TF_RETURN_IF_ERROR(ctx->GetAttr("batch_size_policy", &policy));
  if (policy.empty()) {
    TF_RETURN_IF_ERROR(EnvBatchSizePolicy(&attrs->policy));
  } else if (!ucudnn::ParseBatchSizePolicy(policy, &attrs->policy)) {
    return errors::InvalidArgument(
        "batch_size_policy must be one of undivided, powerOfTwo, all (or empty for "
        "UCUDNN_BATCH_SIZE_POLICY), got '",
        policy, "'");
  }

  TF_RETURN_IF_ERROR(ctx->GetAttr("micro_batch_size", &attrs->micro_batch_size));
  if (attrs->micro_batch_size < 0) {
    return errors::InvalidArgument(
        "micro_batch_size must be 0 (the planner decides) or positive, got ",
        attrs->micro_batch_size);
  }
  TF_RETURN_IF_ERROR(EnvEngineSet(&attrs->engines));
  TF_RETURN_IF_ERROR(CheckEnvGraphSearch());
  // A forced micro-batch size has one plan: nothing to divide. The kernel
  // keeps the total as its per-kernel limit.
  if (attrs->micro_batch_size > 0) attrs->total_workspace = 0;
  return absl::OkStatus();
}

namespace {

// TF's SAME padding: output ceil(in / stride), the extra pixel after.
void SamePadding(int64_t in, int64_t filter, int64_t dilation, int64_t stride, int64_t* before,
                 int64_t* after) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t effective = (filter - 1) * dilation + 1;
  const int64_t needed = std::max<int64_t>(0, (out - 1) * stride + effective - in);
  *before = needed / 2;
  *after = needed - *before;
}

}  // namespace

absl::Status MakeConvParams(const ConvAttrs& attrs, const TensorShape& input,
                            const TensorShape& filter, DataType dtype,
                            ucudnn::ConvParams* p) {
  if (input.dims() != 4) {
    return errors::InvalidArgument("input must be 4-dimensional (",
                                   attrs.layout == ucudnn::Layout::kNHWC ? "NHWC" : "NCHW",
                                   "), got shape ", input.DebugString());
  }
  if (filter.dims() != 4) {
    return errors::InvalidArgument(
        "filter must be 4-dimensional [filter_height, filter_width, in_channels / groups, "
        "out_channels], got shape ",
        filter.DebugString());
  }
  int h, w, c;
  SpatialIndices(attrs.layout, &h, &w, &c);
  p->layout = attrs.layout;
  switch (dtype) {
    case DT_FLOAT: p->dtype = ucudnn::DType::kFloat; break;
    case DT_HALF: p->dtype = ucudnn::DType::kHalf; break;
    case DT_BFLOAT16: p->dtype = ucudnn::DType::kBFloat16; break;
    default:
      return errors::InvalidArgument("dtype must be float32, float16 or bfloat16, got ",
                                     DataTypeString(dtype));
  }
  p->batch = input.dim_size(0);
  p->in_channels = input.dim_size(c);
  p->in_height = input.dim_size(h);
  p->in_width = input.dim_size(w);
  p->filter_height = filter.dim_size(0);
  p->filter_width = filter.dim_size(1);
  p->out_channels = filter.dim_size(3);
  const int64_t filter_in = filter.dim_size(2);
  if (p->batch <= 0) {
    return errors::InvalidArgument("the batch size must be positive, got input shape ",
                                   input.DebugString());
  }
  if (p->filter_height <= 0 || p->filter_width <= 0 || filter_in <= 0 || p->out_channels <= 0) {
    return errors::InvalidArgument("every filter dimension must be positive, got ",
                                   filter.DebugString());
  }
  if (p->in_channels % filter_in != 0) {
    return errors::InvalidArgument(
        "input channels (", p->in_channels, ") must be a multiple of the filter's in_channels (",
        filter_in, "): in_channels = groups * filter in_channels");
  }
  p->groups = p->in_channels / filter_in;
  if (p->out_channels % p->groups != 0) {
    return errors::InvalidArgument("out_channels (", p->out_channels,
                                   ") must be a multiple of groups (", p->groups, ")");
  }
  p->stride_h = attrs.stride_h;
  p->stride_w = attrs.stride_w;
  p->dilation_h = attrs.dilation_h;
  p->dilation_w = attrs.dilation_w;
  if (attrs.padding == "SAME") {
    SamePadding(p->in_height, p->filter_height, p->dilation_h, p->stride_h, &p->pad_top,
                &p->pad_bottom);
    SamePadding(p->in_width, p->filter_width, p->dilation_w, p->stride_w, &p->pad_left,
                &p->pad_right);
  } else if (attrs.padding == "EXPLICIT") {
    p->pad_top = attrs.pad_top;
    p->pad_bottom = attrs.pad_bottom;
    p->pad_left = attrs.pad_left;
    p->pad_right = attrs.pad_right;
  } else {
    p->pad_top = p->pad_bottom = p->pad_left = p->pad_right = 0;
  }
  const int64_t eff_h = (p->filter_height - 1) * p->dilation_h + 1;
  const int64_t eff_w = (p->filter_width - 1) * p->dilation_w + 1;
  if (p->in_height + p->pad_top + p->pad_bottom < eff_h ||
      p->in_width + p->pad_left + p->pad_right < eff_w) {
    return errors::InvalidArgument("the dilated filter (", eff_h, "x", eff_w,
                                   ") is larger than the padded input (",
                                   p->in_height + p->pad_top + p->pad_bottom, "x",
                                   p->in_width + p->pad_left + p->pad_right, ")");
  }
  p->out_height = ucudnn::ConvOutputSize(p->in_height, p->filter_height, p->dilation_h,
                                         p->stride_h, p->pad_top, p->pad_bottom);
  p->out_width = ucudnn::ConvOutputSize(p->in_width, p->filter_width, p->dilation_w,
                                        p->stride_w, p->pad_left, p->pad_right);
  // cuDNN takes int dimensions.
  for (int64_t v : {p->batch, p->in_channels, p->in_height, p->in_width, p->out_channels}) {
    if (v > std::numeric_limits<int>::max()) {
      return errors::InvalidArgument("a dimension (", v, ") exceeds 2^31 - 1");
    }
  }
  return absl::OkStatus();
}

TensorShape OutputShape(const ucudnn::ConvParams& p) {
  if (p.layout == ucudnn::Layout::kNHWC) {
    return TensorShape({p.batch, p.out_height, p.out_width, p.out_channels});
  }
  return TensorShape({p.batch, p.out_channels, p.out_height, p.out_width});
}

absl::Status ShapeFromSizesTensor(const Tensor& sizes, const char* name, TensorShape* shape) {
  if (sizes.dims() != 1 || sizes.NumElements() != 4) {
    return errors::InvalidArgument(name, " must be a 1-D tensor of 4 sizes, got shape ",
                                   sizes.shape().DebugString());
  }
  auto v = sizes.vec<int32>();
  for (int i = 0; i < 4; ++i) {
    if (v(i) < 0) {
      return errors::InvalidArgument(name, " must be non-negative, got ", v(i));
    }
  }
  *shape = TensorShape({v(0), v(1), v(2), v(3)});
  return absl::OkStatus();
}

}  // namespace ucudnn_tf
}  // namespace tensorflow
