"""Keras layers whose convolutions run through tf_ucudnn: `Conv2D` and
`Conv2DTranspose`, drop-ins for Keras' own (same arguments, same weights)."""

import keras
import tensorflow as tf
from keras.src.backend.common.backend_utils import compute_conv_transpose_output_shape

from tf_ucudnn import nn


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


def conv2d_call(layer, inputs, attrs):
    """``keras.layers.Conv2D.call`` through tf_ucudnn: the convolution and its
    bias as one op (``Ucudnn>Conv2DWithBias``), with the layer's activation
    in it where that is ``"relu"`` (Keras' own function, its default
    arguments), else after it."""
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


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class Conv2D(_Knobs, keras.layers.Conv2D):
    __doc__ = """``keras.layers.Conv2D`` whose convolution runs through tf_ucudnn.

    Takes every ``keras.layers.Conv2D`` argument, with the same weights
    (``kernel``: ``[kernel_h, kernel_w, in_channels / groups, filters]``,
    ``bias``: ``[filters]``), so ``set_weights`` / ``get_weights`` move freely
    between the two. Plus μ-cuDNN's knobs:

    Args:""" + _KNOB_ARGS + """

    With ``use_bias`` the convolution and the bias are one op
    (``tf_ucudnn.conv2d(..., bias=...)``): on the GPU the bias is added in the
    convolution's kernel where its cuDNN engine takes one, also under XLA.

    Models with this layer compile with XLA (``jit_compile=True``, and Keras'
    ``"auto"`` on a GPU): on the GPU each pass becomes an XLA custom call that
    runs the micro-batched plan within ``workspace_limit``; on the CPU, XLA's
    own convolution.

    Raises:
      ValueError: from ``__init__``: a knob out of range, or a ``dtype``
        policy whose compute dtype is not float32, float16 or bfloat16.
    """

    def convolution_op(self, inputs, kernel):
        return nn.conv2d(inputs, kernel, **conv2d_arguments(self), **self._knobs())

    def call(self, inputs):
        return conv2d_call(self, inputs, layer_attrs(self, **self._knobs()))


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
