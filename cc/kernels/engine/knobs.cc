#include "cc/kernels/engine/knobs.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cc/kernels/engine/names.h"

namespace ucudnn {
namespace {

constexpr Name<EngineSet> kEngineSetNames[] = {
    {"auto", EngineSet::kAuto}, {"all", EngineSet::kAll}, {"legacy", EngineSet::kLegacy},
    {"graph", EngineSet::kGraph}};
constexpr Name<bool> kGraphSearchNames[] = {{"default", false}, {"exhaustive", true}};
constexpr Name<GraphLayouts> kGraphLayoutNames[] = {{"both", GraphLayouts::kBoth},
                                                    {"native", GraphLayouts::kNative},
                                                    {"transposed", GraphLayouts::kTransposed}};
constexpr Name<XlaWorkspace> kXlaWorkspaceNames[] = {{"scratch", XlaWorkspace::kScratch},
                                                     {"buffer", XlaWorkspace::kBuffer}};
constexpr Name<bool> kXlaPadChannelsNames[] = {{"on", true}, {"off", false}};

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

}  // namespace

bool ParseEngineSet(const std::string& name, EngineSet* engines) {
  return ParseName(kEngineSetNames, name, engines);
}

const char* EngineSetName(EngineSet engines) { return NameOf(kEngineSetNames, engines); }

bool ParseGraphPruneFactor(const std::string& text, double* factor) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(v == 0 || v >= 1) || !std::isfinite(v)) return false;
  *factor = v;
  return true;
}

bool ParseGraphSearch(const std::string& text, bool* exhaustive) {
  return ParseName(kGraphSearchNames, text, exhaustive);
}

bool ParseGraphLayouts(const std::string& text, GraphLayouts* layouts) {
  return ParseName(kGraphLayoutNames, text, layouts);
}

bool ParseXlaWorkspace(const std::string& text, XlaWorkspace* where) {
  return ParseName(kXlaWorkspaceNames, text, where);
}

bool ParseXlaPadChannels(const std::string& text, bool* pad) {
  return ParseName(kXlaPadChannelsNames, text, pad);
}

namespace {
Status Bad(const char* name, const char* rule, const char* value) {
  return Status::InvalidArgument(std::string(name) + " must be " + rule + " '" + value + "'");
}
}  // namespace

Status ReadEngineKnobs(EngineKnobs* knobs) {
  *knobs = EngineKnobs();
  if (const char* env = Env("UCUDNN_ENGINES")) {
    if (!ParseEngineSet(env, &knobs->engines)) {
      return Bad("UCUDNN_ENGINES", "one of auto, all, legacy, graph; got", env);
    }
  }
  if (const char* env = Env("UCUDNN_GRAPH_PRUNE_FACTOR")) {
    if (!ParseGraphPruneFactor(env, &knobs->graph.prune_factor)) {
      return Bad("UCUDNN_GRAPH_PRUNE_FACTOR", "0 (never prune) or a number >= 1; got", env);
    }
  }
  if (const char* env = Env("UCUDNN_GRAPH_SEARCH")) {
    if (!ParseGraphSearch(env, &knobs->graph.exhaustive)) {
      return Bad("UCUDNN_GRAPH_SEARCH", "one of default, exhaustive; got", env);
    }
  }
  if (const char* env = Env("UCUDNN_GRAPH_LAYOUTS")) {
    if (!ParseGraphLayouts(env, &knobs->graph.layouts)) {
      return Bad("UCUDNN_GRAPH_LAYOUTS", "one of both, native, transposed; got", env);
    }
  }
  return Status();
}

Status ReadXlaWorkspace(XlaWorkspace* where) {
  *where = XlaWorkspace::kScratch;
  const char* env = Env("UCUDNN_XLA_WORKSPACE");
  if (env != nullptr && !ParseXlaWorkspace(env, where)) {
    return Bad("UCUDNN_XLA_WORKSPACE", "one of scratch, buffer; got", env);
  }
  return Status();
}

Status ReadXlaPadChannels(bool* pad) {
  *pad = true;
  const char* env = Env("UCUDNN_XLA_PAD_CHANNELS");
  if (env != nullptr && !ParseXlaPadChannels(env, pad)) {
    return Bad("UCUDNN_XLA_PAD_CHANNELS", "one of on, off; got", env);
  }
  return Status();
}

Status ReadDefaultWorkspaceLimit(int64_t* bytes) {
  *bytes = kDefaultWorkspaceLimit;
  const char* env = Env("UCUDNN_DEFAULT_WORKSPACE_LIMIT");
  if (env != nullptr && !ParseBytes(env, bytes)) {
    return Bad("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "a non-negative number of bytes, got", env);
  }
  return Status();
}

Status ReadTotalWorkspaceSize(int64_t* bytes) {
  *bytes = 0;
  const char* env = Env("UCUDNN_TOTAL_WORKSPACE_SIZE");
  if (env != nullptr && !ParseBytes(env, bytes)) {
    return Bad("UCUDNN_TOTAL_WORKSPACE_SIZE", "a non-negative number of bytes, got", env);
  }
  return Status();
}

Status ReadBatchSizePolicy(BatchSizePolicy* policy) {
  *policy = BatchSizePolicy::kPowerOfTwo;
  const char* env = Env("UCUDNN_BATCH_SIZE_POLICY");
  if (env != nullptr && !ParseBatchSizePolicy(env, policy)) {
    return Bad("UCUDNN_BATCH_SIZE_POLICY", "one of undivided, powerOfTwo, all; got", env);
  }
  return Status();
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
