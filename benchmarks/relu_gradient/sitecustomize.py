"""Other formulations of the gradient of a ReLU after a batch norm, for
``benchmarks/relu_gradient_variants.py`` (which puts this directory first on
the worker's ``PYTHONPATH``, so that Python imports this module as the
worker starts).

With ``RELU_GRADIENT_VARIANT`` set, every ``keras.layers.Activation("relu")``
whose input is a batch-norm output recorded by ``tf_ucudnn.batch_norm_chain``
(``out = y * scale + offset``: the statistics path of
``rewrite_model(fuse_batch_norm=True)``) returns ``relu(out)`` whose gradient
goes to ``y``, ``scale`` and ``offset`` directly, computed as the variant
says; the ReLU's mask always comes from ``y``: ``cast(y * scale + offset) > 0``
(``float32-mask``: without the cast). Every variant computes the gradient
TF's own ops compute (``ReluGrad``, then the normalization's), up to float32
rounding of the sums' order (``stacked-sums``) and the mask of values that
round to zero in the compute dtype (``float32-mask``). Without the variable,
importing this module changes nothing.

Variants:
  autodiff: not patched (TF's ``ReluGrad`` on the ReLU's output).
  custom: ``dz = where(mask, dout, 0)``; sums of ``dz`` and ``dz * y``;
    ``dy = dz * scale``: TF's ops, spelled out.
  stacked-sums: as ``custom``, both sums one reduction of ``stack([dz, dz * y])``
    on a new last axis (the pair the reduction's minor kept dimension).
  stacked-sums-leading: the same, stacked on a new first axis (the pair its
    major kept dimension: two reductions of contiguous rows in one kernel).
  float32-mask: as ``custom``, the mask ``y * scale + offset > 0`` in float32.
  mask-per-consumer: no shared ``dz``: each of the two sums and ``dy``
    multiplies the incoming gradient by the mask itself.
  mask-per-consumer-barrier: as ``mask-per-consumer``, ``y``, ``scale`` and
    ``offset`` first passing an optimization barrier with the incoming
    gradient (``tf_ucudnn.gradients._when_gradient_arrives``), so that the
    mask cannot be computed in the forward pass.
  distinct-masks: as ``mask-per-consumer-barrier``, each consumer computing
    its own mask from an expression of its own (``y * scale + offset``,
    ``scale * y + offset``, ``offset + y * scale``: equal in IEEE
    arithmetic), so that no mask or normalized tensor is one instruction
    with several consumers after XLA's CSE.
"""

import os

VARIANTS = ("autodiff", "custom", "stacked-sums", "stacked-sums-leading", "float32-mask",
            "mask-per-consumer", "mask-per-consumer-barrier", "distinct-masks")
VARIANT = os.environ.get("RELU_GRADIENT_VARIANT", "autodiff")
if VARIANT not in VARIANTS:
    raise ValueError(f"RELU_GRADIENT_VARIANT must be one of {', '.join(VARIANTS)}, "
                     f"got {VARIANT!r}")
# ReLUs given the variant's gradient in this process (each trace counts).
patched = [0]


def _gradient(dout, y, scale, offset, variant):
    """``(dy, dscale, doffset)`` of ``relu(cast(y * scale + offset))`` for an
    incoming gradient ``dout``; ``scale``, ``offset`` float32 ``[C]``, ``y``
    NHWC or NCHW (the channels where ``scale``'s length is)."""
    import tensorflow as tf

    nhwc = y.shape[-1] == scale.shape[0]
    axes, shape = ([0, 1, 2], [1, 1, 1, -1]) if nhwc else ([0, 2, 3], [1, -1, 1, 1])
    if variant in ("mask-per-consumer-barrier", "distinct-masks"):
        from tf_ucudnn.gradients import _when_gradient_arrives
        y, scale, offset = _when_gradient_arrives([y, scale, offset], dout)
    scale_c, offset_c = tf.reshape(scale, shape), tf.reshape(offset, shape)
    y32 = tf.cast(y, tf.float32)
    z32 = y32 * scale_c + offset_c
    if variant.startswith("mask-per-consumer") or variant == "distinct-masks":
        def positive(z):  # the ReLU's mask, as float32
            return tf.cast(tf.cast(z, y.dtype) > 0, tf.float32)

        m = [positive(z32)] * 3
        if variant == "distinct-masks":
            m[1:] = [positive(scale_c * y32 + offset_c), positive(offset_c + y32 * scale_c)]
        d32 = tf.cast(dout, tf.float32)
        # Three different products, so that XLA's CSE leaves no shared one.
        return (tf.cast((d32 * scale_c) * m[0], y.dtype),
                tf.reduce_sum((d32 * y32) * m[1], axes), tf.reduce_sum(d32 * m[2], axes))
    mask = z32 > 0 if variant == "float32-mask" else tf.cast(z32, y.dtype) > 0
    dz32 = tf.cast(tf.where(mask, dout, tf.zeros_like(dout)), tf.float32)
    if variant == "stacked-sums":
        both = tf.reduce_sum(tf.stack([dz32, dz32 * y32], axis=-1), axes)
        doffset, dscale = both[:, 0], both[:, 1]
    elif variant == "stacked-sums-leading":
        both = tf.reduce_sum(tf.stack([dz32, dz32 * y32]), [a + 1 for a in axes])
        doffset, dscale = both[0], both[1]
    else:
        doffset, dscale = tf.reduce_sum(dz32, axes), tf.reduce_sum(dz32 * y32, axes)
    return tf.cast(dz32 * scale_c, y.dtype), dscale, doffset


def normalized_relu(out, y, scale, offset, variant=VARIANT):
    """``relu(out)`` where ``out = cast(y * scale + offset)``, its gradient
    to ``y``, ``scale`` and ``offset`` by ``variant`` (none to ``out``)."""
    import tensorflow as tf

    @tf.custom_gradient
    def relu(out, y, scale, offset):
        def grad(dout):
            return (None,) + _gradient(dout, y, scale, offset, variant)
        return tf.nn.relu(out), grad

    return relu(out, y, scale, offset)


def _patch():
    import keras
    import tensorflow as tf

    from tf_ucudnn import batch_norm_chain

    stock_call = keras.layers.Activation.call

    def call(self, inputs):
        if self.activation is keras.activations.relu and not tf.executing_eagerly():
            table = getattr(getattr(inputs, "graph", None), batch_norm_chain._ATTRIBUTE, None)
            found = (table or {}).get(inputs.name)
            if found is not None:
                patched[0] += 1
                return normalized_relu(inputs, *found)
        return stock_call(self, inputs)

    keras.layers.Activation.call = call


if VARIANT != "autodiff":
    _patch()
