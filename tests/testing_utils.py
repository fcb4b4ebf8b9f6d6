"""Helpers shared by the tests: TensorFlow's reference convolution, error norms, grids.

The reference is ``tf.nn.conv2d`` itself, restricted to what TensorFlow's CPU
kernels support with gradients (NHWC, ungrouped, dilation 1). Everything else
is composed around it from differentiable ops, so ``tf.GradientTape`` gives
reference gradients too:

- NCHW: transpose to NHWC and back;
- groups: slice the input channels and the filter's output channels per group
  and concatenate the outputs;
- dilation: insert zeros between the filter taps (a dilated filter *is* a
  larger filter with zeros in it);
- explicit padding: ``tf.pad`` then VALID (SAME is left to TensorFlow, which
  puts the odd extra pixel after, as μ-cuDNN must).
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, *, pythonpath=ROOT, timeout=300, argv=(), **env):
    """Runs `code` (dedented) in a new Python process with ``sys.argv[1:]`` =
    `argv`: `pythonpath` goes first on PYTHONPATH and is the working directory;
    keyword arguments are extra environment variables. Returns the
    ``subprocess.CompletedProcess`` (text)."""
    path = os.pathsep.join([pythonpath] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv],
                          env=dict(os.environ, PYTHONPATH=path, **env), cwd=pythonpath,
                          capture_output=True, text=True, timeout=timeout)

# The start of a GPU test's child script: TF's GPU allocator capped at 6 GiB
# (before TensorFlow initialises the GPU), a 5x5 convolution whose fastest
# algorithms want far more workspace than its slowest (x_host, w_host; `want`
# from the CPU: under a memory cap stock TF's GPU convolution may fail to
# create its cuBLAS handle, which has nothing to do with tf_ucudnn), and
# fill_gpu(leave_bytes): 16 MiB blocks until the GPU is full, then freed until
# leave_bytes are free again; it returns the blocks kept.
CAPPED_5X5_CHILD = textwrap.dedent("""
    import json, sys, time, numpy as np, tensorflow as tf
    gpu = tf.config.list_physical_devices("GPU")[0]
    tf.config.set_logical_device_configuration(
        gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=6144)])
    tf.config.experimental.enable_tensor_float_32_execution(False)
    import tf_ucudnn
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((256, 27, 27, 96)).astype(np.float32)
    w_host = rng.standard_normal((5, 5, 96, 256)).astype(np.float32)
    with tf.device("/CPU:0"):
        want = tf.nn.conv2d(x_host, w_host, 1, "SAME").numpy()
    rel = lambda a, b=want: float(np.linalg.norm(a - b) / np.linalg.norm(b))

    def fill_gpu(leave_bytes):
        blocks = []
        with tf.device("/GPU:0"):
            try:
                while True:
                    blocks.append(tf.zeros([4 << 20], tf.float32))
            except tf.errors.ResourceExhaustedError:
                pass
        freed = 0
        while blocks and freed < leave_bytes:
            blocks.pop()
            freed += 16 << 20
        return blocks
