// XLA kernels (tf2xla) of Ucudnn>Conv2D (and Ucudnn>Conv2DWithBias,
// Ucudnn>Conv2DWithStatistics) and its two gradients, so that functions and Keras models using tf_ucudnn compile
// with jit_compile.
//
// On the GPU the pass becomes an XLA custom call handled by the micro-batched
// engine through XLA's typed FFI (cc/xla/xla_ffi_conv.cc): it plans on its
// first execution per shape (benchmark database, Workspace Reuse) and runs
// within the op's workspace limit. On the CPU it lowers to XLA's own
// convolution (TF's lowering of Conv2D), which has no workspace to bound.
// A bias is the custom call's third operand on the GPU (the plan adds it in
// the convolution's kernel where the engine takes one), an add on the CPU.
// With UCUDNN_XLA_WORKSPACE=buffer the call has a second result, its
// workspace, which XLA's buffer assignment places.
// A half-precision convolution with few input channels runs on channels
// padded with zeros (XlaPaddedInChannels; UCUDNN_XLA_PAD_CHANNELS=off keeps
// them), on the CPU too, so that CI runs the padding and the slicing back.
#include <string>
#include <vector>

#include "cc/kernels/conv_attrs.h"
#include "cc/xla/xla_conv_config.h"
#include "tensorflow/compiler/tf2xla/kernels/conv_op_helpers.h"
#include "tensorflow/compiler/tf2xla/shape_util.h"
#include "tensorflow/compiler/tf2xla/type_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/core/util/determinism.h"
#include "tsl/platform/tensor_float_32_utils.h"
#include "xla/hlo/builder/lib/arithmetic.h"
#include "xla/hlo/builder/lib/constants.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

