"""Other formulations of the max-pool that ``tf_ucudnn.max_pool`` runs under
XLA, for ``benchmarks/xla_profile.py``: put this directory first on the
worker's ``PYTHONPATH`` and name a variant, e.g.

    python3 benchmarks/xla_profile.py resnet50 256 mixed_float16 \\
        "ucudnn-bnstats-xla,ucudnn-bnstats-xla@PYTHONPATH=$PWD/benchmarks/max_pool:$PWD:$PYTHONPATH@MAX_POOL_VARIANT=reduce-window"

Python imports this module as the worker starts. With ``MAX_POOL_VARIANT``
set, it replaces a function of ``tf_ucudnn.max_pool`` for every pool
``rewrite_model`` routes there; every variant gives the shipped forward and
gradient bit for bit (the contributions of overlapping windows added in the
same order), but where a window holds a NaN (the maximum's compare
order). Without the variable, importing this module changes nothing.

Variants:
  shipped: not patched.
  shared-shifts: the gradient as one select per window shift for all
    residues at once (:func:`spread_shared_shifts`) instead of one select
    per residue and shift, interleaved by a masked select. Measured on an
    H200 (ResNet-50, N = 256, ``mixed_float16``): XLA fused the whole sum
    into the stem's ReLU gradient, 1.13 ms at 0.86 TB/s against 0.79 ms for
    the two fusions of the shipped form.
  reduce-window: the forward as ``tf.nn.max_pool2d`` (XLA's reduce-window)
    and the first-max index from ``x`` in the gradient
    (:func:`pool_by_reduce_window`), not both from the window's
    shared strided views. Measured on an H200 (the same step): XLA fused
    them into one pass, 0.34–0.37 ms at 1.5–1.6 TB/s, against 0.29 ms at
    1.9 TB/s for the views.
"""

import os

VARIANTS = ("shipped", "shared-shifts", "reduce-window")
VARIANT = os.environ.get("MAX_POOL_VARIANT", "shipped")
if VARIANT not in VARIANTS:
    raise ValueError(f"MAX_POOL_VARIANT must be one of {', '.join(VARIANTS)}, got {VARIANT!r}")


def _window_element(shift_h, shift_w, pool_size, strides, index_dtype):
    """``[1, 1, sh, 1, sw, 1]``: per residue ``(rh, rw)`` the window element
    ``(rh + sh * th) * kw + rw + sw * tw`` it is in the window ``(th, tw)``
    windows before it, or -1 where that window does not reach it."""
    import numpy as np

    (kh, kw), (sh, sw) = pool_size, strides
    element = np.full([1, 1, sh, 1, sw, 1], -1, index_dtype.as_numpy_dtype)
    for rh in range(sh):
        for rw in range(sw):
            i, j = rh + sh * shift_h, rw + sw * shift_w
            if i < kh and j < kw:
                element[0, 0, rh, 0, rw, 0] = i * kw + j
    return element


def spread_shared_shifts(index, dy, hw, pool_size, strides, padding="VALID"):
    """``tf_ucudnn.max_pool.spread_to_first_max``'s tensor (same arguments)
    as a sum over the ``ceil(kh / sh) * ceil(kw / sw)`` window shifts, each
    term one select over ``[N, Hp / sh, sh, Wp / sw, sw, C]``: the shifted
    ``index`` and ``dy`` broadcast over the residues, compared with the
    element each residue takes at that shift. Earliest window first, as
    the shipped form adds them."""
    import tensorflow as tf

    from tf_ucudnn import max_pool

    (kh, kw), (sh, sw) = pool_size, strides
    h, w = hw
    c = dy.shape[3]
    (top, bottom), (left, right) = max_pool._padding(h, w, pool_size, strides, padding)
    qh, qw = -(-(top + h + bottom) // sh), -(-(left + w + right) // sw)
    per_window = tf.stack([-1, qh, 1, qw, 1, c])
    zero = tf.zeros([], dy.dtype)
    dx6 = None
    for th in reversed(range(max_pool._windows_at(0, kh, sh))):
        for tw in reversed(range(max_pool._windows_at(0, kw, sw))):
            element = _window_element(th, tw, pool_size, strides, index.dtype)
            shifted_index = tf.reshape(max_pool._shifted(max_pool._shifted(index, th, qh, 1),
                                                         tw, qw, 2), per_window)
            shifted_dy = tf.reshape(max_pool._shifted(max_pool._shifted(dy, th, qh, 1),
                                                      tw, qw, 2), per_window)
            term = tf.where(tf.equal(shifted_index, tf.constant(element)), shifted_dy, zero)
            dx6 = term if dx6 is None else dx6 + term
    dx = tf.reshape(dx6, tf.stack([-1, qh * sh, qw * sw, c]))
    return dx[:, top:top + h, left:left + w, :]


def pool_by_reduce_window(x, pool_size, strides, padding="VALID"):
    """In place of ``tf_ucudnn.max_pool.pool_and_first_max_index``:
    ``(tf.nn.max_pool2d(x, ...), None)``, so that ``max_pool2d``'s forward
    is XLA's reduce-window and its gradient computes the first-max index
    from ``x`` (``first_max_index``)."""
    import tensorflow as tf

    return tf.nn.max_pool2d(x, pool_size, strides, padding), None


def _patch(variant):
    from tf_ucudnn import max_pool

    if variant == "shared-shifts":
        max_pool.spread_to_first_max = spread_shared_shifts
    elif variant == "reduce-window":
        max_pool.pool_and_first_max_index = pool_by_reduce_window


if VARIANT != "shipped":
    _patch(VARIANT)
