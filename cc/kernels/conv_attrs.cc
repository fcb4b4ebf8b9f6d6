#include "cc/kernels/conv_attrs.h"

#include <array>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <utility>

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

}  // namespace

absl::Status EngineStatusToTf(const ucudnn::Status& s) {
  switch (s.code()) {
    case ucudnn::Status::Code::kOk: return absl::OkStatus();
    case ucudnn::Status::Code::kInvalidArgument: return absl::InvalidArgumentError(s.message());
    case ucudnn::Status::Code::kResourceExhausted:
      return absl::ResourceExhaustedError(s.message());
    case ucudnn::Status::Code::kInternal: return absl::InternalError(s.message());
  }
  return absl::UnknownError(s.message());
}

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

  ucudnn::KnobAttributes knobs;
  TF_RETURN_IF_ERROR(ctx->GetAttr("workspace_limit", &knobs.workspace_limit));
  TF_RETURN_IF_ERROR(ctx->GetAttr("total_workspace", &knobs.total_workspace));
  TF_RETURN_IF_ERROR(ctx->GetAttr("batch_size_policy", &knobs.batch_size_policy));
  TF_RETURN_IF_ERROR(ctx->GetAttr("micro_batch_size", &knobs.micro_batch_size));
  TF_RETURN_IF_ERROR(EngineStatusToTf(ucudnn::ResolvePlanningKnobs(knobs, &attrs->knobs)));
  if (ctx->HasAttr("input_relu")) {
    bool relu = false;
    TF_RETURN_IF_ERROR(ctx->GetAttr("input_relu", &relu));
    attrs->fusion.prologue =
        relu ? ucudnn::Prologue::kScaleBiasRelu : ucudnn::Prologue::kScaleBias;
  }
  if (ctx->HasAttr("activation")) {  // the op registration limits its values
    std::string activation;
    TF_RETURN_IF_ERROR(ctx->GetAttr("activation", &activation));
    attrs->fusion.epilogue =
        activation == "relu" ? ucudnn::Epilogue::kBiasRelu : ucudnn::Epilogue::kBias;
  }
  return absl::OkStatus();
}

