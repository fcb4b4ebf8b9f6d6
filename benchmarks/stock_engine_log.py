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

import tensorflow as tf

from conv_case import make_case, stock_pass  # also puts the checkout's tf_ucudnn on the path
from tf_ucudnn.bench import harness


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="256,1,161,700,64,5,5,2,1",
                        help="N,C,H,W,K,R,S,STRIDE,PAD (default: speakerid_54)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--pass", dest="pass_", default="backward-data", choices=harness.PASSES)
    args = parser.parse_args()
    with tf.device("/GPU:0"):
        case = make_case(args.shape, args.dtype)
        ms, _ = harness.time_ms(tf.function(stock_pass(case, args.pass_)), (), warmup=3,
                                repeats=1, iters=10)
    print(f"stock {args.pass_}: {ms:.3f} ms per call")


if __name__ == "__main__":
    main()
