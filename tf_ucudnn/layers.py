"""Keras layers whose convolutions run through tf_ucudnn: `Conv2D` and
`Conv2DTranspose`, drop-ins for Keras' own (same arguments, same weights),
`Conv2DBatchNorm`, a convolution with the batch norm that follows it,
`BatchNormalization`, Keras' own whose output the next convolution may apply
as its prologue, and `MaxPooling2D`, Keras' own whose gradient XLA fuses."""

import keras
import tensorflow as tf
from keras.src.backend.common.backend_utils import compute_conv_transpose_output_shape

from tf_ucudnn import batch_norm as batch_norm_math
from tf_ucudnn import batch_norm_chain
from tf_ucudnn import environment, gradients, max_pool, nn


def conv2d_arguments(layer):
    """A Keras 2-D convolution layer's geometry (``Conv2D`` or
    ``Conv2DTranspose``) as ``tf_ucudnn.conv2d`` keyword arguments: strides,
    padding, data_format (NHWC/NCHW), dilations."""
    return dict(strides=list(layer.strides), padding=layer.padding.upper(),
                data_format="NHWC" if layer.data_format == "channels_last" else "NCHW",
                dilations=list(layer.dilation_rate))


def layer_attrs(layer, *, workspace_limit=None, batch_size_policy=None, micro_batch_size=None,
                total_workspace=None):
    """The tf_ucudnn op attributes of a Keras 2-D convolution layer: its
    geometry and μ-cuDNN's knobs (``total_workspace``: bytes of a Workspace
    Division group, or None).

    Raises:
      ValueError: a knob out of range.
    """
    attrs = nn._conv_attrs(**conv2d_arguments(layer), workspace_limit=workspace_limit,
                           batch_size_policy=batch_size_policy, micro_batch_size=micro_batch_size)
    if total_workspace is not None:
        attrs["total_workspace"] = total_workspace
    return attrs


def conv2d_call(layer, inputs, attrs, input_prologue=False):
    """``keras.layers.Conv2D.call`` through tf_ucudnn: the convolution and its
    bias as one op (``Ucudnn>Conv2DWithBias``), with the layer's activation
    in it where that is ``"relu"`` (Keras' own function, its default
    arguments), else after it.

    With ``input_prologue``, in a traced step, where ``inputs`` is a
    recorded batch norm's training output or a ReLU of it
    (``batch_norm_chain``), the convolution reads the batch norm's input and
    applies the normalization and ReLU as its prologue
    (``Ucudnn>NormalizedConv2DWithStatistics``, its sums unused), then the
    bias and the activation."""
    result = _normalized_conv(inputs, tf.cast(layer.kernel, inputs.dtype), attrs, input_prologue)
    if result is not None:
        outputs = result.output
        if layer.use_bias:
            outputs = tf.nn.bias_add(outputs, tf.cast(layer.bias, outputs.dtype),
                                     data_format=attrs["data_format"])
        return outputs if layer.activation is None else layer.activation(outputs)
    if layer.use_bias and layer.activation is keras.activations.relu:
        return nn.ucudnn_conv2d_op(inputs, layer.kernel, attrs, layer.bias, activation="relu")
    outputs = nn.ucudnn_conv2d_op(inputs, layer.kernel, attrs,
                                  layer.bias if layer.use_bias else None)
    return outputs if layer.activation is None else layer.activation(outputs)


def conv2d_transpose_call(layer, inputs, attrs):
    """``keras.layers.Conv2DTranspose.call`` through tf_ucudnn: the
    transposed convolution (a backward-data pass, ``Ucudnn>Conv2DBackpropInput``)
    to the shape Keras computes (``output_padding`` included), then the bias
    and the layer's activation."""
    shape = [tf.shape(inputs)[i] if d is None else d for i, d in enumerate(inputs.shape)]
    out_shape = compute_conv_transpose_output_shape(
        shape, layer.kernel_size, layer.filters, layer.strides, layer.padding,
        layer.output_padding, layer.data_format, layer.dilation_rate)
    if any(tf.is_tensor(d) for d in out_shape):
        out_shape = tf.stack([tf.cast(d, tf.int32) for d in out_shape])
    outputs = nn.ucudnn_conv2d_backprop_input_op(out_shape, layer.kernel, inputs, attrs,
                                                 sizes_name="output_shape")
    if layer.use_bias:
        outputs = tf.nn.bias_add(outputs, tf.cast(layer.bias, outputs.dtype),
                                 data_format=attrs["data_format"])
    return outputs if layer.activation is None else layer.activation(outputs)


