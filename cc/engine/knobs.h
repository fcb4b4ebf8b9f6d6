// The engine's knobs (μ-cuDNN's UCUDNN_* environment variables and ours), in
// one place: their values, parsing and validation. Front ends call
// ReadEngineKnobs when a kernel is created (the TF OpKernel's and the tf2xla
// kernel's constructors) and pass the values into the engine (ConvRequest),
// so that a change of the environment takes effect for kernels created
// afterwards. UCUDNN_DEBUG_OUTPUT and UCUDNN_BENCHMARK_DEVICES are process
// settings, read once per process here. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_KNOBS_H_
#define TF_UCUDNN_ENGINE_KNOBS_H_

#include <cstdint>
#include <string>
#include <tuple>

#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

// μ-cuDNN's default per-kernel workspace limit (UCUDNN_DEFAULT_WORKSPACE_LIMIT).
constexpr int64_t kDefaultWorkspaceLimit = 64LL << 20;  // 64 MiB

// workspace_limit = "auto" (the op attribute's value, and
// UCUDNN_DEFAULT_WORKSPACE_LIMIT=auto): a kernel plans within what its
// device's allocator can hand out when it is planned (AutoWorkspaceLimit), and
// each run takes the fastest planned plan whose workspace is free at that
// moment (RunConvPass).
constexpr int64_t kAutoWorkspaceLimit = -2;
// What "auto" never exceeds: TensorFlow's own default cuDNN workspace limit
// (TF_CUDNN_WORKSPACE_LIMIT_IN_MB unset).
constexpr int64_t kAutoWorkspaceCap = 8LL << 30;  // 8 GiB
// The limit "auto" plans within, in bytes, given what the device's allocator
// can hand out now (`available`, < 0 unknown) and its whole pool
// (`pool_limit`, bytes): `available` less a margin of 1/16 of the pool and at
// least 64 MiB (other ops may allocate while a kernel benchmarks, and the
// benchmark's own buffers come first), within [0, kAutoWorkspaceCap]; the
// fixed default (kDefaultWorkspaceLimit) when `available` is unknown.
int64_t AutoWorkspaceLimit(int64_t available, int64_t pool_limit);
// "auto" for kAutoWorkspaceLimit, else the bytes in decimal.
std::string WorkspaceLimitName(int64_t limit);

// Which cuDNN candidates a kernel benchmarks (UCUDNN_ENGINES):
// - kAuto (the default): graph-API engines at every micro-batch size they are
//   benchmarked at (8 samples and up, or the whole mini-batch), and the legacy
//   algorithms at any size where no engine ran and at the smaller sizes, these
//   only where the workspace limit kept an engine out at a larger size (or no
//   engine ran there) unless the plan is forced, in a Workspace Division
//   group, or spread over GPUs (DeviceBenchmark::Run);
// - kAll: the legacy algorithms at every size, and the graph-API engines;
// - kLegacy, kGraph: only one of the two.
// kAuto skips what kAll spends most on and never used: with cuDNN 9 on Hopper
// no legacy algorithm won a micro-batch of 8 or more samples in the DeepBench
// and VGG-16 plans (docs/benchmarks.md, planning time); a first layer's few
// input channels are the exception (kFirstLayerChannels).
enum class EngineSet : int { kAll = 0, kLegacy = 1, kGraph = 2, kAuto = 3 };
// kAuto times the legacy algorithms at every size too for a convolution of at
// most this many input channels (ConvRunner: cuDNN's image-first-layer kernels).
constexpr int64_t kFirstLayerChannels = 4;
constexpr int kEngineSetCount = 4;

// Parses "auto" | "all" | "legacy" | "graph"; false on anything else.
bool ParseEngineSet(const std::string& name, EngineSet* engines);
const char* EngineSetName(EngineSet engines);

