"""Prints a kernel's benchmark table (every candidate at every micro-batch size):
which legacy algorithms and graph-API engines were measured, their time and
workspace. Default: DeepBench speakerid_54 (1>64, 161x700, 5x5, stride 2, pad 1)
at N=256 within 64 MiB, the layer where the plan stays above stock TF.

  python benchmarks/engine_table.py [--limit-mib 64] [--sizes 256,128,8] \
      [--shape N,C,H,W,K,R,S,STRIDE,PAD] [--dtype float16]

With UCUDNN_GRAPH_SEARCH=exhaustive, UCUDNN_GRAPH_PRUNE_FACTOR=0 and
UCUDNN_DATABASE=off it lists every candidate cuDNN offers, each timed.
"""
import argparse

import tensorflow as tf

from conv_case import make_case  # also puts the checkout's tf_ucudnn on the path
import tf_ucudnn
from tf_ucudnn.bench.models import candidate_name
from tf_ucudnn.engine_info import kernels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=int, default=64)
    parser.add_argument("--sizes", default="256,128,32,8")
    parser.add_argument("--shape", default="256,1,161,700,64,5,5,2,1",
                        help="N,C,H,W,K,R,S,STRIDE,PAD (default: DeepBench speakerid_54)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    args = parser.parse_args()
    limit = args.limit_mib << 20
    with tf.device("/GPU:0"):
        case = make_case(args.shape, args.dtype)
        with tf.GradientTape() as tape:
            tape.watch([case.x, case.filters])
            y = tf_ucudnn.conv2d(case.x, case.filters, case.stride, case.padding,
                                 workspace_limit=limit)
        tape.gradient(y, [case.x, case.filters], output_gradients=tf.ones_like(y))
    sizes = {int(s) for s in args.sizes.split(",")}
    for k in kernels():
        print(f"\n{k['pass']} {k['shape']} limit {k['key']['workspace_limit'] >> 20} MiB; "
              f"plan {k['plan']['time_ms']:.3f} ms")
        names = [candidate_name(a) for a in k["algos"]]
        for row in sorted(k["table"], key=lambda r: (-r["size"], r["time_ms"])):
            if row["size"] in sizes:
                print(f"  {row['size']:4d}  {row['time_ms']:8.3f} ms  "
                      f"{row['workspace_bytes'] / 2**20:9.1f} MiB  {names[row['algo']]}")


if __name__ == "__main__":
    main()
