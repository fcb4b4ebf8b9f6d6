"""The gradients of tf_ucudnn's ops, registered with TensorFlow on import (by
:mod:`tf_ucudnn.nn`), and what a backward pass computes again instead of
keeping it: the batch-norm prologue's result, and the outputs chosen by
``Conv2DBatchNorm(recompute_output=)``, ``rewrite_model(recompute=)`` and
``UCUDNN_RECOMPUTE``."""

import numpy as np
import tensorflow as tf

from tf_ucudnn import environment
from tf_ucudnn._engine import ops as _ops
from tf_ucudnn.batch_norm import channel_shape, reduction_axes
from tf_ucudnn.batch_norm_chain import graph_table

_ATTR_NAMES = ("strides", "padding", "explicit_paddings", "data_format", "dilations",
               "workspace_limit", "batch_size_policy", "micro_batch_size")


def _op_attrs(op):
    attrs = {name: op.get_attr(name) for name in _ATTR_NAMES}
    for key in ("padding", "data_format", "batch_size_policy"):
        if isinstance(attrs[key], bytes):
            attrs[key] = attrs[key].decode()
    return attrs


@tf.RegisterGradient("Ucudnn>Conv2D")
def _conv2d_grad(op, grad):
    """Gradients of Ucudnn>Conv2D: backward-data and backward-filter, same knobs."""
    attrs = _op_attrs(op)
    x, w = op.inputs[0], op.inputs[1]
    dx = _ops.ucudnn_conv2d_backprop_input(input_sizes=tf.shape(x), filter=w, out_backprop=grad, **attrs)
    dw = _ops.ucudnn_conv2d_backprop_filter(input=x, filter_sizes=tf.shape(w), out_backprop=grad, **attrs)
    return dx, dw


@tf.RegisterGradient("Ucudnn>Conv2DWithBias")
def _conv2d_with_bias_grad(op, grad):
    """Gradients of Ucudnn>Conv2DWithBias: with the ReLU, the output gradient
    where the output is positive (``ReluGrad`` of the output, as TF's Relu
    gradient); then Ucudnn>Conv2D's, and the bias's (that gradient summed
    over all but the channel dimension)."""
    if op.get_attr("activation") in (b"relu", "relu"):
        grad = tf.raw_ops.ReluGrad(gradients=grad, features=op.outputs[0])
    dx, dw = _conv2d_grad(op, grad)
    db = tf.raw_ops.BiasAddGrad(out_backprop=grad, data_format=_op_attrs(op)["data_format"])
    return dx, dw, db


def _known_zero(gradient):
    """Whether an output's gradient is None or, in a traced graph, a constant
    zero: what TF passes for an output no one differentiates (a
    convolution's sums that no batch norm reads). Eager tensors are not
    looked at (that would wait for the GPU)."""
    if gradient is None:
        return True
    if isinstance(gradient, tf.Tensor) and hasattr(gradient, "graph"):
        value = tf.get_static_value(gradient)
        return value is not None and not np.any(value)
    return False


def _statistics_output_gradient(op, grad, grad_sum, grad_sum_of_squares):
    """The output's whole gradient of a statistics op: its own plus the
    sums' (d sum / dy = 1, d sum_of_squares / dy = 2 y, per channel),
    computed in float32, in the output's dtype. Sums whose gradient is
    known to be zero add nothing, so a convolution whose sums no one reads
    does not keep its output ``y`` for the backward pass; where the next
    convolution's prologue gradient computed ``y`` again
    (:func:`_recomputed_output`), that copy is read instead."""
    y = op.outputs[0]
    sum_used = not _known_zero(grad_sum)
    squares_used = not _known_zero(grad_sum_of_squares)
    if grad is not None and not sum_used and not squares_used:
        return grad
    channels = channel_shape(_op_attrs(op)["data_format"])
    total = tf.cast(grad, tf.float32) if grad is not None else tf.zeros(tf.shape(y), tf.float32)
    if sum_used:
        total += tf.reshape(grad_sum, channels)
    if squares_used:
        again = _recomputed_output(y)  # where the prologue's gradient computed y again
        y32 = tf.cast(y if again is None else again, tf.float32)
        total += 2.0 * y32 * tf.reshape(grad_sum_of_squares, channels)
    return tf.cast(total, y.dtype)


@tf.RegisterGradient("Ucudnn>Conv2DWithStatistics")
def _conv2d_with_statistics_grad(op, grad, grad_sum, grad_sum_of_squares):
    """Gradients of Ucudnn>Conv2DWithStatistics: Ucudnn>Conv2D's, of the
    output's whole gradient."""
    return _conv2d_grad(op, _statistics_output_gradient(op, grad, grad_sum, grad_sum_of_squares))


