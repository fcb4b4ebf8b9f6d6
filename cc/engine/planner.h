// Micro-batch planning: Workspace Reuse (WR) and the Pareto front used by
// Workspace Division (WD). Pure C++, no TensorFlow, no GPU: the Python
// planner (tf_ucudnn.planner) calls these same functions through c_api.cc.
// One header per concept, all included here:
//   micro_batch_sizes.h   batch-size policies, forced sizes
//   plan.h                benchmark table, plan, float32 accumulator
//   workspace_reuse.h     WR: BestPlan, ForcedPlan (and with the accumulator)
//   pareto_front.h        WD's desirable set: ParetoFront
//   table_merging.h       tables across N and processes: restrict, merge, prune
//
// Reference: Oyama, Ben-Nun, Hoefler, Matsuoka, "Accelerating Deep Learning
// Frameworks with Micro-batches", IEEE CLUSTER 2018 (arXiv:1804.04806), §III.
#ifndef TF_UCUDNN_ENGINE_PLANNER_H_
#define TF_UCUDNN_ENGINE_PLANNER_H_

#include "cc/engine/micro_batch_sizes.h"
#include "cc/engine/pareto_front.h"
#include "cc/engine/plan.h"
#include "cc/engine/table_merging.h"
#include "cc/engine/workspace_reuse.h"

#endif  // TF_UCUDNN_ENGINE_PLANNER_H_
