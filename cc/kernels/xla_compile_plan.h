// Plans an XLA custom call's pass while the function is compiled
// (UCUDNN_XLA_WORKSPACE=plan, the default), so that the call's workspace can
// be a result buffer of the plan's size, placed by XLA's buffer assignment as
// XLA places its own convolutions' workspaces. The plan is made on the GPU
// the function is compiled for, on the stream and with the memory that the
// compilation lends (XlaCompiler::Options::device_allocator: TF's allocator
// and compute stream, which XLA's own autotuner uses too), through the same
// engine as at run time (PlanConvPass), so that the handler later finds the
// kernel planned.
#ifndef TF_UCUDNN_KERNELS_XLA_COMPILE_PLAN_H_
#define TF_UCUDNN_KERNELS_XLA_COMPILE_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "cc/kernels/engine/conv_params.h"
#include "cc/kernels/xla_conv_config.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"

namespace tensorflow {
namespace ucudnn_tf {

// The workspace, in bytes, of the plan of `pass` of the custom call that
// `config` describes. FailedPrecondition where the compilation lends no GPU
// (no device allocator, device ordinal or stream: a compilation for
// inspection, experimental_get_compiler_ir), Unavailable where the benchmark
// buffers do not fit in its memory: the caller then leaves planning to the
// first run. Other errors are the engine's (cuDNN, CUDA).
absl::StatusOr<int64_t> PlanWhenCompiled(XlaOpKernelContext* ctx, ucudnn::Pass pass,
                                         const XlaConvConfig& config);

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // TF_UCUDNN_KERNELS_XLA_COMPILE_PLAN_H_
