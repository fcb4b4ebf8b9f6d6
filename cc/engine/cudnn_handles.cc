#if GOOGLE_CUDA

#include "cc/engine/cudnn_handles.h"

#include <map>
#include <sstream>
#include <tuple>

#include "cc/engine/cuda_check.h"

namespace ucudnn {

std::string CudnnVersionString() {
  const size_t v = cudnnGetVersion();
  if (v == 0) return "";  // no cuDNN could be loaded (a machine without one)
  std::ostringstream s;
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  s << v / 10000 << "." << (v % 10000) / 100 << "." << v % 100;
  return s.str();
}

namespace {
// One handle per (device, stream, purpose): 0 the ops', 1 benchmarking for
// peers, 2 + i the i-th plan-building thread's.
Status GetHandle(int device, cudaStream_t stream, int purpose, CudnnHandle** out) {
  static std::mutex mu;
  static auto* handles = new std::map<std::tuple<int, cudaStream_t, int>, CudnnHandle*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles->find({device, stream, purpose});
  if (it != handles->end()) {
    *out = it->second;
    return Status();
  }
  int current = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&current));
  if (current != device) UCUDNN_CUDA_OK(cudaSetDevice(device));
  auto* h = new CudnnHandle();  // lives as long as the process, like TF's own
  const cudnnStatus_t status = cudnnCreate(&h->handle);
  if (current != device) cudaSetDevice(current);
  if (status != CUDNN_STATUS_SUCCESS) {
    delete h;
    return Status::Internal(std::string("cudnnCreate failed: ") + cudnnGetErrorString(status));
  }
  (*handles)[{device, stream, purpose}] = h;
  *out = h;
  return Status();
}
}  // namespace

Status GetCudnnHandle(int device, cudaStream_t stream, CudnnHandle** out) {
  return GetHandle(device, stream, 0, out);
}

Status GetBenchmarkHandle(int device, cudaStream_t stream, CudnnHandle** out) {
  return GetHandle(device, stream, 1, out);
}

Status GetPlanBuildHandles(int device, cudaStream_t stream, int count,
                           std::vector<CudnnHandle*>* out) {
  out->clear();
  for (int i = 0; i < count; ++i) {
    CudnnHandle* h = nullptr;
    UCUDNN_RETURN_IF_ERROR(GetHandle(device, stream, 2 + i, &h));
    out->push_back(h);
  }
  return Status();
}


}  // namespace ucudnn

#endif  // GOOGLE_CUDA
