"""Each ResNet-50 convolution with its output's batch-norm statistics (the
per-channel sum and sum of squares): cuDNN's fused graph against the plain
convolution and cudnnReduceTensor after it, as the engine measures them
(GPU machine).

    python benchmarks/statistics_layers.py [--precision float32] [--batch 256]
        [--layers I,J,...] [--timeout S] [--json PATH] [--log PATH] [--from-log LOG]

One child process runs ``tf_ucudnn.conv2d_with_statistics`` on each layer
(NHWC, N = --batch, TF32 on as Keras runs float32) twice under
``UCUDNN_STATISTICS=timed`` and ``UCUDNN_DEBUG_OUTPUT=1``: on a kernel's
first run the engine plans the fused graph and the plain convolution (each
benchmarked with cudaEvents), times the reduction (mean of 3), and logs the
three times and which it keeps. The script prints them per layer, and their
sums over ResNet-50's 53 convolutions (each shape times its count); writes
JSON (default $OUT/statistics_layers_PRECISION.json, or the working
directory) and, with ``--log``, the child's whole log (the engine's candidate
lines among it). ``--layers`` runs only those rows of the table (0-based).
Kernels with no fused engine log nothing and are left out.
Wall-clock timing per call is not used: at these sizes a call's dispatch
(0.3-0.6 ms under XLA) hides the kernels. ``--from-log`` prints the table
from a saved log of such a run instead of running one.
"""

import argparse
import json
import os
import re
import subprocess
import sys

# ResNet-50's convolutions (Keras applications): input H = W, C -> K, R x R,
# stride, padding, and how many of the 53 have the shape.
LAYERS = [
    (230, 3, 64, 7, 2, "VALID", 1),
    (56, 64, 64, 1, 1, "VALID", 1), (56, 64, 64, 3, 1, "SAME", 3),
    (56, 64, 256, 1, 1, "VALID", 4), (56, 256, 64, 1, 1, "VALID", 2),
    (56, 256, 128, 1, 2, "VALID", 1), (28, 128, 128, 3, 1, "SAME", 4),
    (28, 128, 512, 1, 1, "VALID", 4), (56, 256, 512, 1, 2, "VALID", 1),
    (28, 512, 128, 1, 1, "VALID", 3), (28, 512, 256, 1, 2, "VALID", 1),
    (14, 256, 256, 3, 1, "SAME", 6), (14, 256, 1024, 1, 1, "VALID", 6),
    (28, 512, 1024, 1, 2, "VALID", 1), (14, 1024, 256, 1, 1, "VALID", 5),
    (14, 1024, 512, 1, 2, "VALID", 1), (7, 512, 512, 3, 1, "SAME", 3),
    (7, 512, 2048, 1, 1, "VALID", 3), (14, 1024, 2048, 1, 2, "VALID", 1),
    (7, 2048, 512, 1, 1, "VALID", 2),
]

# The engine's log line of one choice (conv_runner.cc).
DECISION = re.compile(r"forward N=\d+ C=(\d+) H=(\d+) W=\d+ K=(\d+) R=(\d+) S=\d+ "
                      r"stride=(\d+)x\d+ .*: (?P<how>the statistics stay fused|the statistics "
                      r"are reduced after).*?([\d.]+) \+ ([\d.]+) ms against the fused "
                      r"graph's ([\d.]+) ms")


def layer_name(layer):
    h, c, k, r, stride, _, _ = layer
    return f"{h}² {c}->{k} {r}x{r}" + (f" /{stride}" if stride > 1 else "")


def child(precision, batch, layers):
    """Runs each of `layers` twice (the first run chooses, the second runs the choice)."""
    import numpy as np
    import tensorflow as tf

    import tf_ucudnn

    dtype = tf.as_dtype(precision)
    rng = np.random.default_rng(0)
    for h, c, k, r, stride, padding, _ in layers:
        x = tf.constant(rng.standard_normal((batch, h, h, c)), dtype)
        w = tf.constant(rng.standard_normal((r, r, c, k)) / np.sqrt(r * r * c), dtype)
        with tf.device("/GPU:0"):
            for _ in range(2):
                out = tf_ucudnn.conv2d_with_statistics(x, w, stride, padding)
            tf.test.experimental.sync_devices()
        del out
        print(f"done {layer_name((h, c, k, r, stride, padding, 1))}", file=sys.stderr, flush=True)


