"""Where an XLA-compiled training step's GPU time goes (GPU machine).

    python benchmarks/xla_profile.py [MODEL] [BATCH] [PRECISION] [MODES]
        (default resnet50 128 float32 stock-xla,ucudnn-xla)

Runs the model mode's worker (tf_ucudnn.bench.models) for each of MODES
(``stock-xla`` and ``ucudnn-xla`` by default; any of the model mode's, e.g.
``stock,rewrite`` for the step without XLA; ``MODE@VAR=VALUE[@...]`` runs
MODE with those environment variables, e.g.
``ucudnn-bnstats-xla@UCUDNN_STATISTICS_AFTER_CHANNELS=65536``) at 64 MiB
(``stock``: at 8 GiB, TF's default), each in its own process with XLA's
optimized module of the step dumped, and profiles three steps
after the timed ones with TensorFlow's profiler (CUPTI: ``libcupti.so.12``
must be on ``LD_LIBRARY_PATH``). From each trace's GPU plane it sums, per step:

* the GPU's busy time (the union of all kernel and copy intervals) and its
  idle time within the steps' span, by the length of the gaps between
  kernels (launch latency under 10 us, the host beyond), with the longest
  gaps and the kernels around them (``idle_gaps``);
* the copies and sets by the kernel that follows them (``copies_before``:
  a memset zeroing a kernel's output runs right before it);
* from the host's plane, XLA's thunks by the host time before their first
  launch (``host_thunks``): at the step's start, with nothing queued, the
  GPU waits that long;
* kernel time by kind, from the kernel names: convolutions (cuDNN and
  CUTLASS kernels), layout transforms (cuDNN's filter transforms, XLA's
  transposes), XLA fusions (split into reductions and elementwise fusions by
  name), copies and sets, other;
* per XLA fusion among the largest kernels, the bytes it reads and writes
  (from the dumped module) and so its bandwidth (``add_bandwidth``), and
  the fusions that lose the most time against the best of them
  (``slow_fusions``);
* per layer, its Conv -> BN -> ReLU as one (``layer_of``): the
  convolutions by pass (forward, backward-data, backward-filter), XLA's
  reductions, its elementwise fusions and the rest. A kernel's TF op comes
  from the annotation XLA's runtime puts around each launch (a ``name``
  stat), and for XLA's fusions, whose kernels mostly carry none, from the
  fusion of that name in the dumped module (``kernel_fusions``). XLA
  launches one kernel for identical fusions (the same computation on the
  same shapes, e.g. the normalize + ReLU of three 56x56x64 layers: one
  ``deduplicated_name``), named after one of them; its launches in a step
  go to the group's fusions in program order, the order XLA's scheduled
  module runs them in.

Prints one table and the largest kernels of each run, the per-layer times
side by side, and writes xla_profile_MODEL_PRECISION[_MODES].json and each
mode's optimized module (hlo_MODEL_PRECISION_MODE.txt.gz) into $OUT (or the
working directory). With ``XLA_PROFILE_KEEP_TRACE=1`` it also keeps each
mode's trace, host and GPU planes, as xplane_MODEL_PRECISION_MODE.pb.gz (an
XSpace protocol buffer: TensorFlow's ``xplane_pb2``), for a look at the
host's side (when each kernel was launched) afterwards.
"""

import collections
import glob
import gzip
import json
import os
import re
import shutil
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

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


def _stat_value(plane, event, stat_id):
    """The string value of an event's stat ``stat_id`` (an id of the plane's
    ``stat_metadata``), or None. For a kernel, CUPTI's collector adds the
    metadata of the annotation XLA's runtime put around its launch as stats
    (``name``: the TF op name of the HLO instruction, less the module's
    common prefix; ``hlo_op``: the instruction)."""
    for stat in event.stats:
        if stat.metadata_id == stat_id:
            if stat.HasField("ref_value"):
                return plane.stat_metadata[stat.ref_value].name
            return stat.str_value or None
    return None


