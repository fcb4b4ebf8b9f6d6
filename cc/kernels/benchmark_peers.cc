#if GOOGLE_CUDA

#include "cc/kernels/benchmark_peers.h"

#include <cstdlib>
#include <mutex>
#include <string>

#include "cc/kernels/device_memory.h"
#include "cc/engine/benchmark_devices.h"
#include "cc/engine/knobs.h"
#include "tensorflow/core/common_runtime/device.h"
#include "tensorflow/core/common_runtime/device_mgr.h"
#include "tensorflow/core/framework/function.h"
#include "xla/stream_executor/stream.h"
#include "xla/stream_executor/stream_executor.h"

namespace tensorflow {
namespace ucudnn_tf {

// Memory of a peer GPU from TF's allocator, given back when the peers go
// (the engine has synchronised the peer's stream by then).
class BenchmarkPeers::Scratch : public ucudnn::ScratchAllocator {
 public:
  explicit Scratch(Allocator* allocator) : blocks_(allocator) {}
  void* Allocate(int64_t bytes) override { return blocks_.Allocate(bytes); }

 private:
  HeldBlocks blocks_;
};

BenchmarkPeers::~BenchmarkPeers() = default;

namespace {

std::string GpuModel(int ordinal) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) return "an unknown GPU";
  return prop.name;
}

// The GPU's compute stream in TF, or nullptr.
se::Stream* ComputeStream(Device* device) {
  const DeviceBase::AcceleratorDeviceInfo* info = device->tensorflow_accelerator_device_info();
  return info == nullptr ? nullptr : info->stream;
}

}  // namespace

absl::Status BenchmarkPeers::Make(OpKernelContext* ctx, int own_device,
                                  std::unique_ptr<BenchmarkPeers>* out) {
  static bool all = false;
  static std::vector<int> ids;
  static std::string error;
  static bool parsed = [] {
    return ucudnn::ParseBenchmarkDevices(ucudnn::BenchmarkDevicesSetting(), &all, &ids, &error);
  }();
  *out = std::make_unique<BenchmarkPeers>();
  if (!parsed) return errors::InvalidArgument(error);
  if (!all && ids.empty()) return absl::OkStatus();

  FunctionLibraryRuntime* flr = ctx->function_library();
  const DeviceMgr* mgr = flr == nullptr ? nullptr : flr->device_mgr();
  if (mgr == nullptr) {
    static std::once_flag once;
    std::call_once(once, [] {
      LOG(WARNING) << "tf_ucudnn: UCUDNN_BENCHMARK_DEVICES is set, but this op has no "
                      "device manager to find the other GPUs; benchmarking on its own GPU";
    });
    return absl::OkStatus();
  }
  const DeviceNameUtils::ParsedName& own = ctx->device()->parsed_name();
  std::vector<Device*> gpus;  // this task's GPUs
  std::string available;
  for (Device* d : mgr->ListDevices()) {
    const DeviceNameUtils::ParsedName& n = d->parsed_name();
    if (d->device_type() != DEVICE_GPU || n.job != own.job || n.replica != own.replica ||
        n.task != own.task) {
      continue;
    }
    gpus.push_back(d);
    available += (available.empty() ? "" : ", ") + std::to_string(n.id);
  }
  std::vector<Device*> chosen;
  if (all) {
    chosen = gpus;
  } else {
    for (int id : ids) {
      Device* found = nullptr;
      for (Device* d : gpus) {
        if (d->parsed_name().id == id) found = d;
      }
      if (found == nullptr) {
        return errors::InvalidArgument("UCUDNN_BENCHMARK_DEVICES names GPU ", id,
                                       ", but this process has GPU ids [", available,
                                       "]; use those ids or 'all'");
      }
      chosen.push_back(found);
    }
  }
  const std::string own_model = GpuModel(own_device);
  for (Device* d : chosen) {
    se::Stream* stream = ComputeStream(d);
    if (stream == nullptr) continue;
    const int ordinal = stream->parent()->device_ordinal();
    if (ordinal == own_device) continue;
    const std::string model = GpuModel(ordinal);
    if (model != own_model) {
      return errors::InvalidArgument(
          "UCUDNN_BENCHMARK_DEVICES mixes GPU models: ", ctx->device()->name(), " is ", own_model,
          " but ", d->name(), " is ", model,
          "; benchmark times of different models cannot be compared, so list GPUs of one model");
    }
    auto scratch = std::make_unique<Scratch>(d->GetAllocator(AllocatorAttributes()));
    ucudnn::BenchmarkPeer peer;
    peer.device = ordinal;
    peer.stream = static_cast<cudaStream_t>(stream->platform_specific_handle().stream);
    peer.scratch = scratch.get();
    (*out)->scratch_.push_back(std::move(scratch));
    (*out)->peers_.push_back(peer);
  }
  return absl::OkStatus();
}

}  // namespace ucudnn_tf
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