""")

# TensorFlow's oneDNN build (on by default on Intel CPUs, forced on by
# TF_ENABLE_ONEDNN_OPTS=1 and off by =0) renames the stock convolutions after
# Grappler has run, the tf_ucudnn rewrite included: these are their oneDNN
# names and the stock op each stands for. "WithBias" forms fuse a BiasAdd
# (forward: as _FusedConv2D does) or a BiasAddGrad (backward-filter);
# "PadWith" forms fuse a preceding Pad.
ONEDNN_CONV_OPS = {
    "_MklConv2D": "Conv2D",
    "_MklNativeConv2D": "Conv2D",
    "_MklPadWithConv2D": "Conv2D",
    "_MklNativePadWithConv2D": "Conv2D",
    "_MklConv2DWithBias": "_FusedConv2D",
    "_MklNativeConv2DWithBias": "_FusedConv2D",
    "_MklFusedConv2D": "_FusedConv2D",
    "_MklNativeFusedConv2D": "_FusedConv2D",
    "_MklPadWithFusedConv2D": "_FusedConv2D",
    "_MklNativePadWithFusedConv2D": "_FusedConv2D",
    "_MklConv2DBackpropInput": "Conv2DBackpropInput",
    "_MklNativeConv2DBackpropInput": "Conv2DBackpropInput",
    "_MklConv2DBackpropFilter": "Conv2DBackpropFilter",
    "_MklNativeConv2DBackpropFilter": "Conv2DBackpropFilter",
    "_MklConv2DBackpropFilterWithBias": "Conv2DBackpropFilter",
    "_MklNativeConv2DBackpropFilterWithBias": "Conv2DBackpropFilter",
}


def stock_op_name(op_type):
    """The stock TensorFlow name of an op type: oneDNN's convolutions under the
    name of the op they replaced (``_MklNativeConv2D`` -> ``Conv2D``), others
    unchanged."""
    return ONEDNN_CONV_OPS.get(op_type, op_type)


def registered_op_names():
    """Every op type registered in this process (TensorFlow's and loaded libraries')."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    buffer = pywrap_tf_session.TF_GetAllOpList()
    try:
        op_list = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer))
    finally:
        pywrap_tf_session.TF_DeleteBuffer(buffer)
    return {op.name for op in op_list.op}


# Relative L2 error bounds per dtype. float32: both sides accumulate in
# float32, differing only in summation order. float16 / bfloat16: inputs and
# outputs are stored with 11 resp. 8 significant bits (unit roundoff 2^-11 ≈
# 4.9e-4 resp. 2^-8 ≈ 3.9e-3), so the result of a float32 computation on the
# same (already rounded) inputs differs by about that much after the final
# rounding. Backward-filter micro-batches add up in float32; a
# little more where a GPU plan has no room for the float32 sum and stores
# partial filter gradients in the narrow type between micro-batches.
TOLERANCE = {tf.float32: 1e-5, tf.float16: 1e-3, tf.bfloat16: 1e-2}


def rel_l2(got, want):
    """||got - want|| / ||want|| in float64 (0 when both are all zeros)."""
    got = np.asarray(tf.cast(got, tf.float64))
    want = np.asarray(tf.cast(want, tf.float64))
    denom = np.linalg.norm(want)
    diff = np.linalg.norm(got - want)
    return diff / denom if denom > 0 else diff


def assert_rel_l2(test, got, want, tol, what):
    """Asserts shapes match and the relative L2 error is <= tol; the message has the numbers."""
    test.assertEqual(tuple(got.shape), tuple(want.shape), f"{what}: shape")
    err = rel_l2(got, want)
    if not err <= tol:
        diff = np.abs(np.asarray(tf.cast(got, tf.float64)) - np.asarray(tf.cast(want, tf.float64)))
        test.fail(f"{what}: relative L2 error {err:.3e} > {tol:.1e} (max |diff| {diff.max():.3e} "
                  f"at index {np.unravel_index(diff.argmax(), diff.shape)}, "
                  f"|want|max {np.abs(np.asarray(tf.cast(want, tf.float64))).max():.3e})")


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def _dilate_axis(w, rate, axis):
    if rate == 1 or w.shape[axis] == 1:
        return w
    zeros_shape = list(w.shape)
    zeros_shape[axis] = rate - 1
    zeros = tf.zeros(zeros_shape, w.dtype)
    parts = []
    for tap in tf.split(w, w.shape[axis], axis=axis):
        parts += [tap, zeros]
    return tf.concat(parts[:-1], axis)


def explicit_padding(pairs, data_format):
    """((top, bottom), (left, right)) -> the 4 pairs conv2d takes, in data_format order."""
    (top, bottom), (left, right) = pairs
    if data_format == "NHWC":
        return [[0, 0], [top, bottom], [left, right], [0, 0]]
    return [[0, 0], [0, 0], [top, bottom], [left, right]]