# The compute dtypes of tf_ucudnn's kernels (the ops' T), as Keras names them.
_COMPUTE_DTYPES = ("float32", "float16", "bfloat16")


class _Knobs:
    """μ-cuDNN's knobs of a tf_ucudnn Keras layer (before the Keras layer in
    its bases): validated in ``__init__``, kept as given in ``get_config``."""

    def __init__(self, *args, workspace_limit=None, batch_size_policy=None,
                 micro_batch_size=None, **kwargs):
        super().__init__(*args, **kwargs)
        # Validates the knobs and the dtype now, not at the first call.
        nn.ucudnn_attrs(workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                        micro_batch_size=micro_batch_size)
        if self.compute_dtype not in _COMPUTE_DTYPES:
            raise ValueError(f"tf_ucudnn.layers.{type(self).__name__} computes in float32, "
                             f"float16 or bfloat16 (the dtypes of tf_ucudnn's kernels), got the "
                             f"dtype policy {self.dtype_policy.name!r} (compute dtype "
                             f"{self.compute_dtype}); use keras.layers.{type(self).__name__} "
                             f"for other dtypes")
        self.workspace_limit = workspace_limit
        self.batch_size_policy = batch_size_policy
        self.micro_batch_size = micro_batch_size

    def _knobs(self):
        return dict(workspace_limit=self.workspace_limit,
                    batch_size_policy=self.batch_size_policy,
                    micro_batch_size=self.micro_batch_size)

    def get_config(self):
        config = super().get_config()
        config.update(self._knobs())
        return config


_KNOB_ARGS = """
      workspace_limit: bytes of cuDNN workspace per kernel (forward,
        backward-data and backward-filter each): an int or a string such as
        ``"64MiB"`` (kept as given in ``get_config``), or ``"auto"`` (what the
        GPU's allocator has free when the kernel is planned; each run takes
        the fastest planned plan that fits what is free then); None uses
        ``UCUDNN_DEFAULT_WORKSPACE_LIMIT`` (default 64 MiB).
      batch_size_policy: ``"undivided"``, ``"powerOfTwo"`` or ``"all"``; None
        uses ``UCUDNN_BATCH_SIZE_POLICY`` (default ``"powerOfTwo"``).
      micro_batch_size: None or 0 (the same): the planner chooses the
        micro-batch sizes; k > 0: micro-batches of k samples (one takes the
        remainder), each pass with its fastest algorithm within
        ``workspace_limit``, ``batch_size_policy`` then unused (as
        ``tf_ucudnn.conv2d``)."""


_INPUT_PROLOGUE_ARG = """      input_prologue: in a traced training step (``model.fit``,
        ``tf.function``, ``jit_compile``), where this layer's input is the
        training output of a batch norm that records it (a
        ``Conv2DBatchNorm``, ``tf_ucudnn.layers.BatchNormalization``, or the
        batch norm of an ``enable_rewrite(fuse_batch_norm=True)`` chain), or
        a ReLU of it, either zero-padded (``ZeroPadding2D``; taken where
        this layer's padding is "valid"), read the batch norm's input and
        apply its normalization and ReLU as this convolution's prologue (the
        zero padding as its own), so that the
        normalized tensor is not kept for the backward pass unless another
        layer reads it (the gradient computes it again). True, False, or
        None (default): True where the layer computes in float16, whose
        cuDNN graph fuses the prologue (ResNet-50 under XLA on an H200: the
        same step time at 6 % less peak memory), False otherwise (bfloat16
        has no fused engine and float32's, compiled at run time, is slower:
        ResNet-50 at N = 256, 8 % longer steps at 17 % less peak memory).
        Eagerly it does nothing."""


