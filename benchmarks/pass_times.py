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

import tensorflow as tf

from conv_case import make_case, stock_pass  # also puts the checkout's tf_ucudnn on the path
import tf_ucudnn
from tf_ucudnn.bench import harness


def time_ms(fn, calls):
    """Median ms per call of `fn` in a tf.function: 3 warm-ups, 5 repeats of `calls` calls."""
    return harness.time_ms(tf.function(fn), (), warmup=3, repeats=5, iters=calls)[0]


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
    knobs = dict(strides=case.strides, padding=case.padding, workspace_limit=args.limit)
    ours = {
        "forward": lambda: tf_ucudnn.conv2d(case.x, case.filters, **knobs),
        "backward-data": lambda: tf_ucudnn.conv2d_backprop_input(
            case.input_sizes, case.filters, case.dy, **knobs),
        "backward-filter": lambda: tf_ucudnn.conv2d_backprop_filter(
            case.x, case.filter_sizes, case.dy, **knobs),
    }
    print(f"shape {args.shape} {args.dtype}, tf_ucudnn at {args.limit}; ms per call")
    print(f"{'pass':16} {'stock TF':>9} {'tf_ucudnn':>9} {'speedup':>8}")
    with tf.device("/GPU:0"):
        for name in harness.PASSES:
            t_stock = time_ms(stock_pass(case, name), args.calls)
            t_ours = time_ms(ours[name], args.calls)
            print(f"{name:16} {t_stock:9.3f} {t_ours:9.3f} {t_stock / t_ours:7.2f}x")
    print(tf_ucudnn.plans())


if __name__ == "__main__":
    main()
