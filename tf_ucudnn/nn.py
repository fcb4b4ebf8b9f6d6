"""`conv2d` and its kin: micro-batched convolution with tf.nn.conv2d's interface (their
gradients: :mod:`tf_ucudnn.gradients`, registered when this module is imported)."""

import numbers
import operator

import numpy as np
import tensorflow as tf

from tf_ucudnn import database_link
from tf_ucudnn import gradients  # noqa: F401  (registers the ops' gradients with TensorFlow)
from tf_ucudnn._engine import ops as _ops
from tf_ucudnn.planner import POLICIES, check_int
from tf_ucudnn.units import to_workspace_limit

_INT32 = (-(1 << 31), (1 << 31) - 1)

MiB = 1 << 20
DEFAULT_WORKSPACE_LIMIT = 64 * MiB  # bytes; UCUDNN_DEFAULT_WORKSPACE_LIMIT overrides it


def _index(value):
    """An integer argument as int: Python and numpy integers, 0-d integer arrays
    and eager integer tensors (anything with ``__index__``), but not bools."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a bool is not an int here")
    return operator.index(value)


def _spatial_list(value, name, data_format):
    """tf.nn.conv2d's forms (int, 1, 2 or 4 ints) -> 4 ints in data_format order."""
    try:
        value = [_index(value)]
    except TypeError:
        pass
    try:
        value = [_index(v) for v in value]
    except TypeError:
        raise ValueError(f"{name} must be an int or a list of 1, 2 or 4 ints, got {value!r}") from None
    value = _check_ints(value, name)
    if len(value) == 1:
        value = value * 2
    if len(value) == 2:
        return [1, value[0], value[1], 1] if data_format == "NHWC" else [1, 1, value[0], value[1]]
    if len(value) == 4:
        return value
    raise ValueError(f"{name} must be an int or a list of 1, 2 or 4 ints, got {value!r}")


def _check_ints(values, name, low=None, high=None):
    """Each value an integer (:func:`_index`: 3.5 and 3.0 are not) in int64's
    range unless given (:func:`tf_ucudnn.planner.check_int`), so that nothing
    is truncated, wraps or overflows later; errors name ``name[i]`` (``name``
    for a single value).

    Raises:
      ValueError: naming the value and what is allowed.
    """
    bounds = {} if low is None else dict(low=low, high=high)
    out = []
    for i, v in enumerate(values):
        what = name if len(values) == 1 else f"{name}[{i}]"
        try:
            v = _index(v)
        except TypeError:
            raise ValueError(f"{what} must be an int, got {v!r}") from None
        out.append(check_int(v, what, **bounds))
    return out


def _sizes(value, name):
    """``input_sizes`` / ``filter_sizes`` as the op's int32 tensor. Values known
    now (Python, NumPy, constant tensors) must be integers within int32: 3.5,
    3.0 or 2**32 + 3 are errors, not truncated or wrapped. A tensor known only
    when the op runs must be an integer tensor; int64 values beyond int32
    saturate, so that the kernel rejects them.

    Raises:
      ValueError: naming ``name`` (and the element): not 4 sizes, or not
        integers within int32.
    """
    static = tf.get_static_value(value) if tf.is_tensor(value) else value
    if static is None:
        if not value.dtype.is_integer:
            raise ValueError(f"{name} must be an integer tensor, got {value.dtype.name}")
        return value if value.dtype == tf.int32 else tf.saturate_cast(value, tf.int32)
    array = np.asarray(static, dtype=object)
    if array.shape != (4,):
        raise ValueError(f"{name} must be 4 sizes (a list or 1-D tensor, in data_format order), "
                         f"got {static!r}")
    flat = _check_ints(list(array.reshape(-1)), name, *_INT32)
    return tf.constant(np.asarray(flat, dtype=np.int32).reshape(array.shape))