// A graph prune factor is 0 (never prune) or a finite number >= 1.
bool ValidGraphPruneFactor(double factor);
// UCUDNN_GRAPH_PRUNE_FACTOR: a valid factor; false on anything else (empty,
// not a number, negative, between 0 and 1), leaving *factor as it was.
bool ParseGraphPruneFactor(const std::string& text, double* factor);
// How many of cuDNN's engine configs become graph-API candidates
// (UCUDNN_GRAPH_SEARCH; ProposeGraphEngines in cudnn_graph.h says which). The
// values are the XLA custom calls' graph_search attribute.
enum class GraphSearch : int { kDefault = 0, kExhaustive = 1, kWide = 2 };
constexpr int kGraphSearchCount = 3;
// UCUDNN_GRAPH_SEARCH: "default" (the first configs of each heuristics
// list), "wide" (every config of both lists) or "exhaustive" (also every
// other engine); false on anything else.
bool ParseGraphSearch(const std::string& text, GraphSearch* search);
const char* GraphSearchName(GraphSearch search);
// UCUDNN_GRAPH_LAYOUTS: which layouts graph-API engines compute in. "both"
// (the tensors' and, as transposed candidates, the other one), "native" (the
// tensors' only) or "transposed" (the other only); false on anything else.
enum class GraphLayouts : int { kBoth = 0, kNative = 1, kTransposed = 2 };
constexpr int kGraphLayoutsCount = 3;
bool ParseGraphLayouts(const std::string& text, GraphLayouts* layouts);
const char* GraphLayoutsName(GraphLayouts layouts);

// How graph-API engines are searched; part of what identifies a kernel that
// benchmarks them (KernelKey), since each knob changes the candidates timed.
struct GraphSearchKnobs {
  // Engines dominated by this factor at one micro-batch size are not tried at
  // larger sizes of the same kernel (UCUDNN_GRAPH_PRUNE_FACTOR; 0: never).
  double prune_factor = 2.0;
  // UCUDNN_GRAPH_SEARCH: the first configs of each heuristics list (default),
  // all of them (wide), or all of them and every other engine of the graph
  // with its default knobs (exhaustive; see ProposeGraphEngines).
  GraphSearch search = GraphSearch::kDefault;
  // UCUDNN_GRAPH_LAYOUTS (default native): the layouts graph-API engines are
  // proposed in. Transposed candidates are opt-in: on an H200 with cuDNN 9.19
  // none won a DeepBench plan (their NHWC counterparts already transpose
  // inside their workspace), and they cost planning time.
  GraphLayouts layouts = GraphLayouts::kNative;

  bool operator<(const GraphSearchKnobs& o) const {
    return std::make_tuple(prune_factor, search, layouts) <
           std::make_tuple(o.prune_factor, o.search, o.layouts);
  }
  bool operator==(const GraphSearchKnobs& o) const { return !(*this < o) && !(o < *this); }
};

// The knobs that plan one kernel, whole and resolved (no sentinel but
// kAutoWorkspaceLimit, which is resolved when the kernel is planned:
// AutoWorkspaceLimit). One value travels from the front end's attributes
// (the TF kernel's ConvAttrs, the XLA custom call's XlaConvConfig) through
// the request (ConvRequest) into the kernel's key (KernelKey).
struct PlanningKnobs {
  // The per-kernel workspace limit in bytes (the op's workspace_limit, or
  // UCUDNN_DEFAULT_WORKSPACE_LIMIT), or kAutoWorkspaceLimit. Not what a
  // kernel of a Workspace Division group is benchmarked within: BenchmarkLimit.
  int64_t workspace_limit = kDefaultWorkspaceLimit;
  // > 0: the kernel is in the Workspace Division group of kernels sharing
  // this many bytes on its device (Oyama et al. 2018, section III-C); 0: none.
  int64_t total_workspace = 0;
  BatchSizePolicy policy = BatchSizePolicy::kPowerOfTwo;
  // > 0: forced micro-batches of this many samples; 0: the planner decides.
  int64_t micro_batch_size = 0;
  EngineSet engines = EngineSet::kAuto;  // UCUDNN_ENGINES
  GraphSearchKnobs graph;               // UCUDNN_GRAPH_{PRUNE_FACTOR,SEARCH,LAYOUTS}
  // Numerics, TensorFlow's settings where the front end fixes them (each TF
  // call; XLA: when the function is compiled).
  bool allow_tf32 = true;
  bool deterministic = false;

  // The bytes the kernel is benchmarked (and, outside a group, planned)
  // within: the group's whole budget in a Workspace Division group, else the
  // per-kernel limit (kAutoWorkspaceLimit: resolved at planning).
  int64_t BenchmarkLimit() const { return total_workspace > 0 ? total_workspace : workspace_limit; }
  bool operator<(const PlanningKnobs& o) const;
  bool operator==(const PlanningKnobs& o) const { return !(*this < o) && !(o < *this); }
};

