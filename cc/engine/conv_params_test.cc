// Checks of ConvParams' fusion (what runs around the convolution) and its
// key encoding, with no TensorFlow and no GPU:
//   bazel build //cc/engine:conv_params_test && ./bazel-bin/cc/engine/conv_params_test
#include <cstdint>
#include <string>

#include "cc/engine/conv_params.h"
#include "cc/engine/test_checks.h"

using ucudnn_test::Check;

int main() {
  using namespace ucudnn;
  ConvParams p;
  p.batch = 8; p.in_channels = 3; p.in_height = 5; p.in_width = 5; p.out_channels = 4;
  p.filter_height = 3; p.filter_width = 3; p.out_height = 3; p.out_width = 3;

  // The stored codes and names never change meaning (benchmark databases and
  // the XLA attribute conv's field 20 hold them).
  const struct {
    Epilogue epilogue;
    int64_t code;
    const char* name;
    bool bias, relu;
  } cases[] = {{Epilogue::kNone, 0, "", false, false},
               {Epilogue::kBias, 1, "+bias", true, false},
               {Epilogue::kBiasRelu, 2, "+bias+relu", true, true}};
  for (const auto& c : cases) {
    p.fusion.epilogue = c.epilogue;
    Fusion back;
    Check(p.fusion.Code() == c.code && std::string(p.fusion.Name()) == c.name &&
              p.fusion.bias() == c.bias && p.fusion.relu() == c.relu,
          c.name);
    Check(p.Fields()[20] == c.code && ConvParams::FromFields(p.Fields()).fusion == p.fusion,
          "Fields() carries the fusion's code and FromFields reads it back");
    Check(Fusion::FromCode(c.code, &back) && back == p.fusion, "FromCode inverts Code");
  }
  // The prologues and the statistics: epilogue + 16 * prologue, every
  // combination, each name its own.
  const struct {
    Prologue prologue;
    Epilogue epilogue;
    int64_t code;
    const char* name;
  } fused[] = {
      {Prologue::kNone, Epilogue::kStatistics, 3, "+stats"},
      {Prologue::kScaleBias, Epilogue::kNone, 16, "+input-scale-bias"},
      {Prologue::kScaleBias, Epilogue::kBias, 17, "+input-scale-bias+bias"},
      {Prologue::kScaleBias, Epilogue::kBiasRelu, 18, "+input-scale-bias+bias+relu"},
      {Prologue::kScaleBias, Epilogue::kStatistics, 19, "+input-scale-bias+stats"},
      {Prologue::kScaleBiasRelu, Epilogue::kNone, 32, "+input-scale-bias-relu"},
      {Prologue::kScaleBiasRelu, Epilogue::kBias, 33, "+input-scale-bias-relu+bias"},
      {Prologue::kScaleBiasRelu, Epilogue::kBiasRelu, 34, "+input-scale-bias-relu+bias+relu"},
      {Prologue::kScaleBiasRelu, Epilogue::kStatistics, 35, "+input-scale-bias-relu+stats"}};
  for (const auto& c : fused) {
    p.fusion.prologue = c.prologue;
    p.fusion.epilogue = c.epilogue;
    Fusion back;
    Check(p.fusion.Code() == c.code && std::string(p.fusion.Name()) == c.name, c.name);
    Check(p.fusion.input_scale_bias() == (c.prologue != Prologue::kNone) &&
              p.fusion.input_relu() == (c.prologue == Prologue::kScaleBiasRelu) &&
              p.fusion.statistics() == (c.epilogue == Epilogue::kStatistics) &&
              p.fusion.bias() ==
                  (c.epilogue == Epilogue::kBias || c.epilogue == Epilogue::kBiasRelu),
          "the predicates of a fused value");
    Check(Fusion::FromCode(c.code, &back) && back == p.fusion &&
              ConvParams::FromFields(p.Fields()).Fields() == p.Fields(),
          "a fused value round-trips through its code and Fields()");
  }
  p.fusion = Fusion();
  Fusion kept;
  kept.epilogue = Epilogue::kBias;
  for (int64_t code : {int64_t{4}, int64_t{15}, int64_t{20}, int64_t{48}, int64_t{-1}}) {
    Check(!Fusion::FromCode(code, &kept), "an unknown code is refused");
  }
  Check(kept.epilogue == Epilogue::kBias && kept.prologue == Prologue::kNone,
        "a refused code leaves the fusion");
  p.fusion.epilogue = Epilogue::kBiasRelu;
  Check(p.ToString().size() > 11 &&
            p.ToString().compare(p.ToString().size() - 11, 11, " +bias+relu") == 0,
        "ToString ends with the fusion's name");
  FusionTensors bias_only, none;
  bias_only.bias = true;
  Check(p.fusion.Check(Pass::kForward, bias_only).empty(),
        "a bias on the forward pass with its tensor");
  Check(p.fusion.Check(Pass::kForward, none) ==
            "a bias needs the forward pass and its tensor, not forward",
        "a bias without its tensor is refused");
  Check(!p.fusion.Check(Pass::kBackwardData, bias_only).empty(), "no epilogue on a gradient");
  Check(Fusion().Check(Pass::kBackwardFilter, none).empty(), "no fusion runs anywhere");

  // The prologue and the statistics: forward only, each with its tensors.
  FusionTensors all;
  all.input_scale = all.input_bias = all.statistics = true;
  Fusion bn;
  bn.prologue = Prologue::kScaleBiasRelu;
  bn.epilogue = Epilogue::kStatistics;
  Check(bn.Check(Pass::kForward, all).empty(), "a prologue and statistics with their tensors");
  Check(bn.Check(Pass::kBackwardData, all) ==
            "an input scale-bias prologue (+input-scale-bias-relu+stats) runs on the forward "
            "pass only, not backward-data (its gradients are kernels of their own)",
        "a prologue on backward-data is refused");
  FusionTensors no_bias = all;
  no_bias.input_bias = false;
  Check(bn.Check(Pass::kForward, no_bias) ==
            "an input scale-bias prologue (+input-scale-bias-relu+stats) needs its scale and "
            "bias tensors (in_channels float32 each)",
        "a prologue without its bias tensor is refused");
  Fusion stats;
  stats.epilogue = Epilogue::kStatistics;
  Check(stats.Check(Pass::kBackwardFilter, all) ==
            "a statistics epilogue (+stats) runs on the forward pass only, not backward-filter",
        "statistics on backward-filter are refused");
  Check(stats.Check(Pass::kForward, bias_only) ==
            "a statistics epilogue (+stats) needs its sum and sum-of-squares tensors "
            "(out_channels float32 each)",
        "a caller with only a bias tensor cannot run statistics");
  Check(!bn.Check(Pass::kForward, bias_only).empty(),
        "a caller with only a bias tensor cannot run a prologue");
  return ucudnn_test::Summary("conv_params_test");
}