_RECOMPUTE_OUTPUT_ARG = """      recompute_output: in a traced training step, where the next
        convolution reads this layer's output through its prologue (so its
        gradient needs this convolution's output ``y``) and this layer's
        convolution takes no prologue itself: True computes ``y`` again in
        the backward pass, by the same op and plan, instead of keeping it
        from the forward pass (one more forward convolution for its
        memory: ResNet-50 and ResNet-101 under an 8 GiB cap on an H200 train
        a 7-17 % larger batch with it on their 1x1 convolutions, and a step
        without a cap takes 3 % longer); False keeps it; None (default):
        ``UCUDNN_RECOMPUTE`` decides (``1x1``: 1x1 filters; unset or
        ``off``: keep)."""


def checked_switch(name, value):
    """``value`` if it is a valid three-way switch (True, False or None).

    Raises:
      ValueError: anything else, naming ``name`` and what is allowed.
    """
    if not (value is None or isinstance(value, bool)):
        raise ValueError(f"{name} must be True, False or None, got {value!r}")
    return value


def input_prologue_of(layer):
    """Whether ``layer`` (with an ``input_prologue`` knob) takes the prologue:
    its knob, or where that is None, ``batch_norm_chain.prologue_by_default``."""
    if layer.input_prologue is None:
        return batch_norm_chain.prologue_by_default(layer.compute_dtype)
    return layer.input_prologue


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class Conv2D(_Knobs, keras.layers.Conv2D):
    __doc__ = """``keras.layers.Conv2D`` whose convolution runs through tf_ucudnn.

    Takes every ``keras.layers.Conv2D`` argument, with the same weights
    (``kernel``: ``[kernel_h, kernel_w, in_channels / groups, filters]``,
    ``bias``: ``[filters]``), so ``set_weights`` / ``get_weights`` move freely
    between the two. Plus μ-cuDNN's knobs:

    Args:""" + _KNOB_ARGS + """
""" + _INPUT_PROLOGUE_ARG + """

    With ``use_bias`` the convolution and the bias are one op
    (``tf_ucudnn.conv2d(..., bias=...)``): on the GPU the bias is added in the
    convolution's kernel where its cuDNN engine takes one, also under XLA.

    Models with this layer compile with XLA (``jit_compile=True``, and Keras'
    ``"auto"`` on a GPU): on the GPU each pass becomes an XLA custom call that
    runs the micro-batched plan within ``workspace_limit``; on the CPU, XLA's
    own convolution.

    Raises:
      ValueError: from ``__init__``: a knob out of range, ``input_prologue``
        not True, False or None, or a ``dtype`` policy whose compute dtype is
        not float32, float16 or bfloat16.
    """

    def __init__(self, *args, input_prologue=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_prologue = checked_switch("input_prologue", input_prologue)

    def convolution_op(self, inputs, kernel):
        return nn.conv2d(inputs, kernel, **conv2d_arguments(self), **self._knobs())

    def call(self, inputs):
        return conv2d_call(self, inputs, layer_attrs(self, **self._knobs()),
                           input_prologue_of(self))

    def get_config(self):
        return dict(super().get_config(), input_prologue=self.input_prologue)


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class Conv2DTranspose(_Knobs, keras.layers.Conv2DTranspose):
    __doc__ = """``keras.layers.Conv2DTranspose`` whose transposed convolution
    runs through tf_ucudnn.

    A transposed convolution is a backward-data pass: its micro-batches and
    algorithms are planned as that pass's, and its gradients are the forward
    and backward-filter passes of the convolution it transposes, each planned
    in turn. Takes every ``keras.layers.Conv2DTranspose`` argument
    (``output_padding`` included), with the same weights (``kernel``:
    ``[kernel_h, kernel_w, filters, in_channels]``, ``bias``: ``[filters]``).
    Plus μ-cuDNN's knobs:

    Args:""" + _KNOB_ARGS + """

    Models with this layer compile with XLA: on the GPU each pass becomes an
    XLA custom call, as for :class:`Conv2D`.

    Raises:
      ValueError: from ``__init__``: a knob out of range, or a ``dtype``
        policy whose compute dtype is not float32, float16 or bfloat16.
    """

    def call(self, inputs):
        return conv2d_transpose_call(self, inputs, layer_attrs(self, **self._knobs()))


def _with_input_padding(attrs, paddings):
    """The attributes of the same convolution on the unpadded input of a zero
    padding by ``paddings`` (4 ``[before, after]`` pairs in ``attrs``'
    data format's dimension order): the padding added to the convolution's
    own as explicit paddings; None where the padding touches the batch or
    channels, or the convolution's padding is ``"SAME"`` (its amounts
    depend on the padded size)."""
    if attrs["padding"] == "SAME":
        return None
    try:
        _, explicit = nn._padding_attrs(paddings, attrs["data_format"])
    except ValueError:  # padding of the batch or channels
        return None
    if attrs["padding"] == "EXPLICIT":
        explicit = [a + b for a, b in zip(explicit, attrs["explicit_paddings"])]
    return dict(attrs, padding="EXPLICIT", explicit_paddings=explicit)


def _normalized_conv(inputs, kernel, attrs, input_prologue):
    """With ``input_prologue``, where ``batch_norm_chain.prologue_of(inputs)``
    finds the batch norm ``inputs`` came from,
    ``Ucudnn>NormalizedConv2DWithStatistics`` on that batch norm's input, a
    zero padding between them added to the convolution's padding (counted
    in ``rewrite_stats()["bn_prologue"]``); else None."""
    chain = batch_norm_chain.prologue_of(inputs) if input_prologue else None
    if chain is None:
        return None
    normalized, scale, offset, relu, paddings = chain
    if paddings is not None:
        attrs = _with_input_padding(attrs, paddings)
        if attrs is None:
            return None
    batch_norm_chain.prologues_taken[0] += 1
    return nn._ops.ucudnn_normalized_conv2d_with_statistics(
        input=normalized, filter=kernel, scale=scale, offset=offset, input_relu=relu, **attrs)


def conv_statistics_call(conv, inputs, attrs, input_prologue=False):
    """A Keras ``Conv2D``'s output (no activation) and its per-channel sums
    from one op (``tf_ucudnn.conv2d_with_statistics``; under XLA on the GPU
    one custom call), for the ``BatchNormalization`` after it. A convolution
    of few input channels (at most ``UCUDNN_STATISTICS_AFTER_CHANNELS``, 4:
    an RGB stem) is ``tf_ucudnn``'s plain convolution, its sums float32
    reductions of its output (XLA's fusions under XLA), which are faster
    there than the graphs cuDNN has for its statistics.

    With ``input_prologue``, in a traced step, where ``inputs`` is the
    output of a batch norm computed by :func:`batch_norm_from_statistics`
    (or a ReLU of it), the convolution reads that batch norm's input and
    applies its normalization and ReLU as its prologue instead
    (``batch_norm_chain``): the normalized tensor is not kept for the
    backward pass unless another layer reads it.

    Returns:
      ``(y, statistics)``: the convolution's output without the layer's
      bias, in its compute dtype, and what :func:`batch_norm_from_statistics`
      takes: the sum and sum of squares of ``y`` (float32 ``[filters]``), the
      number of values summed per channel, and the bias (float32, or None),
      which the batch norm folds into its mean and offset.
    """
    fmt = attrs["data_format"]
    kernel = tf.cast(conv.kernel, conv.compute_dtype)
    result = _normalized_conv(inputs, kernel, attrs, input_prologue)
    if result is not None:
        y, total, squares = result.output, result.sum, result.sum_of_squares
    elif _statistics_after(inputs, fmt):
        y = nn.ucudnn_conv2d_op(inputs, kernel, attrs)
        total, squares = batch_norm_math.sums(y, fmt)
    else:
        result = nn._ops.ucudnn_conv2d_with_statistics(input=inputs, filter=kernel, **attrs)
        y, total, squares = result.output, result.sum, result.sum_of_squares
    shape = tf.shape(y)
    count = shape[0] * (shape[1] * shape[2] if fmt == "NHWC" else shape[2] * shape[3])
    conv_bias = tf.cast(conv.bias, tf.float32) if conv.use_bias else None
    return y, (total, squares, count, conv_bias)


def _statistics_after(inputs, data_format):
    """Whether a convolution of ``inputs`` takes its statistics from float32
    reductions after it rather than from its cuDNN graph: its input has a
    known number of channels, at most
    ``environment.statistics_after_channels()`` (``UCUDNN_STATISTICS_AFTER_CHANNELS``)."""
    channels = inputs.shape[-1 if data_format == "NHWC" else 1]
    return channels is not None and channels <= environment.statistics_after_channels()


def batch_norm_from_statistics(batch_norm, y, statistics, data_format):
    """A Keras ``BatchNormalization``'s training call on a convolution's
    output plus its bias, from :func:`conv_statistics_call`'s ``y`` (without
    the bias; ``[batch, h, w, c]`` NHWC or ``[batch, c, h, w]`` NCHW) and
    ``statistics``: the batch mean and variance from the sums, the moving
    statistics updated as Keras does, the bias folded into the offset, the
    normalization in float32 (``batch_norm.py``).

    Returns:
      The normalized output in ``y``'s dtype.
    """
    total, squares, count, conv_bias = statistics
    mean, variance = batch_norm_math.moments_from_sums(total, squares, count, conv_bias)
    return _train_and_normalize(batch_norm, y, mean, variance, data_format, conv_bias)


def _train_and_normalize(batch_norm, y, mean, variance, data_format, conv_bias=None):
    """A batch norm's training step from its batch ``mean`` and ``variance``
    (float32 ``[channels]``): the moving statistics updated as Keras does,
    then ``y * scale + offset`` in float32 (``conv_bias``, float32 or None,
    folded into the offset), in ``y``'s dtype, recorded for the next
    convolution's prologue (``batch_norm_chain``)."""
    batch_norm_math.update_moving_statistics(batch_norm, mean, variance)
    gamma, beta = batch_norm_math.gamma_beta(batch_norm)
    scale, offset = batch_norm_math.scale_and_offset(mean, variance, gamma, beta,
                                                     batch_norm.epsilon)
    if conv_bias is not None:
        offset = offset + conv_bias * scale
    channels = batch_norm_math.channel_shape(data_format)
    outputs = tf.cast(tf.cast(y, tf.float32) * tf.reshape(scale, channels) +
                      tf.reshape(offset, channels), y.dtype)
    batch_norm_chain.remember(outputs, y, scale, offset)
    return outputs


def conv_batch_norm_call(conv, batch_norm, activation, inputs, training, attrs,
                         input_prologue=False, recompute_output=None):
    """``activation(batch_norm(conv(inputs), training))`` of a Keras ``Conv2D``
    (activation None) and ``BatchNormalization`` over its channels, with
    their own variables, through tf_ucudnn.

    Training (``training`` and the batch norm trainable):
    :func:`conv_statistics_call` (with ``input_prologue``: on the previous
    batch norm's input where ``inputs`` is its output), then
    :func:`batch_norm_from_statistics`; ``recompute_output`` True or False
    decides whether the backward pass computes the convolution's output
    again (``gradients.choose_recompute``), None leaves it to ``UCUDNN_RECOMPUTE``.
    Otherwise the batch norm is folded into the convolution: the filter
    scaled per output channel and the offset as its bias, with a ReLU
    activation in the same op (``Ucudnn>Conv2DWithBias``).

    Returns:
      The output, ``[batch, out_height, out_width, filters]`` (NHWC) or
      ``[batch, filters, out_height, out_width]`` (NCHW), in the
      convolution's compute dtype.
    """
    if training and batch_norm.trainable:
        y, statistics = conv_statistics_call(conv, inputs, attrs, input_prologue)
        if recompute_output is not None:
            gradients.choose_recompute(y, recompute_output)
        outputs = batch_norm_from_statistics(batch_norm, y, statistics, attrs["data_format"])
        return outputs if activation is None else activation(outputs)
    dtype = conv.compute_dtype
    mean = tf.cast(batch_norm.moving_mean, tf.float32)
    variance = tf.cast(batch_norm.moving_variance, tf.float32)
    gamma, beta = batch_norm_math.gamma_beta(batch_norm)
    scale, offset = batch_norm_math.scale_and_offset(mean, variance, gamma, beta,
                                                     batch_norm.epsilon)
    if conv.use_bias:
        offset = offset + tf.cast(conv.bias, tf.float32) * scale
    relu = activation is keras.activations.relu
    folded = tf.cast(tf.cast(conv.kernel, tf.float32) * scale, dtype)
    outputs = nn.ucudnn_conv2d_op(inputs, folded, attrs, tf.cast(offset, dtype),
                                  activation="relu" if relu else "linear")
    return outputs if relu or activation is None else activation(outputs)


def batch_norm_fusion_refusal(conv, batch_norm):
    """Why ``Conv2DBatchNorm`` cannot take a Keras ``Conv2D`` and the
    ``BatchNormalization`` after it, or "" when it can: the convolution must
    have no activation (the fused layer applies its own after the batch
    norm), and the batch norm must normalize the convolution's channel axis
    without renorm or synchronized statistics."""
    if conv.activation not in (None, keras.activations.linear):
        return (f"{conv.name} applies {conv.activation.__name__} before the batch norm; the "
                "fused layer applies its activation after it")
    channel_axis = 3 if conv.data_format == "channels_last" else 1
    axes = batch_norm.axis if isinstance(batch_norm.axis, (list, tuple)) else [batch_norm.axis]
    if ([a % 4 for a in axes] != [channel_axis] or batch_norm.renorm
            or getattr(batch_norm, "synchronized", False)):
        return (f"{batch_norm.name} must normalize the channels (axis {channel_axis}) without "
                "renorm or synchronized statistics")
    return ""


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class Conv2DBatchNorm(keras.layers.Layer):
    __doc__ = """``keras.layers.Conv2D`` → ``keras.layers.BatchNormalization`` (over
    the channels) → ``activation``, as one layer whose convolution computes
    the batch norm's statistics (``tf_ucudnn.conv2d_with_statistics``; on
    inputs of at most ``UCUDNN_STATISTICS_AFTER_CHANNELS`` channels, 4 by
    default, float32 reductions after the plain convolution, which are
    faster there).

    Arguments are Keras': ``filters``, ``kernel_size``, ``strides``,
    ``padding``, ``data_format``, ``dilation_rate``, ``groups``,
    ``use_bias`` (default False: a bias before a batch norm only shifts its
    mean), ``kernel_initializer``, ``bias_initializer``,
    ``kernel_regularizer``, ``bias_regularizer``, ``kernel_constraint``,
    ``bias_constraint`` as ``keras.layers.Conv2D`` (``activation`` applies
    after the batch norm); ``momentum``, ``epsilon``, ``center``, ``scale``,
    ``beta_initializer``, ``gamma_initializer``,
    ``moving_mean_initializer``, ``moving_variance_initializer``,
    ``beta_regularizer``, ``gamma_regularizer``, ``beta_constraint``,
    ``gamma_constraint`` as ``keras.layers.BatchNormalization``. The weights
    are those of the two Keras layers it holds, ``conv`` and ``batch_norm``
    (``kernel`` ``[kernel_h, kernel_w, in_channels / groups, filters]``,
    ``bias``, ``gamma``, ``beta``, ``moving_mean``, ``moving_variance``, each
    ``[filters]``), so ``get_weights``/``set_weights`` of each move to and
    from Keras' own; :meth:`from_layers` wraps existing ones. Plus μ-cuDNN's
    knobs:

    Args:""" + _KNOB_ARGS + """
""" + _INPUT_PROLOGUE_ARG + """
""" + _RECOMPUTE_OUTPUT_ARG + """

    In training the output equals Keras' ``Conv2D`` → ``BatchNormalization``
    → activation up to float32 rounding (the variance from sums rather than
    two passes), and the moving statistics update the same way; in
    inference the batch norm is folded into the convolution's filter and
    bias (``Ucudnn>Conv2DWithBias``, with a ReLU in it).

    Raises:
      ValueError: from ``__init__``: a knob out of range, ``input_prologue``
        or ``recompute_output`` not True, False or None, or a ``dtype``
        policy whose compute dtype is not float32, float16 or bfloat16; from
        a training call: ``UCUDNN_STATISTICS_AFTER_CHANNELS`` not a whole
        number from 0 to 65536.
    """

    _CONV_ARGS = ("filters", "kernel_size", "strides", "padding", "data_format",
                  "dilation_rate", "groups", "use_bias", "kernel_initializer",
                  "bias_initializer", "kernel_regularizer", "bias_regularizer",
                  "kernel_constraint", "bias_constraint")
    _BATCH_NORM_ARGS = ("momentum", "epsilon", "center", "scale", "beta_initializer",
                        "gamma_initializer", "moving_mean_initializer",
                        "moving_variance_initializer", "beta_regularizer",
                        "gamma_regularizer", "beta_constraint", "gamma_constraint")

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), groups=1, activation=None, use_bias=False,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, workspace_limit=None, batch_size_policy=None,
                 micro_batch_size=None, input_prologue=None, recompute_output=None, **kwargs):
        super().__init__(**kwargs)
        nn.ucudnn_attrs(workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                        micro_batch_size=micro_batch_size)
        if self.compute_dtype not in _COMPUTE_DTYPES:
            raise ValueError(f"tf_ucudnn.layers.Conv2DBatchNorm computes in float32, float16 or "
                             f"bfloat16, got the dtype policy {self.dtype_policy.name!r}")
        self.workspace_limit = workspace_limit
        self.batch_size_policy = batch_size_policy
        self.micro_batch_size = micro_batch_size
        self.input_prologue = checked_switch("input_prologue", input_prologue)
        self.recompute_output = checked_switch("recompute_output", recompute_output)
        self.activation = keras.activations.get(activation)
        self.conv = keras.layers.Conv2D(
            filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
            dilation_rate=dilation_rate, groups=groups, use_bias=use_bias,
            kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
            dtype=self.dtype_policy, name="conv")
        self.batch_norm = keras.layers.BatchNormalization(
            axis=-1 if self.conv.data_format == "channels_last" else 1, momentum=momentum,
            epsilon=epsilon, center=center, scale=scale, beta_initializer=beta_initializer,
            gamma_initializer=gamma_initializer,
            moving_mean_initializer=moving_mean_initializer,
            moving_variance_initializer=moving_variance_initializer,
            beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
            beta_constraint=beta_constraint, gamma_constraint=gamma_constraint,
            dtype=self.dtype_policy, name="batch_norm")

    @classmethod
    def from_layers(cls, conv, batch_norm, activation=None, **knobs):
        """The fused layer over existing Keras layers and their variables: a
        ``keras.layers.Conv2D`` without activation and a
        ``keras.layers.BatchNormalization`` over its channel axis, unchanged.

        Raises:
          ValueError: ``conv`` has an activation, or ``batch_norm`` normalizes
            another axis or uses renorm or synchronized statistics.
        """
        refusal = batch_norm_fusion_refusal(conv, batch_norm)
        if refusal:
            raise ValueError(refusal)
        layer = cls(activation=activation, name=f"{conv.name}_{batch_norm.name}",
                    dtype=conv.dtype_policy, **cls._arguments_of(conv, batch_norm), **knobs)
        layer.conv, layer.batch_norm = conv, batch_norm
        return layer

    @classmethod
    def _arguments_of(cls, conv, batch_norm):
        """The constructor's Keras arguments that describe ``conv`` and ``batch_norm``."""
        conv_config, bn_config = conv.get_config(), batch_norm.get_config()
        args = {k: conv_config[k] for k in cls._CONV_ARGS}
        args.update({k: bn_config[k] for k in cls._BATCH_NORM_ARGS})
        return args

    def build(self, input_shape):
        if not self.conv.built:
            self.conv.build(input_shape)
        if not self.batch_norm.built:
            self.batch_norm.build(self.conv.compute_output_shape(input_shape))

    def compute_output_shape(self, input_shape):
        return self.conv.compute_output_shape(input_shape)

    def call(self, inputs, training=None):
        attrs = layer_attrs(self.conv, workspace_limit=self.workspace_limit,
                            batch_size_policy=self.batch_size_policy,
                            micro_batch_size=self.micro_batch_size)
        return conv_batch_norm_call(self.conv, self.batch_norm, self.activation, inputs,
                                    training, attrs, input_prologue_of(self),
                                    self.recompute_output)

    def get_config(self):
        config = super().get_config()
        config.update(self._arguments_of(self.conv, self.batch_norm))
        config.update(activation=keras.activations.serialize(self.activation),
                      workspace_limit=self.workspace_limit,
                      batch_size_policy=self.batch_size_policy,
                      micro_batch_size=self.micro_batch_size,
                      input_prologue=self.input_prologue,
                      recompute_output=self.recompute_output)
        return config


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class BatchNormInConv(keras.layers.Layer):
    """The place of a ``keras.layers.BatchNormalization`` whose work the
    :class:`Conv2DBatchNorm` before it does (``rewrite_model(...,
    fuse_batch_norm=True)``): passes its input through, taking the batch
    norm's ``training`` and ``mask`` arguments, so that the model's graph
    and layer names stay as they were."""

    def call(self, inputs, training=None, mask=None):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return super().get_config()  # name, dtype and trainable: nothing of its own


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class BatchNormalization(keras.layers.BatchNormalization):
    """``keras.layers.BatchNormalization`` (the same arguments, weights and
    moving statistics) whose training output a following tf_ucudnn
    convolution (``Conv2D``, ``Conv2DBatchNorm``; directly or after a ReLU)
    may apply as its prologue: the pre-activation order BatchNormalization
    → ReLU → Conv2D of ResNet v2 and DenseNet, where the batch norm's input
    is not a convolution's output (a residual sum, a concatenation).

    In a traced training step (``model.fit``, ``tf.function``,
    ``jit_compile``), for a 4-D input normalized over its channel axis (1 or
    3) without a mask, renorm or synchronized statistics, the layer computes
    Keras' batch mean and variance (``_moments``, in float32), updates the
    moving statistics as Keras does, and returns ``inputs * scale + offset``
    in float32 cast to its compute dtype (``scale = gamma / sqrt(variance +
    epsilon)``, ``offset = beta - mean * scale``: Keras' output up to
    float32 rounding), recording it (``batch_norm_chain``). Otherwise, and
    eagerly, it is Keras' own call.
    """

    def call(self, inputs, training=None, mask=None):
        return recording_batch_norm_call(self, inputs, training, mask)