def layer_of(op_name, model=None):
    """The Keras layer a TF op name comes from, its Conv -> BN -> ReLU parts
    as one: the path component (``gradient_tape/`` aside) after the model's
    scope (``model``, with or without a count: ``resnet50_1``; a ``-`` in it
    read as ``_``, the Keras name of the benchmark's ``unet-bn``), or where
    ``model`` is None or not in the path, the second of three or more
    components (the first taken for the scope) and else the first;
    tf_ucudnn's ``X_conv_X_bn`` (a ``Conv2DBatchNorm``) read as ``X``, and a
    trailing ``_conv``, ``_bn``, ``_relu`` or ``_pad`` dropped with the name
    scope's count after it (``_1``):
    ``gradient_tape/resnet50_1/conv3_block2_1_relu_1/ReluGrad`` ->
    ``conv3_block2_1``. "" for an empty name."""
    parts = [p for p in op_name.split("/") if p]
    if parts and parts[0] == "gradient_tape":
        parts = parts[1:]
    if not parts:
        return ""
    layer = parts[1] if len(parts) >= 3 else parts[0]
    if model is not None:
        scope = re.compile(re.escape(model.replace("-", "_")) + r"(_\d+)?$")
        for i, part in enumerate(parts[:-1]):
            if scope.match(part.replace("-", "_")):
                layer = parts[i + 1]
                break
    merged = re.match(r"^(.*)_conv_\1_bn(_\d+)?$", layer)
    if merged:
        return merged.group(1)
    return re.sub(r"_(conv|bn|relu|pad)(_\d+)?$", "", layer)


CONV_PASSES = ("forward", "backward-data", "backward-filter")
LAYER_PARTS = CONV_PASSES + ("reductions", "elementwise", "other")


def conv_pass(op_name):
    """The pass of a convolution kernel from its TF op's name: TF's and
    tf_ucudnn's ``Conv2DBackpropFilter`` and ``Conv2DBackpropInput`` (any
    prefix) are backward-filter and backward-data, anything else forward."""
    if "BackpropFilter" in op_name:
        return "backward-filter"
    if "BackpropInput" in op_name:
        return "backward-data"
    return "forward"


def kernel_fusions(module_text):
    """``{kernel name: fusion}`` for the fusions of an optimized module's
    entry computation (``hlo_fusion_bytes.entry_fusions``): XLA names a
    fusion's kernel after the fusion with its dots as underscores
    (``loop_select_fusion.1`` -> ``loop_select_fusion_1``). Fusions of one
    ``deduplicated_name`` run one kernel, named after one of them: each of
    their names maps to the first, whose ``group`` lists them all in
    program order (one fusion's group is itself)."""
    import hlo_fusion_bytes

    groups = collections.defaultdict(list)
    for f in hlo_fusion_bytes.entry_fusions(module_text):
        groups[f["deduplicated_name"]].append(f)
    kernels = {}
    for members in groups.values():
        members[0]["group"] = members
        for f in members:
            kernels[f["name"].replace(".", "_")] = members[0]
    return kernels


def fusion_op_names(fusions):
    """``{kernel name: [TF op name, ...]}`` of :func:`kernel_fusions`'
    ``fusions``: the op of each fusion of the kernel's group, in program
    order (``read_trace`` gives a step's n-th launch the n-th); kernels
    whose fusions have no op name left out."""
    return {kernel: [g["op_name"] for g in f["group"]] for kernel, f in fusions.items()
            if all(g["op_name"] for g in f["group"])}


def add_bandwidth(top, fusions):
    """Each XLA fusion of ``top`` (``read_trace``'s kernels) among
    :func:`kernel_fusions`' ``fusions`` gets ``gb``, the bytes its launches
    of a step read and write (its operands and result, once per launch:
    ``hlo_fusion_bytes``), and ``tb_per_s``: those bytes over its time. The
    step's fusions are memory-bound, so one far below the others (an H200
    reaches about 4.4 TB/s) is slow for what it moves, not large."""
    for kernel in top:
        f = fusions.get(kernel["name"])
        if kernel["kind"] == "XLA fusion" and f and kernel["ms"] > 0:
            kernel["gb"] = (f["bytes_in"] + f["bytes_out"]) * kernel["count"] / 1e9
            kernel["tb_per_s"] = kernel["gb"] / kernel["ms"]  # GB per ms


