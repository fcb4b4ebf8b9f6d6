"""`tf_ucudnn.layers.Conv2D`: a drop-in for `keras.layers.Conv2D`."""

import keras

from tf_ucudnn import nn


def conv2d_arguments(layer):
    """A ``keras.layers.Conv2D``'s geometry as ``tf_ucudnn.conv2d`` keyword
    arguments: strides, padding, data_format (NHWC/NCHW), dilations."""
    return dict(strides=list(layer.strides), padding=layer.padding.upper(),
                data_format="NHWC" if layer.data_format == "channels_last" else "NCHW",
                dilations=list(layer.dilation_rate))


@keras.saving.register_keras_serializable(package="tf_ucudnn")
class Conv2D(keras.layers.Conv2D):
    """``keras.layers.Conv2D`` whose convolution runs through tf_ucudnn.

    Takes every ``keras.layers.Conv2D`` argument, with the same weights
    (``kernel``: ``[kernel_h, kernel_w, in_channels / groups, filters]``,
    ``bias``: ``[filters]``), so ``set_weights`` / ``get_weights`` move freely
    between the two. Plus μ-cuDNN's knobs:

    Args:
      workspace_limit: bytes of cuDNN workspace per kernel (forward,
        backward-data and backward-filter each): an int or a string such as
        ``"64MiB"`` (kept as given in ``get_config``); None uses
        ``UCUDNN_DEFAULT_WORKSPACE_LIMIT`` (default 64 MiB).
      batch_size_policy: ``"undivided"``, ``"powerOfTwo"`` or ``"all"``; None
        uses ``UCUDNN_BATCH_SIZE_POLICY`` (default ``"powerOfTwo"``).
      micro_batch_size: None lets the planner decide; k > 0 forces
        micro-batches of k samples.

    With ``use_bias`` the convolution and the bias are one op
    (``tf_ucudnn.conv2d(..., bias=...)``): on the GPU the bias is added in the
    convolution's kernel where its cuDNN engine takes one, also under XLA.

    Models with this layer compile with XLA (``jit_compile=True``, and Keras'
    ``"auto"`` on a GPU): on the GPU each pass becomes an XLA custom call that
    runs the micro-batched plan within ``workspace_limit``; on the CPU, XLA's
    own convolution.

    Raises:
      ValueError: a knob out of range (from ``__init__``).
    """

    def __init__(self, *args, workspace_limit=None, batch_size_policy=None,
                 micro_batch_size=None, **kwargs):
        super().__init__(*args, **kwargs)
        # Validates the knobs now, not at the first call.
        nn.ucudnn_attrs(workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                        micro_batch_size=micro_batch_size)
        self.workspace_limit = workspace_limit
        self.batch_size_policy = batch_size_policy
        self.micro_batch_size = micro_batch_size

    def convolution_op(self, inputs, kernel):
        return nn.conv2d(inputs, kernel, **conv2d_arguments(self), **self._knobs())

    def call(self, inputs):
        outputs = nn.conv2d(inputs, self.kernel, **conv2d_arguments(self),
                            bias=self.bias if self.use_bias else None, **self._knobs())
        return outputs if self.activation is None else self.activation(outputs)

    def _knobs(self):
        return dict(workspace_limit=self.workspace_limit,
                    batch_size_policy=self.batch_size_policy,
                    micro_batch_size=self.micro_batch_size)

    def get_config(self):
        config = super().get_config()
        config.update(workspace_limit=self.workspace_limit,
                      batch_size_policy=self.batch_size_policy,
                      micro_batch_size=self.micro_batch_size)
        return config
