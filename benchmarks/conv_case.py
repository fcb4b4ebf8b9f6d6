"""One convolution of the benchmark scripts, from "N,C,H,W,K,R,S,STRIDE,PAD".

Used by pass_times.py and stock_engine_log.py: NHWC tensors x [N, H, W, C],
filters [R, S, C, K] and dy [N, OH, OW, K] of normal random values in the
dtype, with the stride and the symmetric padding given, and stock TF's op
for each pass.
"""
import os
import sys
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

# The repository root, so that the scripts import this checkout's tf_ucudnn.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class ConvCase:
    """The shape, the tensors and the stock op arguments of one convolution."""
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int
    pad: int
    x: tf.Tensor = None
    filters: tf.Tensor = None
    dy: tf.Tensor = None

    @property
    def strides(self):
        return [1, self.stride, self.stride, 1]

    @property
    def explicit_paddings(self):
        """TF's flat explicit_paddings for NHWC."""
        return [0, 0, self.pad, self.pad, self.pad, self.pad, 0, 0]

    @property
    def padding(self):
        """The same padding as tf_ucudnn.conv2d's explicit [[0, 0], [top, bottom], ...]."""
        return [[0, 0], [self.pad, self.pad], [self.pad, self.pad], [0, 0]]

    @property
    def input_sizes(self):
        return [self.n, self.h, self.w, self.c]

    @property
    def filter_sizes(self):
        return [self.r, self.s, self.c, self.k]


def make_case(shape, dtype_name):
    """A ConvCase of `shape` ("N,C,H,W,K,R,S,STRIDE,PAD") with tensors of
    `dtype_name` ("float32", "float16" or "bfloat16") on the default device.

    Raises:
      ValueError: `shape` is not nine integers.
    """
    values = [int(v) for v in shape.split(",")]
    if len(values) != 9:
        raise ValueError(f"shape must be N,C,H,W,K,R,S,STRIDE,PAD, got {shape!r}")
    case = ConvCase(*values)
    out_h = (case.h + 2 * case.pad - case.r) // case.stride + 1
    out_w = (case.w + 2 * case.pad - case.s) // case.stride + 1
    dtype = getattr(tf, dtype_name)
    rng = np.random.default_rng(0)
    case.x = tf.cast(rng.standard_normal((case.n, case.h, case.w, case.c)), dtype)
    case.filters = tf.cast(rng.standard_normal((case.r, case.s, case.c, case.k)), dtype)
    case.dy = tf.cast(rng.standard_normal((case.n, out_h, out_w, case.k)), dtype)
    return case


def stock_pass(case, pass_):
    """Stock TF's op for `pass_` ("forward", "backward-data" or
    "backward-filter") of `case`, as a function of no arguments."""
    conv = dict(strides=case.strides, padding="EXPLICIT", explicit_paddings=case.explicit_paddings)
    if pass_ == "forward":
        return lambda: tf.raw_ops.Conv2D(input=case.x, filter=case.filters, **conv)
    if pass_ == "backward-data":
        return lambda: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=case.input_sizes, filter=case.filters, out_backprop=case.dy, **conv)
    return lambda: tf.raw_ops.Conv2DBackpropFilter(
        input=case.x, filter_sizes=case.filter_sizes, out_backprop=case.dy, **conv)
