// Checks of the XLA custom call's attributes with no TensorFlow, no XLA and
// no GPU: what EncodeXlaConvConfig writes, read back as XLA's parser reads
// the MLIR dictionary and bound as the FFI handler binds it, decodes
// (DecodeXlaConvConfig) to the same config; bad attribute values are refused.
//   bazel build //cc/xla:xla_conv_config_test && ./bazel-bin/cc/xla/xla_conv_config_test
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cc/engine/test_checks.h"
#include "cc/xla/xla_conv_config.h"

using ucudnn_test::Check;

namespace {

using tensorflow::ucudnn_tf::DecodeXlaConvConfig;
using tensorflow::ucudnn_tf::EncodeXlaConvConfig;
using tensorflow::ucudnn_tf::XlaConvAttributes;
using tensorflow::ucudnn_tf::XlaConvConfig;
namespace names = tensorflow::ucudnn_tf;

// The backend config's dictionary as XLA reads it: attribute name -> its
// value's text ("array<i64: 8, 3>" or "67108864 : i64"). False when the text
// is not "{name = value, ...}" or a name comes twice.
bool ParseDictionary(const std::string& text, std::map<std::string, std::string>* attrs) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return false;
  size_t pos = 1;
  while (pos < text.size() - 1) {
    const size_t eq = text.find(" = ", pos);
    if (eq == std::string::npos) return false;
    const std::string name = text.substr(pos, eq - pos);
    size_t end = eq + 3;
    if (text.compare(end, 6, "array<") == 0) {
      end = text.find('>', end);
      if (end == std::string::npos) return false;
      ++end;
    } else {
      end = text.find(", ", end);
      if (end == std::string::npos) end = text.size() - 1;
    }
    if (!attrs->emplace(name, text.substr(eq + 3, end - eq - 3)).second) return false;
    pos = end;
    if (text.compare(pos, 2, ", ") == 0) pos += 2;
  }
  return true;
}