def recording_batch_norm_call(batch_norm, inputs, training=None, mask=None):
    """A ``keras.layers.BatchNormalization``'s call as
    :class:`BatchNormalization` makes it: in a traced training step, for a
    4-D input normalized over one channel axis (no mask, renorm or
    synchronized statistics), Keras' moments and moving-statistics update,
    the output ``inputs * scale + offset`` recorded for the next
    convolution's prologue (``batch_norm_chain``); otherwise Keras' own
    call."""
    recordable = (training and batch_norm.trainable and mask is None
                  and not tf.executing_eagerly() and len(inputs.shape) == 4
                  and batch_norm.axis in (1, 3, -1) and not batch_norm.renorm
                  and not getattr(batch_norm, "synchronized", False))
    if not recordable:
        return keras.layers.BatchNormalization.call(batch_norm, inputs, training=training,
                                                    mask=mask)
    # Keras has cast inputs to the compute dtype, the dtype of its output.
    mean, variance = batch_norm._moments(tf.cast(inputs, tf.float32), None)
    return _train_and_normalize(batch_norm, inputs, mean, variance,
                                "NHWC" if batch_norm.axis in (3, -1) else "NCHW")


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class MaxPooling2D(keras.layers.MaxPooling2D):
    """``keras.layers.MaxPooling2D`` (the same arguments and outputs) whose
    gradient, traced under XLA (``jit_compile``, Keras' default ``fit`` on a
    GPU), is elementwise selects and pads that XLA fuses instead of its
    select-and-scatter (:func:`tf_ucudnn.max_pool.first_max_gradient`: the
    tensor of TF's kernel), and whose forward there is the maximum of the
    window's strided views
    (:func:`tf_ucudnn.max_pool.pool_and_first_max_index`). For
    ``channels_last``, either padding, windows of at most
    :data:`tf_ucudnn.max_pool.MAX_WINDOW` elements and static input H, W
    and C; otherwise, and without XLA, Keras' own."""

    def call(self, inputs):
        return max_pool.pool_call(self, inputs)
