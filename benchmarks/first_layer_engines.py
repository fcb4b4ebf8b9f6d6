"""Which cuDNN candidates reach the fast first-layer kernels for ResNet-50's
float16 stem, by how its input is given (GPU machine).

    python benchmarks/first_layer_engines.py [--variants NAME,...] [--limit 256MiB]

The stem (N = 256, 7×7 stride 2, 64 output channels, NHWC, float16) in five
forms: its input of 3 or 4 channels (XLA's or tf_ucudnn's padding to 4), the
3-pixel zero padding as a tensor of its own (230², padding 0) or inside the
convolution (224², padding 3), and with a bias (the graph XLA builds for
Keras' ``Conv2D(use_bias=True)``; its forward only). For each, the forward
and backward-filter pass are planned by tf_ucudnn with every candidate
(``UCUDNN_ENGINES=all``, ``UCUDNN_GRAPH_SEARCH=exhaustive``, unless set)
within ``--limit`` of workspace, timed through the TF op without XLA, and
timed against the same pass by stock XLA (``tf.nn.conv2d`` and
``Conv2DBackpropFilter`` under ``jit_compile``).

Prints, per form and pass, the plan, both times (ms, median of 5 repeats of
20 calls), and each candidate's fastest whole-batch equivalent from the
benchmark table (the time of its best micro-batch size × the number of
micro-batches, and that size's workspace in bytes); writes
first_layer_engines.json into $OUT (or the working directory).
"""

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tf_ucudnn import engine_info, nn, table  # noqa: E402
from tf_ucudnn.bench import harness  # noqa: E402
from tf_ucudnn.bench.models.plans import candidate_name  # noqa: E402
from tf_ucudnn.plan_registry import describe_micro_batches  # noqa: E402

N, K, R, STRIDE = 256, 64, 7, 2
# name: (input channels, input height = width, padding in the convolution, bias)
VARIANTS = {
    "c4_230_pad0": (4, 230, 0, False),  # tf_ucudnn's stem under XLA today
    "c3_230_pad0": (3, 230, 0, False),
    "c3_224_pad3": (3, 224, 3, False),
    "c4_224_pad3": (4, 224, 3, False),
    "c3_224_pad3_bias": (3, 224, 3, True),  # stock XLA's stem forward graph
}
TIMING = dict(warmup=3, repeats=5, iters=20)


def candidates(kernel):
    """Each candidate's best whole-batch time from ``kernel``'s benchmark table:
    (ms, name, micro-batch size, workspace bytes), fastest first."""
    best = {}
    for row in kernel["table"]:
        whole = row["time_ms"] * (kernel["key"]["conv"]["batch"] / row["size"])
        if row["algo"] not in best or whole < best[row["algo"]][0]:
            best[row["algo"]] = (whole, row["size"], row["workspace_bytes"])
    out = [(ms, candidate_name(kernel["algos"][a]), size, ws)
           for a, (ms, size, ws) in best.items()]
    return sorted(out)


def measure(name, limit):
    c, h, pad, with_bias = VARIANTS[name]
    padding = [[0, 0], [pad, pad], [pad, pad], [0, 0]] if pad else "VALID"
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((N, h, h, c)), tf.float16)
    w = tf.constant(rng.standard_normal((R, R, c, K)) / np.sqrt(R * R * c), tf.float16)
    b = tf.constant(rng.standard_normal(K), tf.float16)
    out_hw = (h + 2 * pad - R) // STRIDE + 1
    dy = tf.constant(rng.standard_normal((N, out_hw, out_hw, K)), tf.float16)

    def ours_forward(x, w, b):
        return nn.conv2d(x, w, STRIDE, padding, bias=b if with_bias else None,
                         workspace_limit=limit)

    def stock_forward(x, w, b):
        y = tf.nn.conv2d(x, w, STRIDE, padding)
        return tf.nn.bias_add(y, b) if with_bias else y

    def ours_filter(x, dy):
        return nn.conv2d_backprop_filter(x, [R, R, c, K], dy, STRIDE, padding,
                                         workspace_limit=limit)

    def stock_filter(x, dy):
        return tf.compat.v1.nn.conv2d_backprop_filter(x, [R, R, c, K], dy, [1, STRIDE, STRIDE, 1],
                                                      padding)

    passes = [("forward", ours_forward, stock_forward, (x, w, b))]
    if not with_bias:  # the same backward-filter as without
        passes.append(("backward-filter", ours_filter, stock_filter, (x, dy)))
    rows = []
    for pass_, ours, stock, args in passes:
        before = {k["id"] for k in engine_info.kernels()}
        ours_ms = harness.time_ms(tf.function(ours), args, **TIMING)[0]
        stock_ms = harness.time_ms(tf.function(stock, jit_compile=True), args, **TIMING)[0]
        new = [k for k in engine_info.kernels() if k["id"] not in before]
        kernel = new[0] if new else None
        plan = kernel["plan"] if kernel else {"micro_batches": [], "time_ms": float("nan")}
        rows.append(dict(variant=name, pass_=pass_, ours_ms=ours_ms, stock_xla_ms=stock_ms,
                         plan=describe_micro_batches(plan["micro_batches"]),
                         planned_ms=plan["time_ms"],
                         candidates=candidates(kernel) if kernel else []))
    return rows


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--limit", default="256MiB", help="workspace limit per kernel")
    parser.add_argument("--top", type=int, default=12, help="candidates printed per pass")
    args = parser.parse_args(argv)
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        sys.exit("first_layer_engines.py needs a GPU")
    # Read when each kernel is created: every candidate, every graph engine id.
    os.environ.setdefault("UCUDNN_ENGINES", "all")
    os.environ.setdefault("UCUDNN_GRAPH_SEARCH", "exhaustive")
    gpu = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "?")
    rows = []
    for name in args.variants.split(","):
        rows += measure(name, args.limit)
        print(f"  {name} done", flush=True)
    print(f"\nfirst_layer_engines: {gpu}; ResNet-50 stem, N = {N}, float16, limit {args.limit}; ms")
    body = [(r["variant"], r["pass_"], f"{r['ours_ms']:.3f}", f"{r['stock_xla_ms']:.3f}",
             f"{r['planned_ms']:.3f}", r["plan"]) for r in rows]
    print(table.render(("form", "pass", "ours", "stock XLA", "planned", "plan"), body,
                       align="llrrrl"))
    for r in rows:
        print(f"\n{r['variant']} {r['pass_']}: candidates, best whole-batch ms (size, workspace)")
        for ms, name, size, ws in r["candidates"][:args.top]:
            print(f"  {ms:8.3f}  {name:40s} {size:4d}  {ws}")
    out = os.path.join(os.environ.get("OUT", "."), "first_layer_engines.json")
    with open(out, "w") as f:
        json.dump(dict(gpu=gpu, limit=args.limit, rows=rows), f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1:])
