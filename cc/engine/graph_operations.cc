// The operation graph of a convolution pass and its fusion, and engine
// configs of it, through cudnn-frontend's v0.x builder API (graph_operations.h).
#include "cc/engine/graph_operations.h"

#if GOOGLE_CUDA

#include <utility>
#include <vector>

#include "cc/engine/cuda_check.h"

namespace ucudnn {
namespace graph_internal {
namespace {

// A graph tensor of `dims` [n, c, h, w], packed in `layout` (virtual: an
// intermediate of the graph, in no buffer).
fe::Tensor MakeTensor(const int64_t dims[4], Layout layout, int64_t uid, cudnnDataType_t type,
                      int64_t alignment, bool is_virtual = false) {
  int64_t strides[4];
  LayoutStrides(layout, dims[1], dims[2], dims[3], strides);
  return fe::TensorBuilder()
      .setDim(4, dims)
      .setStride(4, strides)
      .setId(uid)
      .setAlignment(alignment)
      .setDataType(type)
      .setVirtual(is_virtual)
      .build();
}

// A pointwise node of the forward prologue or epilogue, computing in float:
// y = x + b (CUDNN_POINTWISE_ADD), y = x * b (MUL) or y = max(x, 0)
// (RELU_FWD, `b` null).
Status MakePointwise(cudnnPointwiseMode_t mode, const fe::Tensor& x, const fe::Tensor* b,
                     const fe::Tensor& y, const char* what, std::unique_ptr<fe::Operation>* out) {
  fe::PointWiseDesc desc =
      fe::PointWiseDescBuilder().setMode(mode).setComputeType(CUDNN_DATA_FLOAT).build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(desc, what));
  fe::OperationBuilder builder(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  builder.setxDesc(x).setyDesc(y).setpwDesc(desc);
  if (b != nullptr) builder.setbDesc(*b);
  *out = std::make_unique<fe::Operation>(builder.build());
  return FrontendOk(**out, what);
}

// A reduction node: `y` ([1, K, 1, 1]) = the sum of `x` over the batch and
// pixels, in float.
Status MakeSum(const fe::Tensor& x, const fe::Tensor& y, const char* what,
               std::unique_ptr<fe::Operation>* out) {
  fe::ReductionDesc desc = fe::ReductionDescBuilder()
                               .setComputeType(CUDNN_DATA_FLOAT)
                               .setReductionOp(CUDNN_REDUCE_TENSOR_ADD)
                               .build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(desc, what));
  *out = std::make_unique<fe::Operation>(
      fe::OperationBuilder(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)
          .setxDesc(x)
          .setyDesc(y)
          .setreductionDesc(desc)
          .build());
  return FrontendOk(**out, what);
}

// The statistics epilogue's nodes on the convolution's output `y`: genstats,
// or a sum of y and a sum of y * y (StatisticsAsGenstats); appended to `ops`,
// owned by `keep`.
Status MakeStatistics(const ConvGraphSpec& spec, const fe::Tensor& y,
                      std::vector<std::unique_ptr<fe::Tensor>>* tensors,
                      std::vector<std::unique_ptr<fe::Operation>>* keep,
                      std::vector<const fe::Operation*>* ops) {
  const Layout l = spec.graph_layout;
  const int64_t sums[4] = {1, spec.y[1], 1, 1};
  auto add_tensor = [&](const int64_t* dims, int64_t uid, bool is_virtual,
                        const char* what) -> Status {
    tensors->push_back(std::make_unique<fe::Tensor>(
        MakeTensor(dims, l, uid, CUDNN_DATA_FLOAT, spec.alignment, is_virtual)));
    return FrontendOk(*tensors->back(), what);
  };
  UCUDNN_RETURN_IF_ERROR(add_tensor(sums, kUidSum, false, "the graph's sum tensor"));
  const fe::Tensor& sum = *tensors->back();
  UCUDNN_RETURN_IF_ERROR(
      add_tensor(sums, kUidSumOfSquares, false, "the graph's sum-of-squares tensor"));
  const fe::Tensor& sum_of_squares = *tensors->back();
  if (StatisticsAsGenstats(spec)) {
    keep->push_back(std::make_unique<fe::Operation>(
        fe::OperationBuilder(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR)
            .setxDesc(y)
            .setSumDesc(sum)
            .setSqSumDesc(sum_of_squares)
            .setGenStatsMode(CUDNN_GENSTATS_SUM_SQSUM)
            .setMathPrecision(CUDNN_DATA_FLOAT)
            .build()));
    UCUDNN_RETURN_IF_ERROR(FrontendOk(*keep->back(), "the genstats node"));
    ops->push_back(keep->back().get());
    return Status();
  }
  UCUDNN_RETURN_IF_ERROR(add_tensor(spec.y, kUidSquares, true, "the graph's squares"));
  const fe::Tensor& squares = *tensors->back();
  std::unique_ptr<fe::Operation> op;
  UCUDNN_RETURN_IF_ERROR(MakeSum(y, sum, "the sum reduction", &op));
  keep->push_back(std::move(op));
  UCUDNN_RETURN_IF_ERROR(MakePointwise(CUDNN_POINTWISE_MUL, y, &y, squares, "the squares", &op));
  keep->push_back(std::move(op));
  UCUDNN_RETURN_IF_ERROR(MakeSum(squares, sum_of_squares, "the sum-of-squares reduction", &op));
  keep->push_back(std::move(op));
  for (size_t i = keep->size() - 3; i < keep->size(); ++i) ops->push_back((*keep)[i].get());
  return Status();
}

}  // namespace

bool StatisticsAsGenstats(const ConvGraphSpec& spec) {
  return spec.data_type == CUDNN_DATA_HALF;
}

cudnnBackendDescriptorType_t OperationType(Pass pass) {
  switch (pass) {
    case Pass::kForward: return CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
    case Pass::kBackwardData: return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
    case Pass::kBackwardFilter: break;
  }
  return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
}

// The pass's output among x (0), w (1), y (2).
int OutputRole(Pass pass) {
  return pass == Pass::kForward ? 2 : pass == Pass::kBackwardData ? 0 : 1;
}

// Whether the plan of `spec` transposes its output (then the graph itself
// never accumulates: the transpose back adds).
bool TransposesOutput(const ConvGraphSpec& spec) {
  const int64_t* dims[3] = {spec.x, spec.w, spec.y};
  return spec.layout != spec.graph_layout && !LayoutsCoincide(dims[OutputRole(spec.pass)]);
}

Status MakeOperationGraph(cudnnHandle_t handle, const ConvGraphSpec& spec,
                          std::unique_ptr<fe::OperationGraph>* graph) {
  const Layout l = spec.graph_layout;
  fe::Tensor x = MakeTensor(spec.x, l, kUidX, spec.data_type, spec.alignment);
  UCUDNN_RETURN_IF_ERROR(FrontendOk(x, "the graph's x tensor"));
  fe::Tensor w = MakeTensor(spec.w, l, kUidW, spec.data_type, spec.alignment);
  UCUDNN_RETURN_IF_ERROR(FrontendOk(w, "the graph's w tensor"));
  fe::Tensor y = MakeTensor(spec.y, l, kUidY, spec.data_type, spec.alignment);
  UCUDNN_RETURN_IF_ERROR(FrontendOk(y, "the graph's y tensor"));
  // With a bias, the convolution writes a float intermediate that a
  // pointwise add reads with the bias ([1, K, 1, 1]) and writes into y; with a
  // ReLU too, the add writes a second float intermediate that the ReLU reads.
  if ((spec.fusion.bias() || spec.fusion.statistics()) && spec.pass != Pass::kForward) {
    return Status::InvalidArgument(std::string("an epilogue needs the forward pass, not ") +
                                   PassName(spec.pass));
  }
  if (spec.fusion.input_scale_bias() && spec.pass != Pass::kForward) {
    return Status::InvalidArgument(std::string("a prologue needs the forward pass, not ") +
                                   PassName(spec.pass));
  }
  // The prologue: x * scale + bias (and its ReLU), per input channel, in
  // float intermediates the convolution reads; scale and bias ([1, C, 1, 1])
  // in x's type, as cuDNN's fused batch-norm patterns take them.
  std::vector<std::unique_ptr<fe::Tensor>> prologue_tensors;
  std::vector<std::unique_ptr<fe::Operation>> prologue_ops;
  const fe::Tensor* conv_x = &x;
  if (spec.fusion.input_scale_bias()) {
    const int64_t channel_dims[4] = {1, spec.x[1], 1, 1};
    auto add_tensor = [&](const int64_t* dims, int64_t uid, cudnnDataType_t type,
                          bool is_virtual, const char* what) -> Status {
      prologue_tensors.push_back(std::make_unique<fe::Tensor>(
          MakeTensor(dims, l, uid, type, spec.alignment, is_virtual)));
      return FrontendOk(*prologue_tensors.back(), what);
    };
    UCUDNN_RETURN_IF_ERROR(add_tensor(channel_dims, kUidInputScale, spec.data_type, false,
                                      "the prologue's scale"));
    UCUDNN_RETURN_IF_ERROR(add_tensor(channel_dims, kUidInputBias, spec.data_type, false,
                                      "the prologue's bias"));
    UCUDNN_RETURN_IF_ERROR(
        add_tensor(spec.x, kUidScaled, CUDNN_DATA_FLOAT, true, "the scaled input"));
    UCUDNN_RETURN_IF_ERROR(
        add_tensor(spec.x, kUidShifted, CUDNN_DATA_FLOAT, true, "the shifted input"));
    const bool relu_in = spec.fusion.input_relu();
    if (relu_in) {
      UCUDNN_RETURN_IF_ERROR(
          add_tensor(spec.x, kUidPrologue, CUDNN_DATA_FLOAT, true, "the prologue's ReLU"));
    }
    const fe::Tensor& scale = *prologue_tensors[0];
    const fe::Tensor& bias_in = *prologue_tensors[1];
    const fe::Tensor& scaled = *prologue_tensors[2];
    const fe::Tensor& shifted = *prologue_tensors[3];
    std::unique_ptr<fe::Operation> node;
    UCUDNN_RETURN_IF_ERROR(
        MakePointwise(CUDNN_POINTWISE_MUL, x, &scale, scaled, "the prologue's scale", &node));
    prologue_ops.push_back(std::move(node));
    UCUDNN_RETURN_IF_ERROR(MakePointwise(CUDNN_POINTWISE_ADD, scaled, &bias_in, shifted,
                                         "the prologue's bias", &node));
    prologue_ops.push_back(std::move(node));
    conv_x = &shifted;
    if (relu_in) {
      UCUDNN_RETURN_IF_ERROR(MakePointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr,
                                           *prologue_tensors[4], "the prologue's ReLU", &node));
      prologue_ops.push_back(std::move(node));
      conv_x = prologue_tensors[4].get();
    }
  }
  const bool add_bias = spec.fusion.bias(), relu = spec.fusion.relu();
  std::unique_ptr<fe::Tensor> conv_y, bias, biased;
  if (relu) {
    biased = std::make_unique<fe::Tensor>(MakeTensor(spec.y, l, kUidBiased, CUDNN_DATA_FLOAT,
                                                     spec.alignment, /*is_virtual=*/true));
    UCUDNN_RETURN_IF_ERROR(FrontendOk(*biased, "the graph's biased result"));
  }
  if (add_bias) {
    const int64_t bias_dims[4] = {1, spec.y[1], 1, 1};
    conv_y = std::make_unique<fe::Tensor>(MakeTensor(spec.y, l, kUidConv, CUDNN_DATA_FLOAT,
                                                     spec.alignment, /*is_virtual=*/true));
    UCUDNN_RETURN_IF_ERROR(FrontendOk(*conv_y, "the graph's convolution result"));
    bias = std::make_unique<fe::Tensor>(
        MakeTensor(bias_dims, l, kUidBias, spec.data_type, spec.alignment));
    UCUDNN_RETURN_IF_ERROR(FrontendOk(*bias, "the graph's bias tensor"));
  }
  fe::ConvDesc conv = fe::ConvDescBuilder()
                          .setComputeType(CUDNN_DATA_FLOAT)
                          .setMathMode(CUDNN_CROSS_CORRELATION)
                          .setSpatialDimCount(2)
                          .setSpatialStride(2, spec.stride)
                          .setPrePadding(2, spec.pad)
                          .setPostPadding(2, spec.pad)
                          .setDilation(2, spec.dilation)
                          .build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(conv, "the convolution descriptor"));
  // Backward-filter's later micro-batches add to dW (beta = 1), which the v1
  // graph API cannot say; the v0.x operation can.
  const float beta = spec.accumulate && !TransposesOutput(spec) ? 1.0f : 0.0f;
  fe::OperationBuilder builder(OperationType(spec.pass));
  switch (spec.pass) {
    case Pass::kForward:
      builder.setxDesc(*conv_x).setwDesc(w).setyDesc(add_bias ? *conv_y : y);
      break;
    case Pass::kBackwardData: builder.setdxDesc(x).setwDesc(w).setdyDesc(y); break;
    case Pass::kBackwardFilter: builder.setxDesc(x).setdwDesc(w).setdyDesc(y); break;
  }
  fe::Operation op = builder.setcDesc(conv).setAlpha(1.0f).setBeta(beta).build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(op, "the convolution operation"));
  std::vector<const fe::Operation*> ops;
  for (const auto& node : prologue_ops) ops.push_back(node.get());
  ops.push_back(&op);
  std::unique_ptr<fe::Operation> add_op, relu_op;
  if (add_bias) {
    UCUDNN_RETURN_IF_ERROR(MakePointwise(CUDNN_POINTWISE_ADD, *conv_y, bias.get(),
                                         relu ? *biased : y, "the bias add", &add_op));
    ops.push_back(add_op.get());
  }
  if (relu) {
    UCUDNN_RETURN_IF_ERROR(
        MakePointwise(CUDNN_POINTWISE_RELU_FWD, *biased, nullptr, y, "the ReLU", &relu_op));
    ops.push_back(relu_op.get());
  }
  std::vector<std::unique_ptr<fe::Tensor>> statistics_tensors;
  std::vector<std::unique_ptr<fe::Operation>> statistics_ops;
  if (spec.fusion.statistics()) {
    UCUDNN_RETURN_IF_ERROR(MakeStatistics(spec, y, &statistics_tensors, &statistics_ops, &ops));
  }
  auto made = std::make_unique<fe::OperationGraph>(
      fe::OperationGraphBuilder()
          .setHandle(handle)
          .setOperationGraph(static_cast<int64_t>(ops.size()), ops.data())
          .build());
  UCUDNN_RETURN_IF_ERROR(FrontendOk(*made, "the operation graph"));
  *graph = std::move(made);
  return Status();
}

