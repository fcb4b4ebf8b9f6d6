// One convolution pass on the CPU over a plan's micro-batches, with its
// fusion: per micro-batch, the input's prologue (cpu_fusion.h), the
// convolution (cpu_backend.h: im2col + Eigen GEMM) and the epilogues; the
// backward-filter gradient and the statistics added up over the
// micro-batches. No TensorFlow includes, no GPU: tested alone
// (cpu_fusion_test.cc); RunConvPassCpu (conv_runner.h) plans and calls it.
#ifndef TF_UCUDNN_ENGINE_CPU_PASS_H_
#define TF_UCUDNN_ENGINE_CPU_PASS_H_

#include "cc/engine/conv_params.h"
#include "cc/engine/cpu_backend.h"
#include "cc/engine/plan.h"
#include "cc/engine/status.h"

namespace ucudnn {

// One pass's tensors in host memory, named as PassTensors names them
// (pass_buffers.h); a, b and out of params.dtype, whole mini-batches in
// params.layout (filter HWIO):
//   forward:         a = input,        b = filter,       out = output
//   backward-data:   a = out_backprop, b = filter,       out = in_backprop
//   backward-filter: a = input,        b = out_backprop, out = filter_backprop
// and the forward pass's fusion tensors (params.fusion), else nullptr.
struct CpuPassTensors {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  // Epilogue::kBias*: out_channels elements of params.dtype.
  const void* bias = nullptr;
  // Prologue::kScaleBias*: in_channels float32 each, used rounded to
  // params.dtype (as the GPU engine hands them to cuDNN's graphs).
  const float* input_scale = nullptr;
  const float* input_bias = nullptr;
  // Epilogue::kStatistics: out_channels float32 each, written: the sums over
  // the whole mini-batch (N, H, W) of the output and of its square.
  float* sum = nullptr;
  float* sum_of_squares = nullptr;

  // Which fusion tensors are there, for Fusion::Check.
  FusionTensors present() const {
    FusionTensors t;
    t.bias = bias != nullptr;
    t.input_scale = input_scale != nullptr;
    t.input_bias = input_bias != nullptr;
    t.statistics = sum != nullptr && sum_of_squares != nullptr;
    return t;
  }
};

// Runs `pass` of `params` over the micro-batches of `plan` (sizes summing to
// params.batch; their algorithms are ignored: the CPU has one), with
// params.fusion. The prologue transforms one micro-batch's input at a time
// into a buffer of that micro-batch (the transformed mini-batch is never
// stored whole). An empty convolution (ConvParams::empty) ignores the plan
// and writes what its fusion gives: zeros, plus the bias, and zero sums.
// Returns: InvalidArgument for a fusion the pass or the tensors cannot take
// (Fusion::Check with tensors.present()), an empty convolution with neither
// a bias nor statistics, or a plan whose sizes do not add up to params.batch.
Status RunCpuPlan(const Plan& plan, Pass pass, const ConvParams& params,
                  const CpuPassTensors& tensors, const ParallelFor& parallel_for);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_CPU_PASS_H_
