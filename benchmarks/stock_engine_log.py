"""Which cuDNN engine stock TensorFlow runs for backward-data of DeepBench
speakerid_54 (1>64, 161x700, 5x5, stride 2, pad 1) at N=256, through cuDNN's
own API log. Run with the limit in TF's variable, e.g.

  TF_CUDNN_WORKSPACE_LIMIT_IN_MB=64 CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=/tmp/cudnn.log \
    python benchmarks/stock_engine_log.py

It times the pass after TF's autotuning and prints the marker from which the
log holds only the timed calls.
"""
import time

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
w = tf.constant(rng.standard_normal((5, 5, 1, 64)), tf.float32)
dy = tf.constant(rng.standard_normal((256, 80, 349, 64)), tf.float32)
pads = [0, 0, 1, 1, 1, 1, 0, 0]


@tf.function
def dx():
    return tf.raw_ops.Conv2DBackpropInput(input_sizes=[256, 161, 700, 1], filter=w,
                                          out_backprop=dy, strides=[1, 2, 2, 1],
                                          padding="EXPLICIT", explicit_paddings=pads)


with tf.device("/GPU:0"):
    for _ in range(3):
        dx().numpy()
    start = time.perf_counter()
    for _ in range(10):
        out = dx()
    out.numpy()
    print(f"stock backward-data: {(time.perf_counter() - start) / 10 * 1e3:.3f} ms per call")
