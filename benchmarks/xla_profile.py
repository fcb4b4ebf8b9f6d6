"""Where an XLA-compiled training step's GPU time goes (GPU machine).

    python benchmarks/xla_profile.py [MODEL] [BATCH] [PRECISION] [MODES]
        (default resnet50 128 float32 stock-xla,ucudnn-xla)

Runs the model mode's worker (tf_ucudnn.bench.models) for each of MODES
(``stock-xla`` and ``ucudnn-xla`` by default; any of the model mode's, e.g.
``stock,rewrite`` for the step without XLA) at 64 MiB (``stock``: at 8 GiB,
TF's default), each in its own process, and profiles three steps
after the timed ones with TensorFlow's profiler (CUPTI: ``libcupti.so.12``
must be on ``LD_LIBRARY_PATH``). From each trace's GPU plane it sums, per step:

* the GPU's busy time (the union of all kernel and copy intervals) and its
  idle time within the steps' span (host-bound gaps, launch latency);
* kernel time by kind, from the kernel names: convolutions (cuDNN and
  CUTLASS kernels), layout transforms (cuDNN's filter transforms, XLA's
  transposes), XLA fusions (split into reductions and elementwise fusions by
  name), copies and sets, other.

Prints one table and the largest kernels of each run, and writes
xla_profile_MODEL_PRECISION[_MODES].json into $OUT (or the working directory).
"""

import collections
import glob
import json
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

STEPS = 3
DEFAULT_MODES = ["stock-xla", "ucudnn-xla"]
KINDS = (  # first match wins
    # XLA names its fusion kernels after the fusion ("input_convert_reduce_fusion_39",
    # "loop_select_fusion_1"): matched first, or "convert" would read as a convolution.
    ("XLA fusion", re.compile(r"^(loop|input|wrapped|triton)_|fusion(_\d+)?$", re.I)),
    # Some cuDNN convolution kernels' names hold "Transform".
    ("convolution", re.compile(r"conv|xmma|implicit|gemm|wgrad|dgrad|fprop|winograd|fft|cutlass|"
                               r"nvjet|sm\d\d_|kernel_\d+_|scudnn", re.I)),
    # cuDNN's channel padding ("nhwcAddPaddingKernel") and layout changes.
    ("layout transform", re.compile(r"nchwtonhwc|nhwctonchw|transpose|transform|permute|swizzle|"
                                    r"padding", re.I)),
    ("XLA fusion", re.compile(r"fusion|triton|reduce|slice|concat", re.I)),
    ("copy / set", re.compile(r"memcpy|memset|copy", re.I)),
    ("cuDNN tensor op", re.compile(r"optensor|op_tensor|tensor_kernel|scale|add_tensor", re.I)),
)


def kind_of(name):
    """The kind of a kernel, from its name (see KINDS)."""
    for kind, pattern in KINDS:
        if pattern.search(name):
            return kind
    return "other"


def fusion_part(name):
    """Which part of an XLA fusion's time a kernel is: "reductions" where XLA
    named the fusion after a reduce (batch norm's statistics and its
    gradient's sums, "input_convert_reduce_fusion_39"), else "elementwise"
    (normalization, ReLU and their gradients, casts: "loop_select_fusion_1")."""
    return "reductions" if "reduce" in name.lower() else "elementwise"


