#if GOOGLE_CUDA

#include "cc/engine/legacy_candidates.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cc/engine/cuda_check.h"

namespace ucudnn {
namespace {

// Find's candidates within this factor of its fastest are timed again (Retime).
constexpr double kLegacyRetimeFactor = 2.0;
// Gated runs per candidate timed again, after one warm-up run (GraphTiming's count).
constexpr int kLegacyTimedRuns = 3;

}  // namespace

int LegacyCandidates::MathType() const {
  // FP32 without TF32 must stay on FMA kernels; otherwise tensor cores may be used.
  return spec_.params.dtype == DType::kFloat && !spec_.allow_tf32 ? CUDNN_FMA_MATH
                                                                  : CUDNN_TENSOR_OP_MATH;
}

Status LegacyCandidates::MaxWorkspaceNeeded(cudnnHandle_t handle, int64_t size,
                                            int64_t* needed) {
  const Pass pass = spec_.pass;
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(runner_->descriptors().GetDescriptors(size, MathType(), &d));
  *needed = 0;
  for (int algo = 0; algo < MaxAlgoCount(pass); ++algo) {
    size_t bytes = 0;
    cudnnStatus_t s = CUDNN_STATUS_NOT_SUPPORTED;
    if (pass == Pass::kForward) {
      s = cudnnGetConvolutionForwardWorkspaceSize(handle, d->x.d, d->w.d, d->conv.d, d->y.d,
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
    } else if (pass == Pass::kBackwardData) {
      s = cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, d->w.d, d->y.d, d->conv.d, d->x.d,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
    } else {
      s = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, d->x.d, d->y.d, d->conv.d, d->w.d,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
    }
    if (s == CUDNN_STATUS_SUCCESS) *needed = std::max<int64_t>(*needed, bytes);
  }
  return Status();
}

Status LegacyCandidates::Find(cudnnHandle_t handle, int64_t size, int64_t workspace_limit,
                              const void* a, const void* b, void* out, void* ws,
                              int64_t ws_bytes, std::vector<Measured>* got) {
  const Pass pass = spec_.pass;
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(runner_->descriptors().GetDescriptors(size, MathType(), &d));
  const int max_count = MaxAlgoCount(pass);
  int returned = 0;
  auto record = [&](int algo, cudnnStatus_t status, float time, size_t memory,
                    cudnnDeterminism_t determinism, cudnnMathType_t math) {
    if (status != CUDNN_STATUS_SUCCESS || time < 0) return;
    if (static_cast<int64_t>(memory) > workspace_limit) return;
    const bool deterministic = determinism == CUDNN_DETERMINISTIC;
    if (spec_.deterministic && !deterministic) return;
    got->push_back({{algo, static_cast<int>(math), deterministic}, static_cast<double>(time),
                    static_cast<int64_t>(memory)});
  };
  if (pass == Pass::kForward) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max_count);
    UCUDNN_CUDNN_OK(cudnnFindConvolutionForwardAlgorithmEx(
        handle, d->x.d, a, d->w.d, b, d->conv.d, d->y.d, out, max_count, &returned, perf.data(),
        ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      record(perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
             perf[i].mathType);
  } else if (pass == Pass::kBackwardData) {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(max_count);
    UCUDNN_CUDNN_OK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        handle, d->w.d, b, d->y.d, a, d->conv.d, d->x.d, out, max_count, &returned, perf.data(),
        ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      record(perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
             perf[i].mathType);
  } else {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(max_count);
    UCUDNN_CUDNN_OK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        handle, d->x.d, a, d->y.d, b, d->conv.d, d->w.d, out, max_count, &returned, perf.data(),
        ws, ws_bytes));
    for (int i = 0; i < returned; ++i)
      record(perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
             perf[i].mathType);
  }
  return Status();
}

Status LegacyCandidates::TimeAddBias(cudnnHandle_t handle, cudaStream_t stream, int64_t size,
                                     const void* bias, void* y, double* ms) {
  PassOperations& ops = runner_->operations();
  constexpr int kRuns = 3;
  const int math_type = MathType();
  UCUDNN_RETURN_IF_ERROR(ops.AddBias(handle, size, math_type, bias, y));  // descriptors, warm-up
  Status failed;
  EventPair events;
  UCUDNN_RETURN_IF_ERROR(events.TimeRuns(
      stream, kRuns,
      [&] {
        failed = ops.AddBias(handle, size, math_type, bias, y);
        return failed.ok();
      },
      ms));
  return failed;
}

Status LegacyCandidates::Retime(cudnnHandle_t handle, cudaStream_t stream, int64_t size,
                                const void* a, const void* b, void* out,
                                const FusionPointers& fusion, void* workspace, size_t first,
                                std::vector<Measured>* row, std::string* log) {
  if (first >= row->size()) return Status();
  double fastest = (*row)[first].time_ms;
  for (size_t i = first; i < row->size(); ++i) fastest = std::min(fastest, (*row)[i].time_ms);
  EventPair events;
  for (size_t i = first; i < row->size(); ++i) {
    Measured& m = (*row)[i];
    if (m.time_ms > kLegacyRetimeFactor * fastest) continue;
    MicroBatch mb;
    mb.size = size;
    mb.workspace_bytes = m.workspace_bytes;
    Status failed;
    auto run = [&] {
      failed = runner_->RunMicroBatch(handle, stream, mb, m.algo, /*offset=*/0,
                                      /*accumulate=*/false, a, b, out, fusion, workspace,
                                      /*padded=*/nullptr);
      return failed.ok();
    };
    double warmup_ms = 0, ms = 0;
    UCUDNN_RETURN_IF_ERROR(events.TimeRuns(stream, 1, run, &warmup_ms, /*gated=*/false));
    if (warmup_ms >= 0) {
      UCUDNN_RETURN_IF_ERROR(events.TimeRuns(stream, kLegacyTimedRuns, run, &ms));
    }
    if (log != nullptr) {
      char line[160];
      std::snprintf(line, sizeof(line), "  %s: cudnnFind %.3f ms, timed %.3f ms\n",
                    CudnnAlgoName(spec_.pass, m.algo).c_str(), m.time_ms,
                    warmup_ms >= 0 ? ms : -1.0);
      *log += line;
    }
    if (warmup_ms >= 0 && ms > 0) m.time_ms = ms;
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
