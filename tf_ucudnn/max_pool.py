"""A max-pool whose gradient XLA compiles to elementwise passes.

Under XLA, TF's ``MaxPoolGrad`` becomes a select-and-scatter: for each
window, the first of its largest inputs (row-major order) receives the
window's gradient, added up where windows overlap. On an H200 XLA runs it as
one scatter kernel that is slow for what it moves: ResNet-50's one max-pool
(3x3, stride 2, 112x112x64) takes 1.3 ms of a 32 ms float16 step at N = 256,
VGG-16's five (2x2, stride 2) 1.6 ms of 31.5 ms in float32 at N = 64
(``docs/benchmarks.md``).

:func:`max_pool2d` pools as ``tf.nn.max_pool2d`` and has
:func:`first_max_gradient` as its gradient: the same tensor from
elementwise selects and shifts, which XLA fuses with the passes
around it (the same window element chosen, the contributions of overlapping
windows added in one fixed order), where the gradient is traced into a
function XLA compiles; elsewhere TF's ``MaxPoolGrad`` (cuDNN's pooling
backward on a GPU), as its selects would run as dozens of unfused ops there.
Under XLA its forward is elementwise too: the maximum of the window's
strided views, from which the first-max index comes in the same pass.
``tf_ucudnn.layers.MaxPooling2D`` pools through it, and ``rewrite_model``
and ``enable_rewrite`` (under XLA) run ``keras.layers.MaxPooling2D`` layers
so (``max_pool_gradient``).
"""

import keras
import numpy as np
import tensorflow as tf

from tf_ucudnn import gradients

# Max-pool gradients traced under XLA as first_max_gradient (rewrite_stats' max_pool).
first_max_gradients = [0]


