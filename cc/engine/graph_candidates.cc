// The graph-API candidates of a kernel: proposal, timing and pruning, and
// re-timing near the best (see graph_candidates.h). Running a micro-batch
// with one is PlanRunner's.
#if GOOGLE_CUDA

#include "cc/engine/graph_candidates.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "cc/engine/cuda_check.h"
#include "cc/engine/screening.h"

namespace ucudnn {
namespace {

// Per candidate and size: one warm-up run (where the engine first runs in the
// process), one screening run, and two more timed runs unless the screening
// run shows it dominated (see Time).
constexpr int kTimedRuns = 3;
// Engines that have run in this process, by device, pass, data type, layout
// and name (id, knobs, transposed): their kernels' modules are loaded, so their
// first run at another shape or size times the kernel, not the loading. Of 612
// such first runs in VGG-16's planning, 2 took visibly longer than the run after
// (eng1: 4.5 against 0.4 ms); a warm-up run before each cost 2.3 of 5.4 s
// (docs/benchmarks.md, planning time).
std::mutex loaded_mu;
std::set<std::string>& LoadedEngines() {
  static auto* loaded = new std::set<std::string>;
  return *loaded;
}
// Whether `key` had run before; marks it as run.
bool EngineLoaded(const std::string& key) {
  std::lock_guard<std::mutex> lock(loaded_mu);
  return !LoadedEngines().insert(key).second;
}

// The fallback lists queried in this process, by kind of convolution: device,
// pass, data type, layout, graph layout, numerics, grouped, dilated (see
// Propose and FallbackEngines).
std::mutex fallback_mu;
std::map<std::string, FallbackEngines>& SharedFallbackEngines() {
  static auto* lists = new std::map<std::string, FallbackEngines>;
  return *lists;
}

// A time for the debug log: "0.651 ms".
std::string Ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f ms", ms);
  return text;
}

}  // namespace

std::string GraphCandidates::KindPrefix(int device) const {
  return std::to_string(device) + " " + PassName(spec_.pass) + spec_.params.fusion.Name() + " " +
         DTypeName(spec_.params.dtype) + " " + LayoutName(spec_.params.layout);
}

Status GraphCandidates::Propose(cudnnHandle_t handle, int64_t size, int64_t workspace_limit,
                                const std::set<std::string>& pruned,
                                std::vector<GraphTrial>* trials, std::string* log,
                                GraphHostCosts* costs, int* over_limit,
                                const std::vector<GraphCandidate>* given) {
  trials->clear();
  *over_limit = 0;
  GraphNumerics numerics;
  // Float32 without TF32 keeps the legacy path's float arithmetic.
  numerics.strict_float = spec_.params.dtype == DType::kFloat && !spec_.allow_tf32;
  numerics.deterministic = spec_.deterministic;
  int device = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&device));
  // The tensors' layout, then the other one (transposed candidates).
  std::vector<GraphCandidate> candidates;
  const GraphLayouts layouts = spec_.graph.layouts;
  if (given != nullptr) {
    candidates = *given;
    if (log != nullptr) *log += " the stored neighbouring sizes' candidates\n";
  }
  for (bool transposed : {false, true}) {
    if (given != nullptr) break;
    if (layouts == (transposed ? GraphLayouts::kNative : GraphLayouts::kTransposed)) continue;
    const ConvGraphSpec spec = descriptors_.GraphSpec(size, false, transposed);
    std::vector<GraphCandidate> got;
    std::string layout_log;
    // The fallback list of this kind of convolution, if another kernel (or
    // size) of it queried one (FallbackEngines, cudnn_graph.h).
    const std::string kind =
        KindPrefix(device) + (transposed ? " transposed" : "") +
        (numerics.strict_float ? " strict" : "") + (numerics.deterministic ? " determ" : "") +
        (spec_.params.groups > 1 ? " grouped" : "") +
        (spec_.params.dilation_h > 1 || spec_.params.dilation_w > 1 ? " dilated" : "");
    // The shared list once it is listed (never changed after: read without
    // the lock), else a new one, queried into `queried` and then shared.
    FallbackEngines queried;
    FallbackEngines* fallback = &queried;
    {
      std::lock_guard<std::mutex> lock(fallback_mu);
      FallbackEngines& shared = SharedFallbackEngines()[kind];
      if (shared.listed) fallback = &shared;
    }
    UCUDNN_RETURN_IF_ERROR(ProposeGraphEngines(handle, spec, numerics, spec_.graph.search,
                                               fallback, &got,
                                               log != nullptr ? &layout_log : nullptr, costs));
    if (fallback == &queried) {
      std::lock_guard<std::mutex> lock(fallback_mu);
      FallbackEngines& shared = SharedFallbackEngines()[kind];
      if (!shared.listed) shared = std::move(queried);
    }
    if (!layout_log.empty()) {
      *log += std::string(" in ") + LayoutName(spec.graph_layout) + ":\n" + layout_log;
    }
    candidates.insert(candidates.end(), got.begin(), got.end());
  }
  for (const GraphCandidate& c : candidates) {
    if (pruned.count(c.engine.Name())) continue;
    const GraphPlan* plan = nullptr;
    if (!descriptors_.GetGraphPlan(handle, size, c.engine, false, &plan, costs).ok()) continue;
    if (plan->workspace_bytes() > workspace_limit) {
      ++*over_limit;
      continue;
    }
    if (spec_.pass == Pass::kBackwardFilter && size < spec_.params.batch) {
      // Later micro-batches accumulate into the filter gradient (beta = 1).
      const GraphPlan* accumulating = nullptr;
      if (!descriptors_.GetGraphPlan(handle, size, c.engine, true, &accumulating, costs).ok()) {
        continue;
      }
      if (accumulating->workspace_bytes() > plan->workspace_bytes()) continue;
    }
    trials->push_back({c, plan});
  }
  return Status();
}

