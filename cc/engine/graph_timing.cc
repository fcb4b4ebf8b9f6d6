// The timing of a kernel's graph-API candidates with CUDA events: warm-up,
// screening, pruning and re-timing near the best (see graph_timing.h).
#if GOOGLE_CUDA

#include "cc/engine/graph_timing.h"

#include <cstdint>
#include <cstdio>
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

// A time for the debug log: "0.651 ms".
std::string Ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f ms", ms);
  return text;
}

}  // namespace

void GraphTiming::GraphRoles(Pass pass, const void* a, const void* b, const void* out,
                                 const void** x, const void** w, const void** y) {
  switch (pass) {
    case Pass::kForward: *x = a; *w = b; *y = out; break;
    case Pass::kBackwardData: *y = a; *w = b; *x = out; break;
    case Pass::kBackwardFilter: *x = a; *y = b; *w = out; break;
  }
}

Status GraphTiming::Time(cudnnHandle_t handle, cudaStream_t stream,
                             const std::vector<GraphTrial>& trials, const void* a, const void* b,
                             void* out, const FusionPointers& fusion, void* workspace,
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
        stream, runs, [&] { return plan.Execute(handle, x, w, y, workspace, fusion).ok(); }, ms,
        gated);
  };
  // After its screening run a candidate may be dropped, or not proposed again
  // at larger micro-batch sizes of the kernel (screening.h): engines keep their
  // rank as sizes grow, and the large sizes cost most of planning.
  const double prune_factor = spec_.graph.prune_factor;
  int device = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&device));
  const std::string loaded_prefix = GraphKindPrefix(spec_, device) + " ";
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

Status GraphTiming::RetimeNearBest(cudnnHandle_t handle, cudaStream_t stream,
                                       const std::vector<GraphTrial>& trials, const void* a,
                                       const void* b, void* out, const FusionPointers& fusion,
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
          stream, 1, [&] { return plan.Execute(handle, x, w, y, workspace, fusion).ok(); }, &ms));
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