def _padding_attrs(padding, data_format):
    """'SAME' | 'VALID' | [[0, 0], [top, bottom], [left, right], [0, 0]] -> (padding, explicit_paddings)."""
    if isinstance(padding, str):
        upper = padding.upper()
        if upper not in ("SAME", "VALID"):
            raise ValueError(f"padding must be 'SAME', 'VALID' or a list of 4 [before, after] "
                             f"pairs, got {padding!r}")
        return upper, []
    try:
        pairs = [[a, b] for a, b in padding]
    except (TypeError, ValueError):
        raise ValueError(f"explicit padding must be 4 [before, after] pairs in {data_format} "
                         f"order, got {padding!r}") from None
    pairs = [_check_ints(pair, f"explicit padding[{i}]") for i, pair in enumerate(pairs)]
    if len(pairs) != 4:
        raise ValueError(f"explicit padding must have 4 [before, after] pairs, got {len(pairs)}")
    channel = 3 if data_format == "NHWC" else 1
    if pairs[0] != [0, 0] or pairs[channel] != [0, 0]:
        raise ValueError(f"explicit padding of the batch and channel dimensions must be [0, 0], "
                         f"got {padding!r}")
    if any(v < 0 for pair in pairs for v in pair):
        raise ValueError(f"explicit padding must be non-negative, got {padding!r}")
    return "EXPLICIT", [v for pair in pairs for v in pair]


def ucudnn_attrs(*, workspace_limit=None, batch_size_policy=None, micro_batch_size=None):
    """Validates μ-cuDNN's knobs and returns them as op attributes.

    Args:
      workspace_limit: bytes of workspace per kernel, an int or a string
        such as ``"64MiB"`` (:func:`tf_ucudnn.units.parse_bytes`), or
        ``"auto"``; None uses UCUDNN_DEFAULT_WORKSPACE_LIMIT (default 64 MiB).
      batch_size_policy: "undivided", "powerOfTwo" or "all"; None uses
        UCUDNN_BATCH_SIZE_POLICY (default "powerOfTwo").
      micro_batch_size: None or 0 lets the planner decide; k > 0 forces
        micro-batches of k samples (one takes the remainder), as for
        :func:`conv2d`.

    Returns:
      A dict with keys workspace_limit (bytes, -1 for the default, -2 for
        ``"auto"``),
      batch_size_policy, micro_batch_size.

    Raises:
      ValueError: a knob out of range, naming it.
    """
    workspace_limit = -1 if workspace_limit is None else to_workspace_limit(workspace_limit)
    if batch_size_policy is None:
        batch_size_policy = ""
    elif batch_size_policy not in POLICIES:
        raise ValueError(f"batch_size_policy must be one of {', '.join(POLICIES)} or None, "
                         f"got {batch_size_policy!r}")
    if micro_batch_size is None:
        micro_batch_size = 0
    elif (isinstance(micro_batch_size, bool) or not isinstance(micro_batch_size, numbers.Integral)
          or not 0 <= micro_batch_size < 1 << 63):
        raise ValueError(f"micro_batch_size must be None, 0 or a positive int (at most 2**63 - 1), "
                         f"got {micro_batch_size!r}")
    return dict(workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                micro_batch_size=int(micro_batch_size))


def _conv_attrs(strides, padding, data_format, dilations, **knobs):
    # Before the first kernel is created: seed it with stored benchmarks.
    database_link.load()
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    padding, explicit_paddings = _padding_attrs(padding, data_format)
    return dict(strides=_spatial_list(strides, "strides", data_format),
                dilations=_spatial_list(1 if dilations is None else dilations, "dilations", data_format),
                padding=padding, explicit_paddings=explicit_paddings, data_format=data_format,
                **ucudnn_attrs(**knobs))


# The op registration's T: the dtypes tf_ucudnn's kernels take (named in _float_input).
_DTYPES = (tf.float32, tf.float16, tf.bfloat16)


