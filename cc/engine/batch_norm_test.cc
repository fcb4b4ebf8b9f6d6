// Checks of batch-norm finalize (batch_norm.h) with no TensorFlow and no GPU:
// against values Keras printed, against Keras' formulas on random data, and
// its refusals.
//   bazel build //cc/engine:batch_norm_test && ./bazel-bin/cc/engine/batch_norm_test
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cc/engine/batch_norm.h"
#include "cc/engine/test_checks.h"

using ucudnn_test::Check;

namespace {

bool Near(double got, double want, double rel) {
  return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
}

bool AllNear(const std::vector<float>& got, const std::vector<double>& want, double rel) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!Near(got[i], want[i], rel)) return false;
  }
  return true;
}

}  // namespace

int main() {
  using namespace ucudnn;
  // Two channels of a [N=2, H=2, W=1, C=2] tensor: channel 0 holds 1, 2, 3,
  // 4 and channel 1 holds 0.5, -1, 2, 6.5. The expected values are what
  // Keras 3.15.1's BatchNormalization(momentum=0.9, epsilon=1e-3) gave in
  // training with gamma = (2, 0.5), beta = (0.5, -1), moving_mean = (1, 0),
  // moving_variance = (2, 1): its moving statistics after the call, and the
  // scale and bias read off its output (y = x * scale + bias).
  BatchNormStatistics st;
  st.sum = {10.0f, 8.0f};
  st.sum_of_squares = {30.0f, 47.5f};
  st.count = 4;
  BatchNormLayer layer;
  layer.gamma = {2.0f, 0.5f};
  layer.beta = {0.5f, -1.0f};
  layer.moving_mean = {1.0f, 0.0f};
  layer.moving_variance = {2.0f, 1.0f};
  layer.momentum = 0.9;
  layer.epsilon = 1e-3;
  BatchNormFinalized f;
  Check(FinalizeBatchNorm(st, layer, &f).ok(), "finalize runs");
  Check(AllNear(f.mean, {2.5, 2.0}, 1e-7) && AllNear(f.variance, {1.25, 7.875}, 1e-7),
        "batch mean and biased variance by hand: (10/4, 30/4 - 2.5^2), (8/4, 47.5/4 - 2^2)");
  Check(AllNear(f.moving_mean, {1.15, 0.2}, 1e-6) &&
            AllNear(f.moving_variance, {1.925, 1.6875}, 1e-6),
        "moving statistics as Keras updated them (biased batch variance)");
  Check(AllNear(f.scale, {1.7881391, 0.17816281}, 1e-6) &&
            AllNear(f.bias, {-3.9703476, -1.3563256}, 1e-6),
        "scale and bias as Keras' output gives them");
  // Keras' output of channel 0 for x = 1..4 is x * scale + bias.
  const double keras_y0[] = {-2.1822085, -0.39406943, 1.3940697, 3.182209};
  bool outputs = true;
  for (int i = 0; i < 4; ++i) outputs &= Near((i + 1) * f.scale[0] + f.bias[0], keras_y0[i], 1e-6);
  Check(outputs, "x * scale + bias is Keras' output");

  // center=False, scale=False: gamma = 1, beta = 0.
  BatchNormLayer plain = layer;
  plain.gamma.clear();
  plain.beta.clear();
  Check(FinalizeBatchNorm(st, plain, &f).ok() &&
            AllNear(f.scale, {1 / std::sqrt(1.251), 1 / std::sqrt(7.876)}, 1e-6) &&
            AllNear(f.bias, {-2.5 / std::sqrt(1.251), -2.0 / std::sqrt(7.876)}, 1e-6),
        "scale=False and center=False: scale = 1/sqrt(var + eps), bias = -mean * scale");

  // Random data against Keras' formulas, computed here the way Keras does:
  // tf.nn.moments' two-pass mean and variance, then the moving averages and
  // tf.nn.batch_normalization's algebra.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int channels = 1 + trial % 5, count = 3 + trial * 7;
    std::normal_distribution<float> value(trial % 3 == 0 ? 3.0f : -0.5f, 0.5f + trial % 4);
    std::uniform_real_distribution<float> u(0.5f, 1.5f);
    std::vector<std::vector<float>> x(channels, std::vector<float>(count));
    BatchNormStatistics s;
    BatchNormLayer l;
    l.momentum = 0.99;
    l.epsilon = 1e-5;
    for (int c = 0; c < channels; ++c) {
      double sum = 0, sq = 0;
      for (float& v : x[c]) {
        v = value(rng);
        sum += v;
        sq += static_cast<double>(v) * v;
      }
      s.sum.push_back(static_cast<float>(sum));
      s.sum_of_squares.push_back(static_cast<float>(sq));
      l.gamma.push_back(u(rng));
      l.beta.push_back(u(rng) - 1.0f);
      l.moving_mean.push_back(u(rng) - 1.0f);
      l.moving_variance.push_back(u(rng));
    }
    s.count = count;
    BatchNormFinalized r;
    bool ok = FinalizeBatchNorm(s, l, &r).ok();
    for (int c = 0; c < channels && ok; ++c) {
      double mean = 0, var = 0;
      for (float v : x[c]) mean += v;
      mean /= count;
      for (float v : x[c]) var += (v - mean) * (v - mean);
      var /= count;
      const double inv = l.gamma[c] / std::sqrt(var + l.epsilon);
      ok = Near(r.mean[c], mean, 1e-5) && Near(r.variance[c], var, 1e-5) &&
           Near(r.moving_mean[c], l.moving_mean[c] * 0.99 + mean * 0.01, 1e-5) &&
           Near(r.moving_variance[c], l.moving_variance[c] * 0.99 + var * 0.01, 1e-5) &&
           Near(r.scale[c], inv, 1e-5) && Near(r.bias[c], l.beta[c] - mean * inv, 1e-5);
    }
    Check(ok, "finalize matches Keras' two-pass moments and moving averages on random data");
  }

  // Refusals.
  BatchNormStatistics none = st;
  none.count = 0;
  Status status = FinalizeBatchNorm(none, layer, &f);
  Check(!status.ok() && status.message() ==
                            "batch-norm finalize needs a positive count of elements per "
                            "channel (N * H * W), not 0",
        "a count of 0 is refused");
  BatchNormLayer short_gamma = layer;
  short_gamma.gamma = {1.0f};
  status = FinalizeBatchNorm(st, short_gamma, &f);
  Check(!status.ok() && status.code() == Status::Code::kInvalidArgument &&
            status.message().find("of 2 channels each") != std::string::npos,
        "a gamma of another size is refused, naming the channels");
  return ucudnn_test::Summary("batch_norm_test");
}
