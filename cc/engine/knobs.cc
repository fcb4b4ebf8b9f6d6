#include "cc/engine/knobs.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cc/engine/names.h"

namespace ucudnn {
namespace {

constexpr Name<EngineSet> kEngineSetNames[] = {
    {"auto", EngineSet::kAuto}, {"all", EngineSet::kAll}, {"legacy", EngineSet::kLegacy},
    {"graph", EngineSet::kGraph}};
constexpr Name<GraphSearch> kGraphSearchNames[] = {{"default", GraphSearch::kDefault},
                                                   {"wide", GraphSearch::kWide},
                                                   {"exhaustive", GraphSearch::kExhaustive}};
constexpr Name<GraphLayouts> kGraphLayoutNames[] = {{"both", GraphLayouts::kBoth},
                                                    {"native", GraphLayouts::kNative},
                                                    {"transposed", GraphLayouts::kTransposed}};
constexpr Name<XlaWorkspace> kXlaWorkspaceNames[] = {{"scratch", XlaWorkspace::kScratch},
                                                     {"buffer", XlaWorkspace::kBuffer}};
constexpr Name<bool> kOnOffNames[] = {{"on", true}, {"off", false}};

// The variable's value, or nullptr when unset or empty (the default applies).
const char* Env(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr || *env == '\0' ? nullptr : env;
}

// A non-negative int64 in decimal, as absl::SimpleAtoi takes it (surrounding
// whitespace allowed, a leading '+').
bool ParseBytes(const char* text, int64_t* out) {
  const char* p = text;
  while (*p == ' ' || (*p >= '\t' && *p <= '\r')) ++p;
  if (*p == '+') ++p;
  if (*p < '0' || *p > '9') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(p, &end, 10);
  if (errno == ERANGE) return false;
  while (*end == ' ' || (*end >= '\t' && *end <= '\r')) ++end;
  if (*end != '\0' || v < 0) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

// Bytes (ParseBytes) or "auto" (kAutoWorkspaceLimit), surrounding whitespace allowed.
bool ParseWorkspaceLimit(const char* text, int64_t* out) {
  std::string s(text);
  const size_t first = s.find_first_not_of(" \t\n\v\f\r");
  const size_t last = s.find_last_not_of(" \t\n\v\f\r");
  if (first != std::string::npos && s.substr(first, last - first + 1) == "auto") {
    *out = kAutoWorkspaceLimit;
    return true;
  }
  return ParseBytes(text, out);
}

}  // namespace

bool ParseEngineSet(const std::string& name, EngineSet* engines) {
  return ParseName(kEngineSetNames, name, engines);
}

const char* EngineSetName(EngineSet engines) { return NameOf(kEngineSetNames, engines); }

bool ValidGraphPruneFactor(double factor) {
  return (factor == 0 || factor >= 1) && std::isfinite(factor);
}

bool ParseGraphPruneFactor(const std::string& text, double* factor) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !ValidGraphPruneFactor(v)) return false;
  *factor = v;
  return true;
}

bool ParseGraphSearch(const std::string& text, GraphSearch* search) {
  return ParseName(kGraphSearchNames, text, search);
}

const char* GraphSearchName(GraphSearch search) { return NameOf(kGraphSearchNames, search); }

bool ParseGraphLayouts(const std::string& text, GraphLayouts* layouts) {
  return ParseName(kGraphLayoutNames, text, layouts);
}

const char* GraphLayoutsName(GraphLayouts layouts) { return NameOf(kGraphLayoutNames, layouts); }

bool ParseXlaWorkspace(const std::string& text, XlaWorkspace* where) {
  return ParseName(kXlaWorkspaceNames, text, where);
}

bool ParseXlaPadChannels(const std::string& text, bool* pad) {
  return ParseName(kOnOffNames, text, pad);
}

namespace {

// Reads variable `name` into *out with `parse` (unset or empty: *out is left,
// the caller's default); a value `parse` refuses is an InvalidArgument
// "<name> must be <rule> '<value>'".
template <typename T, typename Parse>
Status ReadKnob(const char* name, const char* rule, Parse parse, T* out) {
  const char* env = Env(name);
  if (env != nullptr && !parse(env, out)) {
    return Status::InvalidArgument(std::string(name) + " must be " + rule + " '" + env + "'");
  }
  return Status();
}

}  // namespace