def slow_fusions(top, count=5, min_ms=0.1):
    """The XLA fusions of ``top`` (after :func:`add_bandwidth`) that lose
    the most time against the run's own bandwidth: the highest ``tb_per_s``
    of its fusions of at least ``min_ms`` ms. Each gets ``excess_ms``, its
    time less what its bytes take at that bandwidth; the ``count`` largest
    excesses first, and the bandwidth (TB/s, 0 where none)."""
    moved = [t for t in top if "tb_per_s" in t]
    best = max((t["tb_per_s"] for t in moved if t["ms"] >= min_ms), default=0)
    if not best:
        return [], 0
    for t in moved:
        t["excess_ms"] = t["ms"] - t["gb"] / best
    return sorted(moved, key=lambda t: -t["excess_ms"])[:count], best


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


# Idle gaps by length (µs, upper bounds; the last open): many short ones are
# launch latency between kernels, a few long ones the host (between steps, or
# a host-bound stretch of the step).
GAP_BOUNDS_US = (10, 100, None)


def idle_gaps(kernels, per=1, largest=5):
    """The GPU's idle time between its kernels: ``kernels`` is ``(start_ps,
    stop_ps, label)`` in any order (any stream), ``per`` the steps they span.
    Returns ``by_length``: per bound of :data:`GAP_BOUNDS_US` (the label
    ``"< 10 us"``, ``"10-100 us"``, ``">= 100 us"``) the gaps' ms and count
    per step; and ``largest``: the ``largest`` longest gaps, each ``ms`` and
    the labels of the kernel ``before`` it (the one that ended last) and
    ``after`` it."""
    names = []
    low = 0
    for bound in GAP_BOUNDS_US:
        names.append(f"< {bound} us" if low == 0 else f"{low}-{bound} us" if bound else
                     f">= {low} us")
        low = bound
    totals, counts, gaps = [0] * len(names), [0] * len(names), []
    end, end_label = None, None
    for start, stop, label in sorted(kernels, key=lambda k: k[0]):
        if end is not None and start > end:
            gap = start - end
            slot = next(i for i, b in enumerate(GAP_BOUNDS_US) if b is None or gap < b * 10**6)
            totals[slot] += gap
            counts[slot] += 1
            gaps.append((gap, end_label, label))
        if end is None or stop > end:
            end, end_label = stop, label
    gaps.sort(key=lambda g: -g[0])
    return dict(
        by_length={n: dict(ms=t / 1e9 / per, count=c / per)
                   for n, t, c in zip(names, totals, counts)},
        largest=[dict(ms=g / 1e9, before=b, after=a) for g, b, a in gaps[:largest]])


def copies_before(kernels, per=1, top=8):
    """Which kernels the step's copies and sets run for: ``kernels`` is
    ``(start_ps, label, kind)`` (:func:`kind_of`) in any order, ``per`` the
    steps they span. Each ``"copy / set"`` goes to the first kernel of
    another kind to start after it (a memset that zeroes a kernel's output
    runs right before it), counted by that kernel's op: the last part of
    its TF op name (``".../conv2_block1_1_conv_conv2_block1_1_bn_1/Ucudnn>
    Conv2DWithStatistics"`` counts as ``"Ucudnn>Conv2DWithStatistics"``).
    Returns the ``top`` ops by count, ``[{"before": op, "count": per step,
    "places": how many labels of that op}]``; copies after the last other
    kernel go to ``None``."""
    counts, places, pending = collections.Counter(), collections.defaultdict(set), 0
    for _, label, kind in sorted(kernels, key=lambda k: k[0]):
        if kind == "copy / set":
            pending += 1
        elif pending:
            op = label.rsplit("/", 1)[-1]
            counts[op] += pending
            places[op].add(label)
            pending = 0
    if pending:
        counts[None] += pending
    return [dict(before=op, count=n / per, places=len(places[op]))
            for op, n in counts.most_common(top)]


