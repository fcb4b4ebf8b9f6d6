// The Pareto front of a kernel's benchmark table: Workspace Division's
// desirable set (Oyama et al. §III-C), from which its ILP picks one plan per
// kernel. Pure C++, no TensorFlow, no GPU.
#ifndef TF_UCUDNN_ENGINE_PARETO_FRONT_H_
#define TF_UCUDNN_ENGINE_PARETO_FRONT_H_

#include <cstdint>
#include <vector>

#include "cc/engine/plan.h"

namespace ucudnn {

// Workspace Division's desirable set: every plan over the table's sizes that no
// other plan beats in both time and workspace, sorted by workspace ascending
// with strictly decreasing time (Oyama et al. §III-C).
std::vector<Plan> ParetoFront(const PerfTable& table, int64_t batch_size);

// ParetoFront with the accumulator counted in every plan of several
// micro-batches (undivided plans that only those dominated may join it).
std::vector<Plan> ParetoFrontWithAccumulator(const PerfTable& table, int64_t batch_size,
                                             int64_t accumulator_bytes);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_PARETO_FRONT_H_