// The op attributes' values of the planning knobs, sentinels included
// (tf_ucudnn/nn.py writes them): workspace_limit bytes, -1 (kFromEnvironment:
// UCUDNN_DEFAULT_WORKSPACE_LIMIT) or -2 (kAutoWorkspaceLimit);
// total_workspace bytes, 0 (no Workspace Division) or -1
// (UCUDNN_TOTAL_WORKSPACE_SIZE, only where workspace_limit is -1 too);
// batch_size_policy a name (ParseBatchSizePolicy) or "" (UCUDNN_BATCH_SIZE_POLICY);
// micro_batch_size 0 (the planner decides) or a positive size.
constexpr int64_t kFromEnvironment = -1;
struct KnobAttributes {
  int64_t workspace_limit = kFromEnvironment;
  int64_t total_workspace = kFromEnvironment;
  std::string batch_size_policy;
  int64_t micro_batch_size = 0;
};

// Validates `attrs` and resolves their sentinels into *knobs, the one place
// they are resolved: the environment's defaults (UCUDNN_DEFAULT_WORKSPACE_LIMIT,
// UCUDNN_TOTAL_WORKSPACE_SIZE, UCUDNN_BATCH_SIZE_POLICY) where an attribute
// asks for them, and UCUDNN_ENGINES and UCUDNN_GRAPH_* (ReadEngineKnobs), as
// the environment is now (when the front end's kernel is created). A forced
// micro_batch_size has one plan, nothing to divide: a total becomes its
// per-kernel limit. The numerics are left as they are.
// Returns: InvalidArgument naming the attribute (or variable), the values
// allowed and the value found.
Status ResolvePlanningKnobs(const KnobAttributes& attrs, PlanningKnobs* knobs);

// Reads and validates UCUDNN_ENGINES and UCUDNN_GRAPH_* into knobs->engines
// and knobs->graph (unset or empty: the default; UCUDNN_GRAPH_RETIME is only
// checked: ReadGraphRetime, and UCUDNN_STATISTICS: ReadStatisticsMode); the
// other knobs are left.
// InvalidArgument names the variable, the allowed values and the value found.
Status ReadEngineKnobs(PlanningKnobs* knobs);

// Where an XLA custom call's cuDNN workspace lives (UCUDNN_XLA_WORKSPACE),
// read by the tf2xla kernel when the function is compiled:
// - kScratch (the default): XLA's scratch allocator (TF's allocator under TF),
//   taken for the call and given back when it returns, outside the buffers
//   XLA assigns;
// - kBuffer: a result buffer of the call, of the workspace limit's size,
//   placed by XLA's buffer assignment inside its temp allocation as XLA places
//   its own convolutions' workspaces; held whether or not the plan needs it.
// Workspace Division groups always use kScratch: their kernels' shares are
// known only once the group is planned.
enum class XlaWorkspace : int { kScratch = 0, kBuffer = 1 };
// Parses "scratch" | "buffer"; false on anything else.
bool ParseXlaWorkspace(const std::string& text, XlaWorkspace* where);
// Reads and validates UCUDNN_XLA_WORKSPACE (unset or empty: kScratch).
Status ReadXlaWorkspace(XlaWorkspace* where);

