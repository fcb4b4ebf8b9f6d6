"""Batch normalization around a tf_ucudnn convolution: its training step from
the convolution output's per-channel sums (``conv2d_with_statistics``), and
its inference folded into the convolution's filter and bias.

The algebra is Keras 3's ``BatchNormalization`` (renorm off): in training the
batch mean and biased variance normalize the output and update the moving
statistics with ``momentum``; in inference the moving statistics do. Both
compute in float32 and cast the result to the layer's compute dtype, as
Keras does. The C++ reference of the same finalize is
``cc/engine/batch_norm.h`` (tested without TensorFlow).
"""

import tensorflow as tf


def channel_shape(data_format):
    """The shape that broadcasts a ``[channels]`` vector over a 4-D tensor's
    channel dimension: ``[1, 1, 1, -1]`` for NHWC, ``[1, -1, 1, 1]`` for NCHW."""
    return [1, 1, 1, -1] if data_format == "NHWC" else [1, -1, 1, 1]


def reduction_axes(data_format):
    """The axes a per-channel reduction of a 4-D tensor sums over: all but
    the channels' (``[0, 1, 2]`` for NHWC, ``[0, 2, 3]`` for NCHW)."""
    return [0, 1, 2] if data_format == "NHWC" else [0, 2, 3]


def sums(y, data_format):
    """The per-channel sum and sum of squares of ``y`` (4-D, NHWC or NCHW),
    float32 ``[channels]`` each, as ``conv2d_with_statistics`` returns them:
    ``y`` as stored, cast to float32, then reduced."""
    y32 = tf.cast(y, tf.float32)
    axes = reduction_axes(data_format)
    return tf.reduce_sum(y32, axes), tf.reduce_sum(y32 * y32, axes)


def moments_from_sums(total, squares, count, bias=None):
    """The batch mean and biased variance, per channel, from a convolution
    output's sums.

    Args:
      total: float32 ``[K]``, the sum of the output over the batch and pixels.
      squares: float32 ``[K]``, the sum of its squares.
      count: elements per channel (batch * out_height * out_width), a scalar
        tensor or int.
      bias: None, or float32 ``[K]`` added to the output before the
        normalization (a Conv2D's ``use_bias``): the sums are shifted to
        those of the output plus the bias.

    Returns:
      ``(mean, variance)``, float32 ``[K]`` each: ``sum / count`` and
      ``max(sum_of_squares / count - mean**2, 0)`` (the divisor is count, as
      ``tf.nn.moments``; the one-pass formula is that of Keras' synchronized
      moments, equal to the two-pass variance up to float32 rounding of the
      sums, whose relative error on the variance grows as mean**2 /
      variance).
    """
    count = tf.cast(count, tf.float32)
    if bias is not None:
        squares = squares + 2.0 * bias * total + bias * bias * count
        total = total + bias * count
    mean = total / count
    variance = tf.maximum(squares / count - tf.square(mean), 0.0)
    return mean, variance


def scale_and_offset(mean, variance, gamma, beta, epsilon):
    """``y * scale + offset`` is the batch normalization of ``y``: ``scale =
    gamma * rsqrt(variance + epsilon)``, ``offset = beta - mean * scale``
    (``tf.nn.batch_normalization``'s algebra), float32 ``[K]``. ``gamma`` or
    ``beta`` None: 1 or 0 (Keras' ``scale=False``, ``center=False``)."""
    scale = tf.math.rsqrt(variance + epsilon)
    if gamma is not None:
        scale = scale * gamma
    offset = -mean * scale
    if beta is not None:
        offset = offset + beta
    return scale, offset


def update_moving_statistics(layer, mean, variance):
    """Keras' update of a ``BatchNormalization`` layer's moving statistics:
    ``moving = moving * momentum + batch * (1 - momentum)``."""
    m = layer.momentum
    layer.moving_mean.assign(tf.cast(layer.moving_mean, tf.float32) * m + mean * (1.0 - m))
    layer.moving_variance.assign(
        tf.cast(layer.moving_variance, tf.float32) * m + variance * (1.0 - m))


def gamma_beta(layer):
    """A ``BatchNormalization`` layer's gamma and beta as float32, or None
    where it has none (``scale=False``, ``center=False``)."""
    gamma = tf.cast(layer.gamma, tf.float32) if layer.scale else None
    beta = tf.cast(layer.beta, tf.float32) if layer.center else None
    return gamma, beta