def _float_input(value, name="input"):
    """``input`` (or the tensor ``name``) as a tensor of one of the kernels' dtypes.

    Raises:
      ValueError: not convertible to a tensor, or of another dtype (naming it).
    """
    allowed = "float32, float16 or bfloat16"
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a {allowed} tensor, got {type(value).__name__} "
                         f"{value!r:.80}") from None
    if tensor.dtype not in _DTYPES:
        raise ValueError(f"{name} must be {allowed} (the dtypes of tf_ucudnn's kernels), got "
                         f"{tensor.dtype.name}; cast it first, e.g. tf.cast(x, tf.float32)")
    return tensor


def _like_input(value, dtype, name, like="input"):
    """``filters``, ``bias`` or ``out_backprop`` as a tensor of ``like``'s
    ``dtype`` (Python and NumPy values are converted to it; tensors must have
    it already).

    Raises:
      ValueError: naming ``name``, its dtype (or type) and ``like``'s dtype.
    """
    try:
        return tf.convert_to_tensor(value, dtype=dtype)
    except (TypeError, ValueError):
        got = value.dtype.name if tf.is_tensor(value) else f"{type(value).__name__} {value!r:.80}"
        raise ValueError(f"{name} must have the {like}'s dtype {dtype.name}, got {got}") from None


def _check_rank(tensor, name):
    rank = tensor.shape.rank
    if rank is not None and rank != 4:
        raise ValueError(f"{name} must be 4-dimensional, got shape {tensor.shape}")


def _input_and_filters(input, filters):  # noqa: A002
    """``input`` as a float tensor and ``filters`` in its dtype, both checked
    4-D where the rank is known (ValueError otherwise)."""
    input = _float_input(input)
    filters = _like_input(filters, input.dtype, "filters")
    _check_rank(input, "input")
    _check_rank(filters, "filters")
    return input, filters