def _union_ps(intervals):
    total, end = 0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def read_trace(directory, per=STEPS):
    """GPU figures from the XPlane trace under ``directory``, in ms per step
    (the trace holds ``per`` steps, or calls of a function)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = glob.glob(os.path.join(directory, "**", "*.xplane.pb"), recursive=True)
    if not paths:
        return dict(error=f"no trace under {directory}")
    space = xplane_pb2.XSpace()
    with open(max(paths, key=os.path.getsize), "rb") as f:
        space.ParseFromString(f.read())
    gpu = [p for p in space.planes if p.name.startswith("/device:GPU:")]
    if not gpu:
        return dict(error="no GPU plane in the trace (is CUPTI loadable?)",
                    planes=[p.name for p in space.planes])
    plane = gpu[0]
    intervals, by_kind, by_kernel = [], collections.Counter(), collections.Counter()
    counts, kind_counts = collections.Counter(), collections.Counter()
    fusion_parts = collections.Counter()
    for line in plane.lines:
        base_ps = line.timestamp_ns * 1000
        for event in line.events:
            name = plane.event_metadata[event.metadata_id].name
            start = base_ps + event.offset_ps
            intervals.append((start, start + event.duration_ps))
            kind = kind_of(name)
            by_kind[kind] += event.duration_ps
            if kind == "XLA fusion":
                fusion_parts[fusion_part(name)] += event.duration_ps
            kind_counts[kind] += 1
            by_kernel[name] += event.duration_ps
            counts[name] += 1
    if not intervals:
        return dict(error="the GPU plane has no events")
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    busy = _union_ps(intervals)
    ms = lambda ps: ps / 1e9 / per  # noqa: E731  (per step)
    return dict(
        lines=[l.name for l in plane.lines],
        span_ms=ms(span), busy_ms=ms(busy), idle_ms=ms(span - busy),
        kernel_sum_ms=ms(sum(by_kind.values())),
        kinds={k: dict(ms=ms(v), count=kind_counts[k] / per) for k, v in by_kind.items()},
        fusion_parts={k: ms(v) for k, v in fusion_parts.items()},
        top=[dict(name=n[:110], ms=ms(v), count=counts[n] / per, kind=kind_of(n))
             for n, v in by_kernel.most_common()])


def main():
    from tf_ucudnn import table
    from tf_ucudnn.bench import models

    model = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else models.DEFAULT_BATCH[model]
    precision = sys.argv[3] if len(sys.argv) > 3 else "float32"
    modes = sys.argv[4].split(",") if len(sys.argv) > 4 else DEFAULT_MODES
    runs = {}
    for mode in modes:
        trace = tempfile.mkdtemp(prefix=f"xla_profile_{mode}_")
        limit = models.REFERENCE_LIMIT if mode == "stock" else 64 << 20
        r = models.launch(model, mode, limit, batch, 900, precision=precision,
                                 profile_dir=trace)
        r["trace"] = read_trace(trace) if "error" not in r else {}
        runs[mode] = r
        print(f"  {mode}: " + (r["error"] if "error" in r else
                               f"{r['step_ms']:.1f} ms; trace: {r['trace'].get('error', 'read')}"),
              flush=True)
    ok = {m: r for m, r in runs.items() if "error" not in r and "error" not in r["trace"]}
    kinds = sorted({k for r in ok.values() for k in r["trace"]["kinds"]})
    rows = [("step ms (timed, wall)",) + tuple(f"{r['step_ms']:.2f}" for r in ok.values()),
            ("profiled span per step ms",) + tuple(f"{r['trace']['span_ms']:.2f}" for r in ok.values()),
            ("GPU busy ms",) + tuple(f"{r['trace']['busy_ms']:.2f}" for r in ok.values()),
            ("GPU idle within span ms",) + tuple(f"{r['trace']['idle_ms']:.2f}" for r in ok.values()),
            ("kernel time, sum ms",) + tuple(f"{r['trace']['kernel_sum_ms']:.2f}" for r in ok.values())]
    for k in kinds:
        rows.append((f"  {k} ms (kernels)",) + tuple(
            "{ms:.2f} ({count:.0f})".format(**r["trace"]["kinds"].get(k, dict(ms=0, count=0)))
            for r in ok.values()))
        if k == "XLA fusion":
            for part in ("reductions", "elementwise"):
                rows.append((f"    of which {part} ms",) + tuple(
                    f"{r['trace']['fusion_parts'].get(part, 0):.2f}" for r in ok.values()))
    print(f"\n{model} N={batch}, {precision}, one training step ({', '.join(modes)}), "
          f"per step (3 profiled)")
    print(table.render(("",) + tuple(ok), rows, align="l" + "r" * len(ok)))
    for mode, r in ok.items():
        print(f"\n{mode}: largest kernels, ms per step (launches)")
        for t in r["trace"]["top"][:15]:
            print(f"  {t['ms']:7.3f} ({t['count']:3.0f})  {t['kind']:<16}  {t['name']}")
        for kind in ("layout transform", "copy / set", "cuDNN tensor op", "other"):
            rest = [t for t in r["trace"]["top"][15:] if t["kind"] == kind][:5]
            for t in rest:
                print(f"  {t['ms']:7.3f} ({t['count']:3.0f})  {t['kind']:<16}  {t['name']}")
    for mode, r in ok.items():
        if r.get("plans"):
            from tf_ucudnn.plan_registry import PlanTable
            plans = sorted(r["plans"], key=lambda p: -(p["time_ms"] or 0))
            split = [p for p in plans if len(p["micro_batches"]) > 1]
            print(f"\n{mode}: {len(plans)} kernels planned, {len(split)} in more than one "
                  f"micro-batch; benchmarked ms summed over kernels "
                  f"{sum(p['time_ms'] or 0 for p in plans):.2f}; the ten slowest:")
            print(PlanTable(plans[:10]).to_string(max_width=150))
    out = os.path.join(os.environ.get("OUT", "."), f"xla_profile_{model}_{precision}"
                       + ("" if modes == DEFAULT_MODES else "_" + "_".join(modes))
                       + ".json")
    with open(out, "w") as f:
        json.dump(runs, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
