#include "cc/engine/knobs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

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
constexpr Name<StatisticsMode> kStatisticsModeNames[] = {{"fused", StatisticsMode::kFused},
                                                         {"timed", StatisticsMode::kTimed},
                                                         {"unfused", StatisticsMode::kUnfused}};

// The variable's value, or nullptr when unset or empty (the default applies).
const char* Env(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr || *env == '\0' ? nullptr : env;
}

bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Bytes (ParseByteCount) or "auto" (kAutoWorkspaceLimit, any case),
// surrounding whitespace allowed.
bool ParseWorkspaceLimit(const std::string& text, int64_t* out) {
  const size_t first = text.find_first_not_of(" \t\n\v\f\r");
  const size_t last = text.find_last_not_of(" \t\n\v\f\r");
  if (first != std::string::npos) {
    std::string word = text.substr(first, last - first + 1);
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (word == "auto") {
      *out = kAutoWorkspaceLimit;
      return true;
    }
  }
  return ParseByteCount(text, out);
}

// The rule of a byte count's variable, in its error message.
constexpr char kByteCountRule[] =
    "a byte count such as 67108864, 64MiB or 1GiB (binary units B, KiB, MiB, GiB)";

}  // namespace

bool ParseByteCount(const std::string& text, int64_t* bytes) {
  // \s*([0-9]+(\.[0-9]+)?)\s*([A-Za-z]*)\s* as tf_ucudnn/units.py's parse_bytes.
  size_t i = 0;
  const size_t n = text.size();
  while (i < n && IsSpace(text[i])) ++i;
  const size_t int_begin = i;
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string whole = text.substr(int_begin, i - int_begin);
  if (whole.empty()) return false;
  std::string fraction;
  if (i < n && text[i] == '.') {
    const size_t frac_begin = ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    fraction = text.substr(frac_begin, i - frac_begin);
    if (fraction.empty()) return false;
  }
  while (i < n && IsSpace(text[i])) ++i;
  std::string unit;
  while (i < n && std::isalpha(static_cast<unsigned char>(text[i]))) {
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i++])));
  }
  while (i < n && IsSpace(text[i])) ++i;
  if (i != n) return false;
  static const std::pair<const char*, int> kUnits[] = {
      {"", 0}, {"b", 0}, {"k", 10}, {"kib", 10}, {"m", 20}, {"mib", 20}, {"g", 30}, {"gib", 30}};
  int shift = -1;
  for (const auto& [name, bits] : kUnits) {
    if (unit == name) shift = bits;
  }
  if (shift < 0) return false;
  // whole.fraction * 2^shift, exactly: a whole number of bytes <= 2^63 - 1.
  constexpr unsigned __int128 kMax = std::numeric_limits<int64_t>::max();
  unsigned __int128 value = 0;
  for (char c : whole) {
    value = value * 10 + static_cast<unsigned>(c - '0');
    if (value > kMax) return false;
  }
  value <<= shift;
  if (value > kMax) return false;
  // Trailing zeros of the fraction change nothing; a fraction of a GiB that
  // is whole bytes has at most 30 digits (2^-30 has 30).
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  if (fraction.size() > 30) return false;
  if (!fraction.empty()) {
    // fraction / 10^k * 2^shift is whole iff 5^k divides the digits and
    // (digits / 5^k) * 2^shift is a multiple of 2^k.
    const int k = static_cast<int>(fraction.size());
    unsigned __int128 digits = 0, five_k = 1;
    for (char c : fraction) {
      digits = digits * 10 + static_cast<unsigned>(c - '0');
      five_k *= 5;
    }
    if (digits % five_k != 0) return false;
    const unsigned __int128 scaled = (digits / five_k) << shift;  // < 2^(k + shift) <= 2^60
    const unsigned __int128 two_k = static_cast<unsigned __int128>(1) << k;
    if (scaled % two_k != 0) return false;
    value += scaled / two_k;
    if (value > kMax) return false;
  }
  *bytes = static_cast<int64_t>(value);
  return true;
}

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

bool PlanningKnobs::operator<(const PlanningKnobs& o) const {
  return std::tie(workspace_limit, total_workspace, policy, micro_batch_size, engines, graph,
                  allow_tf32, deterministic) <
         std::tie(o.workspace_limit, o.total_workspace, o.policy, o.micro_batch_size, o.engines,
                  o.graph, o.allow_tf32, o.deterministic);
}

