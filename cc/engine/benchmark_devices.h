// UCUDNN_BENCHMARK_DEVICES: which GPUs benchmark a kernel's micro-batch sizes,
// and how the sizes are shared among them. Pure C++ (no CUDA, no TensorFlow),
// so that it is tested without a GPU.
#ifndef TF_UCUDNN_ENGINE_BENCHMARK_DEVICES_H_
#define TF_UCUDNN_ENGINE_BENCHMARK_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ucudnn {

// Parses the value of UCUDNN_BENCHMARK_DEVICES: "" (off), "all", or
// comma-separated non-negative GPU ids such as "0,1" (spaces allowed,
// duplicates dropped). On success *all says "all" and *ids holds the ids in
// ascending order; on failure *error says what was wrong and what is allowed.
bool ParseBenchmarkDevices(const std::string& spec, bool* all, std::vector<int>* ids,
                           std::string* error);

// Shares `sizes` among `devices` GPUs so that their sums of sizes (the cost of
// benchmarking a micro-batch grows with its size) are as even as the greedy
// longest-first rule makes them. Element 0 is the kernel's own GPU; it gets
// the largest size. Every size goes to exactly one GPU, each list ascending.
std::vector<std::vector<int64_t>> SpreadSizes(const std::vector<int64_t>& sizes, int devices);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_BENCHMARK_DEVICES_H_