// Whether XLA custom calls of half-precision convolutions with few input
// channels run on channels padded with zeros (UCUDNN_XLA_PAD_CHANNELS: "on",
// the default, or "off"), read by the tf2xla kernel when the function is
// compiled; which convolutions: XlaPaddedInChannels (xla_conv_config.h).
// Parses "on" | "off"; false on anything else.
bool ParseXlaPadChannels(const std::string& text, bool* pad);
// Reads and validates UCUDNN_XLA_PAD_CHANNELS (unset or empty: on).
Status ReadXlaPadChannels(bool* pad);
// How a convolution's statistics epilogue (the per-channel sum and sum of
// squares of its output) runs where a fused cuDNN graph plans
// (UCUDNN_STATISTICS):
// - kFused (the default, "fused"): the fused graph;
// - kTimed ("timed"): the kernel's first run also runs the plain convolution
//   and the reduction after it (statistics_reduction.h), and the kernel keeps
//   whichever is faster: the fused plan's benchmarked time against the plain
//   plan's plus the reduction's (mean of 3, cudaEvents). Kernels that also
//   take an input prologue, and Workspace Division groups' kernels, stay
//   fused. On an H200 (cuDNN 9.19) it kept every ResNet-50 kernel fused in
//   float32, bfloat16 and float16: cudnnReduceTensor's per-channel sums of
//   an NHWC output took 9-99x (float32) the time the fused graph adds to the
//   plain convolution;
// - kUnfused ("unfused"): always the plain convolution and the reduction.
// Read when a statistics kernel first runs (not at every run).
enum class StatisticsMode : int { kFused = 0, kTimed = 1, kUnfused = 2 };
// Parses "fused" | "timed" | "unfused"; false on anything else.
bool ParseStatisticsMode(const std::string& text, StatisticsMode* mode);
// Reads and validates UCUDNN_STATISTICS (unset or empty: kFused).
Status ReadStatisticsMode(StatisticsMode* mode);
// Reads and validates UCUDNN_GRAPH_RETIME, on or off (unset or empty: on):
// whether graph candidates near the best at a size are timed again,
// interleaved (screening.h, "Re-timing near the best").
Status ReadGraphRetime(bool* retime);
// How many threads finalize the execution plans of a kernel's run-time
// compiled candidates (a statistics epilogue or an input prologue) at once
// (UCUDNN_PLAN_BUILD_THREADS): a whole number from 1 (one after the other) to
// kMaxPlanBuildThreads; unset or empty: kDefaultPlanBuildThreads, at most
// the host's hardware threads. Each such plan takes about 0.5 s of host time
// to compile while the CUDA driver's JIT cache does not hold its kernels
// (H200, cuDNN 9.19: ResNet-50's 20 bfloat16 statistics shapes planned in
// 109 s on one thread, 31 s on 8, 7 s either way from the cache); the plans
// are the same whichever thread builds them (DescriptorCache::BuildGraphPlans).
// Read where it applies (GraphCandidates::Propose), checked when a kernel is
// created.
constexpr int kDefaultPlanBuildThreads = 8;
constexpr int kMaxPlanBuildThreads = 64;
bool ParsePlanBuildThreads(const std::string& text, int* threads);
Status ReadPlanBuildThreads(int* threads);

// A byte count as tf_ucudnn/units.py's parse_bytes reads it (the Python
// argument "64MiB" and UCUDNN_DEFAULT_WORKSPACE_LIMIT=64MiB alike): a
// non-negative decimal number, optionally with a fraction, and a binary unit
// B, K/KiB, M/MiB or G/GiB (any case; none: bytes), surrounding and
// separating whitespace allowed, e.g. "67108864", "64MiB", "64 MiB", "1.5GiB".
// False when it is anything else, not a whole number of bytes, or above
// 2^63 - 1; *bytes is left as it was then.
bool ParseByteCount(const std::string& text, int64_t* bytes);

// The environment's defaults of op attributes, read (when a kernel is
// created) only where an op leaves the attribute to them, so that a bad value
// fails only the ops that use it. Unset or empty: the default.
// The byte counts take ParseByteCount's forms ("64MiB"); InvalidArgument
// names the variable, the forms allowed and the value found.
Status ReadDefaultWorkspaceLimit(int64_t* bytes);      // UCUDNN_DEFAULT_WORKSPACE_LIMIT (or "auto")
Status ReadTotalWorkspaceSize(int64_t* bytes);         // UCUDNN_TOTAL_WORKSPACE_SIZE (0: unset)
Status ReadBatchSizePolicy(BatchSizePolicy* policy);   // UCUDNN_BATCH_SIZE_POLICY

// UCUDNN_DEBUG_OUTPUT (μ-cuDNN's name): when set to anything but "" or "0",
// plans and the cost of planning each kernel are printed to stderr. Read once
// per process.
bool DebugOutput();

// The value of UCUDNN_BENCHMARK_DEVICES ("" when unset; see
// ParseBenchmarkDevices), read once per process.
const std::string& BenchmarkDevicesSetting();

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_KNOBS_H_