// "<number> : <type>" -> the number, with the type checked.
bool ScalarOf(const std::string& value, const char* type, std::string* number) {
  const std::string suffix = std::string(" : ") + type;
  if (value.size() <= suffix.size() ||
      value.compare(value.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  *number = value.substr(0, value.size() - suffix.size());
  return true;
}

// The attributes of `text` bound as UCUDNN_FFI_BINDING binds them (every
// attribute present, each with its type); `conv` holds the array.
bool Bind(const std::string& text, std::vector<int64_t>* conv, XlaConvAttributes* a) {
  std::map<std::string, std::string> attrs;
  if (!ParseDictionary(text, &attrs) || attrs.size() != 11) return false;
  const std::string array = attrs[names::kAttrConv];
  const std::string head = "array<i64: ";
  if (array.compare(0, head.size(), head) != 0) return false;
  conv->clear();
  const char* p = array.c_str() + head.size();
  while (*p != '>') {
    char* end = nullptr;
    conv->push_back(std::strtoll(p, &end, 10));
    if (end == p) return false;
    p = end;
    if (*p == ',') p += 2;
  }
  a->conv = conv->data();
  a->conv_size = conv->size();
  const std::vector<std::pair<const char*, int64_t*>> i64 = {
      {names::kAttrWorkspaceLimit, &a->workspace_limit},
      {names::kAttrBatchSizePolicy, &a->policy},
      {names::kAttrMicroBatchSize, &a->micro_batch_size},
      {names::kAttrTotalWorkspace, &a->total_workspace},
      {names::kAttrEngines, &a->engines},
      {names::kAttrGraphSearch, &a->graph_search},
      {names::kAttrGraphLayouts, &a->graph_layouts},
      {names::kAttrAllowTf32, &a->allow_tf32},
      {names::kAttrDeterministic, &a->deterministic}};
  std::string number;
  for (const auto& [name, field] : i64) {
    if (!attrs.count(name) || !ScalarOf(attrs[name], "i64", &number)) return false;
    *field = std::strtoll(number.c_str(), nullptr, 10);
  }
  if (!ScalarOf(attrs[names::kAttrGraphPruneFactor], "f64", &number)) return false;
  a->graph_prune_factor = std::strtod(number.c_str(), nullptr);
  return true;
}

// Encodes `config`, binds and decodes it: true when the decoded config equals
// it (every ConvParams field, the fusion included, and every knob).
bool RoundTrips(const XlaConvConfig& config) {
  std::vector<int64_t> conv;
  XlaConvAttributes attrs;
  XlaConvConfig back;
  back.knobs.workspace_limit = 12345;  // not the default: decoding must set it
  return Bind(EncodeXlaConvConfig(config), &conv, &attrs) && DecodeXlaConvConfig(attrs, &back) &&
         back.params.Fields() == config.params.Fields() && back.knobs == config.knobs;
}

// The attributes of `config`, then `bad` applied: true when decoding refuses them.
template <typename Bad>
bool Refused(const XlaConvConfig& config, Bad bad) {
  std::vector<int64_t> conv;
  XlaConvAttributes attrs;
  if (!Bind(EncodeXlaConvConfig(config), &conv, &attrs)) return false;
  bad(&conv, &attrs);
  attrs.conv = conv.data();
  attrs.conv_size = conv.size();
  XlaConvConfig back;
  return !DecodeXlaConvConfig(attrs, &back);
}

}  // namespace

int main() {
  using namespace ucudnn;
  XlaConvConfig base;
  ConvParams& p = base.params;
  p.batch = 128; p.in_channels = 3; p.in_height = 224; p.in_width = 224; p.out_channels = 64;
  p.filter_height = 7; p.filter_width = 7; p.stride_h = 2; p.stride_w = 2;
  p.pad_top = 2; p.pad_bottom = 3; p.pad_left = 2; p.pad_right = 3;
  p.out_height = 112; p.out_width = 112; p.layout = Layout::kNCHW; p.dtype = DType::kBFloat16;

  Check(RoundTrips(base), "the default knobs round-trip");
  std::vector<int64_t> conv;
  XlaConvAttributes attrs;
  Check(Bind(EncodeXlaConvConfig(base), &conv, &attrs) && conv.size() == p.Fields().size(),
        "the dictionary has every attribute once, conv with all of ConvParams::Fields()");

  // Every ConvParams field, each set apart from its neighbours' values.
  for (size_t i = 0; i + 1 < p.Fields().size(); ++i) {
    std::array<int64_t, 21> fields = base.params.Fields();
    if (i == 18 || i == 19) continue;  // layout and dtype: below
    fields[i] = 1000 + static_cast<int64_t>(i);
    XlaConvConfig c = base;
    c.params = ConvParams::FromFields(fields);
    Check(c.params.Fields()[i] == fields[i] && RoundTrips(c),
          ("ConvParams field " + std::to_string(i) + " round-trips").c_str());
  }
  for (Layout layout : {Layout::kNHWC, Layout::kNCHW}) {
    for (DType dtype : {DType::kFloat, DType::kHalf, DType::kBFloat16}) {
      XlaConvConfig c = base;
      c.params.layout = layout;
      c.params.dtype = dtype;
      Check(RoundTrips(c), "every layout and data type round-trips");
    }
  }
  // The fusion codes (conv's last field): every code Fusion::FromCode knows.
  int fusions = 0;
  for (int64_t code = 0; code < 256; ++code) {
    XlaConvConfig c = base;
    if (!Fusion::FromCode(code, &c.params.fusion)) continue;
    ++fusions;
    Check(c.params.fusion.Code() == code && RoundTrips(c),
          ("fusion code " + std::to_string(code) + " round-trips").c_str());
  }
  Check(fusions >= 3, "none, bias and bias + ReLU (at least) are fusion codes");

  // Every planning knob.
  auto knob = [&base](auto set, const char* what) {
    XlaConvConfig c = base;
    set(&c.knobs);
    Check(!(c.knobs == base.knobs) && RoundTrips(c), what);
  };
  knob([](PlanningKnobs* k) { k->workspace_limit = 0; }, "a workspace limit of 0 bytes");
  knob([](PlanningKnobs* k) { k->workspace_limit = (8LL << 30) + 7; }, "a limit over 4 GiB");
  knob([](PlanningKnobs* k) { k->workspace_limit = kAutoWorkspaceLimit; },
       "the auto limit (kAutoWorkspaceLimit) round-trips as its sentinel");
  knob([](PlanningKnobs* k) { k->total_workspace = 1LL << 30; },
       "a Workspace Division total");
  for (BatchSizePolicy policy : {BatchSizePolicy::kUndivided, BatchSizePolicy::kAll}) {
    knob([policy](PlanningKnobs* k) { k->policy = policy; }, "every batch-size policy");
  }
  knob([](PlanningKnobs* k) { k->micro_batch_size = 32; }, "a forced micro-batch size");
  for (EngineSet engines : {EngineSet::kAll, EngineSet::kLegacy, EngineSet::kGraph}) {
    knob([engines](PlanningKnobs* k) { k->engines = engines; }, "every engine set");
  }
  for (double factor : {0.0, 1.0, 4.0 / 3.0, 1e9}) {
    knob([factor](PlanningKnobs* k) { k->graph.prune_factor = factor; },
         "a graph prune factor round-trips exactly (0, 1, 4/3, 1e9)");
  }
  for (GraphSearch search : {GraphSearch::kExhaustive, GraphSearch::kWide}) {
    knob([search](PlanningKnobs* k) { k->graph.search = search; }, "every graph search");
  }
  for (GraphLayouts layouts : {GraphLayouts::kBoth, GraphLayouts::kTransposed}) {
    knob([layouts](PlanningKnobs* k) { k->graph.layouts = layouts; }, "every graph layouts");
  }
  knob([](PlanningKnobs* k) { k->allow_tf32 = false; }, "TF32 off");
  knob([](PlanningKnobs* k) { k->deterministic = true; }, "determinism on");

  // The default limit, and a Workspace Division group's kernel: its per-kernel
  // limit and the group's total both kept, benchmarked within the total.
  Check(base.knobs.workspace_limit == kDefaultWorkspaceLimit && RoundTrips(base),
        "the default limit (64 MiB) round-trips");
  {
    XlaConvConfig c = base;
    c.knobs.workspace_limit = 16LL << 20;
    c.knobs.total_workspace = 3LL << 30;
    XlaConvConfig back;
    Check(Bind(EncodeXlaConvConfig(c), &conv, &attrs) && DecodeXlaConvConfig(attrs, &back) &&
              back.knobs.workspace_limit == 16LL << 20 &&
              back.knobs.total_workspace == 3LL << 30 &&
              back.knobs.BenchmarkLimit() == 3LL << 30,
          "a Workspace Division kernel keeps its limit and the group's total");
  }

  // Bad values are refused.
  using Conv = std::vector<int64_t>;
  Check(Refused(base, [](Conv* f, XlaConvAttributes*) { f->pop_back(); }),
        "a conv array of 20 fields");
  Check(Refused(base, [](Conv* f, XlaConvAttributes*) { f->push_back(0); }),
        "a conv array of 22 fields");
  Check(Refused(base, [](Conv* f, XlaConvAttributes*) { (*f)[18] = 2; }), "layout 2");
  Check(Refused(base, [](Conv* f, XlaConvAttributes*) { (*f)[19] = 3; }), "dtype 3");
  Check(Refused(base, [](Conv* f, XlaConvAttributes*) { (*f)[19] = -1; }), "dtype -1");
  Check(Refused(base, [](Conv* f, XlaConvAttributes*) { (*f)[20] = 1 << 20; }),
        "fusion code 2^20");
  Check(Refused(base, [](Conv* f, XlaConvAttributes*) { (*f)[20] = -1; }), "fusion code -1");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->workspace_limit = kFromEnvironment; }),
        "an unresolved default limit (kFromEnvironment, -1)");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->workspace_limit = -3; }),
        "a workspace limit of -3");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->total_workspace = -1; }),
        "an unresolved total (-1)");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->micro_batch_size = -1; }),
        "a micro-batch size of -1");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->policy = 3; }), "policy 3");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->policy = -1; }), "policy -1");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->engines = kEngineSetCount; }),
        "an engine set past the last");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->graph_search = kGraphSearchCount; }),
        "a graph search past the last");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->graph_layouts = kGraphLayoutsCount; }),
        "graph layouts past the last");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->graph_prune_factor = 0.5; }),
        "a prune factor between 0 and 1");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->graph_prune_factor = -1; }),
        "a negative prune factor");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->allow_tf32 = 2; }), "allow_tf32 = 2");
  Check(Refused(base, [](Conv*, XlaConvAttributes* a) { a->deterministic = -1; }),
        "deterministic = -1");
  Check(!Refused(base, [](Conv*, XlaConvAttributes*) {}), "the encoder's own attributes pass");
  return ucudnn_test::Summary("xla_conv_config_test");
}