namespace tensorflow {
namespace ucudnn_tf {
namespace {

using ucudnn::ConvParams;
using ucudnn::Pass;

constexpr int64_t kFilterInDim = 2;  // HWIO's I

// The output's channel dimension: 3 in NHWC, 1 in NCHW.
int64_t ChannelDimension(ucudnn::Layout layout) {
  return layout == ucudnn::Layout::kNHWC ? 3 : 1;
}

// The input and filter shapes of `pass`'s op: from its operands, or from
// its compile-time constant sizes (input_sizes of backward-data,
// filter_sizes of backward-filter).
absl::Status PassShapes(XlaOpKernelContext* ctx, Pass pass, TensorShape* input,
                        TensorShape* filter) {
  switch (pass) {
    case Pass::kForward:
      *input = ctx->InputShape(0);
      *filter = ctx->InputShape(1);
      return absl::OkStatus();
    case Pass::kBackwardData:
      *filter = ctx->InputShape(1);
      return ctx->ConstantInputAsShape(0, input);
    case Pass::kBackwardFilter:
      *input = ctx->InputShape(0);
      return ctx->ConstantInputAsShape(1, filter);
  }
  return absl::InternalError("unknown pass");
}

// A pass's operands: input (forward, backward-filter), filter (forward,
// backward-data), out_backprop (the gradients), bias (Conv2DWithBias).
struct Operands {
  xla::XlaOp input, filter, out_backprop, bias;
};

Operands PassOperands(XlaOpKernelContext* ctx, Pass pass, bool bias) {
  Operands ops;
  switch (pass) {
    case Pass::kForward:
      ops.input = ctx->Input(0);
      ops.filter = ctx->Input(1);
      if (bias) ops.bias = ctx->Input(2);
      break;
    case Pass::kBackwardData:
      ops.filter = ctx->Input(1);
      ops.out_backprop = ctx->Input(2);
      break;
    case Pass::kBackwardFilter:
      ops.input = ctx->Input(0);
      ops.out_backprop = ctx->Input(2);
      break;
  }
  return ops;
}

// The result of an empty convolution, as stock TF: an empty result, or a
// zero filter gradient (or the bias alone, a sum over nothing plus the bias,
// and its ReLU); nothing to plan.
xla::XlaOp EmptyResult(XlaOpKernelContext* ctx, bool bias, const ConvParams& params,
                       const TensorShape& result, xla::PrimitiveType type) {
  xla::XlaOp out = bias ? xla::BroadcastInDim(ctx->Input(2), result.dim_sizes(),
                                              {ChannelDimension(params.layout)})
                        : xla::Broadcast(xla::Zero(ctx->builder(), type), result.dim_sizes());
  if (params.fusion.relu()) out = xla::Max(out, xla::Zero(ctx->builder(), type));
  return out;
}

// Input channels C -> `padded`, zeros in the input and in the filter's input
// channels (XlaPaddedInChannels). backward-filter pads its input behind an
// optimization barrier with out_backprop, so that the padded copy is made
// when the gradient is, not kept from the forward pass to it (XLA would
// otherwise share one pad of the input between the passes).
void PadInChannels(xla::XlaBuilder* b, Pass pass, xla::PrimitiveType type, int64_t padded,
                   ConvParams* params, Operands* ops, TensorShape* input_shape,
                   TensorShape* filter_shape) {
  const int64_t extra = padded - params->in_channels;
  auto pad = [&](xla::XlaOp op, int64_t dim) {  // a 4-D operand
    xla::PaddingConfig config;
    for (int64_t i = 0; i < 4; ++i) {
      config.add_dimensions()->set_edge_padding_high(i == dim ? extra : 0);
    }
    return xla::Pad(op, xla::Zero(b, type), config);
  };
  const int64_t channel_dim = ChannelDimension(params->layout);
  if (pass == Pass::kBackwardFilter) {
    xla::XlaOp both = xla::OptimizationBarrier(xla::Tuple(b, {ops->input, ops->out_backprop}));
    ops->input = xla::GetTupleElement(both, 0);
    ops->out_backprop = xla::GetTupleElement(both, 1);
  }
  if (pass != Pass::kBackwardData) ops->input = pad(ops->input, channel_dim);
  if (pass != Pass::kBackwardFilter) ops->filter = pad(ops->filter, kFilterInDim);
  input_shape->set_dim(channel_dim, padded);
  filter_shape->set_dim(kFilterInDim, padded);
  params->in_channels = padded;
}

// A custom call's operands, their shapes and its result's: activations in
// TF's layouts (row-major NHWC/NCHW), the filter's HWIO dimensions laid out
// as cuDNN takes them (KRSC for NHWC, KCRS for NCHW).
struct CallSignature {
  std::vector<xla::XlaOp> operands;
  std::vector<xla::Shape> operand_shapes;
  xla::Shape result;
};

// `bias_shape`: the bias operand's shape where the forward pass has one, else nullptr.
CallSignature CustomCallSignature(Pass pass, xla::PrimitiveType type, const ConvParams& params,
                                  const Operands& ops, const TensorShape& input_shape,
                                  const TensorShape& filter_shape,
                                  const TensorShape& output_shape,
                                  const TensorShape* bias_shape) {
  auto shape_of = [type](const TensorShape& s) {
    return xla::ShapeUtil::MakeShapeWithDescendingLayout(type, s.dim_sizes());
  };
  // HWIO = dimensions (0, 1, 2, 3) = (R, S, C, K), minor to major.
  const std::vector<int64_t> cudnn_filter_layout =
      params.layout == ucudnn::Layout::kNHWC ? std::vector<int64_t>{2, 1, 0, 3}   // KRSC
                                             : std::vector<int64_t>{1, 0, 2, 3};  // KCRS
  auto filter_shape_of = [&](const TensorShape& s) {
    return xla::ShapeUtil::MakeShapeWithDenseLayout(type, s.dim_sizes(), cudnn_filter_layout);
  };
  CallSignature call;
  switch (pass) {
    case Pass::kForward:  // a = input, b = filter [, bias] -> output
      call.operands = {ops.input, ops.filter};
      call.operand_shapes = {shape_of(input_shape), filter_shape_of(filter_shape)};
      if (bias_shape != nullptr) {
        call.operands.push_back(ops.bias);
        call.operand_shapes.push_back(shape_of(*bias_shape));
      }
      call.result = shape_of(output_shape);
      break;
    case Pass::kBackwardData:  // a = out_backprop, b = filter -> in_backprop
      call.operands = {ops.out_backprop, ops.filter};
      call.operand_shapes = {shape_of(output_shape), filter_shape_of(filter_shape)};
      call.result = shape_of(input_shape);
      break;
    case Pass::kBackwardFilter:  // a = input, b = out_backprop -> filter_backprop
      call.operands = {ops.input, ops.out_backprop};
      call.operand_shapes = {shape_of(input_shape), shape_of(output_shape)};
      call.result = filter_shape_of(filter_shape);
      break;
  }
  return call;
}

// What every XLA kernel of the ops reads when it is constructed: the knobs
// (and their environment defaults) as the TF kernel parses them, so that a
// bad value is the same InvalidArgument at compile time; T;
// UCUDNN_XLA_WORKSPACE and UCUDNN_XLA_PAD_CHANNELS, read on the CPU too so
// that a bad value is the same error wherever the function is compiled; and
// on the CPU TF's attributes of XLA convolutions.
template <bool kGpu>
class UcudnnXlaKernel : public XlaOpKernel {
 public:
  explicit UcudnnXlaKernel(OpKernelConstruction* ctx) : XlaOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ParseConvAttrs(ctx, &attrs_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("T", &dtype_));
    OP_REQUIRES_OK(ctx, DataTypeToPrimitiveType(dtype_, &type_));
    OP_REQUIRES_OK(ctx, EngineStatusToTf(ucudnn::ReadXlaWorkspace(&xla_workspace_)));
    OP_REQUIRES_OK(ctx, EngineStatusToTf(ucudnn::ReadXlaPadChannels(&pad_channels_)));
    if (!kGpu) {
      absl::StatusOr<ConvOpAttrs> conv = ConvOpAttrs::Create(2, /*depthwise=*/false, ctx);
      OP_REQUIRES_OK(ctx, conv.status());
      xla_attrs_ = *conv;
    }
  }