void GraphCandidates::GraphRoles(Pass pass, const void* a, const void* b, const void* out,
                                 const void** x, const void** w, const void** y) {
  switch (pass) {
    case Pass::kForward: *x = a; *w = b; *y = out; break;
    case Pass::kBackwardData: *y = a; *w = b; *x = out; break;
    case Pass::kBackwardFilter: *x = a; *y = b; *w = out; break;
  }
}

Status GraphCandidates::Time(cudnnHandle_t handle, cudaStream_t stream,
                             const std::vector<GraphTrial>& trials, const void* a, const void* b,
                             void* out, const void* bias, void* workspace,
                             int64_t workspace_bytes, std::vector<Measured>* got,
                             std::set<std::string>* pruned, int* runs, std::string* log) {
  if (trials.empty()) return Status();
  const void *x, *w, *y;
  GraphRoles(spec_.pass, a, b, out, &x, &w, &y);
  EventPair events;
  // `runs` executions of `plan` timed with events: mean ms, or < 0 if cuDNN
  // refused. Behind a StreamGate, but for a first run (module loading).
  auto time_runs = [&](const GraphPlan& plan, int runs, double* ms, bool gated = true) {
    return events.TimeRuns(
        stream, runs, [&] { return plan.Execute(handle, x, w, y, workspace, bias).ok(); }, ms,
        gated);
  };
  // After its screening run a candidate may be dropped, or not proposed again
  // at larger micro-batch sizes of the kernel (screening.h): engines keep their
  // rank as sizes grow, and the large sizes cost most of planning.
  const double prune_factor = spec_.graph.prune_factor;
  int device = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&device));
  const std::string loaded_prefix = KindPrefix(device) + " ";
  for (const GraphTrial& trial : trials) {
    const GraphPlan& plan = *trial.plan;
    if (plan.workspace_bytes() > workspace_bytes) continue;
    double warmup_ms = 0, screen_ms = 0, rest_ms = 0;
    std::string line;
    if (log != nullptr) {
      line = "  " + trial.candidate.engine.Name() + " (workspace " +
             std::to_string(plan.workspace_bytes()) + " bytes): ";
    }
    // A warm-up run where the engine first runs in the process: module loading.
    if (!EngineLoaded(loaded_prefix + trial.candidate.engine.Name())) {
      UCUDNN_RETURN_IF_ERROR(time_runs(plan, 1, &warmup_ms, /*gated=*/false));
      *runs += 1;
      if (warmup_ms < 0) {  // the engine refused at run time: not a candidate
        if (log != nullptr) *log += line + "refused\n";
        continue;
      }
      if (log != nullptr) line += "first run " + Ms(warmup_ms) + ", ";
    } else if (log != nullptr) {
      line += "loaded, ";
    }
    UCUDNN_RETURN_IF_ERROR(time_runs(plan, 1, &screen_ms));
    *runs += 1;
    if (log != nullptr) line += "screened " + Ms(screen_ms);
    if (screen_ms < 0) {
      if (log != nullptr) *log += line + ", refused\n";
      continue;
    }
    std::vector<Timed> measured;
    for (const Measured& m : *got) measured.push_back({m.time_ms, m.workspace_bytes});
    const ScreenVerdict verdict = Screen(screen_ms, plan.workspace_bytes(), measured, prune_factor);
    if (verdict.prune) {
      pruned->insert(trial.candidate.engine.Name());
      if (log != nullptr) line += ", pruned from larger sizes";
    }
    if (verdict.drop) {
      if (log != nullptr) *log += line + ", dominated\n";
      continue;
    }
    CudnnAlgo algo;
    algo.engine = trial.candidate.engine;
    algo.deterministic = trial.candidate.deterministic;
    if (verdict.screen_only) {  // on the Pareto front, but no time worth spending on it
      if (log != nullptr) *log += line + ", far behind: screening run only\n";
      got->push_back({algo, screen_ms, plan.workspace_bytes()});
      continue;
    }
    UCUDNN_RETURN_IF_ERROR(time_runs(plan, kTimedRuns - 1, &rest_ms));
    *runs += kTimedRuns - 1;
    if (rest_ms < 0) continue;
    if (log != nullptr) *log += line + ", timed " + Ms(rest_ms) + "\n";
    const double ms = (screen_ms + rest_ms * (kTimedRuns - 1)) / kTimedRuns;
    got->push_back({algo, ms, plan.workspace_bytes()});
  }
  return Status();
}