def same_padding(size, window, stride):
    """TensorFlow's ``"SAME"`` padding of one spatial axis: ``(before,
    after)`` elements, the output ``ceil(size / stride)`` long, the odd
    element after."""
    total = max((-(-size // stride) - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def _padding(h, w, pool_size, strides, padding):
    """``((top, bottom), (left, right))``: the elements TF pads around an
    ``h x w`` input before pooling it."""
    if padding != "SAME":
        return (0, 0), (0, 0)
    return same_padding(h, pool_size[0], strides[0]), same_padding(w, pool_size[1], strides[1])


def _window_views(x, pool_size, strides, padding):
    """The ``kh * kw`` strided views of ``x`` (NHWC) that a max-pool's
    windows take their element ``k = i * kw + j`` from, each ``[N, Ho, Wo,
    C]``, in the order of ``k``; and per view an in-bounds mask ``[1, Ho,
    Wo, 1]`` (numpy bool), or None where no window takes that element from
    the padding.

    Under ``"SAME"`` the views run over ``x`` padded as TF pads it
    (:func:`same_padding`), with the lowest value of its dtype (-inf for
    floats), so that the padding never is a window's maximum."""
    (kh, kw), (sh, sw) = pool_size, strides
    h, w = x.shape[1], x.shape[2]
    (top, bottom), (left, right) = _padding(h, w, pool_size, strides, padding)
    ho, wo = (top + h + bottom - kh) // sh + 1, (left + w + right - kw) // sw + 1
    if top or bottom or left or right:
        lowest = -np.inf if x.dtype.is_floating else x.dtype.min
        x = tf.pad(x, [[0, 0], [top, bottom], [left, right], [0, 0]], constant_values=lowest)
    views, masks = [], []
    for i in range(kh):
        for j in range(kw):
            views.append(x[:, i:i + (ho - 1) * sh + 1:sh, j:j + (wo - 1) * sw + 1:sw, :])
            rows, cols = i + sh * np.arange(ho), j + sw * np.arange(wo)
            mask = (((rows >= top) & (rows < top + h))[None, :, None, None]
                    & ((cols >= left) & (cols < left + w))[None, None, :, None])
            masks.append(None if mask.all() else mask)
    return views, masks


def _first_match(views, masks, y):
    """Per window, the first ``k`` whose in-bounds view equals ``y``."""
    index_dtype = tf.int8 if len(views) < 127 else tf.int32
    index = tf.fill(tf.shape(y), tf.constant(len(views), index_dtype))
    for k in reversed(range(len(views))):
        match = tf.equal(views[k], y)
        if masks[k] is not None:
            match = tf.logical_and(match, tf.constant(masks[k]))
        index = tf.where(match, tf.constant(k, index_dtype), index)
    return index


def first_max_index(x, y, pool_size, strides, padding="VALID"):
    """For each window of ``y = tf.nn.max_pool2d(x, pool_size, strides,
    padding)``, the position ``k = i * kw + j`` within the window of its
    first (row-major) element equal to its maximum: the element TF's kernel
    and XLA's select-and-scatter send the window's gradient to.

    One pass over the ``kh * kw`` strided views of ``x``
    (:func:`_window_views`). Under ``"SAME"`` a constant in-bounds mask
    keeps a view's padded positions from matching: in TF they are no
    candidates, so a border window whose maximum is -inf takes its first
    input, not the padding before it.

    Args:
      x: the pool's input, ``[N, H, W, C]`` (NHWC), static H and W.
      y: its output, ``[N, Ho, Wo, C]``.
      pool_size: ``(kh, kw)``.
      strides: ``(sh, sw)``.
      padding: ``"VALID"`` or ``"SAME"``.

    Returns:
      ``[N, Ho, Wo, C]``, int8 for windows of up to 126 elements, else
      int32.
    """
    views, masks = _window_views(x, pool_size, strides, padding)
    return _first_match(views, masks, y)


def pool_and_first_max_index(x, pool_size, strides, padding="VALID"):
    """``(y, index)``: ``tf.nn.max_pool2d(x, pool_size, strides, padding)``
    as the maximum of the window's strided views (:func:`_window_views`),
    and :func:`first_max_index` from the same views.

    Under XLA both are elementwise work on shared slices, which XLA fuses
    into one pass over ``x``; its reduce-window and the index's selects
    fused ran at a third of the bandwidth bound on an H200 (ResNet-50's
    stem pool, N = 256, float16: 0.29 against 0.36 ms, ``docs/notebook.md``).
    The values of XLA's own max-pool (a maximum is exact; -inf for a window
    of -inf, where TF's CPU kernel gives the lowest finite value); a window
    holding a NaN gets what XLA's ``maximum`` gives in the views' order
    (XLA's reduce-window compares in its own).

    Args:
      x, pool_size, strides, padding: as for :func:`first_max_index`.

    Returns:
      ``y`` ``[N, Ho, Wo, C]`` as ``x``; ``index`` as :func:`first_max_index`.
    """
    views, masks = _window_views(x, pool_size, strides, padding)
    y = views[0]
    for view in views[1:]:
        y = tf.maximum(y, view)
    return y, _first_match(views, masks, y)


def _shifted(t, by, length, axis):
    """``t`` moved ``by`` positions up ``axis`` (zeros before), cut or
    zero-filled to ``length``."""
    pads = [[0, 0]] * len(t.shape)
    pads[axis] = [by, max(0, length - t.shape[axis] - by)]
    return tf.pad(t, pads)[(slice(None),) * axis + (slice(0, length),)]


def _windows_at(residue, window, stride):
    """How many windows hold an input position ``stride * q + residue``
    (away from the edges): the shifts ``t`` with ``residue + stride * t <
    window``."""
    return max(0, -(-(window - residue) // stride))


def spread_to_first_max(index, dy, hw, pool_size, strides, padding="VALID"):
    """Each window's gradient ``dy`` sent to its element ``index``
    (:func:`first_max_index`), added where windows overlap: the gradient to
    the pool's ``H x W`` input.

    An input row ``p = sh * q + r`` (in the padded input) lies in the
    windows ``q - t`` at their rows ``r + sh * t < kh``, so each residue
    ``r`` (and likewise each column residue) gathers its shares from
    ``dy`` shifted by ``t`` windows: ``ceil(kh / sh) * ceil(kw / sw)``
    selects at most per input element (4 for a 3x3 stride-2 window, 1 where
    windows tile), with no interior padding. The residues are interleaved
    elementwise: each broadcast over ``[N, Hp / sh, sh, Wp / sw, sw, C]``
    (``Hp x Wp``: the padded input, rounded up to whole strides) and chosen
    by a constant mask of its residue, then a reshape (a stack would
    lower to a concatenate and a transpose, through which XLA's GPU fusions
    reading the gradient ran at a third of their bandwidth). The
    contributions to one element are added in the windows' row-major order,
    as TF's CPU kernel adds them.

    Args:
      index: ``[N, Ho, Wo, C]`` from :func:`first_max_index`.
      dy: the gradient to the pool's output, ``[N, Ho, Wo, C]``.
      hw: the input's ``(H, W)``.
      pool_size, strides, padding: the pool's, as for
        :func:`first_max_index`.

    Returns:
      ``[N, H, W, C]``, ``dy``'s dtype.
    """
    (kh, kw), (sh, sw) = pool_size, strides
    h, w = hw
    c = dy.shape[3]
    (top, bottom), (left, right) = _padding(h, w, pool_size, strides, padding)
    qh, qw = -(-(top + h + bottom) // sh), -(-(left + w + right) // sw)
    zero = tf.zeros_like(dy)
    parts = {}
    for rh in range(sh):
        for rw in range(sw):
            part = None
            # The earliest window first: the largest shifts.
            for th in reversed(range(_windows_at(rh, kh, sh))):
                for tw in reversed(range(_windows_at(rw, kw, sw))):
                    k = (rh + sh * th) * kw + rw + sw * tw
                    share = tf.where(tf.equal(index, tf.constant(k, index.dtype)), dy, zero)
                    term = _shifted(_shifted(share, th, qh, 1), tw, qw, 2)
                    part = term if part is None else part + term
            if part is not None:  # None: a stride longer than the window, never in one
                parts[rh, rw] = tf.reshape(part, tf.stack([-1, qh, 1, qw, 1, c]))
    # dx6[n, a, rh, b, rw] = parts[rh, rw][n, a, b]: each residue chosen by a
    # constant mask over the broadcast; the reshape after it is a bitcast.
    shape6 = tf.stack([tf.shape(dy)[0], qh, sh, qw, sw, c])
    if len(parts) == sh * sw:
        dx6 = tf.broadcast_to(parts.pop((sh - 1, sw - 1)), shape6)
    else:
        dx6 = tf.zeros(shape6, dy.dtype)
    for (rh, rw), part in parts.items():
        mask = np.zeros([1, 1, sh, 1, sw, 1], bool)
        mask[0, 0, rh, 0, rw, 0] = True
        dx6 = tf.where(tf.constant(mask), part, dx6)
    dx = tf.reshape(dx6, tf.stack([-1, qh * sh, qw * sw, c]))
    return dx[:, top:top + h, left:left + w, :]


def first_max_gradient(x, y, dy, pool_size, strides, padding="VALID"):
    """The gradient to ``x`` of ``y = tf.nn.max_pool2d(x, pool_size, strides,
    padding)``, as TF and XLA compute it, from elementwise ops.

    Each window's gradient goes to the first (row-major) of its elements
    equal to its maximum ``y`` (:func:`first_max_index`); where windows
    overlap, the contributions are added (:func:`spread_to_first_max`).

    Args:
      x: the pool's input, ``[N, H, W, C]`` (NHWC), static H and W.
      y: its output, ``[N, Ho, Wo, C]``.
      dy: the gradient to ``y``, as ``y``.
      pool_size: ``(kh, kw)``.
      strides: ``(sh, sw)``.
      padding: ``"VALID"`` or ``"SAME"``.

    Returns:
      The gradient to ``x``, as ``x``: the tensor of TF's CPU kernel (the
      contributions of overlapping windows added in the windows' row-major
      order), and of XLA's select-and-scatter where nothing is padded or no
      window holds its maximum twice (padded, XLA's CPU backend can send a
      window's gradient to another of its tied maxima). A kernel that adds
      the contributions in another order (atomics on a GPU) can differ from
      it in the last bits where windows overlap; where they tile (stride =
      window) there is nothing to add.
    """
    return spread_to_first_max(first_max_index(x, y, pool_size, strides, padding), dy,
                               (x.shape[1], x.shape[2]), pool_size, strides, padding)


def _pair(value, name):
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, int) and v > 0 for v in pair):
        raise ValueError(f"{name} must be a positive int or two of them, got {value!r}")
    return pair


def max_pool2d(x, pool_size, strides=None, padding="VALID"):
    """``tf.nn.max_pool2d(x, pool_size, strides, padding)`` (NHWC) with
    :func:`first_max_gradient` as its gradient where that is traced under
    XLA (``jit_compile``), TF's ``MaxPoolGrad`` elsewhere. Traced under
    XLA, the forward and the first-max index are
    :func:`pool_and_first_max_index` (the index, an ``[N, Ho, Wo, C]`` int8,
    kept for the gradient); elsewhere the forward is ``tf.nn.max_pool2d``.

    Args:
      x: ``[N, H, W, C]`` (NHWC), float; H, W and C static.
      pool_size: the window, an int or ``(kh, kw)``.
      strides: an int or ``(sh, sw)``; None: ``pool_size``.
      padding: ``"VALID"`` or ``"SAME"`` (either case, as Keras spells it).

    Returns:
      ``[N, Ho, Wo, C]``, ``x``'s dtype: ``Ho = (H - kh) // sh + 1`` under
      ``"VALID"``, ``ceil(H / sh)`` under ``"SAME"``; ``Wo`` likewise.

    Raises:
      ValueError: a ``pool_size`` or ``strides`` that is not one or two
        positive ints, a ``padding`` other than those two, an ``x`` that is
        not 4-D with static H, W and C, or under ``"VALID"`` a window larger
        than ``x``.
    """
    pool_size = _pair(pool_size, "pool_size")
    strides = pool_size if strides is None else _pair(strides, "strides")
    if not isinstance(padding, str) or padding.upper() not in ("VALID", "SAME"):
        raise ValueError(f"padding must be 'valid' or 'same', got {padding!r}")
    padding = padding.upper()
    x = tf.convert_to_tensor(x)
    if x.shape.rank != 4 or any(d is None for d in x.shape[1:]):
        raise ValueError(f"max_pool2d takes [N, H, W, C] with static H, W and C, got {x.shape}")
    if padding == "VALID" and (pool_size[0] > x.shape[1] or pool_size[1] > x.shape[2]):
        raise ValueError(f"pool_size {pool_size} is larger than the input's H x W "
                         f"{x.shape[1]} x {x.shape[2]} (padding 'valid')")

    @tf.custom_gradient
    def pool(x):
        index = None
        if gradients._in_xla_function():
            y, index = pool_and_first_max_index(x, pool_size, strides, padding)
        else:
            y = tf.nn.max_pool2d(x, pool_size, strides, padding)

        def grad(dy):
            if not gradients._in_xla_function():
                return tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy,
                                              ksize=[1, *pool_size, 1],
                                              strides=[1, *strides, 1], padding=padding)
            first_max_gradients[0] += 1
            if index is None:  # the forward ran outside XLA
                return first_max_gradient(x, y, dy, pool_size, strides, padding)
            return spread_to_first_max(index, dy, (x.shape[1], x.shape[2]), pool_size, strides,
                                       padding)
        return y, grad

    return pool(x)


# The largest window (kh * kw elements) a layer pools through max_pool2d: the
# gradient is one select per window element; 2x2 and 3x3 were measured.
MAX_WINDOW = 9


def routable(layer):
    """Whether a ``keras.layers.MaxPooling2D`` can pool through
    :func:`max_pool2d`: ``channels_last`` and a window of at most
    :data:`MAX_WINDOW` elements (either padding); the rest keeps Keras' call."""
    kh, kw = layer.pool_size
    return layer.data_format == "channels_last" and kh * kw <= MAX_WINDOW


def pool_call(layer, inputs):
    """A ``keras.layers.MaxPooling2D``'s call through :func:`max_pool2d`
    where :func:`routable` and the input's H, W and C are static; Keras'
    own call otherwise."""
    if not routable(layer) or any(d is None for d in inputs.shape[1:]):
        return keras.layers.MaxPooling2D.call(layer, inputs)
    return max_pool2d(inputs, tuple(layer.pool_size), tuple(layer.strides), layer.padding)
