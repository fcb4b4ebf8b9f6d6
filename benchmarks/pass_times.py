"""Per-pass times of DeepBench layers: stock TF against tf_ucudnn, in one process.

    TF_CUDNN_WORKSPACE_LIMIT_IN_MB=64 python benchmarks/pass_times.py \\
        [--layers vision_30_5x5,ocr_09_3x3] [--dtype float16] [--batch 256] \\
        [--limit 64MiB] [--calls 20] [--profile] [--json PATH]

For each layer and each pass (forward, backward-data, backward-filter), and
for the three passes in one function (the layer tables' figure), in NHWC:
stock TF's ops (their workspace limit from TF_CUDNN_WORKSPACE_LIMIT_IN_MB,
read once per process) and tf_ucudnn's at --limit, each in a tf.function
built by the layer benchmark (tf_ucudnn.bench.layers.make_passes), three
warm-up calls, then the median over 5 repeats of --calls calls, in ms per
call (wall time, host included).

With --profile, --calls more calls of each function run under TensorFlow's
profiler (CUPTI: libcupti.so.12 on LD_LIBRARY_PATH) and the script adds the
GPU's kernel time per call (the sum of the kernels' durations) and the
kernels that ran. Wall time above GPU time is host time per call: a
sub-millisecond layer can measure slower in the layer tables with faster
kernels. Prints one table per layer and tf_ucudnn's plans; --json writes
every figure.
"""
import argparse
import json
import os
import sys
import tempfile

import tensorflow as tf

# The checkout's tf_ucudnn (conv_case puts the repository root on the path).
import conv_case  # noqa: F401
from xla_profile import read_trace
import tf_ucudnn
from tf_ucudnn import table
from tf_ucudnn.bench import harness, layers, report
from tf_ucudnn.plan_registry import format_ms
from tf_ucudnn.units import format_bytes

ALL = "all three"


def gpu_time(fn, args, calls):
    """GPU figures of `calls` calls of `fn(*args)` under TF's profiler:
    read_trace's dict (kernel_sum_ms and busy_ms per call, the kernels).
    Called after harness.time_ms, which warmed `fn` up and synced the device."""
    logdir = tempfile.mkdtemp(prefix="pass_times_")
    tf.profiler.experimental.start(logdir)
    out = ()
    for _ in range(calls):
        out = fn(*args)
    harness.sync_devices(out)
    tf.profiler.experimental.stop()
    return read_trace(logdir, per=calls)


def measure_layer(layer, args):
    """Wall (and with --profile GPU) ms per call of each pass and of the three
    together, stock TF and tf_ucudnn; tf_ucudnn's plan records."""
    x, w, dy = layers.random_tensors(layer, args.batch, "NHWC", args.dtype)
    rows = {}
    tf_ucudnn.clear_plans()
    for passes in [(p,) for p in harness.PASSES] + [harness.PASSES]:
        name = passes[0] if len(passes) == 1 else ALL
        rows[name] = {}
        for mode in ("stock", "ucudnn"):
            knobs = dict(workspace_limit=args.limit) if mode == "ucudnn" else {}
            fn = tf.function(layers.make_passes(mode, layer, args.batch, "NHWC",
                                                passes=passes, **knobs))
            ms, per_repeat = harness.time_ms(fn, (x, w, dy), warmup=3, repeats=5,
                                             iters=args.calls)
            r = dict(wall_ms=ms, wall_repeats_ms=per_repeat)
            if args.profile:
                r["gpu"] = gpu_time(fn, (x, w, dy), args.calls)
            rows[name][mode] = r
    plans = {p["pass"]: f"{report.plan_summary(p)}, workspace {format_bytes(p['workspace_bytes'])}, "
                        f"benchmarked {format_ms(p['time_ms'])}" for p in tf_ucudnn.plans()}
    return rows, plans


def render(layer, rows, plans, args):
    """The printed table of one layer."""
    stock_mib = os.environ.get("TF_CUDNN_WORKSPACE_LIMIT_IN_MB", "8192 (TF's default)")
    head = ("pass", "stock wall", "tf_ucudnn wall", "speedup")
    if args.profile:
        head += ("stock GPU", "tf_ucudnn GPU", "GPU speedup")
    body = []
    for name, r in rows.items():
        s, o = r["stock"], r["ucudnn"]
        row = (name, f"{s['wall_ms']:.3f}", f"{o['wall_ms']:.3f}",
               f"{s['wall_ms'] / o['wall_ms']:.2f}x")
        if args.profile:
            sg, og = s["gpu"].get("kernel_sum_ms"), o["gpu"].get("kernel_sum_ms")
            row += ((f"{sg:.3f}", f"{og:.3f}", f"{sg / og:.2f}x") if sg and og
                    else (s["gpu"].get("error", "-"), o["gpu"].get("error", "-"), "-"))
        body.append(row)
    lines = [f"\n{layer.name} ({layer.describe()}), N={args.batch}, {args.dtype}, NHWC; "
             f"stock TF at TF_CUDNN_WORKSPACE_LIMIT_IN_MB={stock_mib}, tf_ucudnn at "
             f"{args.limit}; ms per call",
             table.render(head, body, align="l" + "r" * (len(head) - 1))]
    if args.profile:
        for name, r in rows.items():
            for mode in ("stock", "ucudnn"):
                for k in r[mode]["gpu"].get("top", [])[:4]:
                    lines.append(f"  {name:15} {mode:6} {k['ms']:7.3f} ms ({k['count']:.1f}/call)"
                                 f"  {k['name']}")
    lines += [f"  tf_ucudnn {p}: {s}" for p, s in plans.items()]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="vision_30_5x5",
                        help="DeepBench layer names, comma-separated (default vision_30_5x5)")
    parser.add_argument("--dtype", default="float16", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--batch", type=int, default=256, help="N (default 256, as the layer tables)")
    parser.add_argument("--limit", default="64MiB", help="tf_ucudnn's workspace limit")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--profile", action="store_true",
                        help="also the GPU's kernel time per call (TF's profiler, CUPTI)")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    try:
        chosen = layers.select_layers(layers.layer_set("deepbench"), args.layers)
    except ValueError as e:
        parser.error(str(e))
    results = []
    with tf.device("/GPU:0"):
        for layer in chosen:
            rows, plans = measure_layer(layer, args)
            print(render(layer, rows, plans, args), flush=True)
            results.append(dict(layer=layer.to_json(), rows=rows, plans=plans))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), environment=harness.describe_environment(True),
                           stock_limit_mib=os.environ.get("TF_CUDNN_WORKSPACE_LIMIT_IN_MB"),
                           layers=results), f, indent=1)
        print("wrote", args.json, file=sys.stderr)


if __name__ == "__main__":
    main()