def _in_xla_function():
    """Whether ops built now go into a function XLA compiles (``jit_compile``,
    Keras' default ``model.fit`` on a GPU). TF keeps that as an XLA control
    flow context on the graph or an outer one; if that private module ever
    moves, False (the caller then does without what needs XLA)."""
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _when_gradient_arrives(forward, gradient):
    """``forward`` (tensors of the forward pass), made to wait for
    ``gradient``, so that what the backward pass computes again from them is
    computed when the gradient is there, not in the forward pass.

    XLA schedules an instruction anywhere its operands allow, and its
    scheduler placed the prologue's result and ReLU mask, recomputed for the
    backward pass from forward tensors only, right after the forward
    convolution: kept from there to the backward pass, they took back the
    memory that not storing the normalized tensor had freed. TF's executor
    runs an op as soon as its inputs are ready, which for those is in the
    forward pass too. So under XLA the tensors pass an optimization barrier
    with ``gradient`` (a barrier's results exist only once all its operands
    do: XLA's ``OptimizationBarrier``, the means JAX's rematerialization
    uses); in other traced graphs they are ``tf.identity``s with a control
    dependency on ``gradient``; eagerly the backward pass runs after the
    forward pass anyway, and they are returned as they are.

    Returns:
      a list of tensors, one per element of ``forward``, equal to them.
    """
    if tf.executing_eagerly():
        return list(forward)
    if _in_xla_function():
        try:
            from tensorflow.compiler.tf2xla.ops import gen_xla_ops
        except ImportError:
            return list(forward)
        return list(gen_xla_ops.xla_optimization_barrier(list(forward) + [gradient]))[:-1]
    with tf.control_dependencies([gradient]):
        return [tf.identity(t) for t in forward]


# Where a traced graph keeps the convolution outputs computed again for its
# backward pass: {output name: the output computed again}; and the layers'
# own choices (:func:`choose_recompute`): {output name: bool}.
_RECOMPUTED = "_tf_ucudnn_recomputed_outputs"
_RECOMPUTE_CHOSEN = "_tf_ucudnn_recompute_chosen"
# How many outputs the backward passes traced in this process compute again:
# ``tf_ucudnn.rewrite_stats()["bn_recomputed"]``.
recomputed_outputs = [0]


def recompute_1x1(kernel_size, policy=None):
    """Whether the ``"1x1"`` recompute policy covers a convolution of
    ``kernel_size`` (``(kh, kw)``): ``policy`` (``"off"`` or ``"1x1"``; None:
    ``UCUDNN_RECOMPUTE``, :func:`tf_ucudnn.environment.recompute`) is
    ``"1x1"`` and the filter is 1x1.

    Raises:
      ValueError: ``policy`` (or ``UCUDNN_RECOMPUTE``) is neither ``off`` nor ``1x1``.
    """
    policy = environment.recompute() if policy is None else environment.checked_choice(
        policy, environment.RECOMPUTE_CHOICES, "recompute")
    return policy == "1x1" and tuple(kernel_size) == (1, 1)


def choose_recompute(y, recompute):
    """Records, in the graph being traced, whether the backward pass computes
    ``y`` (a ``Ucudnn>Conv2DWithStatistics`` output) again where the next
    convolution's prologue gradient needs it (:func:`_recomputed_output`),
    instead of following ``UCUDNN_RECOMPUTE``: ``recompute`` True or False.
    Eagerly nothing."""
    if not tf.executing_eagerly() and hasattr(y, "graph"):
        graph_table(y.graph, _RECOMPUTE_CHOSEN)[y.name] = bool(recompute)


