"""Where a convolution's batch-norm statistics cost least: in its cuDNN graph
(``conv2d_with_statistics``) or as float32 reductions of its output after a
plain convolution (GPU machine).

    python benchmarks/statistics_placement.py [--precisions P,...] [--shapes NAME,...]

For each shape and precision, NHWC, three ways under XLA (``jit_compile``):

* ``stock-xla``: ``tf.nn.conv2d``, then the sum and sum of squares of its
  output as float32 reductions (XLA's fusions);
* ``fused``: ``tf_ucudnn.conv2d_with_statistics`` (the statistics as the
  epilogue of the convolution's cuDNN graph; one custom call);
* ``after``: ``tf_ucudnn.conv2d`` and the same reductions as stock's;

and ``fused`` and ``after`` without XLA. Each is timed for the forward pass
(output and sums) and for a training step (gradients of input and filter),
median of 5 repeats of 20 runs after warm-up, ms. Prints one table and
writes statistics_placement.json into $OUT (or the working directory).
Answers ``UCUDNN_STATISTICS_AFTER_CHANNELS``: from how many input channels
the cuDNN graph pays.
"""

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tf_ucudnn  # noqa: E402
from tf_ucudnn import table  # noqa: E402
from tf_ucudnn.batch_norm import sums  # noqa: E402
from tf_ucudnn.bench import harness  # noqa: E402

# name: (batch, input height = width, in channels, out channels, filter size,
# stride, padding)
SHAPES = {
    "resnet50_stem": (256, 230, 3, 64, 7, 2, "VALID"),  # after Keras' 3-pixel zero padding
    "unet_first": (32, 384, 3, 64, 3, 1, "SAME"),
    "c8_112": (64, 112, 8, 64, 3, 1, "SAME"),
    "c16_112": (64, 112, 16, 64, 3, 1, "SAME"),
    "c32_112": (64, 112, 32, 64, 3, 1, "SAME"),
    "resnet50_3x3": (256, 56, 64, 64, 3, 1, "SAME"),
    "resnet50_1x1": (256, 56, 64, 256, 1, 1, "SAME"),
}
WAYS = (("stock-xla", True), ("fused-xla", True), ("after-xla", True), ("fused", False),
        ("after", False))


def layer_of(way, stride, padding):
    """The layer of one way: (x, w) -> (y, sum, sum_of_squares)."""
    if way.startswith("stock"):
        def layer(x, w):
            y = tf.nn.conv2d(x, w, stride, padding)
            return (y,) + sums(y, "NHWC")
    elif way.startswith("fused"):
        def layer(x, w):
            return tf_ucudnn.conv2d_with_statistics(x, w, stride, padding)
    else:
        def layer(x, w):
            y = tf_ucudnn.conv2d(x, w, stride, padding)
            return (y,) + sums(y, "NHWC")
    return layer


def step_of(layer):
    def step(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y, total, squares = layer(x, w)
            loss = (tf.reduce_mean(tf.cast(y, tf.float32)) + 1e-3 * tf.reduce_sum(total)
                    + 1e-6 * tf.reduce_sum(squares))
        return tape.gradient(loss, [x, w])
    return step


def measure(name, precision):
    n, h, c, k, r, stride, padding = SHAPES[name]
    dtype = tf.as_dtype(precision)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((n, h, h, c)), dtype)
    w = tf.constant(rng.standard_normal((r, r, c, k)) / np.sqrt(r * r * c), dtype)
    row = dict(shape=name, precision=precision)
    for way, xla in WAYS:
        layer = layer_of(way, stride, padding)
        for part, fn in (("forward", layer), ("step", step_of(layer))):
            row[f"{way} {part}"] = harness.time_ms(tf.function(fn, jit_compile=xla), (x, w),
                                                   warmup=3, repeats=5, iters=20)[0]
    return row


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--precisions", default="float16,bfloat16,float32")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args(argv)
    gpus = tf.config.list_physical_devices("GPU")
    gpu = tf.config.experimental.get_device_details(gpus[0]) if gpus else {"device_name": "CPU"}
    rows = []
    for precision in args.precisions.split(","):
        for name in args.shapes.split(","):
            rows.append(measure(name, precision))
            print(f"  {precision} {name} done", flush=True)
    print(f"\nstatistics_placement: {gpu.get('device_name', '?')}; ms, forward / training step")
    header = ("shape", "precision") + tuple(w for w, _ in WAYS) + ("after-xla / fused-xla",)
    body = [(r["shape"], r["precision"])
            + tuple(f"{r[w + ' forward']:.3f} / {r[w + ' step']:.3f}" for w, _ in WAYS)
            + (f"{r['after-xla step'] / r['fused-xla step']:.2f}x",) for r in rows]
    print(table.render(header, body, align="ll" + "r" * len(WAYS) + "r"))
    plans = [dict(p) for p in tf_ucudnn.plans() if "GPU" in p["device"]]
    out = os.path.join(os.environ.get("OUT", "."), "statistics_placement.json")
    with open(out, "w") as f:
        json.dump(dict(gpu=gpu.get("device_name"), shapes=SHAPES, rows=rows, plans=plans), f,
                  indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1:])
