"""Host-side cost of one op call, stock TF against tf_ucudnn, per pass.

Each pass alone in a tf.function, called 200 times from Python (median of 5
repeats, ms per call from a synced GPU to a synced GPU), on a tiny
convolution (N=1, 8x8x8 -> 8, 3x3), whose GPU time is a few microseconds, so
the figure is the host's: the function call, TF's executor and the op's own
work. And on DeepBench's facerec_16 (256>512 7x7, N=256), one of the layers
where tf_ucudnn's step is slower than the sum of its cuDNN times.

    python benchmarks/op_overhead.py   # on a GPU machine
"""
import json
import sys

import tensorflow as tf

import tf_ucudnn
from tf_ucudnn import bench

LAYERS = [(bench.ConvLayer(("tiny",), 8, 8, 8, 8, 3, 3, 1, 1, 1, 1), 1),
          (bench.ConvLayer(("deepbench/facerec_16_3x3",), 256, 7, 7, 512, 3, 3, 1, 1, 1, 1), 256)]
rows = []
for layer, batch in LAYERS:
    x, w, dy = bench.random_tensors(layer, batch, "NHWC", tf.float32)
    for name in bench.PASSES:
        row = dict(layer=layer.name, batch=batch, **{"pass": name})
        for mode in ("stock", "ucudnn"):
            knobs = dict(workspace_limit=256 << 20) if mode == "ucudnn" else {}
            fn = tf.function(bench.make_passes(mode, layer, batch, "NHWC", passes=(name,),
                                               **knobs))
            with tf.device("/GPU:0"):
                row[mode + "_ms"], _ = bench.time_ms(fn, (x, w, dy), warmup=20, repeats=5,
                                                     iters=200)
        row["plan_ms"] = tf_ucudnn.plans()[-1]["time_ms"]
        rows.append(row)
        print(f"{layer.name:28s} N={batch:<4d} {name:16s} stock {row['stock_ms']:.4f} ms  "
              f"tf_ucudnn {row['ucudnn_ms']:.4f} ms  (its cuDNN time {row['plan_ms']:.4f} ms)",
              flush=True)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(rows, f, indent=2)
