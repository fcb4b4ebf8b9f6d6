"""Another formulation of a max-pool's gradient, imported as a model
worker starts where this directory is first on its ``PYTHONPATH`` (Python
imports ``sitecustomize`` at start-up), e.g. by ``benchmarks/xla_profile.py``:

    python3 benchmarks/xla_profile.py resnet50 256 mixed_float16 \
        "ucudnn-bnstats-xla,ucudnn-bnstats-xla@PYTHONPATH=$PWD/benchmarks/max_pool_gradient:$PYTHONPATH@MAX_POOL_GRADIENT=first-max-index"

Under XLA, TF's ``MaxPoolGrad`` becomes a select-and-scatter: for each
window, the first of its largest inputs (row-major order) receives the
window's gradient, added up where windows overlap. On an H200 ResNet-50's
one max-pool (3x3, stride 2, on 112x112x64 padded to 114x114) takes 1.3 ms
of its step so (``docs/benchmarks.md`` section 12). With
``MAX_POOL_GRADIENT=first-max-index`` every
``keras.layers.MaxPooling2D`` with ``padding="valid"`` and channels last
returns ``tf.nn.max_pool2d`` whose gradient is :func:`first_max_gradient`:
elementwise selects and pads, the same tensor (the same window element
chosen, the same additions in the same order). Without the variable,
importing this module changes nothing.

Variants:
  select-and-scatter: not patched (TF's ``MaxPoolGrad``).
  first-max-index: :func:`first_max_gradient`.
"""

import os

VARIANTS = ("select-and-scatter", "first-max-index")
VARIANT = os.environ.get("MAX_POOL_GRADIENT", "select-and-scatter")
if VARIANT not in VARIANTS:
    raise ValueError(f"MAX_POOL_GRADIENT must be one of {', '.join(VARIANTS)}, got {VARIANT!r}")


def _spread(t, offset, stride, size, axis):
    """``t`` along ``axis`` (of length n) placed at ``offset, offset + stride,
    ...`` of a zero tensor of length ``size`` there (XLA's interior padding,
    from TF's pad and reshape)."""
    import tensorflow as tf

    n = t.shape[axis]
    if stride > 1:  # n -> n * stride: each element followed by stride - 1 zeros
        t = tf.expand_dims(t, axis + 1)
        pads = [[0, 0]] * len(t.shape)
        pads[axis + 1] = [0, stride - 1]
        t = tf.pad(t, pads)
        shape = t.shape.as_list()
        t = tf.reshape(t, [-1 if s is None else s for s in
                           shape[:axis] + [n * stride] + shape[axis + 2:]])
    span = (n - 1) * stride + 1
    t = t[(slice(None),) * axis + (slice(0, span),)]
    pads = [[0, 0]] * len(t.shape)
    pads[axis] = [offset, size - offset - span]
    return tf.pad(t, pads)


def first_max_gradient(x, y, dy, pool_size, strides):
    """The gradient of ``y = max_pool2d(x, pool_size, strides, "VALID")``
    (NHWC, ``x`` ``[N, H, W, C]``, ``y`` and ``dy`` ``[N, Ho, Wo, C]``) to
    ``x``, as select-and-scatter computes it: each window's gradient to the
    first (row-major) of its elements equal to its maximum ``y``; where
    windows overlap, the contributions added in the windows' row-major order.

    The index of that element is one elementwise pass over the ``kh * kw``
    strided views of ``x`` (int8, kept for the scatter); each view's share
    ``where(index == k, dy, 0)`` is spread to its positions with pads, and the
    shares are summed from the window's last element to its first, which for
    every input position is the order of the windows that cover it."""
    import tensorflow as tf

    (kh, kw), (sh, sw) = pool_size, strides
    _, h, w, _ = x.shape.as_list()
    ho, wo = y.shape.as_list()[1:3]
    offsets = [(i, j) for i in range(kh) for j in range(kw)]
    index_dtype = tf.int8 if len(offsets) < 127 else tf.int32

    def view(i, j):
        return x[:, i:i + (ho - 1) * sh + 1:sh, j:j + (wo - 1) * sw + 1:sw, :]

    index = tf.fill(tf.shape(y), tf.constant(len(offsets), index_dtype))
    for k in reversed(range(len(offsets))):
        index = tf.where(tf.equal(view(*offsets[k]), y), tf.constant(k, index_dtype), index)
    dx = None
    zero = tf.zeros_like(dy)
    for k in reversed(range(len(offsets))):
        i, j = offsets[k]
        share = tf.where(tf.equal(index, tf.constant(k, index_dtype)), dy, zero)
        placed = _spread(_spread(share, i, sh, h, 1), j, sw, w, 2)
        dx = placed if dx is None else dx + placed
    return dx


def max_pool(x, pool_size, strides):
    """``tf.nn.max_pool2d(x, pool_size, strides, "VALID")`` (NHWC) with
    :func:`first_max_gradient` as its gradient."""
    import tensorflow as tf

    @tf.custom_gradient
    def pool(x):
        y = tf.nn.max_pool2d(x, pool_size, strides, "VALID")

        def grad(dy):
            return first_max_gradient(x, y, dy, pool_size, strides)
        return y, grad

    return pool(x)


def _patch():
    import keras

    stock_call = keras.layers.MaxPooling2D.call

    def call(self, inputs):
        if self.padding == "valid" and self.data_format == "channels_last" and all(
                d is not None for d in inputs.shape[1:]):
            return max_pool(inputs, tuple(self.pool_size), tuple(self.strides))
        return stock_call(self, inputs)

    keras.layers.MaxPooling2D.call = call


if VARIANT != "select-and-scatter":
    _patch()