def _recomputed_output(y, gradient=None):
    """``y``, a forward convolution's output that a prologue convolution reads,
    computed again for the backward pass where chosen, so that the forward
    pass's ``y`` is freed after the next convolution has read it. Chosen:
    by the layer that made ``y`` (:func:`choose_recompute`: a
    ``Conv2DBatchNorm``'s ``recompute_output``, ``rewrite_model``'s and
    ``enable_rewrite``'s ``recompute``), else by ``UCUDNN_RECOMPUTE``
    (:func:`recompute_1x1`: ``"1x1"``, ResNet v1's reducing convolutions
    before the 3x3, whose recomputation costs one more 1x1 convolution).
    Only the output of a ``Ucudnn>Conv2DWithStatistics`` (a convolution
    without a prologue of its own) is computed again: by the same op and
    knobs (so the same plan and the same values), from its input and filter
    made to wait for ``gradient`` (:func:`_when_gradient_arrives`), once per
    traced graph.

    Returns:
      the recomputed tensor, or None where ``y`` is not recomputed (or,
      without ``gradient``, not recomputed yet in this graph).

    Raises:
      ValueError: ``UCUDNN_RECOMPUTE`` is neither ``off`` nor ``1x1`` (read
        where no layer chose).
    """
    if tf.executing_eagerly():
        return None
    op = y.op
    if op.type != "Ucudnn>Conv2DWithStatistics" or y is not op.outputs[0]:
        return None
    graph = tf.compat.v1.get_default_graph()
    chosen = graph_table(y.graph, _RECOMPUTE_CHOSEN).get(y.name)
    if chosen is None:
        chosen = recompute_1x1(op.inputs[1].shape[:2])
    if not chosen:
        return None
    table = graph_table(graph, _RECOMPUTED)
    if y.name not in table and gradient is not None:
        x, w = _when_gradient_arrives(op.inputs[:2], gradient)
        table[y.name] = _ops.ucudnn_conv2d_with_statistics(input=x, filter=w,
                                                           **_op_attrs(op)).output
        recomputed_outputs[0] += 1
    return table.get(y.name)


@tf.RegisterGradient("Ucudnn>NormalizedConv2DWithStatistics")
def _normalized_conv2d_with_statistics_grad(op, grad, grad_sum, grad_sum_of_squares):
    """Gradients of Ucudnn>NormalizedConv2DWithStatistics: the prologue's
    result ``z = relu(x * scale + offset)`` computed again (scale and offset
    rounded to x's dtype as the forward pass used them, in float32, z rounded
    to x's dtype; the forward pass kept none) once the incoming gradient is
    there (:func:`_when_gradient_arrives`; ``x`` itself computed again where
    :func:`_recomputed_output` allows it), backward-filter on
    it, backward-data to dz, and through the prologue: ``da = dz`` where
    ``x * scale + offset > 0`` (everywhere without the ReLU), ``dx = da *
    scale``, ``dscale = sum(da * x)``, ``doffset = sum(da)`` over all but
    the channel dimension, in float32."""
    attrs = _op_attrs(op)
    x, w, scale, offset = op.inputs
    channels = channel_shape(attrs["data_format"])
    axes = reduction_axes(attrs["data_format"])
    dy = _statistics_output_gradient(op, grad, grad_sum, grad_sum_of_squares)
    again = _recomputed_output(x, dy)
    x = again if again is not None else _when_gradient_arrives([x], dy)[0]
    x32 = tf.cast(x, tf.float32)
    # As the forward pass used them: rounded to x's dtype.
    scale32, offset32 = (tf.reshape(tf.cast(tf.cast(v, x.dtype), tf.float32), channels)
                         for v in (scale, offset))
    a = x32 * scale32 + offset32
    relu = op.get_attr("input_relu")
    z = tf.cast(tf.nn.relu(a) if relu else a, x.dtype)
    dz = _ops.ucudnn_conv2d_backprop_input(input_sizes=tf.shape(x), filter=w, out_backprop=dy,
                                           **attrs)
    dw = _ops.ucudnn_conv2d_backprop_filter(input=z, filter_sizes=tf.shape(w), out_backprop=dy,
                                            **attrs)
    da = tf.cast(dz, tf.float32)
    if relu:
        da = tf.where(a > 0, da, tf.zeros_like(da))
    dx = tf.cast(da * scale32, x.dtype)
    return dx, dw, tf.reduce_sum(da * x32, axes), tf.reduce_sum(da, axes)


@tf.RegisterGradient("Ucudnn>Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op, grad):
    """Second order: dx = conv^T(dy, w) is linear in w and dy."""
    attrs = _op_attrs(op)
    w, dy = op.inputs[1], op.inputs[2]
    dw = _ops.ucudnn_conv2d_backprop_filter(input=grad, filter_sizes=tf.shape(w), out_backprop=dy, **attrs)
    ddy = _ops.ucudnn_conv2d(input=grad, filter=w, **attrs)
    return None, dw, ddy


@tf.RegisterGradient("Ucudnn>Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op, grad):
    """Second order: dw = corr(x, dy) is linear in x and dy."""
    attrs = _op_attrs(op)
    x, dy = op.inputs[0], op.inputs[2]
    dx = _ops.ucudnn_conv2d_backprop_input(input_sizes=tf.shape(x), filter=grad, out_backprop=dy, **attrs)
    ddy = _ops.ucudnn_conv2d(input=x, filter=grad, **attrs)
    return dx, None, ddy