def host_thunks(events, per=1, top=8):
    """The host's side of the launches: ``events`` is ``(start_ps, stop_ps,
    name, is_launch)`` of one host thread (any order), the launches (CUDA
    API calls that enqueue a kernel, copy or set) among XLA's thunks, which
    nest (``Ucudnn_Conv2D.9`` around its ``cuLaunchKernel``s). Each launch
    belongs to the innermost thunk open around it; thunks without a launch
    of their own (``command_buffer``, ``Thunks::Initialize``) are left out.
    Groups the thunks by name without XLA's ``.N`` and returns the ``top``
    groups by the longest host time before a first launch: ``name``,
    ``calls`` per step (``per`` steps), that time's ``median_us``,
    ``max_us`` and ``total_us`` per step, and the whole call's
    ``median_call_us``. Where the GPU has nothing queued (the step's start),
    that time is the GPU's idle time."""
    stack, calls = [], []  # thunks: [start, stop, name, ps to its first launch or None]
    for start, stop, name, is_launch in sorted(events, key=lambda e: (e[0], -e[1])):
        while stack and stack[-1][1] <= start:
            stack.pop()
        if not is_launch:
            stack.append([start, stop, name, None])
            calls.append(stack[-1])
        elif stack and stack[-1][3] is None:
            stack[-1][3] = start - stack[-1][0]
    groups = collections.defaultdict(list)
    for start, stop, name, wait in calls:
        if wait is not None:
            groups[re.sub(r"\.\d+$", "", name)].append((wait, stop - start))
    rows = []
    for name, got in groups.items():
        waits = [w for w, _ in got]
        rows.append(dict(name=name, calls=len(got) / per, total_us=sum(waits) / 1e6 / per,
                         median_us=statistics.median_high(waits) / 1e6, max_us=max(waits) / 1e6,
                         median_call_us=statistics.median_high(n for _, n in got) / 1e6))
    rows.sort(key=lambda r: -r["max_us"])
    return rows[:top]


def _trace_file(directory):
    """The largest XPlane file under ``directory`` (the profiler's trace of
    the GPU's host), or None."""
    paths = glob.glob(os.path.join(directory, "**", "*.xplane.pb"), recursive=True)
    return max(paths, key=os.path.getsize) if paths else None


