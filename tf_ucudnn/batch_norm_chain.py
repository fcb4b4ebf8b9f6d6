"""Batch norms whose normalization the next convolution applies as its prologue.

In a traced training step (``tf.function``, ``model.fit``, XLA's
``jit_compile``), a batch norm records its output here with what it was made
of: its input ``y`` and the float32 per-channel ``scale`` and ``offset`` with
``output = y * scale + offset``. Two kinds record: a batch norm computed from
a convolution's statistics (``layers.batch_norm_from_statistics``:
``Conv2DBatchNorm``, ``enable_rewrite``'s chains) and a pre-activation batch
norm (``layers.BatchNormalization``, whose input is a residual sum or a
concatenation). A following tf_ucudnn convolution (``layers.conv_statistics_call``,
``layers.conv2d_call``) asks :func:`prologue_of` about its input: when the
input is such an output, or a ReLU of one, the convolution reads ``y`` and
applies the normalization (and the ReLU) as its prologue
(``Ucudnn>NormalizedConv2DWithStatistics``). The normalized tensor is then
used by no one else in the step's graph unless another layer reads it (a
residual shortcut), so the graph computes and keeps it only then: the memory
of a BatchNormalization -> ReLU -> Conv chain's middle tensor is not kept for
the backward pass, whose gradient computes it again (μ-cuDNN's micro-batches
apply it one micro-batch at a time inside the convolution).

Eagerly nothing is recorded: every tensor is computed as it is called, so the
prologue would only add work.
"""

import tensorflow as tf

_ATTRIBUTE = "_tf_ucudnn_normalized_outputs"


def graph_table(graph, attribute):
    """The dict a traced ``graph`` keeps under ``attribute`` (made empty on
    first use): per-graph records of the trace, such as the batch norms a
    next convolution may take as its prologue (:func:`remember`). TF's
    ``Graph`` has no ``__dict__``, hence an attribute set on it."""
    table = getattr(graph, attribute, None)
    if table is None:
        table = {}
        setattr(graph, attribute, table)
    return table


def remember(output, y, scale, offset):
    """Records ``output = y * scale + offset`` (per channel, in ``y``'s
    dtype) in the graph being traced; eagerly, nothing.

    Args:
      output: the normalized tensor, ``y``'s shape and dtype.
      y: the tensor it normalizes (a convolution's output, a residual sum),
        NHWC or NCHW.
      scale, offset: float32 ``[channels]``.
    """
    if tf.executing_eagerly() or not hasattr(output, "graph"):
        return
    graph_table(output.graph, _ATTRIBUTE)[output.name] = (y, scale, offset)


def _zero_padding(tensor):
    """``(inner, paddings)`` where ``tensor`` is a constant zero padding of
    ``inner`` (a ``Pad`` op, or ``PadV2`` with value 0: Keras'
    ``ZeroPadding2D``) by ``paddings``, 4 ``[before, after]`` pairs in
    dimension order, known when traced; else ``(tensor, None)``."""
    op = tensor.op
    if op.type not in ("Pad", "PadV2"):
        return tensor, None
    paddings = tf.get_static_value(op.inputs[1])
    if paddings is None or paddings.shape != (4, 2):
        return tensor, None
    if op.type == "PadV2":
        value = tf.get_static_value(op.inputs[2])
        if value is None or value != 0:
            return tensor, None
    return op.inputs[0], paddings.tolist()


def prologue_of(inputs):
    """What a convolution on ``inputs`` may read instead, in the graph being
    traced.

    Returns:
      ``(y, scale, offset, relu, paddings)`` when ``inputs`` is a recorded
      batch norm's output (``relu`` False) or ``tf.nn.relu`` of one
      (``relu`` True; Keras' ``ReLU()``, ``Activation("relu")`` and
      ``activation="relu"`` trace to it), either of them optionally padded
      with zeros (Keras' ``ZeroPadding2D``, as before ResNet v2's 3×3
      convolutions; ``paddings``: 4 ``[before, after]`` pairs in dimension
      order, else None), and ``y`` has ``inputs``' dtype; else None
      (eagerly always None). Zero padding after the prologue is the
      convolution's own padding, so the convolution can take it.
    """
    if tf.executing_eagerly() or not hasattr(inputs, "graph"):
        return None
    table = getattr(inputs.graph, _ATTRIBUTE, None)
    if not table:
        return None
    unpadded, paddings = _zero_padding(inputs)
    found = None
    if unpadded.name in table:
        found = table[unpadded.name] + (False,)
    elif unpadded.op.type == "Relu" and unpadded.op.inputs[0].name in table:
        found = table[unpadded.op.inputs[0].name] + (True,)
    if found is None or found[0].dtype != inputs.dtype:
        return None
    return found + (paddings,)


def prologue_by_default(compute_dtype):
    """Whether a convolution takes the prologue unless told: in float16 only,
    where cuDNN's graph fuses it (engine 2: scale-bias-ReLU, convolution,
    genstats). ResNet-50 224², N = 256, under XLA on an H200
    (docs/benchmarks.md §12): float16 the same step time at 6 % less peak
    memory, and under an 8 GiB cap a larger batch; bfloat16 (no fused
    engine: the prologue runs into scratch) 13 % and float32 (a run-time
    compiled engine) 16 % slower steps, at 9 % and 17 % less memory."""
    return compute_dtype == "float16"


# How many convolutions took a prologue from this module, in this process (each
# trace counts): ``tf_ucudnn.rewrite_stats()["bn_prologue"]``.
prologues_taken = [0]