def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None,  # noqa: A002
           name=None, *, bias=None, activation=None, workspace_limit=None,
           batch_size_policy=None, micro_batch_size=None):
    """Micro-batched 2-D convolution: the same result as ``tf.nn.conv2d``.

    On the GPU each call's mini-batch is split into micro-batches so that fast
    cuDNN algorithms fit in ``workspace_limit``; the split and the algorithms
    come from benchmarking and the Workspace Reuse recurrence (Oyama et al.
    2018, §III-B), once per convolution shape. On the CPU, micro-batches of
    ``micro_batch_size`` (else the whole batch) with an im2col + GEMM kernel.

    The arguments up to ``name`` are ``tf.nn.conv2d``'s, in its order;
    ``bias``, ``activation`` and μ-cuDNN's knobs are keyword-only. With
    ``bias`` the result is ``tf.nn.bias_add(tf.nn.conv2d(...), bias,
    data_format)`` from one op, ``Ucudnn>Conv2DWithBias``: on the GPU the
    bias is added in the convolution's cuDNN kernel where its engine takes
    one (graph-API engines: a pointwise add after the convolution), else
    right after it (``cudnnAddTensor``), planned as one pass; with
    ``activation="relu"`` as well, ``tf.nn.relu`` of that (a pointwise ReLU
    after the add, or ``cudnnActivationForward``). Under XLA this keeps bias
    and ReLU inside the custom call, as XLA fuses them into its own
    convolutions.

    Args:
      input: float32, float16 or bfloat16 tensor, ``[batch, height, width,
        channels]`` (NHWC) or ``[batch, channels, height, width]`` (NCHW).
      filters: ``[filter_height, filter_width, in_channels / groups,
        out_channels]``; ``groups = channels / filters.shape[2]``.
      strides: int or list of 1, 2 or 4 ints (as ``tf.nn.conv2d``; numpy
        integers too).
      padding: ``"SAME"``, ``"VALID"``, or explicit ``[[0, 0], [top, bottom],
        [left, right], [0, 0]]`` pairs in ``data_format`` order.
      data_format: ``"NHWC"`` or ``"NCHW"``.
      dilations: int or list of 1, 2 or 4 ints; None means 1.
      name: op name (a name scope around the op).
      bias: None, or ``[out_channels]`` of the input's dtype, added to every
        output element of its channel.
      activation: None or ``"linear"`` (none), or ``"relu"`` (needs ``bias``).
      workspace_limit: bytes of cuDNN workspace per kernel: an int or a
        string such as ``"64MiB"`` or ``"1GiB"``; ``"auto"`` to follow the
        GPU's free memory (:data:`tf_ucudnn.units.AUTO_WORKSPACE_LIMIT`);
        None uses ``UCUDNN_DEFAULT_WORKSPACE_LIMIT`` (default 64 MiB).
      batch_size_policy: ``"undivided"``, ``"powerOfTwo"`` or ``"all"``; None uses
        ``UCUDNN_BATCH_SIZE_POLICY`` (default ``"powerOfTwo"``).
      micro_batch_size: None or 0 (the same): the planner chooses the
        micro-batch sizes (Workspace Reuse within ``workspace_limit`` under
        ``batch_size_policy``; on the CPU the whole batch at once). k > 0:
        micro-batches of k samples (one takes the remainder; k at least the
        batch runs it whole), each with the fastest algorithm within
        ``workspace_limit``; ``batch_size_policy`` and Workspace Division
        (``total_workspace``) do not apply then.

    Returns:
      The output tensor, ``[batch, out_height, out_width, out_channels]``
      (NHWC) or ``[batch, out_channels, out_height, out_width]`` (NCHW).

    Raises:
      ValueError: an argument found wrong when the op is built, named in the
        message: ``input`` not float32, float16 or bfloat16, or ``filters``
        or ``bias`` a tensor of another dtype; ``input`` or ``filters`` not
        4-D, or ``bias`` not 1-D (where the rank is known); ``strides`` or
        ``dilations`` not an int or a list of 1, 2 or 4 ints;
        ``padding`` neither ``"SAME"``, ``"VALID"`` nor 4 non-negative
        ``[before, after]`` int pairs with ``[0, 0]`` for the batch and
        channel dimensions; ``data_format`` neither ``"NHWC"`` nor
        ``"NCHW"``; ``workspace_limit`` neither a byte count in
        [0, 2**63 - 1] nor ``"auto"``; ``batch_size_policy`` not one of the
        three or None; ``micro_batch_size`` neither None nor an int >= 0;
        ``activation`` other than None, ``"linear"`` or ``"relu"``, or
        ``"relu"`` without ``bias``. In a ``tf.function``, also shapes
        that TF's shape function finds inconsistent while tracing (input
        channels not a multiple of ``filters.shape[2]``).
      tf.errors.InvalidArgumentError: found when the op runs: ``strides``
        or ``dilations`` not positive, or not 1 in the batch and channel
        dimensions; input channels not a multiple of ``filters.shape[2]``,
        or out_channels not a multiple of the groups; 0 input channels; a
        dilated filter larger than the padded input; a ``bias`` whose length
        is not out_channels; a rank other than 4 known only then; sizes
        whose element count exceeds 2**63 - 1. Zero-size inputs (batch 0,
        an empty spatial dimension) give empty outputs, as
        ``tf.nn.conv2d``.
    """
    activation = activation or "linear"
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be None, 'linear' or 'relu', got {activation!r}")
    if activation != "linear" and bias is None:
        raise ValueError(f"activation={activation!r} is fused after the bias: it needs a bias")
    with tf.name_scope(name or "ucudnn_conv2d"):
        input, filters = _input_and_filters(input, filters)
        if bias is not None:
            bias = _like_input(bias, input.dtype, "bias")
            if bias.shape.rank is not None and bias.shape.rank != 1:
                raise ValueError(f"bias must be 1-dimensional, got shape {bias.shape}")
        attrs = _conv_attrs(strides, padding, data_format, dilations,
                            workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                            micro_batch_size=micro_batch_size)
        return ucudnn_conv2d_op(input, filters, attrs, bias, activation)


