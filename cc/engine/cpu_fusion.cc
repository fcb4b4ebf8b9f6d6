#include "cc/engine/cpu_fusion.h"

#include "Eigen/Core"

namespace ucudnn {
namespace {

// The channel of element i of one sample of `channels` channels and `pixels`
// pixels: NHWC is channel-minor, NCHW a plane of pixels per channel.
inline int64_t ChannelOf(Layout layout, int64_t i, int64_t channels, int64_t pixels) {
  return layout == Layout::kNHWC ? i % channels : i / pixels;
}

}  // namespace

template <typename T>
void CpuInputPrologue(const ConvParams& p, int64_t size, const T* input, const float* scale,
                      const float* bias, T* out) {
  const int64_t c = p.in_channels, pixels = p.in_height * p.in_width;
  const int64_t elements = size * p.input_sample_size();
  for (int64_t i = 0; i < elements; ++i) {
    const int64_t ch = ChannelOf(p.layout, i % (c * pixels), c, pixels);
    const float y = static_cast<float>(input[i]) * scale[ch] + bias[ch];
    out[i] = static_cast<T>(p.fusion.input_relu() && y < 0.0f ? 0.0f : y);  // NaN stays NaN
  }
}

template <typename T>
void CpuBiasEpilogue(const ConvParams& p, int64_t size, const T* bias, T* output) {
  const int64_t k = p.out_channels, pixels = p.out_height * p.out_width;
  for (int64_t n = 0; n < size; ++n) {
    T* sample = output + n * p.output_sample_size();
    for (int64_t i = 0; i < pixels * k; ++i) {
      const int64_t ch = ChannelOf(p.layout, i, k, pixels);
      const float sum = static_cast<float>(sample[i]) + static_cast<float>(bias[ch]);
      sample[i] = static_cast<T>(p.fusion.relu() && sum < 0.0f ? 0.0f : sum);  // NaN stays NaN
    }
  }
}

template <typename T>
void CpuAddStatistics(const ConvParams& p, int64_t size, const T* output, double* sum,
                      double* sum_of_squares) {
  const int64_t k = p.out_channels, pixels = p.out_height * p.out_width;
  for (int64_t n = 0; n < size; ++n) {
    const T* sample = output + n * p.output_sample_size();
    for (int64_t i = 0; i < pixels * k; ++i) {
      const double y = static_cast<double>(static_cast<float>(sample[i]));
      const int64_t ch = ChannelOf(p.layout, i, k, pixels);
      sum[ch] += y;
      sum_of_squares[ch] += y * y;
    }
  }
}

#define UCUDNN_INSTANTIATE_CPU_FUSION(T)                                                   \
  template void CpuInputPrologue<T>(const ConvParams&, int64_t, const T*, const float*,    \
                                    const float*, T*);                                     \
  template void CpuBiasEpilogue<T>(const ConvParams&, int64_t, const T*, T*);              \
  template void CpuAddStatistics<T>(const ConvParams&, int64_t, const T*, double*, double*);

UCUDNN_INSTANTIATE_CPU_FUSION(float)
UCUDNN_INSTANTIATE_CPU_FUSION(Eigen::half)
UCUDNN_INSTANTIATE_CPU_FUSION(Eigen::bfloat16)

}  // namespace ucudnn
