// Batch-norm finalize: from the per-channel sums a statistics epilogue wrote
// (Epilogue::kStatistics) to the scale and bias that the next convolution's
// prologue applies (Prologue::kScaleBias*), and the moving statistics updated
// as Keras 3's BatchNormalization updates them in training. Pure C++, no
// TensorFlow, no GPU: the reference of the GPU's finalize.
#ifndef TF_UCUDNN_ENGINE_BATCH_NORM_H_
#define TF_UCUDNN_ENGINE_BATCH_NORM_H_

#include <cstdint>
#include <vector>

#include "cc/engine/status.h"

namespace ucudnn {

// What a statistics epilogue gives for one mini-batch, per channel C of the
// normalized tensor (the convolution's out_channels): float32 as the
// epilogue writes them.
struct BatchNormStatistics {
  std::vector<float> sum;             // [C]: sum of x over N, H and W
  std::vector<float> sum_of_squares;  // [C]: sum of x^2 over N, H and W
  int64_t count = 0;                  // elements per channel: N * H * W
};

// The layer's variables and arguments, in Keras' names. `gamma` is empty
// for scale=False (gamma = 1), `beta` empty for center=False (beta = 0).
struct BatchNormLayer {
  std::vector<float> gamma;            // [C] or empty
  std::vector<float> beta;             // [C] or empty
  std::vector<float> moving_mean;      // [C]
  std::vector<float> moving_variance;  // [C]
  double momentum = 0.99;              // Keras' default
  double epsilon = 1e-3;               // Keras' default
};

// One training step's batch normalization, per channel [C], float32.
struct BatchNormFinalized {
  std::vector<float> mean;      // the batch mean, sum / count
  std::vector<float> variance;  // the batch variance, biased (divisor count)
  // y = x * scale + bias is BatchNormalization's output: what the next
  // convolution's prologue applies.
  std::vector<float> scale;
  std::vector<float> bias;
  // The layer's moving statistics after this step.
  std::vector<float> moving_mean;
  std::vector<float> moving_variance;
};

// scale = gamma / sqrt(variance + epsilon), bias = beta - mean * scale for
// every channel, computed in double and rounded to float32 once; gamma or
// beta empty: 1 or 0. tf.nn.batch_normalization's algebra (x * inv +
// (beta - mean * inv), inv = rsqrt(variance + epsilon) * gamma), which Keras
// 3's BatchNormalization calls through ops.batch_normalization. With the
// moving statistics, this is inference's folded batch norm.
// Requires: mean and variance of one size C, gamma and beta empty or of C.
void BatchNormScaleBias(const std::vector<float>& mean, const std::vector<float>& variance,
                        const std::vector<float>& gamma, const std::vector<float>& beta,
                        double epsilon, std::vector<float>* scale, std::vector<float>* bias);

// One training step's finalize, per channel, in double, rounded to float32:
//   mean = sum / count
//   variance = max(sum_of_squares / count - mean^2, 0)  (biased)
//   scale, bias = BatchNormScaleBias(mean, variance, gamma, beta, epsilon)
//   moving_mean = moving_mean * momentum + mean * (1 - momentum)
//   moving_variance = moving_variance * momentum + variance * (1 - momentum)
// Sources (Keras 3.15, keras/src/): layers/normalization/
// batch_normalization.py, BatchNormalization.call (training, renorm off)
// assigns the two moving averages above from ops.moments(inputs), and
// backend/tensorflow/nn.py's moments is tf.nn.moments, whose variance is the
// mean of squared deviations (divisor count, no Bessel correction): the
// moving variance takes the biased batch variance. The variance from the
// sums is the formula of that file's synchronized moments
// (_compute_moments_sync: max(E[x^2] - E[x]^2, 0)); it matches the
// two-pass variance up to float32 rounding of the sums, whose relative error
// on the variance grows as mean^2 / variance.
// Returns: InvalidArgument for count <= 0, or sums, moving statistics,
// gamma or beta of sizes that differ.
Status FinalizeBatchNorm(const BatchNormStatistics& statistics, const BatchNormLayer& layer,
                         BatchNormFinalized* out);

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_BATCH_NORM_H_