def conv2d_with_statistics(input, filters, strides, padding, data_format="NHWC",  # noqa: A002
                           dilations=None, name=None, *, workspace_limit=None,
                           batch_size_policy=None, micro_batch_size=None, input_scale=None,
                           input_offset=None, input_relu=False):
    """:func:`conv2d` and the per-channel statistics of its output that a
    following batch normalization's training step needs, from one op.

    On the GPU the statistics are the epilogue of the convolution's cuDNN
    graph engine (float16: cuDNN's genstats node; float32 and bfloat16: a sum
    and a square-then-sum reduction, which cuDNN compiles at run time, about
    0.5-0.9 s per plan on an H200 where the CUDA driver's JIT cache does not
    hold it yet, on ``UCUDNN_PLAN_BUILD_THREADS`` threads at once), so the
    output is not read again to reduce it; each micro-batch's sums are
    added up in float32 to the mini-batch's. Only graph engines compute them: legacy cuDNN algorithms
    are not candidates, and NHWC is the layout cuDNN fuses. On the CPU the
    sums are taken in float64 over the micro-batches and rounded once. Under
    XLA (``jit_compile``) the op is one custom call on the GPU, running the
    same micro-batched plan, and XLA's convolution and float32 reductions on
    the CPU.

    With ``input_scale`` and ``input_offset`` the convolution reads
    ``input * input_scale + input_offset`` per input channel (then
    ``max(., 0)`` where ``input_relu``): the previous layer's batch
    normalization (and its ReLU) as the convolution's prologue, so that the
    normalized tensor is neither written in the forward pass nor kept for the
    backward pass (whose gradient computes it again). On the GPU it is one
    cuDNN graph where an engine fuses it: float16 (scale-bias-ReLU,
    convolution, genstats, NHWC, symmetric padding); elsewhere, or where no
    engine plans, the prologue runs into scratch before the convolution,
    logged once. The scale and offset are rounded to the input's dtype, as
    cuDNN's fused graphs take them (float16: relative error up to 2**-11 on
    each), on either device; their gradients are float32 (as if unrounded).
    Under XLA the op is one custom call on the GPU (the same plan) and XLA's
    elementwise ops before its convolution on the CPU.

    Arguments as :func:`conv2d` (no ``bias`` or ``activation``), and:
      input_scale, input_offset: ``[in_channels]`` tensors (cast to
        float32), both or neither.
      input_relu: whether the prologue ends in a ReLU.

    Returns:
      ``(output, sum, sum_of_squares)``: the output as :func:`conv2d`'s, and
      two float32 ``[out_channels]`` tensors, the sum of the output over the
      batch and pixels and the sum of its squares (the output as stored,
      in its dtype). The batch mean is ``sum / count`` and the biased
      variance ``sum_of_squares / count - mean**2``, ``count = batch *
      out_height * out_width``. Differentiable in ``input`` and ``filters``
      through all three.

    Raises:
      ValueError, tf.errors.InvalidArgumentError: as :func:`conv2d`.
      ValueError: one of ``input_scale`` and ``input_offset`` without the other.
    """
    with tf.name_scope(name or "ucudnn_conv2d_with_statistics"):
        input, filters = _input_and_filters(input, filters)
        attrs = _conv_attrs(strides, padding, data_format, dilations,
                            workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                            micro_batch_size=micro_batch_size)
        if (input_scale is None) != (input_offset is None):
            raise ValueError("input_scale and input_offset come together: got "
                             + ("input_scale" if input_offset is None else "input_offset")
                             + " alone")
        if input_scale is None:
            result = _ops.ucudnn_conv2d_with_statistics(input=input, filter=filters, **attrs)
        else:
            result = _ops.ucudnn_normalized_conv2d_with_statistics(
                input=input, filter=filters, scale=tf.cast(input_scale, tf.float32),
                offset=tf.cast(input_offset, tf.float32), input_relu=bool(input_relu), **attrs)
        return result.output, result.sum, result.sum_of_squares


