#include "cc/kernels/xla_conv_config.h"

#include <array>
#include <iomanip>
#include <sstream>

namespace tensorflow {
namespace ucudnn_tf {

const char* XlaConvTarget(ucudnn::Pass pass) {
  switch (pass) {
    case ucudnn::Pass::kForward: return "ucudnn_conv2d_forward";
    case ucudnn::Pass::kBackwardData: return "ucudnn_conv2d_backward_data";
    case ucudnn::Pass::kBackwardFilter: return "ucudnn_conv2d_backward_filter";
  }
  return "";
}

int64_t XlaPaddedInChannels(const ucudnn::ConvParams& p) {
  constexpr int64_t kChannels = 8;  // 16 bytes of half-precision values
  const bool half = p.dtype == ucudnn::DType::kHalf || p.dtype == ucudnn::DType::kBFloat16;
  return half && p.groups == 1 && p.in_channels < kChannels ? kChannels : p.in_channels;
}

std::string EncodeXlaConvConfig(const XlaConvConfig& c) {
  std::ostringstream s;
  s << "{" << kAttrConv << " = array<i64: ";
  const auto fields = c.params.Fields();
  for (size_t i = 0; i < fields.size(); ++i) s << (i ? ", " : "") << fields[i];
  s << ">";
  auto i64 = [&s](const char* name, int64_t value) {
    s << ", " << name << " = " << value << " : i64";
  };
  i64(kAttrWorkspaceLimit, c.workspace_limit);
  i64(kAttrBatchSizePolicy, static_cast<int64_t>(c.policy));
  i64(kAttrMicroBatchSize, c.micro_batch_size);
  i64(kAttrTotalWorkspace, c.total_workspace);
  i64(kAttrEngines, static_cast<int64_t>(c.engines));
  // Exactly representable in decimal with 17 significant digits.
  s << ", " << kAttrGraphPruneFactor << " = " << std::setprecision(17) << std::scientific
    << c.graph.prune_factor << " : f64" << std::defaultfloat;
  i64(kAttrGraphSearch, static_cast<int64_t>(c.graph.search));
  i64(kAttrGraphLayouts, static_cast<int64_t>(c.graph.layouts));
  i64(kAttrAllowTf32, c.allow_tf32 ? 1 : 0);
  i64(kAttrDeterministic, c.deterministic ? 1 : 0);
  s << "}";
  return s.str();
}

bool ConvParamsFromFields(const int64_t* f, size_t n, ucudnn::ConvParams* p) {
  if (n != std::tuple_size<decltype(p->Fields())>::value) return false;
  if (f[18] < 0 || f[18] > 1 || f[19] < 0 || f[19] > 2 || f[20] < 0 || f[20] > 2) return false;
  p->batch = f[0];
  p->in_channels = f[1];
  p->in_height = f[2];
  p->in_width = f[3];
  p->out_channels = f[4];
  p->filter_height = f[5];
  p->filter_width = f[6];
  p->groups = f[7];
  p->stride_h = f[8];
  p->stride_w = f[9];
  p->dilation_h = f[10];
  p->dilation_w = f[11];
  p->pad_top = f[12];
  p->pad_bottom = f[13];
  p->pad_left = f[14];
  p->pad_right = f[15];
  p->out_height = f[16];
  p->out_width = f[17];
  p->layout = static_cast<ucudnn::Layout>(f[18]);
  p->dtype = static_cast<ucudnn::DType>(f[19]);
  p->bias = f[20] != 0;
  p->relu = f[20] == 2;
  // The encoder wrote Fields(): decoding must give them back.
  const auto back = p->Fields();
  for (size_t i = 0; i < n; ++i) {
    if (back[i] != f[i]) return false;
  }
  return true;
}

}  // namespace ucudnn_tf
}  // namespace tensorflow