namespace {

// Overflow-safe int64 arithmetic. Every size below comes from a tensor's
// shape, an attribute or a size tensor that a user controls, and a tensor
// with no elements may still have a dimension near 2^63 (e.g. [0, 2^62, 5, 2]),
// so signed overflow (undefined behaviour) is possible in every sum and product.
bool CheckedAdd(int64_t a, int64_t b, int64_t* sum) { return !__builtin_add_overflow(a, b, sum); }
bool CheckedMul(int64_t a, int64_t b, int64_t* product) {
  return !__builtin_mul_overflow(a, b, product);
}

// The number of elements of a shape of non-negative `dims`; false when it
// exceeds 2^63 - 1 (TensorShape would CHECK-fail on it and abort).
bool CheckedNumElements(std::initializer_list<int64_t> dims, int64_t* n) {
  *n = 1;
  for (int64_t d : dims) {
    if (!CheckedMul(*n, d, n)) return false;
  }
  return true;
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// The output's dimensions in its layout's order.
std::array<int64_t, 4> OutputDims(const ucudnn::ConvParams& p) {
  if (p.layout == ucudnn::Layout::kNHWC) {
    return {p.batch, p.out_height, p.out_width, p.out_channels};
  }
  return {p.batch, p.out_channels, p.out_height, p.out_width};
}

// One spatial dimension as TF computes it (GetWindowedOutputSizeVerbose),
// overflow-checked: the dilated filter size, the padding (SAME: output
// ceil(in / stride), the extra pixel after) and the padded input size.
// `what` is "height" or "width".
struct SpatialSizes {
  int64_t effective = 0, pad_before = 0, pad_after = 0, padded = 0;
};

absl::Status SpatialDim(const std::string& padding, int64_t in, int64_t filter, int64_t dilation,
                        int64_t stride, int64_t explicit_before, int64_t explicit_after,
                        const char* what, SpatialSizes* d) {
  // (filter - 1) * dilation + 1, with filter >= 1 and dilation >= 1.
  if (!CheckedMul(filter - 1, dilation, &d->effective) ||
      !CheckedAdd(d->effective, 1, &d->effective)) {
    return errors::InvalidArgument("the dilated filter ", what, " (", filter,
                                   " taps with dilation ", dilation, ") exceeds 2^63 - 1");
  }
  if (padding == "SAME") {
    // in / stride rounded up, without in + stride - 1 (which can overflow).
    const int64_t out = in / stride + (in % stride != 0 ? 1 : 0);
    // (out - 1) * stride < in cannot overflow; adding the filter can.
    int64_t span = 0;
    if (!CheckedAdd((out - 1) * stride, d->effective, &span)) {
      return errors::InvalidArgument("the SAME-padded input ", what, " (input ", in,
                                     ", dilated filter ", d->effective, ", stride ", stride,
                                     ") exceeds 2^63 - 1");
    }
    const int64_t needed = std::max<int64_t>(0, span - in);
    d->pad_before = needed / 2;
    d->pad_after = needed - d->pad_before;
  } else if (padding == "EXPLICIT") {
    d->pad_before = explicit_before;
    d->pad_after = explicit_after;
  } else {
    d->pad_before = d->pad_after = 0;
  }
  if (!CheckedAdd(in, d->pad_before, &d->padded) ||
      !CheckedAdd(d->padded, d->pad_after, &d->padded)) {
    return errors::InvalidArgument("the padded input ", what, " (", in, " + ", d->pad_before,
                                   " + ", d->pad_after, ") exceeds 2^63 - 1");
  }
  return absl::OkStatus();
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
  // Zero-size tensors are valid, as in tf.nn.conv2d: a batch of 0, an empty
  // spatial dimension (with SAME padding or enough explicit padding) or 0
  // output channels give an empty or zero result (see ConvParams::empty()).
  // A filter without taps or input channels is an error, as in TF.
  if (p->filter_height <= 0 || p->filter_width <= 0 || filter_in <= 0) {
    return errors::InvalidArgument(
        "the filter's height, width and in_channels must be positive (TF: filter must not have "
        "zero elements), got filter shape ",
        filter.DebugString());
  }
  if (p->in_channels % filter_in != 0) {
    return errors::InvalidArgument(
        "input channels (", p->in_channels, ") must be a multiple of the filter's in_channels (",
        filter_in, "): in_channels = groups * filter in_channels");
  }
  p->groups = p->in_channels / filter_in;
  // 0 input channels would make 0 groups, and out_channels % 0 a division by
  // zero (SIGFPE); TF rejects it too ("Number of groups must not be 0").
  if (p->groups == 0) {
    return errors::InvalidArgument("the input has 0 channels but the filter's in_channels is ",
                                   filter_in,
                                   ": a convolution needs at least one group (input channels = "
                                   "groups * filter in_channels, groups >= 1)");
  }
  if (p->out_channels % p->groups != 0) {
    return errors::InvalidArgument("out_channels (", p->out_channels,
                                   ") must be a multiple of groups (", p->groups, ")");
  }
  p->stride_h = attrs.stride_h;
  p->stride_w = attrs.stride_w;
  p->dilation_h = attrs.dilation_h;
  p->dilation_w = attrs.dilation_w;
  SpatialSizes sh, sw;
  TF_RETURN_IF_ERROR(SpatialDim(attrs.padding, p->in_height, p->filter_height, p->dilation_h,
                                p->stride_h, attrs.pad_top, attrs.pad_bottom, "height", &sh));
  TF_RETURN_IF_ERROR(SpatialDim(attrs.padding, p->in_width, p->filter_width, p->dilation_w,
                                p->stride_w, attrs.pad_left, attrs.pad_right, "width", &sw));
  p->pad_top = sh.pad_before;
  p->pad_bottom = sh.pad_after;
  p->pad_left = sw.pad_before;
  p->pad_right = sw.pad_after;
  // SAME never fails: its output is ceil(in / stride), 0 for an empty input.
  // VALID and EXPLICIT need the padded input to hold the dilated filter, as
  // TF's shape function (graph mode) requires; TF's eager kernel also returns
  // an empty output when it is short by less than a stride.
  if (attrs.padding != "SAME" && (sh.padded < sh.effective || sw.padded < sw.effective)) {
    return errors::InvalidArgument("the dilated filter (", sh.effective, "x", sw.effective,
                                   ") is larger than the padded input (", sh.padded, "x",
                                   sw.padded, ")");
  }
  // Safe now: in + pads fits in int64 (checked above).
  p->out_height = ucudnn::ConvOutputSize(p->in_height, p->filter_height, p->dilation_h,
                                         p->stride_h, p->pad_top, p->pad_bottom);
  p->out_width = ucudnn::ConvOutputSize(p->in_width, p->filter_width, p->dilation_w,
                                        p->stride_w, p->pad_left, p->pad_right);
  // The output's element count must fit before OutputShape builds it, in the
  // order TensorShape multiplies the dimensions (a later 0 does not save an
  // earlier overflow there).
  const std::array<int64_t, 4> out_dims = OutputDims(*p);
  int64_t output_elements = 0;
  if (!CheckedNumElements({out_dims[0], out_dims[1], out_dims[2], out_dims[3]},
                          &output_elements)) {
    return errors::InvalidArgument("the output shape [", absl::StrJoin(out_dims, ", "),
                                   "] would have more than 2**63 - 1 elements");
  }
  if (p->empty()) return absl::OkStatus();  // nothing runs: no limits to check
  // The engine (cuDNN's legacy descriptors) takes int dimensions, paddings
  // and per-sample element counts; checked here so that no static_cast<int>
  // there wraps. Only convolutions that run are held to it.
  const int64_t padded_h = sh.padded, padded_w = sw.padded;
  const std::pair<const char*, int64_t> dims[] = {
      {"batch", p->batch},
      {"input channels", p->in_channels},
      {"input height", p->in_height},
      {"input width", p->in_width},
      {"output channels", p->out_channels},
      {"filter height", p->filter_height},
      {"filter width", p->filter_width},
      {"output height", p->out_height},
      {"output width", p->out_width},
      {"padded input height", padded_h},
      {"padded input width", padded_w}};
  for (const auto& [name, v] : dims) {
    if (v > kIntMax) {
      return errors::InvalidArgument("the ", name, " (", v,
                                     ") exceeds 2^31 - 1: cuDNN takes int dimensions");
    }
  }
  int64_t padded_sample = 0, output_sample = 0;
  if (!CheckedNumElements({p->in_channels, padded_h, padded_w}, &padded_sample) ||
      padded_sample > kIntMax ||
      !CheckedNumElements({p->out_channels, p->out_height, p->out_width}, &output_sample) ||
      output_sample > kIntMax) {
    return errors::InvalidArgument(
        "one sample of the padded input (", p->in_channels, " x ", padded_h, " x ", padded_w,
        ") or of the output (", p->out_channels, " x ", p->out_height, " x ", p->out_width,
        ") has more than 2^31 - 1 elements: cuDNN takes int strides");
  }
  return absl::OkStatus();
}

TensorShape OutputShape(const ucudnn::ConvParams& p) {
  const std::array<int64_t, 4> dims = OutputDims(p);
  return TensorShape({dims[0], dims[1], dims[2], dims[3]});
}

const TensorShape& PassResultShape(ucudnn::Pass pass, const TensorShape& input,
                                   const TensorShape& filter, const TensorShape& output) {
  switch (pass) {
    case ucudnn::Pass::kForward: return output;
    case ucudnn::Pass::kBackwardData: return input;
    case ucudnn::Pass::kBackwardFilter: return filter;
  }
  return output;
}

absl::Status CheckOutBackprop(const TensorShape& out_backprop, const TensorShape& output) {
  if (out_backprop == output) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("out_backprop has shape ",
                                                 out_backprop.DebugString(),
                                                 " but the convolution's output shape is ",
                                                 output.DebugString()));
}

absl::Status CheckBias(const TensorShape& bias, const ucudnn::ConvParams& params) {
  if (bias.dims() == 1 && bias.dim_size(0) == params.out_channels) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("bias has shape ", bias.DebugString(),
                                                 " but must be [out_channels] = [",
                                                 params.out_channels, "]"));
}

absl::Status CheckInputScaleBias(const TensorShape& scale, const TensorShape& offset,
                                  const ucudnn::ConvParams& params) {
  for (const auto& [name, shape] : {std::pair<const char*, const TensorShape*>{"scale", &scale},
                                    {"offset", &offset}}) {
    if (shape->dims() != 1 || shape->dim_size(0) != params.in_channels) {
      return absl::InvalidArgumentError(absl::StrCat(name, " has shape ", shape->DebugString(),
                                                     " but must be [in_channels] = [",
                                                     params.in_channels, "]"));
    }
  }
  return absl::OkStatus();
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
  // 4 int32 sizes can have 2^124 elements: TensorShape would CHECK-fail (abort).
  int64_t elements = 0;
  if (!CheckedNumElements({v(0), v(1), v(2), v(3)}, &elements)) {
    return errors::InvalidArgument(name, " [", v(0), ", ", v(1), ", ", v(2), ", ", v(3),
                                   "] would have more than 2**63 - 1 elements");
  }
  return TensorShape::BuildTensorShape({v(0), v(1), v(2), v(3)}, shape);
}

}  // namespace ucudnn_tf
}  // namespace tensorflow
