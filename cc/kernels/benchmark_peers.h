// UCUDNN_BENCHMARK_DEVICES in TensorFlow: the other GPUs of this process that
// benchmark a kernel's micro-batch sizes, each with TF's allocator and compute
// stream of that GPU (so the benchmark's memory is TF's, stream-ordered there).
#ifndef TF_UCUDNN_KERNELS_BENCHMARK_PEERS_H_
#define TF_UCUDNN_KERNELS_BENCHMARK_PEERS_H_

#if GOOGLE_CUDA

#include <memory>
#include <vector>

#include "cc/engine/pass_buffers.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tensorflow {
namespace ucudnn_tf {

class BenchmarkPeers {
 public:
  // The GPUs that UCUDNN_BENCHMARK_DEVICES names (TF GPU ids of this task, or
  // "all"), other than the op's own GPU (CUDA ordinal `own_device`). Empty
  // when the variable is unset. InvalidArgument for a malformed value, an id
  // this process has no GPU of, or GPUs of another model than the op's.
  static absl::Status Make(OpKernelContext* ctx, int own_device,
                           std::unique_ptr<BenchmarkPeers>* out);
  ~BenchmarkPeers();

  const std::vector<ucudnn::BenchmarkPeer>& peers() const { return peers_; }

 private:
  class Scratch;
  std::vector<std::unique_ptr<Scratch>> scratch_;
  std::vector<ucudnn::BenchmarkPeer> peers_;
};

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_KERNELS_BENCHMARK_PEERS_H_
