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
  Fusion kept;
  kept.epilogue = Epilogue::kBias;
  Check(!Fusion::FromCode(3, &kept) && !Fusion::FromCode(-1, &kept) &&
            kept.epilogue == Epilogue::kBias,
        "an unknown code is refused and leaves the fusion");
  p.fusion.epilogue = Epilogue::kBiasRelu;
  Check(p.ToString().size() > 11 &&
            p.ToString().compare(p.ToString().size() - 11, 11, " +bias+relu") == 0,
        "ToString ends with the fusion's name");
  Check(p.fusion.Check(Pass::kForward, true).empty(), "a bias on the forward pass with its tensor");
  Check(p.fusion.Check(Pass::kForward, false) ==
            "a bias needs the forward pass and its tensor, not forward",
        "a bias without its tensor is refused");
  Check(!p.fusion.Check(Pass::kBackwardData, true).empty(), "no epilogue on a gradient");
  Check(Fusion().Check(Pass::kBackwardFilter, false).empty(), "no fusion runs anywhere");
  return ucudnn_test::Summary("conv_params_test");
}