def reference_conv2d(x, w, strides, padding, data_format="NHWC", dilations=1):
    """tf.nn.conv2d's result, composed from what TF's CPU kernels differentiate.

    Args:
      x: float32 input in data_format.
      w: float32 filter ``[R, S, C / groups, K]``.
      strides, dilations: int or (h, w).
      padding: "SAME", "VALID" or ((top, bottom), (left, right)).
      data_format: "NHWC" or "NCHW".

    For an empty input or filter the result is zeros of the shape that TF's
    shape functions give this composition (traced, no kernel runs): CPU
    kernels disagree on empty inputs (oneDNN's returns wrong shapes or
    rejects some), and only padding can reach the filter. It stays
    differentiable: zero gradients of the inputs' shapes.
    """
    if x.shape.num_elements() == 0 or w.shape.num_elements() == 0:
        traced = tf.function(lambda a, b: _composed_conv2d(
            a, b, strides, padding, data_format, dilations)).get_concrete_function(
                tf.TensorSpec(x.shape, x.dtype), tf.TensorSpec(w.shape, w.dtype))
        return tf.zeros(traced.output_shapes, x.dtype) + 0 * (tf.reduce_sum(x) + tf.reduce_sum(w))
    return _composed_conv2d(x, w, strides, padding, data_format, dilations)


def _composed_conv2d(x, w, strides, padding, data_format, dilations):
    if data_format == "NCHW":
        x = tf.transpose(x, [0, 2, 3, 1])
    if isinstance(padding, str):
        mode = padding
    else:
        (top, bottom), (left, right) = padding
        x = tf.pad(x, [[0, 0], [top, bottom], [left, right], [0, 0]])
        mode = "VALID"
    dh, dw = _pair(dilations)
    w = _dilate_axis(_dilate_axis(w, dh, 0), dw, 1)
    group_in, out_channels = w.shape[2], w.shape[3]
    groups = x.shape[-1] // group_in
    group_out = out_channels // groups
    ys = [tf.nn.conv2d(x[..., g * group_in:(g + 1) * group_in],
                       w[..., g * group_out:(g + 1) * group_out], list(_pair(strides)), mode)
          for g in range(groups)]
    y = tf.concat(ys, axis=-1) if groups > 1 else ys[0]
    if data_format == "NCHW":
        y = tf.transpose(y, [0, 3, 1, 2])
    return y


class OnGpuWithoutTf32:
    """A mixin for the GPU variant of a test class: skips where TensorFlow
    sees no GPU, and runs each test with TF32 off (restored after it), so
    that float32 keeps its 1e-5 bounds."""

    def setUp(self):
        super().setUp()
        if not tf.config.list_physical_devices("GPU"):
            self.skipTest("no GPU")
        tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        self.addCleanup(tf.config.experimental.enable_tensor_float_32_execution, tf32)


def random_tensor(rng, shape, dtype):
    """Standard-normal values rounded to dtype, and the same values in float32."""
    rounded = tf.cast(tf.constant(rng.standard_normal(shape), tf.float32), dtype)
    return rounded, tf.cast(rounded, tf.float32)


def pairwise(factors):
    """A greedy all-pairs covering array: every level of every factor meets every
    level of every other factor in at least one case (far fewer cases than the
    cartesian product). Deterministic.

    Args:
      factors: dict name -> list of levels.

    Returns:
      A list of dicts name -> level.
    """
    names = list(factors)
    counts = [len(factors[n]) for n in names]
    uncovered = {(i, a, j, b) for i in range(len(names)) for j in range(i + 1, len(names))
                 for a in range(counts[i]) for b in range(counts[j])}

    def key(k, c, m, v):
        return (k, c, m, v) if k < m else (m, v, k, c)

    cases = []
    while uncovered:
        i, a, j, b = min(uncovered)
        chosen = {i: a, j: b}
        for k in range(len(names)):
            if k not in chosen:
                chosen[k] = max(range(counts[k]), key=lambda c: sum(
                    key(k, c, m, v) in uncovered for m, v in chosen.items()))
        uncovered -= {key(k, chosen[k], m, chosen[m])
                      for k in chosen for m in chosen if k < m}
        cases.append({names[k]: factors[names[k]][chosen[k]] for k in range(len(names))})
    return cases
