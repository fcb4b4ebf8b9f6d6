// Turns a failed cuDNN or CUDA runtime call into the engine's Status, naming
// the call: the cuDNN backend and its graph-API candidates share these. And
// CUDA events for timing, destroyed with their owner, behind a gate that
// keeps the host's launch latency out of the times.
#ifndef TF_UCUDNN_ENGINE_CUDA_CHECK_H_
#define TF_UCUDNN_ENGINE_CUDA_CHECK_H_

#if GOOGLE_CUDA

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/status.h"

#define UCUDNN_CUDNN_OK(expr)                                                          \
  do {                                                                                 \
    cudnnStatus_t _s = (expr);                                                         \
    if (_s != CUDNN_STATUS_SUCCESS) {                                                  \
      return ::ucudnn::Status::Internal(std::string("cuDNN error in ") + #expr + ": " + \
                                        cudnnGetErrorString(_s));                      \
    }                                                                                  \
  } while (0)

#define UCUDNN_CUDA_OK(expr)                                                           \
  do {                                                                                 \
    cudaError_t _e = (expr);                                                           \
    if (_e != cudaSuccess) {                                                           \
      return ::ucudnn::Status::Internal(std::string("CUDA error in ") + #expr + ": " +  \
                                        cudaGetErrorString(_e));                       \
    }                                                                                  \
  } while (0)

namespace ucudnn {

// A gate on a stream: work enqueued after it starts once the host opens it,
// so that timed work enqueued behind it runs back to back from its first
// launch. Timed from an idle GPU, a run's time includes the host's launch
// latency: on an H100, 9-10 us at the median and 29-31 us at the 90th
// percentile of the convolutions under 0.2 ms (their screening run against
// the mean of two back-to-back runs), differing between processes with the
// host's load. The gate opens by itself after kMaxWaitMs, so that nothing
// waits on it for long: a launch that loads a kernel (CUDA's lazy loading,
// also for an engine already run at another shape) waits for the context to
// be idle, hence for the gate. Enqueuing two runs takes tens of microseconds;
// 2 ms bounds the cost of such a load (100 ms cost ResNet-50's planning
// 0.3 s on an H200). timed_out() then says the times include that wait.
class StreamGate {
 public:
  static constexpr double kMaxWaitMs = 2;

  // Closes `stream` behind a host function that waits for Open(); closes
  // nothing if the host function cannot be enqueued.
  explicit StreamGate(cudaStream_t stream) : state_(new State) {
    if (cudaLaunchHostFunc(stream, &StreamGate::Wait, state_) != cudaSuccess) {
      cudaGetLastError();  // clears the error: timing goes on without the gate
      delete state_;
      state_ = nullptr;
    }
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  ~StreamGate() {
    if (state_ == nullptr) return;
    Open();
    Release(state_);
  }

  // Lets the stream go on (idempotent).
  void Open() {
    if (state_ != nullptr) state_->open.store(true, std::memory_order_release);
  }
  // Whether the gate opened by itself; read once the stream passed it.
  bool timed_out() const {
    return state_ != nullptr && state_->timed_out.load(std::memory_order_acquire);
  }

 private:
  struct State {
    std::atomic<bool> open{false};
    std::atomic<bool> timed_out{false};
    std::atomic<int> holders{2};  // the gate and its host function
  };
  static void Release(State* state) {
    if (state->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) delete state;
  }
  static void CUDART_CB Wait(void* arg) {
    State* state = static_cast<State*>(arg);
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double, std::milli>(kMaxWaitMs);
    while (!state->open.load(std::memory_order_acquire)) {
      if (std::chrono::steady_clock::now() >= until) {
        state->timed_out.store(true, std::memory_order_release);
        break;
      }
      std::this_thread::yield();
    }
    Release(state);
  }
  State* state_;
};

// A start and a stop event, created on first use and destroyed with their
// owner; times runs of work enqueued on a stream (the benchmarks' timing).
class EventPair {
 public:
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }

  // Gates that opened by themselves in this thread's TimeRuns so far (each
  // a launch that waited, then the runs timed again): the debug output's count.
  static int& GateTimeouts() {
    thread_local int count = 0;
    return count;
  }

  // Calls `run()` `runs` times between the two events on `stream` and waits
  // for them: *ms is the mean elapsed milliseconds per run, or -1 if a run
  // returned false (it stops there). `run` enqueues its work on `stream`,
  // and must not wait for the stream: with `gated`, the stream waits behind
  // a StreamGate until every run is enqueued. Ungated for a run that may
  // load a module (an engine's first run in the process), which may wait.
  template <typename Run>
  Status TimeRuns(cudaStream_t stream, int runs, Run run, double* ms, bool gated = true) {
    if (start_ == nullptr) UCUDNN_CUDA_OK(cudaEventCreate(&start_));
    if (stop_ == nullptr) UCUDNN_CUDA_OK(cudaEventCreate(&stop_));
    bool ran = true;
    std::unique_ptr<StreamGate> gate;
    if (gated) gate = std::make_unique<StreamGate>(stream);
    UCUDNN_CUDA_OK(cudaEventRecord(start_, stream));
    for (int i = 0; ran && i < runs; ++i) ran = run();
    UCUDNN_CUDA_OK(cudaEventRecord(stop_, stream));
    if (gate) gate->Open();  // before waiting: the stream waits for it
    UCUDNN_CUDA_OK(cudaEventSynchronize(stop_));
    if (gate && gate->timed_out() && ran) {
      // The runs waited at the gate (a module load): time them again, ungated.
      ++GateTimeouts();
      gate.reset();
      return TimeRuns(stream, runs, run, ms, /*gated=*/false);
    }
    float elapsed = 0;
    UCUDNN_CUDA_OK(cudaEventElapsedTime(&elapsed, start_, stop_));
    *ms = ran ? static_cast<double>(elapsed) / runs : -1.0;
    return Status();
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDA_CHECK_H_