Status ResolvePlanningKnobs(const KnobAttributes& attrs, PlanningKnobs* knobs) {
  int64_t limit = attrs.workspace_limit;
  if (limit < kAutoWorkspaceLimit) {
    return Status::InvalidArgument(
        "workspace_limit must be a non-negative number of bytes (or -1 for "
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT, -2 for auto: what the GPU's allocator has free), got " +
        std::to_string(limit));
  }
  int64_t total = attrs.total_workspace;
  if (total < kFromEnvironment) {
    return Status::InvalidArgument(
        "total_workspace must be a non-negative number of bytes (0 = no Workspace Division, "
        "-1 = UCUDNN_TOTAL_WORKSPACE_SIZE), got " + std::to_string(total));
  }
  if (total > 0 && limit != kFromEnvironment) {
    return Status::InvalidArgument(
        "set either workspace_limit (" + WorkspaceLimitName(limit) +
        " bytes per kernel) or total_workspace (" + std::to_string(total) +
        " bytes shared by all kernels), not both");
  }
  // The environment's total applies to ops that leave both knobs to it.
  if (total == kFromEnvironment) {
    total = 0;
    if (limit == kFromEnvironment) UCUDNN_RETURN_IF_ERROR(ReadTotalWorkspaceSize(&total));
  }
  if (limit == kFromEnvironment) UCUDNN_RETURN_IF_ERROR(ReadDefaultWorkspaceLimit(&limit));
  if (attrs.batch_size_policy.empty()) {
    UCUDNN_RETURN_IF_ERROR(ReadBatchSizePolicy(&knobs->policy));
  } else if (!ParseBatchSizePolicy(attrs.batch_size_policy, &knobs->policy)) {
    return Status::InvalidArgument(
        "batch_size_policy must be one of undivided, powerOfTwo, all (or empty for "
        "UCUDNN_BATCH_SIZE_POLICY), got '" + attrs.batch_size_policy + "'");
  }
  if (attrs.micro_batch_size < 0) {
    return Status::InvalidArgument(
        "micro_batch_size must be 0 (the planner decides) or positive, got " +
        std::to_string(attrs.micro_batch_size));
  }
  knobs->micro_batch_size = attrs.micro_batch_size;
  UCUDNN_RETURN_IF_ERROR(ReadEngineKnobs(knobs));
  // A forced micro-batch size has one plan: nothing to divide. The kernel
  // takes the total as its per-kernel limit.
  if (attrs.micro_batch_size > 0 && total > 0) {
    limit = total;
    total = 0;
  }
  knobs->workspace_limit = limit;
  knobs->total_workspace = total;
  return Status();
}

Status ReadEngineKnobs(PlanningKnobs* knobs) {
  knobs->engines = EngineSet::kAuto;
  knobs->graph = GraphSearchKnobs();
  UCUDNN_RETURN_IF_ERROR(ReadKnob("UCUDNN_ENGINES", "one of auto, all, legacy, graph; got",
                                  ParseEngineSet, &knobs->engines));
  UCUDNN_RETURN_IF_ERROR(ReadKnob("UCUDNN_GRAPH_PRUNE_FACTOR",
                                  "0 (never prune) or a number >= 1; got", ParseGraphPruneFactor,
                                  &knobs->graph.prune_factor));
  UCUDNN_RETURN_IF_ERROR(ReadKnob("UCUDNN_GRAPH_SEARCH", "one of default, wide, exhaustive; got",
                                  ParseGraphSearch, &knobs->graph.search));
  bool retime = true;  // read again where it applies (benchmarking); checked here
  UCUDNN_RETURN_IF_ERROR(ReadGraphRetime(&retime));
  StatisticsMode statistics;  // read again where it applies (RunConvPass); checked here
  UCUDNN_RETURN_IF_ERROR(ReadStatisticsMode(&statistics));
  int threads = 1;  // read again where it applies (GraphCandidates::Propose); checked here
  UCUDNN_RETURN_IF_ERROR(ReadPlanBuildThreads(&threads));
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

bool ParseStatisticsMode(const std::string& text, StatisticsMode* mode) {
  return ParseName(kStatisticsModeNames, text, mode);
}

Status ReadStatisticsMode(StatisticsMode* mode) {
  *mode = StatisticsMode::kFused;
  return ReadKnob("UCUDNN_STATISTICS", "one of fused, timed, unfused; got", ParseStatisticsMode,
                  mode);
}

Status ReadGraphRetime(bool* retime) {
  *retime = true;
  auto parse = [](const std::string& text, bool* on) { return ParseName(kOnOffNames, text, on); };
  return ReadKnob("UCUDNN_GRAPH_RETIME", "one of on, off; got", parse, retime);
}

bool ParsePlanBuildThreads(const std::string& text, int* threads) {
  size_t begin = text.find_first_not_of(" \t");
  size_t end = text.find_last_not_of(" \t");
  if (begin == std::string::npos) return false;
  const std::string digits = text.substr(begin, end - begin + 1);
  if (digits.empty() || digits.size() > 2 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const int n = std::stoi(digits);
  if (n < 1 || n > kMaxPlanBuildThreads) return false;
  *threads = n;
  return true;
}

Status ReadPlanBuildThreads(int* threads) {
  *threads = kDefaultPlanBuildThreads;
  const unsigned host = std::thread::hardware_concurrency();  // 0: unknown
  if (host > 0) *threads = std::min<int>(*threads, static_cast<int>(host));
  return ReadKnob("UCUDNN_PLAN_BUILD_THREADS",
                  ("a whole number from 1 to " + std::to_string(kMaxPlanBuildThreads) + "; got")
                      .c_str(),
                  ParsePlanBuildThreads, threads);
}

Status ReadDefaultWorkspaceLimit(int64_t* bytes) {
  *bytes = kDefaultWorkspaceLimit;
  return ReadKnob("UCUDNN_DEFAULT_WORKSPACE_LIMIT", (std::string(kByteCountRule) + " or auto; got").c_str(),
                  ParseWorkspaceLimit, bytes);
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
  return ReadKnob("UCUDNN_TOTAL_WORKSPACE_SIZE", (std::string(kByteCountRule) + "; got").c_str(),
                  ParseByteCount, bytes);
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