 protected:
  // The typed-FFI custom call `target` on `call`'s operands, of `results`
  // (one: an array result; more: a tuple), and the ops of those results.
  // Its config is the params and knobs, TF32 and determinism fixed when the
  // function is compiled, as XLA's own convolutions fix theirs. With
  // UCUDNN_XLA_WORKSPACE=buffer the call has one more result, u8 of the
  // limit's size, that XLA's buffer assignment places (live only during the
  // call, as the workspace of XLA's own convolutions); not in a Workspace
  // Division group, whose kernels' shares are known only when the group is
  // planned.
  std::vector<xla::XlaOp> CustomCall(XlaOpKernelContext* ctx, const char* target,
                                     const ConvParams& params, const CallSignature& call,
                                     std::vector<xla::Shape> results) const {
    XlaConvConfig config;
    config.params = params;
    config.knobs = attrs_.knobs;
    config.knobs.allow_tf32 = tsl::tensor_float_32_execution_enabled();
    config.knobs.deterministic = OpDeterminismRequired();
    const ucudnn::PlanningKnobs& knobs = attrs_.knobs;
    const size_t wanted = results.size();
    if (xla_workspace_ == ucudnn::XlaWorkspace::kBuffer && knobs.total_workspace == 0 &&
        knobs.workspace_limit > 0) {
      results.push_back(
          xla::ShapeUtil::MakeShapeWithDescendingLayout(xla::U8, {knobs.workspace_limit}));
    }
    xla::XlaOp out = xla::CustomCallWithLayout(
        ctx->builder(), target, call.operands,
        results.size() == 1 ? results[0] : xla::ShapeUtil::MakeTupleShape(results),
        call.operand_shapes, EncodeXlaConvConfig(config), /*has_side_effect=*/false,
        /*output_operand_aliasing=*/{}, /*literal=*/nullptr,
        xla::CustomCallSchedule::SCHEDULE_NONE,
        xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
    if (results.size() == 1) return {out};
    std::vector<xla::XlaOp> ops;
    for (size_t i = 0; i < wanted; ++i) ops.push_back(xla::GetTupleElement(out, i));
    return ops;
  }

  ConvAttrs attrs_;
  ucudnn::XlaWorkspace xla_workspace_ = ucudnn::XlaWorkspace::kScratch;  // UCUDNN_XLA_WORKSPACE
  bool pad_channels_ = true;  // UCUDNN_XLA_PAD_CHANNELS
  DataType dtype_ = DT_FLOAT;
  xla::PrimitiveType type_ = xla::F32;  // dtype_ in XLA's terms
  ConvOpAttrs xla_attrs_;
};

// The base's members, named in a class template deriving from it.
#define UCUDNN_XLA_KERNEL_MEMBERS(BASE) \
  using BASE::attrs_;                   \
  using BASE::xla_workspace_;           \
  using BASE::pad_channels_;            \
  using BASE::dtype_;                   \
  using BASE::type_;                    \
  using BASE::xla_attrs_

// kBias: Ucudnn>Conv2DWithBias (forward).
template <Pass kPass, bool kGpu, bool kBias = false>
class UcudnnXlaConvOp : public UcudnnXlaKernel<kGpu> {
  static_assert(!kBias || kPass == Pass::kForward, "only the forward pass takes a bias");
  UCUDNN_XLA_KERNEL_MEMBERS(UcudnnXlaKernel<kGpu>);

