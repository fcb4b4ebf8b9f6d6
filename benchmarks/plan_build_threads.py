"""Planning time of ResNet-50's convolutions with batch-norm statistics, their
run-time compiled plans finalized one after the other or on threads (GPU
machine).

    python benchmarks/plan_build_threads.py [--precision bfloat16] [--batch 64]
        [--threads 1,8] [--json PATH]

Each setting is a child process with ``UCUDNN_DATABASE=off`` that runs
``tf_ucudnn.conv2d_with_statistics`` once on each distinct shape of
``statistics_layers.LAYERS`` (NHWC, TF32 on) and sums the kernels'
``planning_ms`` (``tf_ucudnn.plans()``: benchmarking and Workspace Reuse,
host and GPU). ``UCUDNN_PLAN_BUILD_THREADS`` takes each of ``--threads``,
first with the CUDA driver's JIT cache off (``CUDA_CACHE_DISABLE=1``), then
with it on: once to fill it, then again at each thread count. The batch is
small since a plan's compilation does not depend on it. Prints the table and
writes JSON (default $OUT/plan_build_threads_PRECISION.json, or the working
directory).
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def child(precision, batch):
    """Plans each distinct shape once; prints a JSON line of the sums."""
    import numpy as np
    import tensorflow as tf

    import tf_ucudnn
    from statistics_layers import LAYERS

    dtype = tf.as_dtype(precision)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for h, c, k, r, stride, padding, _ in LAYERS:
        x = tf.constant(rng.standard_normal((batch, h, h, c)), dtype)
        w = tf.constant(rng.standard_normal((r, r, c, k)) / np.sqrt(r * r * c), dtype)
        with tf.device("/GPU:0"):
            tf_ucudnn.conv2d_with_statistics(x, w, stride, padding)
        tf.test.experimental.sync_devices()
    wall = time.perf_counter() - start
    records = tf_ucudnn.plans()
    print("RESULT " + json.dumps(dict(
        kernels=len(records), wall_s=wall,
        planning_s=sum((r["planning_ms"] or 0.0) for r in records) / 1e3)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", default="bfloat16",
                        choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", default="1,8",
                        help="comma-separated UCUDNN_PLAN_BUILD_THREADS values (default 1,8)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.precision, args.batch)
        return 0
    threads = [t.strip() for t in args.threads.split(",") if t.strip()]
    settings = [(t, "off") for t in threads] + [(threads[-1], "on, filled here")]
    settings += [(t, "on") for t in threads]
    rows = []
    for t, cache in settings:
        env = dict(os.environ, UCUDNN_DATABASE="off", UCUDNN_PLAN_BUILD_THREADS=t,
                   PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
        if cache == "off":
            env["CUDA_CACHE_DISABLE"] = "1"
        else:
            env.pop("CUDA_CACHE_DISABLE", None)
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                               "--precision", args.precision, "--batch", str(args.batch)],
                              env=env, capture_output=True, text=True, timeout=args.timeout)
        lines = [s for s in done.stdout.splitlines() if s.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            print(done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"threads {t}, JIT cache {cache}: the child failed")
        row = dict(threads=int(t), jit_cache=cache, **json.loads(lines[-1][len("RESULT "):]))
        rows.append(row)
        print(f"  threads {t}, JIT cache {cache}: planning {row['planning_s']:.2f} s, "
              f"wall {row['wall_s']:.2f} s, {row['kernels']} kernels", flush=True)
    print(f"\n{args.precision}, N = {args.batch}, {rows[0]['kernels']} statistics kernels")
    print(f"{'threads':>7}  {'JIT cache':<16} {'planning s':>10} {'wall s':>7}")
    for r in rows:
        print(f"{r['threads']:>7}  {r['jit_cache']:<16} {r['planning_s']:>10.2f} {r['wall_s']:>7.2f}")
    path = args.json or os.path.join(os.environ.get("OUT", "."),
                                     f"plan_build_threads_{args.precision}.json")
    with open(path, "w") as f:
        json.dump(dict(precision=args.precision, batch=args.batch, rows=rows), f, indent=1)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
