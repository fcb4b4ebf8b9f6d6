"""Which cuDNN engine stock TensorFlow runs for one convolution pass, through
cuDNN's own API log. By default backward-data of DeepBench speakerid_54
(1>64, 161x700, 5x5, stride 2, pad 1) at N=256 in float32. Run with the limit
in TF's variable, e.g.

  TF_CUDNN_WORKSPACE_LIMIT_IN_MB=64 CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=/tmp/cudnn.log \\
    python benchmarks/stock_engine_log.py [--shape N,C,H,W,K,R,S,STRIDE,PAD] \\
    [--dtype float32|float16|bfloat16] [--pass forward|backward-data|backward-filter]

It times the pass (NHWC) after TF's autotuning and prints the marker from
which the log holds only the timed calls.
"""
import argparse
import time

import numpy as np
import tensorflow as tf

PASSES = ("forward", "backward-data", "backward-filter")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="256,1,161,700,64,5,5,2,1",
                        help="N,C,H,W,K,R,S,STRIDE,PAD (default: speakerid_54)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--pass", dest="pass_", default="backward-data", choices=PASSES)
    args = parser.parse_args()
    n, c, h, w_, k, r, s, stride, pad = (int(v) for v in args.shape.split(","))
    dtype = getattr(tf, args.dtype)
    out_h = (h + 2 * pad - r) // stride + 1
    out_w = (w_ + 2 * pad - s) // stride + 1
    rng = np.random.default_rng(0)
    x = tf.cast(rng.standard_normal((n, h, w_, c)), dtype)
    w = tf.cast(rng.standard_normal((r, s, c, k)), dtype)
    dy = tf.cast(rng.standard_normal((n, out_h, out_w, k)), dtype)
    strides = [1, stride, stride, 1]
    pads = [0, 0, pad, pad, pad, pad, 0, 0]

    @tf.function
    def run():
        if args.pass_ == "forward":
            return tf.raw_ops.Conv2D(input=x, filter=w, strides=strides, padding="EXPLICIT",
                                     explicit_paddings=pads)
        if args.pass_ == "backward-data":
            return tf.raw_ops.Conv2DBackpropInput(input_sizes=[n, h, w_, c], filter=w,
                                                  out_backprop=dy, strides=strides,
                                                  padding="EXPLICIT", explicit_paddings=pads)
        return tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[r, s, c, k],
                                               out_backprop=dy, strides=strides,
                                               padding="EXPLICIT", explicit_paddings=pads)

    with tf.device("/GPU:0"):
        for _ in range(3):
            run().numpy()
        start = time.perf_counter()
        for _ in range(10):
            out = run()
        out.numpy()
        print(f"stock {args.pass_}: {(time.perf_counter() - start) / 10 * 1e3:.3f} ms per call")


if __name__ == "__main__":
    main()