 public:
  explicit UcudnnXlaConvOp(OpKernelConstruction* ctx) : UcudnnXlaKernel<kGpu>(ctx) {}

  void Compile(XlaOpKernelContext* ctx) override {
    TensorShape input_shape, filter_shape;
    OP_REQUIRES_OK(ctx, PassShapes(ctx, kPass, &input_shape, &filter_shape));
    // The same validation as the TF kernel: a bad shape or attribute is an
    // InvalidArgument when the function is compiled.
    ConvParams params;
    OP_REQUIRES_OK(ctx, MakeConvParams(attrs_, input_shape, filter_shape, dtype_, &params));
    if (kBias) {
      OP_REQUIRES_OK(ctx, CheckBias(ctx->InputShape(2), params));
      params.fusion = attrs_.fusion;
    }
    const TensorShape output_shape = OutputShape(params);
    if (kPass != Pass::kForward) {
      OP_REQUIRES_OK(ctx, CheckOutBackprop(ctx->InputShape(2), output_shape));
    }
    if (params.empty()) {
      const TensorShape& result = PassResultShape(kPass, input_shape, filter_shape, output_shape);
      ctx->SetOutput(0, EmptyResult(ctx, kBias, params, result, type_));
      return;
    }
    Operands ops = PassOperands(ctx, kPass, kBias);
    const int64_t channels = params.in_channels;
    const int64_t padded = pad_channels_ ? XlaPaddedInChannels(params) : channels;
    if (padded != channels) {
      PadInChannels(ctx->builder(), kPass, type_, padded, &params, &ops, &input_shape,
                    &filter_shape);
    }
    absl::StatusOr<xla::XlaOp> out =
        kGpu ? CompileCustomCall(ctx, params, ops, input_shape, filter_shape, output_shape)
             : CompileXlaConv(ctx, ops, input_shape, filter_shape);
    OP_REQUIRES_OK(ctx, out.status());
    if (padded != channels && kPass != Pass::kForward) {
      // The gradient of the padded channels is dropped.
      const int64_t dim = kPass == Pass::kBackwardData ? ChannelDimension(params.layout)
                                                       : kFilterInDim;
      out = xla::SliceInDim(*out, 0, channels, 1, dim);
    }
    ctx->SetOutput(0, *out);
  }

 private:
  // GPU: a typed-FFI custom call (CustomCallSignature): XLA transposes the
  // filter where it can inside a fusion (the filter gradient, e.g., inside
  // the weight update), and the engine runs without a transform of its own.
  absl::StatusOr<xla::XlaOp> CompileCustomCall(XlaOpKernelContext* ctx, const ConvParams& params,
                                               const Operands& ops,
                                               const TensorShape& input_shape,
                                               const TensorShape& filter_shape,
                                               const TensorShape& output_shape) {
    const TensorShape bias_shape = kBias ? ctx->InputShape(2) : TensorShape();
    const CallSignature call = CustomCallSignature(kPass, type_, params, ops, input_shape,
                                                   filter_shape, output_shape,
                                                   kBias ? &bias_shape : nullptr);
    return this->CustomCall(ctx, XlaConvTarget(kPass), params, call, {call.result})[0];
  }

  // CPU: TF's own lowering of Conv2D and its gradients to XLA convolutions.
  absl::StatusOr<xla::XlaOp> CompileXlaConv(XlaOpKernelContext* ctx, const Operands& ops,
                                            const TensorShape& input_shape,
                                            const TensorShape& filter_shape) {
    switch (kPass) {
      case Pass::kForward: {
        absl::StatusOr<xla::XlaOp> out =
            MakeXlaForwardConvOp(this->type_string(), ops.input, ops.filter, xla_attrs_);
        if (kBias && out.ok()) out = xla::Add(*out, ops.bias, {ChannelDimension(attrs_.layout)});
        if (attrs_.fusion.relu() && out.ok()) {
          out = xla::Max(*out, xla::Zero(ctx->builder(), type_));
        }
        return out;
      }
      case Pass::kBackwardData: {
        xla::XlaOp input_sizes = ctx->Input(0);
        return MakeXlaBackpropInputConvOp(this->type_string(),
                                          TensorShapeToXLAShape(type_, input_shape), ops.filter,
                                          ops.out_backprop, xla_attrs_, &input_sizes);
      }
      case Pass::kBackwardFilter:
        return MakeXlaBackpropFilterConvOp(this->type_string(), ops.input,
                                           TensorShapeToXLAShape(type_, filter_shape),
                                           ops.out_backprop, xla_attrs_);
    }
    return absl::InternalError("unknown pass");
  }

};

// Ucudnn>Conv2DWithStatistics: the output and its per-channel sum and sum of
// squares (float32). GPU: one custom call of three results
// (kXlaStatisticsTarget), the engine's statistics epilogue; CPU: XLA's
// convolution and two float32 reductions of its output. With kPrologue,
// Ucudnn>NormalizedConv2DWithStatistics: the convolution of relu(input *
// scale + offset) (kXlaNormalizedStatisticsTarget on the GPU, the engine's
// input prologue; on the CPU XLA's elementwise ops before the convolution),
// scale and offset rounded to the input's type as the engine uses them.
template <bool kGpu, bool kPrologue = false>
class UcudnnXlaConvStatisticsOp : public UcudnnXlaKernel<kGpu> {
  UCUDNN_XLA_KERNEL_MEMBERS(UcudnnXlaKernel<kGpu>);

