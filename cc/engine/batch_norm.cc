#include "cc/engine/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ucudnn {

void BatchNormScaleBias(const std::vector<float>& mean, const std::vector<float>& variance,
                        const std::vector<float>& gamma, const std::vector<float>& beta,
                        double epsilon, std::vector<float>* scale, std::vector<float>* bias) {
  const size_t channels = mean.size();
  scale->resize(channels);
  bias->resize(channels);
  for (size_t c = 0; c < channels; ++c) {
    const double g = gamma.empty() ? 1.0 : gamma[c];
    const double b = beta.empty() ? 0.0 : beta[c];
    const double s = g / std::sqrt(static_cast<double>(variance[c]) + epsilon);
    (*scale)[c] = static_cast<float>(s);
    (*bias)[c] = static_cast<float>(b - mean[c] * s);
  }
}

Status FinalizeBatchNorm(const BatchNormStatistics& st, const BatchNormLayer& layer,
                         BatchNormFinalized* out) {
  const size_t channels = st.sum.size();
  if (st.count <= 0) {
    return Status::InvalidArgument("batch-norm finalize needs a positive count of elements "
                                   "per channel (N * H * W), not " +
                                   std::to_string(st.count));
  }
  const auto sized = [channels](const std::vector<float>& v, bool may_be_empty) {
    return v.size() == channels || (may_be_empty && v.empty());
  };
  if (!sized(st.sum_of_squares, false) || !sized(layer.moving_mean, false) ||
      !sized(layer.moving_variance, false) || !sized(layer.gamma, true) ||
      !sized(layer.beta, true)) {
    return Status::InvalidArgument(
        "batch-norm finalize needs sum, sum_of_squares, moving_mean and moving_variance of " +
        std::to_string(channels) + " channels each, and gamma and beta of as many or empty; got " +
        std::to_string(st.sum_of_squares.size()) + ", " +
        std::to_string(layer.moving_mean.size()) + ", " +
        std::to_string(layer.moving_variance.size()) + ", " + std::to_string(layer.gamma.size()) +
        ", " + std::to_string(layer.beta.size()));
  }
  out->mean.resize(channels);
  out->variance.resize(channels);
  out->moving_mean.resize(channels);
  out->moving_variance.resize(channels);
  const double count = static_cast<double>(st.count), m = layer.momentum;
  for (size_t c = 0; c < channels; ++c) {
    const double mean = st.sum[c] / count;
    const double variance = std::max(st.sum_of_squares[c] / count - mean * mean, 0.0);
    out->mean[c] = static_cast<float>(mean);
    out->variance[c] = static_cast<float>(variance);
    out->moving_mean[c] = static_cast<float>(layer.moving_mean[c] * m + mean * (1.0 - m));
    out->moving_variance[c] =
        static_cast<float>(layer.moving_variance[c] * m + variance * (1.0 - m));
  }
  BatchNormScaleBias(out->mean, out->variance, layer.gamma, layer.beta, layer.epsilon,
                     &out->scale, &out->bias);
  return Status();
}

}  // namespace ucudnn
