"""Per-pass times of one convolution: stock TF against tf_ucudnn, in one process.

    TF_CUDNN_WORKSPACE_LIMIT_IN_MB=64 python benchmarks/pass_times.py \\
        [--shape N,C,H,W,K,R,S,STRIDE,PAD] [--dtype float16] [--limit 64MiB] [--calls 20]

For each pass (forward, backward-data, backward-filter) in NHWC: stock TF's op
(its workspace limit from TF_CUDNN_WORKSPACE_LIMIT_IN_MB, read once per
process) and tf_ucudnn's op at --limit, each in a tf.function, three warm-up
calls, then the median over 5 repeats of --calls calls, in ms per call; and
tf_ucudnn's plan from tf_ucudnn.plans(). The default shape is DeepBench
vision_30 (192>32, 28x28, 5x5, pad 2) at N=256. Where bench's layer mode
gives one figure for the three passes, this says which pass differs.
"""
import argparse
import statistics
import time

import tensorflow as tf

import tf_ucudnn
from conv_case import make_case


def timed(fn, calls):
    """Median ms per call of `fn` over 5 repeats of `calls` calls (after 3 warm-ups)."""
    for _ in range(3):
        fn().numpy()
    repeats = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn()
        out.numpy()
        repeats.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(repeats)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="256,192,28,28,32,5,5,1,2",
                        help="N,C,H,W,K,R,S,STRIDE,PAD (default: DeepBench vision_30)")
    parser.add_argument("--dtype", default="float16", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--limit", default="64MiB", help="tf_ucudnn's workspace limit")
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    with tf.device("/GPU:0"):
        case = make_case(args.shape, args.dtype)
    conv = dict(strides=case.strides, padding="EXPLICIT", explicit_paddings=case.explicit_paddings)
    ucudnn_args = dict(strides=case.strides, workspace_limit=args.limit,
                       padding=[[0, 0], [case.pad, case.pad], [case.pad, case.pad], [0, 0]])
    runs = {
        "forward": (
            lambda: tf.raw_ops.Conv2D(input=case.x, filter=case.filters, **conv),
            lambda: tf_ucudnn.conv2d(case.x, case.filters, **ucudnn_args)),
        "backward-data": (
            lambda: tf.raw_ops.Conv2DBackpropInput(input_sizes=case.input_sizes,
                                                   filter=case.filters, out_backprop=case.dy,
                                                   **conv),
            lambda: tf_ucudnn.conv2d_backprop_input(case.input_sizes, case.filters, case.dy,
                                                    **ucudnn_args)),
        "backward-filter": (
            lambda: tf.raw_ops.Conv2DBackpropFilter(input=case.x, filter_sizes=case.filter_sizes,
                                                    out_backprop=case.dy, **conv),
            lambda: tf_ucudnn.conv2d_backprop_filter(case.x, case.filter_sizes, case.dy,
                                                     **ucudnn_args)),
    }
    print(f"shape {args.shape} {args.dtype}, tf_ucudnn at {args.limit}; ms per call")
    print(f"{'pass':16} {'stock TF':>9} {'tf_ucudnn':>9} {'speedup':>8}")
    with tf.device("/GPU:0"):
        for name, (stock_fn, ucudnn_fn) in runs.items():
            t_stock = timed(tf.function(stock_fn), args.calls)
            t_ours = timed(tf.function(ucudnn_fn), args.calls)
            print(f"{name:16} {t_stock:9.3f} {t_ours:9.3f} {t_stock / t_ours:7.2f}x")
    print(tf_ucudnn.plans())


if __name__ == "__main__":
    main()