Status MakeEngineConfig(fe::OperationGraph& graph, const GraphEngine& e,
                        EngineConfigDescriptors* out) {
  fe::Engine engine = fe::EngineBuilder().setOperationGraph(graph).setGlobalEngineIdx(e.id).build();
  UCUDNN_RETURN_IF_ERROR(FrontendOk(engine, "the engine"));
  // Built through the backend: the frontend's config builder passes a choice
  // for every knob the engine lists once one is chosen, -1 for the knobs not
  // chosen.
  EngineConfigDescriptors made;
  made.engine = engine.get_desc();
  for (const auto& [type, value] : e.knobs) {
    made.choices.push_back(fe::make_shared_backend_pointer(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    UCUDNN_CUDNN_OK(made.choices.back()->get_status());
    cudnnBackendDescriptor_t choice = made.choices.back()->get_backend_descriptor();
    const auto knob_type = static_cast<cudnnBackendKnobType_t>(type);
    const int64_t knob_value = value;
    UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                             CUDNN_TYPE_KNOB_TYPE, 1, &knob_type));
    UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                             CUDNN_TYPE_INT64, 1, &knob_value));
    UCUDNN_CUDNN_OK(cudnnBackendFinalize(choice));
  }
  made.config = fe::make_shared_backend_pointer(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  UCUDNN_CUDNN_OK(made.config->get_status());
  cudnnBackendDescriptor_t config = made.config->get_backend_descriptor();
  cudnnBackendDescriptor_t engine_desc = made.engine->get_backend_descriptor();
  UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine_desc));
  if (!made.choices.empty()) {
    std::vector<cudnnBackendDescriptor_t> choices;
    for (const auto& c : made.choices) choices.push_back(c->get_backend_descriptor());
    UCUDNN_CUDNN_OK(cudnnBackendSetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                             static_cast<int64_t>(choices.size()), choices.data()));
  }
  UCUDNN_CUDNN_OK(cudnnBackendFinalize(config));
  *out = std::move(made);
  return Status();
}

}  // namespace graph_internal
}  // namespace ucudnn

#endif  // GOOGLE_CUDA
