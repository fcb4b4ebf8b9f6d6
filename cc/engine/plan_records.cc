#include "cc/engine/plan_records.h"

#include <atomic>
#include <cmath>
#include <mutex>
#include <sstream>
#include <tuple>

namespace ucudnn {

std::string PolicyLabel(const PlanningKnobs& knobs) {
  return knobs.micro_batch_size > 0 ? "forced " + std::to_string(knobs.micro_batch_size)
                                    : BatchSizePolicyName(knobs.policy);
}

PlanRecord MakePlanRecord(const std::string& device, Pass pass, const ConvParams& params,
                          const PlanningKnobs& knobs, const Plan& plan,
                          const std::function<std::string(const MicroBatch&)>& algo_name) {
  PlanRecord r;
  r.device = device;
  r.pass = pass;
  r.params = params;
  r.workspace_limit = knobs.BenchmarkLimit();
  r.policy = PolicyLabel(knobs);
  for (const MicroBatch& mb : plan.micro_batches) {
    r.micro_batches.push_back({mb.size, algo_name(mb), mb.workspace_bytes, mb.time_ms});
  }
  r.workspace_bytes = plan.workspace_bytes;
  r.time_ms = plan.time_ms;
  return r;
}

namespace {

std::mutex& RecordsMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<PlanRecord>& Records() {
  static auto* records = new std::vector<PlanRecord>();
  return *records;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

void AppendRecordJson(std::ostringstream& s, const PlanRecord& r) {
  const ConvParams& p = r.params;
  s << "{\"device\":" << JsonString(r.device) << ",\"pass\":" << JsonString(PassName(r.pass))
    << ",\"shape\":" << JsonString(p.ToString()) << ",\"batch\":" << p.batch
    << ",\"layout\":" << JsonString(LayoutName(p.layout))
    << ",\"dtype\":" << JsonString(DTypeName(p.dtype))
    << ",\"workspace_limit\":" << r.workspace_limit << ",\"policy\":" << JsonString(r.policy)
    << ",\"workspace_bytes\":" << r.workspace_bytes << ",\"time_ms\":" << JsonNumber(r.time_ms)
    << ",\"note\":" << JsonString(r.note) << ",\"planning_ms\":" << JsonNumber(r.planning_ms)
    << ",\"micro_batches\":[";
  for (size_t i = 0; i < r.micro_batches.size(); ++i) {
    const PlanRecord::Step& m = r.micro_batches[i];
    s << (i ? "," : "") << "{\"size\":" << m.size << ",\"algo\":" << JsonString(m.algo)
      << ",\"workspace_bytes\":" << m.workspace_bytes
      << ",\"time_ms\":" << JsonNumber(m.time_ms) << "}";
  }
  s << "]}";
}

std::atomic<PlanListener>& Listener() {
  static std::atomic<PlanListener> listener{nullptr};
  return listener;
}

}  // namespace

void SetPlanListener(PlanListener listener) { Listener().store(listener); }

void RecordPlan(PlanRecord record) {
  {
    std::lock_guard<std::mutex> lock(RecordsMutex());
    Records().push_back(std::move(record));
  }
  if (const PlanListener listener = Listener().load()) listener();
}

void ClearPlanRecords() {
  std::lock_guard<std::mutex> lock(RecordsMutex());
  Records().clear();
}

std::string PlanRecordsJson() {
  std::lock_guard<std::mutex> lock(RecordsMutex());
  std::ostringstream s;
  s << "[";
  bool first = true;
  for (const PlanRecord& r : Records()) {
    if (!first) s << ",";
    first = false;
    AppendRecordJson(s, r);
  }
  s << "]";
  return s.str();
}

}  // namespace ucudnn