Status GraphCandidates::RetimeNearBest(cudnnHandle_t handle, cudaStream_t stream,
                                       const std::vector<GraphTrial>& trials, const void* a,
                                       const void* b, void* out, const void* bias,
                                       void* workspace, int64_t workspace_bytes,
                                       std::vector<Measured>* got, int* runs,
                                       std::string* log) {
  // The graph rows of the size, and the plan each was timed with.
  std::vector<size_t> rows;
  std::vector<Timed> timed;
  std::vector<const GraphPlan*> plans;
  for (size_t i = 0; i < got->size(); ++i) {
    const Measured& m = (*got)[i];
    if (!m.algo.graph()) continue;
    for (const GraphTrial& trial : trials) {
      if (trial.candidate.engine == m.algo.engine &&
          trial.plan->workspace_bytes() <= workspace_bytes) {
        rows.push_back(i);
        timed.push_back({m.time_ms, m.workspace_bytes});
        plans.push_back(trial.plan);
        break;
      }
    }
  }
  const std::vector<size_t> near = NearBest(timed, kRetimeWindow, kRetimeMax);
  if (near.empty()) return Status();
  const void *x, *w, *y;
  GraphRoles(spec_.pass, a, b, out, &x, &w, &y);
  EventPair events;
  std::vector<std::vector<double>> samples(near.size());
  for (int round = 0; round < kRetimeRounds; ++round) {
    for (size_t k = 0; k < near.size(); ++k) {
      if (samples[k].size() < static_cast<size_t>(round)) continue;  // refused earlier
      double ms = -1;
      const GraphPlan& plan = *plans[near[k]];
      UCUDNN_RETURN_IF_ERROR(events.TimeRuns(
          stream, 1, [&] { return plan.Execute(handle, x, w, y, workspace, bias).ok(); }, &ms));
      *runs += 1;
      if (ms >= 0) samples[k].push_back(ms);
    }
  }
  for (size_t k = 0; k < near.size(); ++k) {
    if (samples[k].size() != static_cast<size_t>(kRetimeRounds)) continue;  // keeps its time
    Measured& m = (*got)[rows[near[k]]];
    const double median = Median(samples[k]);
    if (log != nullptr) {
      *log += "  " + m.algo.engine.Name() + ": re-timed " + Ms(m.time_ms) + " -> " +
              Ms(median) + "\n";
    }
    m.time_ms = median;
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