# Ucudnn>Conv2DWithBias's activation attribute (the op's registration).
_ACTIVATIONS = ("linear", "relu")


def ucudnn_conv2d_op(input, filters, attrs, bias=None, activation="linear"):  # noqa: A002
    """The ``Ucudnn>Conv2D`` op (``Ucudnn>Conv2DWithBias`` with a ``bias``,
    and its ``activation``: ``"linear"`` or ``"relu"``) with attributes from
    ``_conv_attrs`` (and optionally ``total_workspace``, bytes); their
    gradients are registered below."""
    if bias is None:
        return _ops.ucudnn_conv2d(input=input, filter=filters, **attrs)
    return _ops.ucudnn_conv2d_with_bias(input=input, filter=filters, bias=bias,
                                        activation=activation, **attrs)


def conv2d_backprop_input(input_sizes, filters, out_backprop, strides, padding,
                          data_format="NHWC", dilations=None, name=None, *,
                          workspace_limit=None, batch_size_policy=None, micro_batch_size=None):
    """Backward-data: the gradient of :func:`conv2d` with respect to its input.

    The arguments up to ``name`` are in the order of
    ``tf.compat.v1.nn.conv2d_backprop_input`` without ``use_cudnn_on_gpu``
    (TensorFlow 2 has no ``tf.nn`` version); μ-cuDNN's knobs are keyword-only.

    Args:
      input_sizes: int32 1-D tensor of 4: the input's shape.
      filters: ``[filter_height, filter_width, in_channels / groups, out_channels]``.
      out_backprop: gradient of the output, shaped like conv2d's output.
      strides, padding, data_format, dilations, name: as :func:`conv2d`.
      workspace_limit, batch_size_policy, micro_batch_size: as :func:`conv2d`.

    Returns:
      The input gradient, shaped ``input_sizes``.

    Raises:
      ValueError: as :func:`conv2d` for the arguments they share;
        ``out_backprop`` not float32, float16 or bfloat16, or ``filters`` a
        tensor of another dtype; ``input_sizes`` known now that are not 4
        integers within int32 (or a tensor of another dtype).
      tf.errors.InvalidArgumentError: as :func:`conv2d` when the op runs,
        and ``input_sizes`` known only then that are not 4 sizes, or an
        ``out_backprop`` whose shape is not the convolution's output shape for ``input_sizes``.
    """
    with tf.name_scope(name or "ucudnn_conv2d_backprop_input"):
        out_backprop = _float_input(out_backprop, "out_backprop")
        filters = _like_input(filters, out_backprop.dtype, "filters", like="out_backprop")
        attrs = _conv_attrs(strides, padding, data_format, dilations,
                            workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                            micro_batch_size=micro_batch_size)
        return ucudnn_conv2d_backprop_input_op(input_sizes, filters, out_backprop, attrs)