 public:
  explicit UcudnnXlaConvStatisticsOp(OpKernelConstruction* ctx)
      : UcudnnXlaKernel<kGpu>(ctx) {}

  void Compile(XlaOpKernelContext* ctx) override {
    TensorShape input_shape = ctx->InputShape(0), filter_shape = ctx->InputShape(1);
    ConvParams params;
    OP_REQUIRES_OK(ctx, MakeConvParams(attrs_, input_shape, filter_shape, dtype_, &params));
    params.fusion.epilogue = ucudnn::Epilogue::kStatistics;
    if (kPrologue) {
      OP_REQUIRES_OK(ctx, CheckInputScaleBias(ctx->InputShape(2), ctx->InputShape(3), params));
      params.fusion.prologue = attrs_.fusion.prologue;
    }
    const TensorShape output_shape = OutputShape(params);
    xla::XlaBuilder* b = ctx->builder();
    if (params.empty()) {  // sums over nothing, an output of zeros
      ctx->SetOutput(0, xla::Broadcast(xla::Zero(b, type_), output_shape.dim_sizes()));
      const xla::XlaOp zeros = xla::Broadcast(xla::Zero(b, xla::F32), {params.out_channels});
      ctx->SetOutput(1, zeros);
      ctx->SetOutput(2, zeros);
      return;
    }
    Operands ops = PassOperands(ctx, Pass::kForward, /*bias=*/false);
    // Zero input channels change neither the output nor its sums (not with
    // a prologue, whose offset would make them nonzero: no padding then).
    const int64_t padded =
        pad_channels_ && !kPrologue ? XlaPaddedInChannels(params) : params.in_channels;
    if (padded != params.in_channels) {
      PadInChannels(b, Pass::kForward, type_, padded, &params, &ops, &input_shape,
                    &filter_shape);
    }
    if (kGpu) {
      CompileCustomCall(ctx, params, ops, input_shape, filter_shape, output_shape);
      return;
    }
    if (kPrologue) {
      const int64_t channel = ChannelDimension(params.layout);
      auto rounded = [&](int i) {
        return xla::ConvertElementType(xla::ConvertElementType(ctx->Input(i), type_), xla::F32);
      };
      xla::XlaOp z = xla::Add(xla::Mul(xla::ConvertElementType(ops.input, xla::F32), rounded(2),
                                       {channel}),
                              rounded(3), {channel});
      if (params.fusion.input_relu()) z = xla::Max(z, xla::Zero(b, xla::F32));
      ops.input = xla::ConvertElementType(z, type_);
    }
    absl::StatusOr<xla::XlaOp> out =
        MakeXlaForwardConvOp(this->type_string(), ops.input, ops.filter, xla_attrs_);
    OP_REQUIRES_OK(ctx, out.status());
    const xla::XlaOp y = xla::ConvertElementType(*out, xla::F32);
    const std::vector<int64_t> dims = params.layout == ucudnn::Layout::kNHWC
                                          ? std::vector<int64_t>{0, 1, 2}
                                          : std::vector<int64_t>{0, 2, 3};
    const xla::XlaComputation add = xla::CreateScalarAddComputation(xla::F32, b);
    ctx->SetOutput(0, *out);
    ctx->SetOutput(1, xla::Reduce(y, xla::Zero(b, xla::F32), add, dims));
    ctx->SetOutput(2, xla::Reduce(xla::Mul(y, y), xla::Zero(b, xla::F32), add, dims));
  }