def read_trace(directory, per=STEPS, model=None, fusion_ops=None):
    """GPU figures from the XPlane trace under ``directory``, in ms per step
    (the trace holds ``per`` steps, or calls of a function). Where kernels
    have a TF op name, also ``layers``: ``{layer: {part: ms}}`` per
    :func:`layer_of` (``model``: the model's scope name), the parts in
    ``LAYER_PARTS``: the convolutions by :func:`conv_pass`, XLA's fusions as
    :func:`fusion_part`, and ``other``; and ``unnamed_ms``, the kernel time
    of no layer. An XLA fusion's op name comes from ``fusion_ops[kernel
    name]`` (:func:`fusion_op_names`) where given: the kernel's launches in
    time order take its op names in turn. Else, as for every other kernel,
    it is the ``name`` stat of XLA's annotation. From the host's plane,
    ``host_thunks``: :func:`host_thunks` of each host thread, the eight
    with the longest time before a first launch."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = _trace_file(directory)
    if path is None:
        return dict(error=f"no trace under {directory}")
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    gpu = [p for p in space.planes if p.name.startswith("/device:GPU:")]
    if not gpu:
        return dict(error="no GPU plane in the trace (is CUPTI loadable?)",
                    planes=[p.name for p in space.planes])
    host = [p for p in space.planes if p.name == "/host:CPU"]
    host_side = []
    if host:
        corr = {i for i, m in host[0].stat_metadata.items() if m.name == "correlation_id"}
        for line in host[0].lines:
            host_side += host_thunks([
                (line.timestamp_ns * 1000 + e.offset_ps,
                 line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps,
                 host[0].event_metadata[e.metadata_id].name,
                 any(st.metadata_id in corr for st in e.stats)) for e in line.events], per)
        host_side.sort(key=lambda r: -r["max_us"])
    plane = gpu[0]
    labelled = []  # (start, stop, TF op or kernel name, kind) per kernel
    by_kind, by_kernel = collections.Counter(), collections.Counter()
    counts, kind_counts = collections.Counter(), collections.Counter()
    fusion_parts = collections.Counter()
    layers = collections.defaultdict(collections.Counter)
    fusion_ops = fusion_ops or {}
    unnamed = 0
    name_stat = next((i for i, m in plane.stat_metadata.items() if m.name == "name"), None)
    events = sorted(((line.timestamp_ns * 1000 + event.offset_ps, event)
                     for line in plane.lines for event in line.events), key=lambda e: e[0])
    launches = collections.Counter()  # per fusion kernel, for its group's op names
    for start, event in events:
        name = plane.event_metadata[event.metadata_id].name
        kind = kind_of(name)
        by_kind[kind] += event.duration_ps
        part = ("convolution" if kind == "convolution" else
                fusion_part(name) if kind == "XLA fusion" else "other")
        if kind == "XLA fusion":
            fusion_parts[part] += event.duration_ps
        op_name = None
        if kind == "XLA fusion" and name in fusion_ops:
            op_name = fusion_ops[name][launches[name] % len(fusion_ops[name])]
            launches[name] += 1
        if not op_name and name_stat is not None:
            op_name = _stat_value(plane, event, name_stat)
        labelled.append((start, start + event.duration_ps, op_name or name[:60], kind))
        if op_name:
            layer_part = conv_pass(op_name) if part == "convolution" else part
            layers[layer_of(op_name, model)][layer_part] += event.duration_ps
        else:
            unnamed += event.duration_ps
        kind_counts[kind] += 1
        by_kernel[name] += event.duration_ps
        counts[name] += 1
    if not labelled:
        return dict(error="the GPU plane has no events")
    intervals = [k[:2] for k in labelled]
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    busy = _union_ps(intervals)
    ms = lambda ps: ps / 1e9 / per  # noqa: E731  (per step)
    return dict(
        lines=[l.name for l in plane.lines],
        span_ms=ms(span), busy_ms=ms(busy), idle_ms=ms(span - busy),
        kernel_sum_ms=ms(sum(by_kind.values())), gaps=idle_gaps([k[:3] for k in labelled], per),
        copies_before=copies_before([(k[0], k[2], k[3]) for k in labelled], per),
        kinds={k: dict(ms=ms(v), count=kind_counts[k] / per) for k, v in by_kind.items()},
        host_thunks=host_side[:8],
        fusion_parts={k: ms(v) for k, v in fusion_parts.items()},
        top=[dict(name=n[:110], ms=ms(v), count=counts[n] / per, kind=kind_of(n))
             for n, v in by_kernel.most_common()],
        **({"layers": {layer: {k: ms(v) for k, v in parts.items()}
                       for layer, parts in layers.items()},
            "unnamed_ms": ms(unnamed)} if layers else {}))


def print_layers(runs, top=30):
    """The ``top`` layers by their GPU time in the first of ``runs`` (mode ->
    worker result with its ``trace``), ms per step side by side: per mode
    the convolutions' forward / backward-data / backward-filter, XLA's
    reductions, its elementwise fusions and the rest; then every layer's sum
    and the time in no layer. Nothing where no trace has ``layers``."""
    from tf_ucudnn import table

    layered = {m: r["trace"]["layers"] for m, r in runs.items() if r["trace"].get("layers")}
    if not layered:
        print("\nno kernel in these traces carries a TF op name: no per-layer times")
        return
    first = next(iter(layered.values()))
    names = sorted(first, key=lambda l: -sum(first[l].values()))[:top]

    def cells(parts):
        conv = "/".join(f"{parts.get(p, 0):.3f}" for p in CONV_PASSES)
        return [conv] + [f"{parts.get(p, 0):.3f}" for p in LAYER_PARTS[len(CONV_PASSES):]]

    def total(layers):
        sums = collections.Counter()
        for parts in layers.values():
            sums.update(parts)
        return sums

    header = ["layer"] + [f"{m} {c}" for m in layered
                          for c in ("conv f/d/w", "redu", "elem", "other")]
    rows = [[name] + [c for m in layered for c in cells(layered[m].get(name, {}))]
            for name in names]
    rows.append(["all layers"] + [c for m in layered for c in cells(total(layered[m]))])
    rows.append(["no layer"] + [c for m in layered for c in
                                ("", f"{runs[m]['trace'].get('unnamed_ms', 0):.3f}", "", "")])
    print(f"\nper layer, ms per step (the {len(names)} longest in {next(iter(layered))}; "
          f"conv f/d/w: convolutions forward / backward-data / backward-filter, redu: "
          f"reductions, elem: elementwise fusions)")
    print(table.render(header, rows, align="l" + "r" * (len(header) - 1)))


def mode_spec(spec):
    """``(mode, {variable: value})`` of ``MODE[@VAR=VALUE...]``.

    Raises:
      ValueError: a part after ``@`` without ``=``."""
    mode, *assignments = spec.split("@")
    env = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep or not name:
            raise ValueError(f"{spec!r}: after the mode, @VAR=VALUE (e.g. "
                             f"ucudnn-bnstats-xla@UCUDNN_STATISTICS_AFTER_CHANNELS=65536)")
        env[name] = value
    return mode, env


def file_part(spec):
    """A mode spec as part of a file name: ``MODE-VAR-VALUE...``, a value
    that holds paths named by its first path's last component
    (``PYTHONPATH=/a/b/relu_gradient:/c`` -> ``PYTHONPATH-relu_gradient``),
    every run of other characters than letters, digits, ``.`` and ``_`` as one ``-``."""
    mode, env = mode_spec(spec)
    parts = [mode]
    for name, value in env.items():
        if "/" in value:
            value = os.path.basename(value.split(os.pathsep)[0].rstrip("/"))
        parts += [name, value]
    return re.sub(r"[^A-Za-z0-9._]+", "-", "-".join(parts))


def _keep_module(dump, name):
    """The text of the largest optimized module XLA dumped into ``dump``
    (None if none), gzipped into $OUT as ``name``; ``dump`` removed."""
    import hlo_fusion_bytes

    path = hlo_fusion_bytes.largest_dump(dump)
    text = None
    if path:
        text = hlo_fusion_bytes.read_module(path)
        try:
            with gzip.open(os.path.join(os.environ.get("OUT", "."), name), "wt") as f:
                f.write(text)
        except OSError as e:  # the profile goes on without the copy
            print(f"  could not keep the optimized module as {name}: {e}", flush=True)
    shutil.rmtree(dump, ignore_errors=True)
    return text


def _keep_trace(directory, name):
    """Gzips the largest XPlane file under ``directory`` into $OUT as
    ``name`` where ``XLA_PROFILE_KEEP_TRACE`` is 1; else nothing."""
    if os.environ.get("XLA_PROFILE_KEEP_TRACE") != "1":
        return
    path = _trace_file(directory)
    if path is None:
        return
    try:
        with open(path, "rb") as src, \
                gzip.open(os.path.join(os.environ.get("OUT", "."), name), "wb") as dst:
            shutil.copyfileobj(src, dst)
    except OSError as e:  # the profile goes on without the copy
        print(f"  could not keep the trace as {name}: {e}", flush=True)


def main():
    from tf_ucudnn import table
    from tf_ucudnn.bench import models

    model = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else models.DEFAULT_BATCH[model]
    precision = sys.argv[3] if len(sys.argv) > 3 else "float32"
    modes = sys.argv[4].split(",") if len(sys.argv) > 4 else DEFAULT_MODES
    runs = {}
    for spec in modes:
        mode, env = mode_spec(spec)
        trace = tempfile.mkdtemp(prefix=f"xla_profile_{mode}_")
        dump = tempfile.mkdtemp(prefix=f"xla_dump_{mode}_")
        env["XLA_FLAGS"] = " ".join(filter(None, (
            env.get("XLA_FLAGS", os.environ.get("XLA_FLAGS", "")),
            f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*step.*")))
        limit = models.REFERENCE_LIMIT if mode == "stock" else 64 << 20
        r = models.launch(model, mode, limit, batch, 900, extra_env=env, precision=precision,
                          profile_dir=trace)
        module = _keep_module(dump, f"hlo_{model}_{precision}_{file_part(spec)}.txt.gz")
        fusions = kernel_fusions(module) if module else {}
        r["trace"] = (read_trace(trace, model=model, fusion_ops=fusion_op_names(fusions))
                      if "error" not in r else {})
        _keep_trace(trace, f"xplane_{model}_{precision}_{file_part(spec)}.pb.gz")
        if "top" in r["trace"]:
            add_bandwidth(r["trace"]["top"], fusions)
        runs[spec] = r
        print(f"  {spec}: " + (r["error"] if "error" in r else
                               f"{r['step_ms']:.1f} ms; trace: {r['trace'].get('error', 'read')}"),
              flush=True)
    ok = {m: r for m, r in runs.items() if "error" not in r and "error" not in r["trace"]}
    kinds = sorted({k for r in ok.values() for k in r["trace"]["kinds"]})
    rows = [("step ms (timed, wall)",) + tuple(f"{r['step_ms']:.2f}" for r in ok.values()),
            ("profiled span per step ms",) + tuple(f"{r['trace']['span_ms']:.2f}" for r in ok.values()),
            ("GPU busy ms",) + tuple(f"{r['trace']['busy_ms']:.2f}" for r in ok.values()),
            ("GPU idle within span ms",) + tuple(f"{r['trace']['idle_ms']:.2f}" for r in ok.values()),
            ("kernel time, sum ms",) + tuple(f"{r['trace']['kernel_sum_ms']:.2f}" for r in ok.values())]
    gap_names = next((list(r["trace"]["gaps"]["by_length"]) for r in ok.values()
                      if "gaps" in r["trace"]), [])
    rows[4:4] = [(f"  in gaps {name} ms (gaps)",) + tuple(
        "{ms:.2f} ({count:.0f})".format(**r["trace"]["gaps"]["by_length"][name])
        if "gaps" in r["trace"] else "" for r in ok.values()) for name in gap_names]
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
        print(f"\n{mode}: largest kernels, ms per step (launches; XLA's fusions: GB read and "
              f"written, TB/s)")
        shown = r["trace"]["top"][:15]
        for kind in ("layout transform", "copy / set", "cuDNN tensor op", "other"):
            shown += [t for t in r["trace"]["top"][15:] if t["kind"] == kind][:5]
        for t in shown:
            moved = f"  {t['gb']:.3f} GB, {t['tb_per_s']:.2f} TB/s" if "gb" in t else ""
            print(f"  {t['ms']:7.3f} ({t['count']:3.0f})  {t['kind']:<16}  {t['name']}{moved}")
        slow, best = slow_fusions(r["trace"]["top"])
        if slow:
            print(f"{mode}: XLA's fusions furthest from the step's best bandwidth ({best:.2f} TB/s): "
                  f"ms per step, ms over it")
            for t in slow:
                print(f"  {t['ms']:7.3f} +{t['excess_ms']:.3f} ({t['count']:3.0f})  {t['name']}  "
                      f"{t['gb']:.3f} GB, {t['tb_per_s']:.2f} TB/s")
    for mode, r in ok.items():
        if r["trace"].get("gaps", {}).get("largest"):
            print(f"\n{mode}: the GPU's longest idle gaps in the profiled steps, ms (the kernel "
                  f"before -> after, by TF op)")
            for g in r["trace"]["gaps"]["largest"]:
                print(f"  {g['ms']:7.3f}  {g['before']} -> {g['after']}")
        if r["trace"].get("host_thunks"):
            print(f"{mode}: the host's time from a thunk's start to its first launch, us "
                  f"(median, max; the whole call's median), by the longest")
            for t in r["trace"]["host_thunks"]:
                print(f"  {t['median_us']:7.1f} {t['max_us']:7.1f} ({t['median_call_us']:6.1f})  "
                      f"{t['calls']:4.0f} calls  {t['name']}")
        if r["trace"].get("copies_before"):
            print(f"{mode}: copies and sets per step, by the op of the kernel after them "
                  f"(in how many places)")
            for c in r["trace"]["copies_before"]:
                print(f"  {c['count']:5.0f}  {c['before']} ({c.get('places', 1)})")
    print_layers(ok)
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
                       + ("" if modes == DEFAULT_MODES else
                          "_" + "_".join(file_part(m) for m in modes))
                       + ".json")
    with open(out, "w") as f:
        json.dump(runs, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