def conv2d_transpose(input, filters, output_shape, strides, padding="SAME",  # noqa: A002
                     data_format="NHWC", dilations=None, name=None, *, workspace_limit=None,
                     batch_size_policy=None, micro_batch_size=None):
    """Micro-batched transposed 2-D convolution: the same result as
    ``tf.nn.conv2d_transpose``.

    A transposed convolution is the backward-data pass of the convolution it
    transposes: :func:`conv2d_backprop_input` with ``input`` as the output
    gradient, planned and split into micro-batches as that pass is. Its
    gradients are that convolution's forward pass (for ``input``) and its
    backward-filter pass (for ``filters``). The arguments up to ``name`` are
    ``tf.nn.conv2d_transpose``'s, in its order; μ-cuDNN's knobs are
    keyword-only.

    Args:
      input: float32, float16 or bfloat16, ``[batch, height, width,
        in_channels]`` (NHWC) or ``[batch, in_channels, height, width]`` (NCHW).
      filters: ``[filter_height, filter_width, out_channels, in_channels]``
        (``tf.nn.conv2d_transpose``'s and ``keras.layers.Conv2DTranspose``'s
        kernel layout).
      output_shape: 1-D integer tensor or list of 4: the result's shape, in
        ``data_format`` order.
      strides, padding, data_format, dilations, name: as :func:`conv2d`.
      workspace_limit, batch_size_policy, micro_batch_size: as :func:`conv2d`.

    Returns:
      The output tensor, shaped ``output_shape``.

    Raises:
      ValueError: as :func:`conv2d` for the arguments they share (``input``
        not float32, float16 or bfloat16, ``filters`` of another dtype,
        ``strides``, ``padding``, ``data_format``, ``dilations`` and the
        knobs), and an ``output_shape`` known now that is not 4 integers
        within int32.
      tf.errors.InvalidArgumentError: found when the op runs (an
        ``output_shape`` whose convolution does not give ``input``'s shape,
        channel mismatches, and the run-time cases of :func:`conv2d`).
    """
    with tf.name_scope(name or "ucudnn_conv2d_transpose"):
        input, filters = _input_and_filters(input, filters)
        attrs = _conv_attrs(strides, padding, data_format, dilations,
                            workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                            micro_batch_size=micro_batch_size)
        return ucudnn_conv2d_backprop_input_op(output_shape, filters, input, attrs,
                                               sizes_name="output_shape")


def ucudnn_conv2d_backprop_input_op(input_sizes, filters, out_backprop, attrs, *,
                                    sizes_name="input_sizes"):
    """The ``Ucudnn>Conv2DBackpropInput`` op (backward-data, or a transposed
    convolution of ``out_backprop``) with attributes from ``_conv_attrs`` (and
    optionally ``total_workspace``); ``sizes_name`` names ``input_sizes`` in
    errors (``output_shape`` for a transposed convolution)."""
    return _ops.ucudnn_conv2d_backprop_input(
        input_sizes=_sizes(input_sizes, sizes_name), filter=filters, out_backprop=out_backprop,
        **attrs)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                           data_format="NHWC", dilations=None, name=None, *,
                           workspace_limit=None, batch_size_policy=None, micro_batch_size=None):
    """Backward-filter: the gradient of :func:`conv2d` with respect to its filters.

    Every micro-batch adds its share to the whole filter gradient (the first
    overwrites, the rest accumulate), so the result equals the undivided one.
    The arguments up to ``name`` are in the order of
    ``tf.compat.v1.nn.conv2d_backprop_filter`` without ``use_cudnn_on_gpu``;
    μ-cuDNN's knobs are keyword-only.

    Args:
      input: the forward input.
      filter_sizes: int32 1-D tensor of 4: the filter's shape.
      out_backprop: gradient of the output, shaped like conv2d's output.
      strides, padding, data_format, dilations, name: as :func:`conv2d`.
      workspace_limit, batch_size_policy, micro_batch_size: as :func:`conv2d`.

    Returns:
      The filter gradient, shaped ``filter_sizes``.

    Raises:
      ValueError: as :func:`conv2d` for the arguments they share;
        ``input`` not float32, float16 or bfloat16, or ``out_backprop`` a
        tensor of another dtype; ``filter_sizes`` known now that are not 4
        integers within int32 (or a tensor of another dtype).
      tf.errors.InvalidArgumentError: as :func:`conv2d` when the op runs,
        and ``filter_sizes`` known only then that are not 4 sizes, or an
        ``out_backprop`` whose shape is not the convolution's output shape.
    """
    with tf.name_scope(name or "ucudnn_conv2d_backprop_filter"):
        input = _float_input(input)
        out_backprop = _like_input(out_backprop, input.dtype, "out_backprop")
        attrs = _conv_attrs(strides, padding, data_format, dilations,
                            workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                            micro_batch_size=micro_batch_size)
        return _ops.ucudnn_conv2d_backprop_filter(
            input=input, filter_sizes=_sizes(filter_sizes, "filter_sizes"),
            out_backprop=out_backprop, **attrs)
