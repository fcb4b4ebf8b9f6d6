#include "cc/engine/conv_params.h"

#include <sstream>

namespace ucudnn {

const char* PassName(Pass pass) {
  switch (pass) {
    case Pass::kForward: return "forward";
    case Pass::kBackwardData: return "backward-data";
    case Pass::kBackwardFilter: return "backward-filter";
  }
  return "?";
}

void LayoutStrides(Layout layout, int64_t c, int64_t height, int64_t width, int64_t s[4]) {
  if (layout == Layout::kNHWC) {
    s[0] = height * width * c; s[1] = 1; s[2] = width * c; s[3] = c;
  } else {
    s[0] = c * height * width; s[1] = height * width; s[2] = width; s[3] = 1;
  }
}

const char* LayoutName(Layout layout) {
  return layout == Layout::kNHWC ? "NHWC" : "NCHW";
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat: return "float32";
    case DType::kHalf: return "float16";
    case DType::kBFloat16: return "bfloat16";
  }
  return "?";
}

int DTypeSize(DType dtype) { return dtype == DType::kFloat ? 4 : 2; }

PassBytes PassTensorBytes(Pass pass, const ConvParams& p, int64_t samples) {
  const int64_t elem = DTypeSize(p.dtype);
  const int64_t in = samples * p.input_sample_size() * elem;
  const int64_t out = samples * p.output_sample_size() * elem;
  const int64_t filter = p.filter_size() * elem;
  switch (pass) {
    case Pass::kForward: return {in, filter, out};
    case Pass::kBackwardData: return {out, filter, in};
    case Pass::kBackwardFilter: return {in, out, filter};
  }
  return {};
}

const char* Fusion::Name() const {
  // [prologue][epilogue], as the data flows: the input's transform, then
  // the output's.
  static const char* const kNames[3][4] = {
      {"", "+bias", "+bias+relu", "+stats"},
      {"+input-scale-bias", "+input-scale-bias+bias", "+input-scale-bias+bias+relu",
       "+input-scale-bias+stats"},
      {"+input-scale-bias-relu", "+input-scale-bias-relu+bias",
       "+input-scale-bias-relu+bias+relu", "+input-scale-bias-relu+stats"}};
  const int pro = static_cast<int>(prologue), epi = static_cast<int>(epilogue);
  if (pro < 0 || pro > 2 || epi < 0 || epi > 3) return "?";
  return kNames[pro][epi];
}

bool Fusion::FromCode(int64_t code, Fusion* fusion) {
  if (code < 0) return false;
  const int64_t epi = code % kPrologueCodeStep, pro = code / kPrologueCodeStep;
  if (epi > static_cast<int64_t>(Epilogue::kStatistics) ||
      pro > static_cast<int64_t>(Prologue::kScaleBiasRelu)) {
    return false;
  }
  fusion->epilogue = static_cast<Epilogue>(epi);
  fusion->prologue = static_cast<Prologue>(pro);
  return true;
}

std::string Fusion::Check(Pass pass, const FusionTensors& tensors) const {
  if (bias() && (pass != Pass::kForward || !tensors.bias)) {
    return std::string("a bias needs the forward pass and its tensor, not ") + PassName(pass);
  }
  if (input_scale_bias()) {
    if (pass != Pass::kForward) {
      return std::string("an input scale-bias prologue (") + Name() +
             ") runs on the forward pass only, not " + PassName(pass) +
             " (its gradients are kernels of their own)";
    }
    if (!tensors.input_scale || !tensors.input_bias) {
      return std::string("an input scale-bias prologue (") + Name() +
             ") needs its scale and bias tensors (in_channels float32 each)";
    }
  }
  if (statistics()) {
    if (pass != Pass::kForward) {
      return std::string("a statistics epilogue (") + Name() +
             ") runs on the forward pass only, not " + PassName(pass);
    }
    if (!tensors.statistics) {
      return std::string("a statistics epilogue (") + Name() +
             ") needs its sum and sum-of-squares tensors (out_channels float32 each)";
    }
  }
  return "";
}

std::array<int64_t, 21> ConvParams::Fields() const {
  return {batch,      in_channels, in_height,  in_width,   out_channels,
          filter_height, filter_width, groups, stride_h,   stride_w,
          dilation_h, dilation_w,  pad_top,    pad_bottom, pad_left,
          pad_right,  out_height,  out_width,  static_cast<int64_t>(layout),
          static_cast<int64_t>(dtype), fusion.Code()};
}

ConvParams ConvParams::FromFields(const std::array<int64_t, 21>& f) {
  ConvParams p;
  p.batch = f[0];
  p.in_channels = f[1];
  p.in_height = f[2];
  p.in_width = f[3];
  p.out_channels = f[4];
  p.filter_height = f[5];
  p.filter_width = f[6];
  p.groups = f[7];
  p.stride_h = f[8];
  p.stride_w = f[9];
  p.dilation_h = f[10];
  p.dilation_w = f[11];
  p.pad_top = f[12];
  p.pad_bottom = f[13];
  p.pad_left = f[14];
  p.pad_right = f[15];
  p.out_height = f[16];
  p.out_width = f[17];
  p.layout = static_cast<Layout>(f[18]);
  p.dtype = static_cast<DType>(f[19]);
  Fusion::FromCode(f[20], &p.fusion);
  return p;
}

std::string ConvParams::ToString() const {
  std::ostringstream s;
  s << "N=" << batch << " C=" << in_channels << " H=" << in_height << " W=" << in_width
    << " K=" << out_channels << " R=" << filter_height << " S=" << filter_width
    << " stride=" << stride_h << "x" << stride_w << " pad=" << pad_top << ","
    << pad_bottom << "," << pad_left << "," << pad_right << " dil=" << dilation_h << "x"
    << dilation_w << " groups=" << groups << " " << LayoutName(layout) << " "
    << DTypeName(dtype) << (*fusion.Name() != '\0' ? " " : "") << fusion.Name();
  return s.str();
}

int64_t ConvOutputSize(int64_t in, int64_t filter, int64_t dilation, int64_t stride,
                       int64_t pad_before, int64_t pad_after) {
  const int64_t effective_filter = (filter - 1) * dilation + 1;
  const int64_t span = in + pad_before + pad_after - effective_filter;
  if (span < 0) return 0;
  return span / stride + 1;
}

}  // namespace ucudnn
