"""Where a ``model.fit`` step goes under a memory cap (GPU machine).

    python benchmarks/fit_profile.py MODEL MODE BATCH [--caps 8GiB,96GiB]
        [--steps-per-execution 1,5] [--prefetch-to-device off,on]
        [--precision mixed_float16] [--limit 64MiB]

Runs the memory-cap benchmark's worker (tf_ucudnn.bench.memory_cap: the
GPU's allocator capped, ``model.fit`` on a host-side ``tf.data`` batch) once
per cap, Keras ``steps_per_execution`` and input pipeline, each in its own
process, and profiles one epoch after the timed ones (CUPTI:
``libcupti.so.12`` must be on ``LD_LIBRARY_PATH``). A cap far above the
step's peak shows what the cap costs at the same N; ``steps_per_execution``
above 1 shows what ``fit``'s wait for each step's loss costs (at 1, the next
batch's copy to the GPU starts only after the step ends);
``--prefetch-to-device on`` ends the ``tf.data`` pipeline with
``prefetch_to_device``, so that the copy runs during the previous step. Per
step: the timed wall time, the GPU's busy and idle time within the profiled
span, the host-to-device copies, and kernel time by kind
(``benchmarks/xla_profile.py``'s kinds).

Prints one table and writes fit_profile_MODEL_MODE_nBATCH_PRECISION.json into
$OUT (or the working directory).
"""

import argparse
import itertools
import json
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_HOST_TO_DEVICE = re.compile(r"h2d|htod|host.?to.?device", re.I)


def _label(run):
    from tf_ucudnn.units import format_bytes

    return (f"{format_bytes(run['cap'])}, x{run['steps_per_execution']}"
            + (", on device" if run["prefetch_to_device"] else ""))


def main(argv=None):
    from tf_ucudnn import table
    from tf_ucudnn.bench import memory_cap
    from tf_ucudnn.units import parse_bytes
    from xla_profile import read_trace

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("mode", choices=memory_cap.MODES)
    parser.add_argument("batch", type=int)
    parser.add_argument("--caps", default="8GiB,96GiB")
    parser.add_argument("--steps-per-execution", default="1")
    parser.add_argument("--precision", default="mixed_float16")
    parser.add_argument("--prefetch-to-device", default="off",
                        help="off, on or off,on: the tf.data pipeline ends with "
                             "prefetch_to_device (the copy overlaps the step)")
    parser.add_argument("--limit", default="64MiB", help="tf_ucudnn's workspace limit")
    parser.add_argument("--steps-per-epoch", type=int, default=memory_cap.DEFAULT_STEPS_PER_EPOCH)
    args = parser.parse_args(argv)
    caps = [parse_bytes(c) for c in args.caps.split(",")]
    executions = [int(k) for k in args.steps_per_execution.split(",")]
    prefetches = [p == "on" for p in args.prefetch_to_device.split(",")]
    limit = None if args.mode in memory_cap.STOCK_MODES else parse_bytes(args.limit)

    runs = []
    for cap in caps:
        for k, prefetch in itertools.product(executions, prefetches):
            trace = tempfile.mkdtemp(prefix="fit_profile_")
            sweep = dict(model=args.model, mode=args.mode, limit=limit, cap=cap)
            r = memory_cap.launch(sweep, args.batch, timeout=900, precision=args.precision,
                                  steps_per_epoch=args.steps_per_epoch,
                                  steps_per_execution=k, prefetch_to_device=prefetch,
                                  profile_dir=trace)
            r.update(cap=cap, steps_per_execution=k, prefetch_to_device=prefetch)
            if r["status"] == "ok":
                r["trace"] = read_trace(trace, per=args.steps_per_epoch)
                if "top" in r["trace"]:
                    r["trace"]["host_to_device_ms"] = sum(
                        t["ms"] for t in r["trace"]["top"] if _HOST_TO_DEVICE.search(t["name"]))
            print(f"  {_label(r)}: {r['status']} "
                  + (f"{r['step_ms']:.1f} ms" if r["status"] == "ok" else r.get("message", "")),
                  flush=True)
            runs.append(r)

    ok = [r for r in runs if r["status"] == "ok" and "error" not in r["trace"]]
    heads = ("",) + tuple(_label(r) for r in ok)

    def row(label, value):
        return (label,) + tuple(value(r) for r in ok)

    rows = [row("step ms (timed, wall)", lambda r: f"{r['step_ms']:.2f}"),
            row("images/s", lambda r: f"{r['images_per_s']:.1f}"),
            row("peak GiB", lambda r: f"{r['peak_bytes'] / 2**30:.2f}"),
            row("profiled span per step ms", lambda r: f"{r['trace']['span_ms']:.2f}"),
            row("GPU busy ms", lambda r: f"{r['trace']['busy_ms']:.2f}"),
            row("GPU idle within span ms", lambda r: f"{r['trace']['idle_ms']:.2f}"),
            row("host-to-device copies ms", lambda r: f"{r['trace']['host_to_device_ms']:.2f}"),
            row("kernels, copies and sets left out ms", lambda r: "{:.2f}".format(
                r["trace"]["kernel_sum_ms"]
                - r["trace"]["kinds"].get("copy / set", dict(ms=0))["ms"]))]
    for kind in sorted({k for r in ok for k in r["trace"]["kinds"]}):
        rows.append(row(f"  {kind} ms", lambda r, kind=kind: "{:.2f}".format(
            r["trace"]["kinds"].get(kind, dict(ms=0))["ms"])))
    print(f"\n{args.model} {args.mode} N={args.batch}, {args.precision}, model.fit, "
          f"per step ({args.steps_per_epoch} profiled)")
    print(table.render(heads, rows, align="l" + "r" * len(ok)))
    for r in ok:
        print(f"\n{_label(r)}: largest, ms per step")
        for t in r["trace"]["top"][:8]:
            print(f"  {t['ms']:7.3f} ({t['count']:3.0f})  {t['kind']:<16}  {t['name']}")
    out = os.path.join(os.environ.get("OUT", "."), f"fit_profile_{args.model}_{args.mode}_"
                       f"n{args.batch}_{args.precision}.json")
    for r in runs:
        if "top" in r.get("trace", {}):
            r["trace"]["top"] = r["trace"]["top"][:40]
    with open(out, "w") as f:
        json.dump(dict(args=vars(args), runs=runs), f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