def parse_layers(text):
    """The row indices of LAYERS in `text` ("0,3,7"); argparse's error if one is not a row."""
    try:
        rows = [int(i) for i in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated integers, got {text!r}")
    bad = [i for i in rows if not 0 <= i < len(LAYERS)]
    if bad:
        raise argparse.ArgumentTypeError(f"rows 0 to {len(LAYERS) - 1} of the layer table, got {bad}")
    return rows


def parse_decisions(log):
    """The engine's choices in `log`: {(H, C, K, R, stride): dict(plain_ms,
    reduce_ms, fused_ms, fused=bool)} (H is the convolution's input height)."""
    found = {}
    for line in log.splitlines():
        m = DECISION.search(line)
        if m:
            c, h, k, r, stride = (int(m.group(i)) for i in range(1, 6))
            found[(h, c, k, r, stride)] = dict(
                plain_ms=float(m.group(7)), reduce_ms=float(m.group(8)),
                fused_ms=float(m.group(9)), fused=m.group("how").endswith("fused"))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", default="float32",
                        choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds before the child process is killed (default 600)")
    parser.add_argument("--layers", default=None, type=parse_layers,
                        help="comma-separated rows of the layer table, 0-based (default all)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--log", default=None, help="where to write the child's whole log")
    parser.add_argument("--from-log", default=None,
                        help="the engine's log of an earlier run: its table, without a GPU")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    layers = LAYERS if args.layers is None else [LAYERS[i] for i in args.layers]
    if args.child:
        child(args.precision, args.batch, layers)
        return 0
    env = dict(os.environ, UCUDNN_STATISTICS="timed", UCUDNN_DEBUG_OUTPUT="1")
    if args.from_log:
        with open(args.from_log) as f:
            log, status = f.read(), 0
    else:
        log, status = run_child(args, env)
        if args.log:
            with open(args.log, "w") as f:
                f.write(log)
    if status != 0:
        print(f"statistics_layers: the child failed ({status}): {log.strip()[-1500:]}",
              file=sys.stderr)
    return report(args, layers, parse_decisions(log), status)


def run_child(args, env):
    """Runs the child; returns its stderr and exit status (or "timeout")."""
    try:
        command = [sys.executable, os.path.abspath(__file__), "--child",
                   "--precision", args.precision, "--batch", str(args.batch)]
        if args.layers is not None:
            command += ["--layers", ",".join(map(str, args.layers))]
        done = subprocess.run(command,
                              env=env, capture_output=True, text=True, timeout=args.timeout)
        return done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        return (e.stderr or b"").decode(errors="replace"), "timeout"


def report(args, layers, decisions, status):
    """Prints the table of `decisions` for `layers` and writes the JSON; the exit status."""
    print(f"statistics_layers: {args.precision}, N = {args.batch}, the engine's ms "
          f"(UCUDNN_STATISTICS=timed)")
    print(f"{'layer':<22}{'count':>6}{'plain':>9}{'reduce':>9}{'fused':>9}"
          f"{'fused/plain':>12}  kept")
    rows, totals = [], dict(plain_ms=0.0, reduce_ms=0.0, fused_ms=0.0)
    for layer in layers:
        h, c, k, r, stride, padding, count = layer
        d = decisions.get((h, c, k, r, stride))
        if d is None:
            print(f"{layer_name(layer):<22}{count:>6}  (no fused engine, or not reached)")
            continue
        rows.append(dict(name=layer_name(layer), count=count, **d))
        for key in totals:
            totals[key] += count * d[key]
        print(f"{layer_name(layer):<22}{count:>6}{d['plain_ms']:>9.3f}{d['reduce_ms']:>9.3f}"
              f"{d['fused_ms']:>9.3f}{d['fused_ms'] / d['plain_ms']:>11.2f}x  "
              f"{'fused' if d['fused'] else 'unfused'}")
    print(f"{'sum over the counts':<22}{'':>6}{totals['plain_ms']:>9.2f}{totals['reduce_ms']:>9.2f}"
          f"{totals['fused_ms']:>9.2f}")
    path = args.json or os.path.join(os.environ.get("OUT", "."),
                                     f"statistics_layers_{args.precision}.json")
    with open(path, "w") as f:
        json.dump(dict(precision=args.precision, batch=args.batch, layers=rows, totals=totals),
                  f, indent=1)
    print(f"wrote {path}")
    return 0 if status == 0 and rows else 1


if __name__ == "__main__":
    sys.exit(main())
