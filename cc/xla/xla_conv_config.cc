#include "cc/xla/xla_conv_config.h"

#include <algorithm>
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
  if (!half || p.groups != 1 || p.in_channels >= kChannels) return p.in_channels;
  // cuDNN's float16 first-layer kernels ("image_first_layer", 4 channels).
  const bool image = p.dtype == ucudnn::DType::kHalf && p.in_channels == 3 &&
                     (p.out_channels == 32 || p.out_channels == 64);
  return image ? 4 : kChannels;
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
  const ucudnn::PlanningKnobs& k = c.knobs;
  i64(kAttrWorkspaceLimit, k.workspace_limit);
  i64(kAttrBatchSizePolicy, static_cast<int64_t>(k.policy));
  i64(kAttrMicroBatchSize, k.micro_batch_size);
  i64(kAttrTotalWorkspace, k.total_workspace);
  i64(kAttrEngines, static_cast<int64_t>(k.engines));
  // Exactly representable in decimal with 17 significant digits.
  s << ", " << kAttrGraphPruneFactor << " = " << std::setprecision(17) << std::scientific
    << k.graph.prune_factor << " : f64" << std::defaultfloat;
  i64(kAttrGraphSearch, static_cast<int64_t>(k.graph.search));
  i64(kAttrGraphLayouts, static_cast<int64_t>(k.graph.layouts));
  i64(kAttrAllowTf32, k.allow_tf32 ? 1 : 0);
  i64(kAttrDeterministic, k.deterministic ? 1 : 0);
  s << "}";
  return s.str();
}

bool DecodeXlaConvConfig(const XlaConvAttributes& a, XlaConvConfig* c) {
  if (!ConvParamsFromFields(a.conv, a.conv_size, &c->params) || a.policy < 0 || a.policy > 2 ||
      a.engines < 0 || a.engines >= ucudnn::kEngineSetCount || a.graph_search < 0 ||
      a.graph_search >= ucudnn::kGraphSearchCount || a.graph_layouts < 0 ||
      a.graph_layouts >= ucudnn::kGraphLayoutsCount ||
      !ucudnn::ValidGraphPruneFactor(a.graph_prune_factor) ||
      (a.workspace_limit < 0 && a.workspace_limit != ucudnn::kAutoWorkspaceLimit) ||
      a.total_workspace < 0 || a.micro_batch_size < 0 || a.allow_tf32 < 0 || a.allow_tf32 > 1 ||
      a.deterministic < 0 || a.deterministic > 1) {
    return false;
  }
  ucudnn::PlanningKnobs& k = c->knobs;
  k.workspace_limit = a.workspace_limit;
  k.policy = static_cast<ucudnn::BatchSizePolicy>(a.policy);
  k.micro_batch_size = a.micro_batch_size;
  k.total_workspace = a.total_workspace;
  k.engines = static_cast<ucudnn::EngineSet>(a.engines);
  k.graph.prune_factor = a.graph_prune_factor;
  k.graph.search = static_cast<ucudnn::GraphSearch>(a.graph_search);
  k.graph.layouts = static_cast<ucudnn::GraphLayouts>(a.graph_layouts);
  k.allow_tf32 = a.allow_tf32 != 0;
  k.deterministic = a.deterministic != 0;
  return true;
}

bool ConvParamsFromFields(const int64_t* f, size_t n, ucudnn::ConvParams* p) {
  decltype(p->Fields()) fields;
  if (n != fields.size()) return false;
  // Layout and dtype are cast to enums: out of range, they would come back.
  if (f[18] < 0 || f[18] > 1 || f[19] < 0 || f[19] > 2) return false;
  std::copy(f, f + n, fields.begin());
  *p = ucudnn::ConvParams::FromFields(fields);
  // The encoder wrote Fields(): decoding must give them back (this refuses a
  // fusion code Fusion::FromCode does not know too).
  return p->Fields() == fields;
}

}  // namespace ucudnn_tf
}  // namespace tensorflow
