// Workspace Division at run time (Oyama et al. 2018, §III-C), for ops with a
// total_workspace (UCUDNN_TOTAL_WORKSPACE_SIZE, enable_rewrite(total_workspace=)).
//
// The kernels that share one total budget on one device form a group. Each is
// benchmarked within the whole budget the first time it runs. When a kernel of
// the group runs again and the group has gained members since it was last
// divided (so one whole step has run), the division callback divides the
// budget among the members: tf_ucudnn's Python side registers it and solves
// the ILP with PuLP, then replans each kernel within its share. No TensorFlow
// headers here.
#ifndef TF_UCUDNN_ENGINE_DIVISION_GROUPS_H_
#define TF_UCUDNN_ENGINE_DIVISION_GROUPS_H_

#include <cstdint>

namespace ucudnn {

// Called with (device ordinal, total bytes); must not throw.
using DivisionCallback = void (*)(int32_t device, int64_t total_workspace);

// Registers the callback (nullptr turns division off; kernels then keep
// their whole-budget plans).
void SetDivisionCallback(DivisionCallback callback);

// Notes that `kernel` (any stable identity) of the group (device, total) has
// run. Runs the callback on this thread, with no lock held, when a division
// is due; at most one division per group runs at a time.
void NoteGroupRun(int device, int64_t total_workspace, const void* kernel);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_DIVISION_GROUPS_H_