 private:
  void CompileCustomCall(XlaOpKernelContext* ctx, const ConvParams& params, const Operands& ops,
                         const TensorShape& input_shape, const TensorShape& filter_shape,
                         const TensorShape& output_shape) {
    CallSignature call = CustomCallSignature(Pass::kForward, type_, params, ops, input_shape,
                                             filter_shape, output_shape, nullptr);
    if (kPrologue) {
      const xla::Shape channels =
          xla::ShapeUtil::MakeShapeWithDescendingLayout(xla::F32, {params.in_channels});
      for (int i : {2, 3}) {
        call.operands.push_back(ctx->Input(i));
        call.operand_shapes.push_back(channels);
      }
    }
    const xla::Shape sums =
        xla::ShapeUtil::MakeShapeWithDescendingLayout(xla::F32, {params.out_channels});
    const std::vector<xla::XlaOp> out = this->CustomCall(
        ctx,
        kPrologue ? ucudnn_tf::kXlaNormalizedStatisticsTarget : ucudnn_tf::kXlaStatisticsTarget,
        params, call, {call.result, sums, sums});
    for (int i = 0; i < 3; ++i) ctx->SetOutput(i, out[i]);
  }

};

// REGISTER_XLA_OP takes a plain class name.
using XlaForwardGpu = UcudnnXlaConvOp<Pass::kForward, true>;
using XlaBackwardDataGpu = UcudnnXlaConvOp<Pass::kBackwardData, true>;
using XlaBackwardFilterGpu = UcudnnXlaConvOp<Pass::kBackwardFilter, true>;
using XlaForwardCpu = UcudnnXlaConvOp<Pass::kForward, false>;
using XlaBackwardDataCpu = UcudnnXlaConvOp<Pass::kBackwardData, false>;
using XlaBackwardFilterCpu = UcudnnXlaConvOp<Pass::kBackwardFilter, false>;
using XlaForwardBiasGpu = UcudnnXlaConvOp<Pass::kForward, true, true>;
using XlaForwardBiasCpu = UcudnnXlaConvOp<Pass::kForward, false, true>;
using XlaForwardStatisticsGpu = UcudnnXlaConvStatisticsOp<true>;
using XlaForwardStatisticsCpu = UcudnnXlaConvStatisticsOp<false>;
using XlaForwardNormalizedGpu = UcudnnXlaConvStatisticsOp<true, true>;
using XlaForwardNormalizedCpu = UcudnnXlaConvStatisticsOp<false, true>;

#define UCUDNN_REGISTER_XLA(DEVICE, FORWARD, FORWARD_BIAS, FORWARD_STATISTICS,                \
                            FORWARD_NORMALIZED, BACKWARD_DATA, BACKWARD_FILTER)               \
  REGISTER_XLA_OP(Name("Ucudnn>Conv2D").Device(DEVICE), FORWARD);                             \
  REGISTER_XLA_OP(Name("Ucudnn>Conv2DWithBias").Device(DEVICE), FORWARD_BIAS);               \
  REGISTER_XLA_OP(Name("Ucudnn>Conv2DWithStatistics").Device(DEVICE), FORWARD_STATISTICS);   \
  REGISTER_XLA_OP(Name("Ucudnn>NormalizedConv2DWithStatistics").Device(DEVICE),               \
                  FORWARD_NORMALIZED);                                                        \
  REGISTER_XLA_OP(Name("Ucudnn>Conv2DBackpropInput")                                         \
                      .Device(DEVICE)                                                         \
                      .CompileTimeConstantInput("input_sizes"),                               \
                  BACKWARD_DATA);                                                             \
  REGISTER_XLA_OP(Name("Ucudnn>Conv2DBackpropFilter")                                        \
                      .Device(DEVICE)                                                         \
                      .CompileTimeConstantInput("filter_sizes"),                              \
                  BACKWARD_FILTER);

UCUDNN_REGISTER_XLA(DEVICE_CPU_XLA_JIT, XlaForwardCpu, XlaForwardBiasCpu, XlaForwardStatisticsCpu,
                    XlaForwardNormalizedCpu, XlaBackwardDataCpu, XlaBackwardFilterCpu)
UCUDNN_REGISTER_XLA(DEVICE_GPU_XLA_JIT, XlaForwardGpu, XlaForwardBiasGpu, XlaForwardStatisticsGpu,
                    XlaForwardNormalizedGpu, XlaBackwardDataGpu, XlaBackwardFilterGpu)

}  // namespace
}  // namespace ucudnn_tf
}  // namespace tensorflow
