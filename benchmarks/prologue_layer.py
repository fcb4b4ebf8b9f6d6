"""One batch-normalized layer's convolution with the previous batch norm as its
prologue, against the same math unfused (GPU machine).

    python benchmarks/prologue_layer.py [PRECISION] [N] [H] [C] [K] [R]
        (default float16 256 56 64 64 3: a ResNet-50 stage-1 3x3 layer)

The layer: ``y = conv2d(relu(x * scale + offset), w)`` and the per-channel
sum and sum of squares of ``y`` (what the next batch norm needs), NHWC,
stride 1, SAME. Three ways, each timed for the forward pass alone and for a
training step's forward and backward (gradients of x, w, scale and offset):

* ``stock-xla``: TF ops compiled with XLA (``jit_compile=True``): the
  normalization, ``tf.nn.conv2d`` and two reductions;
* ``statistics``: the normalization as TF ops, then
  ``tf_ucudnn.conv2d_with_statistics`` (the statistics as the convolution's
  epilogue), without XLA;
* ``prologue``: ``tf_ucudnn.conv2d_with_statistics(..., input_scale,
  input_offset, input_relu=True)``: one op, the normalization as the
  convolution's prologue (one cuDNN graph where an engine fuses it), without
  XLA;
* ``prologue-xla``: the same compiled with XLA (the op a custom call, its
  gradient's elementwise ops and reductions XLA's fusions).

Median of 5 repeats of 20 runs after warm-up, ms. Prints the table and writes
prologue_layer_PRECISION.json into $OUT (or the working directory).
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

import tf_ucudnn
from tf_ucudnn.batch_norm import sums
from tf_ucudnn.bench import harness


def main(argv):
    precision = argv[1] if len(argv) > 1 else "float16"
    n, h, c, k, r = (int(a) for a in (argv[2:7] + ["256", "56", "64", "64", "3"][len(argv[2:7]):]))
    dtype = tf.as_dtype(precision)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((n, h, h, c)), dtype)
    w = tf.constant(rng.standard_normal((r, r, c, k)) / np.sqrt(r * r * c), dtype)
    scale = tf.constant(rng.uniform(0.5, 1.5, c), tf.float32)
    offset = tf.constant(rng.uniform(-0.5, 0.5, c), tf.float32)

    def normalized(x, scale, offset):
        return tf.nn.relu(tf.cast(x, tf.float32) * scale + offset)

    def stock(x, w, scale, offset):
        y = tf.nn.conv2d(tf.cast(normalized(x, scale, offset), dtype), w, 1, "SAME")
        return (y,) + sums(y, "NHWC")

    def statistics(x, w, scale, offset):
        return tf_ucudnn.conv2d_with_statistics(tf.cast(normalized(x, scale, offset), dtype), w,
                                                1, "SAME")

    def prologue(x, w, scale, offset):
        return tf_ucudnn.conv2d_with_statistics(x, w, 1, "SAME", input_scale=scale,
                                                input_offset=offset, input_relu=True)

    def step_of(layer):
        def step(x, w, scale, offset):
            with tf.GradientTape() as tape:
                tape.watch([x, w, scale, offset])
                y, total, squares = layer(x, w, scale, offset)
                loss = (tf.reduce_mean(tf.cast(y, tf.float32)) + 1e-3 * tf.reduce_sum(total)
                        + 1e-6 * tf.reduce_sum(squares))
            return tape.gradient(loss, [x, w, scale, offset])
        return step

    rows = []
    for name, layer, xla in (("stock-xla", stock, True), ("statistics", statistics, False),
                             ("prologue", prologue, False), ("prologue-xla", prologue, True)):
        row = dict(way=name)
        for part, fn in (("forward_ms", layer), ("step_ms", step_of(layer))):
            row[part] = harness.time_ms(tf.function(fn, jit_compile=xla), (x, w, scale, offset),
                                        warmup=3, repeats=5, iters=20)[0]
        rows.append(row)
    gpu = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
    print(f"prologue_layer: {gpu.get('device_name', '?')}, {precision}, N={n} {h}x{h} "
          f"C={c} K={k} {r}x{r}")
    print(f"{'way':<12} {'forward ms':>10} {'step ms':>9}  {'step vs stock-xla':>17}")
    base = rows[0]["step_ms"]
    for row in rows:
        print(f"{row['way']:<12} {row['forward_ms']:>10.3f} {row['step_ms']:>9.3f}  "
              f"{base / row['step_ms']:>16.2f}x")
    plans = [dict(r) for r in tf_ucudnn.plans() if "GPU" in r["device"]]
    for r in plans:
        print(f"  plan {r['pass']} {r['shape']}: "
              + ", ".join(f"{mb['size']} {mb['algo']}" for mb in r["micro_batches"]))
    out_dir = os.environ.get("OUT", ".")
    with open(os.path.join(out_dir, f"prologue_layer_{precision}.json"), "w") as f:
        json.dump(dict(gpu=gpu.get("device_name"), precision=precision,
                       shape=dict(n=n, h=h, c=c, k=k, r=r), rows=rows, plans=plans), f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