Status ReadEngineKnobs(EngineKnobs* knobs) {
  *knobs = EngineKnobs();
  UCUDNN_RETURN_IF_ERROR(ReadKnob("UCUDNN_ENGINES", "one of auto, all, legacy, graph; got",
                                  ParseEngineSet, &knobs->engines));
  UCUDNN_RETURN_IF_ERROR(ReadKnob("UCUDNN_GRAPH_PRUNE_FACTOR",
                                  "0 (never prune) or a number >= 1; got", ParseGraphPruneFactor,
                                  &knobs->graph.prune_factor));
  UCUDNN_RETURN_IF_ERROR(ReadKnob("UCUDNN_GRAPH_SEARCH", "one of default, wide, exhaustive; got",
                                  ParseGraphSearch, &knobs->graph.search));
  bool retime = true;  // read again where it applies (benchmarking); checked here
  UCUDNN_RETURN_IF_ERROR(ReadGraphRetime(&retime));
  return ReadKnob("UCUDNN_GRAPH_LAYOUTS", "one of both, native, transposed; got",
                  ParseGraphLayouts, &knobs->graph.layouts);
}

Status ReadXlaWorkspace(XlaWorkspace* where) {
  *where = XlaWorkspace::kScratch;
  return ReadKnob("UCUDNN_XLA_WORKSPACE", "one of scratch, buffer; got", ParseXlaWorkspace, where);
}

Status ReadXlaPadChannels(bool* pad) {
  *pad = true;
  return ReadKnob("UCUDNN_XLA_PAD_CHANNELS", "one of on, off; got", ParseXlaPadChannels, pad);
}

Status ReadGraphRetime(bool* retime) {
  *retime = true;
  auto parse = [](const std::string& text, bool* on) { return ParseName(kOnOffNames, text, on); };
  return ReadKnob("UCUDNN_GRAPH_RETIME", "one of on, off; got", parse, retime);
}

Status ReadDefaultWorkspaceLimit(int64_t* bytes) {
  *bytes = kDefaultWorkspaceLimit;
  return ReadKnob("UCUDNN_DEFAULT_WORKSPACE_LIMIT",
                  "a non-negative number of bytes or auto, got", ParseWorkspaceLimit, bytes);
}

int64_t AutoWorkspaceLimit(int64_t available, int64_t pool_limit) {
  if (available < 0) return kDefaultWorkspaceLimit;
  const int64_t margin = std::max<int64_t>(64LL << 20, std::max<int64_t>(pool_limit, 0) / 16);
  return std::min(kAutoWorkspaceCap, std::max<int64_t>(available - margin, 0));
}

std::string WorkspaceLimitName(int64_t limit) {
  return limit == kAutoWorkspaceLimit ? "auto" : std::to_string(limit);
}

Status ReadTotalWorkspaceSize(int64_t* bytes) {
  *bytes = 0;
  return ReadKnob("UCUDNN_TOTAL_WORKSPACE_SIZE", "a non-negative number of bytes, got",
                  ParseBytes, bytes);
}

Status ReadBatchSizePolicy(BatchSizePolicy* policy) {
  *policy = BatchSizePolicy::kPowerOfTwo;
  return ReadKnob("UCUDNN_BATCH_SIZE_POLICY", "one of undivided, powerOfTwo, all; got",
                  ParseBatchSizePolicy, policy);
}

bool DebugOutput() {
  static const bool on = [] {
    const char* env = std::getenv("UCUDNN_DEBUG_OUTPUT");
    return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
  }();
  return on;
}

const std::string& BenchmarkDevicesSetting() {
  static const std::string* setting = [] {
    const char* env = std::getenv("UCUDNN_BENCHMARK_DEVICES");
    return new std::string(env == nullptr ? "" : env);
  }();
  return *setting;
}

}  // namespace ucudnn
