"""The layer benchmark: layer sets, the three passes of one layer, and the
worker processes that time them (stock TF vs tf_ucudnn per workspace limit).

TF reads ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` once per process, so every (mode,
limit) runs in its own worker process (``python -m tf_ucudnn.bench layers``
with a hidden ``--worker`` flag) that writes its timings as JSON. Layers of the same
shape are measured once.
"""

import csv
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from tf_ucudnn.bench import harness, report
from tf_ucudnn.bench.harness import PASSES
from tf_ucudnn.units import format_bytes

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
DEFAULT_CSV = os.path.join(DATA_DIR, "model_convs.csv")

DEEPBENCH_CSV = os.path.join(DATA_DIR, "deepbench_conv_train.csv")

LAYER_SETS = ("deepbench", "alexnet", "resnet18", "models")

REFERENCE_LIMIT = 8 << 30  # TF's default TF_CUDNN_WORKSPACE_LIMIT_IN_MB (8192)

# Relative L2 error allowed between tf_ucudnn and stock TF, which may pick
# different algorithms: each side rounds to its own precision (TF32: 10
# mantissa bits, float16: 10, bfloat16: 7).
_TOLERANCE = {"float32": 1e-5, "tf32": 1e-2, "float16": 5e-3, "bfloat16": 3e-2}


@dataclasses.dataclass(frozen=True)
class ConvLayer:
    """One convolution to benchmark (NCHW terms; the filter is ``[R, S, C, K]``).

    Attributes:
      names: ``"model/layer"`` names of every CSV row with this shape.
      C, H, W: input channels, height, width.
      K, R, S: output channels, filter height, filter width.
      pad_h, pad_w: symmetric zero padding.
      stride_h, stride_w: strides.
    """

    names: tuple
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    pad_h: int
    pad_w: int
    stride_h: int
    stride_w: int

    @property
    def name(self):
        """The first name, with ``(+n)`` when n more rows share the shape."""
        more = len(self.names) - 1
        return self.names[0] + (f" (+{more})" if more else "")

    @property
    def shape_key(self):
        """The shape as a tuple, without the names."""
        return (self.C, self.H, self.W, self.K, self.R, self.S, self.pad_h, self.pad_w,
                self.stride_h, self.stride_w)

    @property
    def out_hw(self):
        """Output (height, width)."""
        return ((self.H + 2 * self.pad_h - self.R) // self.stride_h + 1,
                (self.W + 2 * self.pad_w - self.S) // self.stride_w + 1)

    def describe(self):
        """Compact shape, e.g. ``64>192 27x27 k5x5 s1 p2``."""
        stride = (f"s{self.stride_h}" if self.stride_h == self.stride_w
                  else f"s{self.stride_h}x{self.stride_w}")
        pad = f"p{self.pad_h}" if self.pad_h == self.pad_w else f"p{self.pad_h}x{self.pad_w}"
        return f"{self.C}>{self.K} {self.H}x{self.W} k{self.R}x{self.S} {stride} {pad}"

    def to_json(self):
        """The layer as a JSON-ready dict."""
        d = dataclasses.asdict(self)
        d["names"] = list(self.names)
        return d

QUICK_LAYERS = (
    ConvLayer(("quick/3x3",), 3, 12, 12, 8, 3, 3, 1, 1, 1, 1),
    ConvLayer(("quick/5x5s2",), 8, 11, 11, 16, 5, 5, 2, 2, 2, 2),
)

QUICK_BATCH = 8

def read_layers(path):
    """Reads the layer CSV.

    Columns: model, layer, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w
    (the filter is R x S, input C x H x W, K output channels). DeepBench's
    table (name, N, C, ...) is read too: its rows are named
    ``deepbench/<name>`` and its N is ignored (``--batch`` sets N).

    Args:
      path: the CSV file.

    Returns:
      A list of :class:`ConvLayer`, one per row, in file order, each with one name
      ``"model/layer"``.

    Raises:
      ValueError: a missing column, a non-integer field or a shape with an
        empty output.
    """
    fields = ("C", "H", "W", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w")
    layers = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns = set(reader.fieldnames or ())
        naming = {"name"} if "name" in columns and "model" not in columns else {"model", "layer"}
        missing = (naming | set(fields)) - columns
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        for line, row in enumerate(reader, start=2):
            try:
                values = [int(row[k]) for k in fields]
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{line}: non-integer field in {row}") from None
            name = (f"deepbench/{row['name']}" if naming == {"name"}
                    else f"{row['model']}/{row['layer']}")
            layer = ConvLayer((name,), *values)
            if min(values) < 0 or min(layer.C, layer.K, layer.stride_h, layer.stride_w) < 1 \
                    or min(layer.out_hw) < 1:
                raise ValueError(f"{path}:{line}: {layer.names[0]} is not a valid convolution "
                                 f"(negative field, zero channels or stride, or empty output "
                                 f"{layer.out_hw})")
            layers.append(layer)
    return layers

def layer_set(name):
    """The layers of a named set (see ``--set``), shapes merged.

    Raises:
      ValueError: an unknown set name.
    """
    if name == "deepbench":
        return select_layers([l for l in read_layers(DEEPBENCH_CSV)
                              if (l.R, l.S) in ((3, 3), (5, 5))], "all")
    if name == "models":
        return select_layers(read_layers(DEFAULT_CSV), "all")
    if name in ("alexnet", "resnet18"):
        rows = read_layers(DEFAULT_CSV)
        return select_layers([l for l in rows if l.names[0].split("/")[0].startswith(name)], "all")
    raise ValueError(f"--set must be one of {', '.join(LAYER_SETS)}, got {name!r}")

def select_layers(layers, spec):
    """Picks layers by name and merges rows of the same shape.

    Args:
      layers: list of :class:`ConvLayer` (from :func:`read_layers`).
      spec: ``"all"`` or a comma list of names: ``model/layer``, a bare layer
        name (every model's layer of that name) or a model name (all its layers).

    Returns:
      A list of :class:`ConvLayer` with distinct shapes, in first-seen order;
      each carries the names of all selected rows of its shape.

    Raises:
      ValueError: a name that matches nothing.
    """
    if spec.strip().lower() == "all":
        chosen = list(layers)
    else:
        chosen = []
        for token in (t.strip() for t in spec.split(",") if t.strip()):
            hits = [l for l in layers
                    if token in (l.names[0], l.names[0].split("/", 1)[1], l.names[0].split("/")[0])]
            if not hits:
                raise ValueError(f"--layers: no layer named {token!r}; names are "
                                 f"{', '.join(l.names[0] for l in layers)}")
            chosen.extend(h for h in hits if h not in chosen)
    merged = {}
    for layer in chosen:
        if layer.shape_key in merged:
            prev = merged[layer.shape_key]
            merged[layer.shape_key] = dataclasses.replace(prev, names=prev.names + layer.names)
        else:
            merged[layer.shape_key] = layer
    return list(merged.values())

def _conv_geometry(layer, batch, data_format):
    """Shapes, strides and explicit paddings of one layer in a layout."""
    P, Q = layer.out_hw
    if data_format == "NCHW":
        x_shape, y_shape = (batch, layer.C, layer.H, layer.W), (batch, layer.K, P, Q)
        strides = [1, 1, layer.stride_h, layer.stride_w]
        pads = [[0, 0], [0, 0], [layer.pad_h] * 2, [layer.pad_w] * 2]
    else:
        x_shape, y_shape = (batch, layer.H, layer.W, layer.C), (batch, P, Q, layer.K)
        strides = [1, layer.stride_h, layer.stride_w, 1]
        pads = [[0, 0], [layer.pad_h] * 2, [layer.pad_w] * 2, [0, 0]]
    w_shape = (layer.R, layer.S, layer.C, layer.K)
    return x_shape, w_shape, y_shape, strides, pads

def make_passes(mode, layer, batch, data_format, *, workspace_limit=None, policy=None,
                micro_batch_size=None, passes=PASSES):
    """A function computing a layer's three passes, stock or tf_ucudnn.

    Args:
      mode: ``"stock"`` (``tf.nn.conv2d`` and ``tf.raw_ops.Conv2DBackprop*``)
        or ``"ucudnn"`` (``tf_ucudnn.conv2d`` and its backprop functions).
      layer: a :class:`ConvLayer`.
      batch: N.
      data_format: ``"NCHW"`` or ``"NHWC"``.
      workspace_limit, policy, micro_batch_size: tf_ucudnn's knobs (ucudnn mode).
      passes: which of :data:`PASSES` to compute, in that order.

    Returns:
      ``fn(x, w, dy) -> (y, dx, dw)`` (the chosen passes' results only), where
      ``x`` is the input (``[N, C, H, W]`` or ``[N, H, W, C]``), ``w`` the
      filter ``[R, S, C, K]`` and ``dy`` the output gradient, shaped like ``y``.
    """
    import tensorflow as tf

    _, _, _, strides, pads = _conv_geometry(layer, batch, data_format)
    flat_pads = [v for pair in pads for v in pair]
    chosen = [p for p in PASSES if p in passes]
    if mode == "stock":
        def stock(x, w, dy):
            out = []
            if "forward" in chosen:
                out.append(tf.nn.conv2d(x, w, strides, pads, data_format=data_format))
            if "backward-data" in chosen:
                out.append(tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=tf.shape(x), filter=w, out_backprop=dy, strides=strides,
                    padding="EXPLICIT", explicit_paddings=flat_pads, data_format=data_format))
            if "backward-filter" in chosen:
                out.append(tf.raw_ops.Conv2DBackpropFilter(
                    input=x, filter_sizes=tf.shape(w), out_backprop=dy, strides=strides,
                    padding="EXPLICIT", explicit_paddings=flat_pads, data_format=data_format))
            return tuple(out)
        return stock
    if mode != "ucudnn":
        raise ValueError(f"mode must be 'stock' or 'ucudnn', got {mode!r}")
    import tf_ucudnn

    knobs = dict(workspace_limit=workspace_limit, batch_size_policy=policy,
                 micro_batch_size=micro_batch_size)

    def ours(x, w, dy):
        out = []
        if "forward" in chosen:
            out.append(tf_ucudnn.conv2d(x, w, strides, pads, data_format, **knobs))
        if "backward-data" in chosen:
            out.append(tf_ucudnn.conv2d_backprop_input(tf.shape(x), w, dy, strides, pads,
                                                       data_format, **knobs))
        if "backward-filter" in chosen:
            out.append(tf_ucudnn.conv2d_backprop_filter(x, tf.shape(w), dy, strides, pads,
                                                        data_format, **knobs))
        return tuple(out)
    return ours


def random_tensors(layer, batch, data_format, dtype):
    """Reproducible inputs of a layer: ``[x, w, dy]`` (input, filter ``[R, S, C, K]``,
    output gradient) in ``data_format``, uniform in [-1, 1], cast to ``dtype``."""
    import tensorflow as tf

    x_shape, w_shape, y_shape, _, _ = _conv_geometry(layer, batch, data_format)
    tensors = []
    for i, shape in enumerate((x_shape, w_shape, y_shape)):
        t = tf.random.stateless_uniform(shape, seed=(1, i), minval=-1.0, maxval=1.0)
        tensors.append(tf.cast(t, dtype))
    return tensors


def _bench_layer(spec, layer):
    import tensorflow as tf

    import tf_ucudnn

    mode, batch, data_format = spec["mode"], spec["batch"], spec["data_format"]
    x, w, dy = random_tensors(layer, batch, data_format, spec["dtype"])
    passes = spec.get("passes", PASSES)
    knobs = dict(workspace_limit=spec["limit"], policy=spec["policy"], passes=passes)
    fn = tf.function(make_passes(mode, layer, batch, data_format, **knobs))
    result = {}
    if mode == "ucudnn":
        tf_ucudnn.clear_plans()
        for _ in range(spec["warmup"]):  # plans are made here, on the first call
            out = fn(x, w, dy)
        records = {r["pass"]: r for r in tf_ucudnn.plans()}
        result["plans"] = records
        result["plan"] = {p: report.plan_summary(records[p]) for p in PASSES if p in records}
        # Once, untimed: the same results as stock TF in this process?
        want = tf.function(make_passes("stock", layer, batch, data_format, passes=passes))(x, w, dy)
        result["max_rel_err"] = max(harness.relative_error(a, b) for a, b in zip(out, want))
    median, per_repeat = harness.time_ms(fn, (x, w, dy), warmup=spec["warmup"], repeats=spec["repeats"],
                                 iters=spec["iters"])
    result.update(ms=median, per_repeat_ms=per_repeat)
    return result

def run_worker(spec_path, out_path):
    """Worker side: times every layer of a spec file in this process and writes JSON.

    The parent sets ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` in this process's
    environment before TensorFlow starts.

    Args:
      spec_path: JSON with mode (``stock``/``ucudnn``), limit (bytes), layers,
        batch, data_format, dtype, tf32, policy, warmup, repeats, iters.
      out_path: where to write ``{"results": {shape_key: {...}}, ...}``; a layer
        that fails gets ``{"error": "..."}``.

    Returns:
      0.
    """
    with open(spec_path) as f:
        spec = json.load(f)
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(spec["tf32"])
    results = {}
    for entry in spec["layers"]:
        layer = ConvLayer(tuple(entry["names"]), *[entry[k] for k in (
            "C", "H", "W", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w")])
        try:
            results[json.dumps(layer.shape_key)] = _bench_layer(spec, layer)
        except Exception as e:  # noqa: BLE001 - one failing layer must not lose the others
            results[json.dumps(layer.shape_key)] = {"error": f"{type(e).__name__}: {e}"[:2000]}
        print(f"worker {spec['mode']} {format_bytes(spec['limit'])}: {layer.name} done",
              file=sys.stderr, flush=True)
    with open(out_path, "w") as f:
        json.dump({"mode": spec["mode"], "limit": spec["limit"],
                   "env_limit_mb": os.environ.get("TF_CUDNN_WORKSPACE_LIMIT_IN_MB"),
                   "gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
                   "results": results}, f)
    return 0

def _launch_worker(mode, limit, layers, args, data_format, tmpdir):
    """Runs one worker process; returns (results or None, info dict)."""
    tag = f"{mode}-{limit >> 20}"
    spec_path = os.path.join(tmpdir, f"{tag}.spec.json")
    out_path = os.path.join(tmpdir, f"{tag}.out.json")
    spec = dict(mode=mode, limit=limit, layers=[l.to_json() for l in layers], batch=args.batch,
                data_format=data_format, dtype=args.dtype, tf32=args.tf32 == "on",
                policy=args.policy, warmup=args.warmup, repeats=args.repeats, iters=args.iters,
                passes=args.passes)
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    # The worker imports this very package, wherever the parent was started from.
    env = harness.with_package_on_path(dict(os.environ,
                                            TF_CUDNN_WORKSPACE_LIMIT_IN_MB=str(limit >> 20)))
    cmd = [sys.executable, "-m", "tf_ucudnn.bench", "layers", "--worker", spec_path,
           "--worker-out", out_path]
    label = f"{_mode_label(mode)} at {format_bytes(limit)}"
    print(f"  {label}: TF_CUDNN_WORKSPACE_LIMIT_IN_MB={limit >> 20} ...", end="", flush=True)
    start = time.perf_counter()
    info = dict(mode=mode, limit=limit, command=cmd)
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=args.worker_timeout)
        info.update(rc=proc.returncode, stderr_tail=proc.stderr[-4000:])
    except subprocess.TimeoutExpired as e:
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        info.update(rc=None, error=f"timed out after {args.worker_timeout} s",
                    stderr_tail=(stderr or "")[-4000:])
    info["seconds"] = time.perf_counter() - start
    results = None
    if info.get("rc") == 0 and os.path.exists(out_path):
        with open(out_path) as f:
            results = json.load(f)["results"]
        del info["stderr_tail"]
        print(f" {info['seconds']:.1f} s", flush=True)
    else:
        why = info.get("error") or f"exit status {info.get('rc')} after {info['seconds']:.1f} s"
        print(f" FAILED ({why}); its stderr ends:\n"
              + "\n".join("    " + line for line in info["stderr_tail"].splitlines()[-15:]),
              flush=True)
    return results, info

def self_check(batch=QUICK_BATCH, micro_batch_size=3):
    """Checks tf_ucudnn against stock TensorFlow on one tiny NHWC layer (runs on any device).

    Forward, backward-data and backward-filter with forced micro-batches of
    ``micro_batch_size`` (so backward-filter must accumulate across
    micro-batches) are compared with ``tf.nn.conv2d`` and its gradients.

    Args:
      batch: N.
      micro_batch_size: forced micro-batch size (should not divide ``batch``).

    Returns:
      ``(ok, lines)``: whether every pass matched within 1e-5 relative L2, and a
      report line per pass.
    """
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)
    layer = QUICK_LAYERS[0]
    x, w, dy = random_tensors(layer, batch, "NHWC", "float32")
    want = make_passes("stock", layer, batch, "NHWC")(x, w, dy)
    got = make_passes("ucudnn", layer, batch, "NHWC", micro_batch_size=micro_batch_size)(x, w, dy)
    ok, lines = True, []
    for name, a, b in zip(PASSES, got, want):
        err = harness.relative_error(a, b)
        passed = a.shape == b.shape and err <= _TOLERANCE["float32"]
        ok &= passed
        lines.append(f"  {name:15s} {layer.describe()} N={batch}, micro-batches of "
                     f"{micro_batch_size}: relative L2 error {err:.1e} "
                     f"{'ok' if passed else 'MISMATCH'}")
    return ok, lines

def tolerance(args):
    if args.dtype == "float32":
        return _TOLERANCE["tf32" if args.tf32 == "on" else "float32"]
    return _TOLERANCE[args.dtype]

def _mode_label(mode):
    return "stock TF" if mode == "stock" else "tf_ucudnn"

def run_all_workers(layers, args, data_format):
    """One worker per (mode, limit), the reference first; returns (measured, worker infos)."""
    runs = [("stock", REFERENCE_LIMIT)]
    for limit in args.limits:
        if limit != REFERENCE_LIMIT:
            runs.append(("stock", limit))
        runs.append(("ucudnn", limit))
    measured, workers = {}, []
    with tempfile.TemporaryDirectory(prefix="tf_ucudnn_bench_") as tmpdir:
        print(f"running {len(runs)} worker processes:")
        for mode, limit in runs:
            results, info = _launch_worker(mode, limit, layers, args, data_format, tmpdir)
            measured[(mode, limit)] = results or {}
            workers.append(info)
    return measured, workers

def collect_rows(layers, args, measured, workers):
    """Joins the workers' results into table rows; returns (rows, errors, check_failures)."""
    errors = [f"worker {_mode_label(w['mode'])} at {format_bytes(w['limit'])} failed "
              f"({w.get('error') or 'exit status ' + str(w['rc'])})"
              for w in workers if w.get("rc") != 0]
    reported = set()

    def lookup(mode, limit, layer):
        r = measured[(mode, limit)].get(json.dumps(layer.shape_key), {"error": "worker failed"})
        if "error" in r and r["error"] != "worker failed" and (mode, limit, layer) not in reported:
            reported.add((mode, limit, layer))
            first_line = (r["error"].strip().splitlines() or [""])[0][:300]
            errors.append(f"{layer.name}, {_mode_label(mode)} at {format_bytes(limit)}: "
                          f"{first_line}")
        return r

    rows, check_failures = [], []
    tol = tolerance(args)
    for limit in args.limits:
        for layer in layers:
            stock, ours = lookup("stock", limit, layer), lookup("ucudnn", limit, layer)
            ref = lookup("stock", REFERENCE_LIMIT, layer)
            speedup = stock["ms"] / ours["ms"] if "ms" in stock and "ms" in ours else None
            err = ours.get("max_rel_err")
            if err is not None and not err <= tol:
                check_failures.append(f"{layer.name} at {format_bytes(limit)}: tf_ucudnn vs "
                                      f"stock TF relative L2 error {err:.2e} > {tol:g}")
            rows.append(dict(layer=layer.names[0], name=layer.name, names=list(layer.names),
                             shape=layer.describe(), limit=limit, stock_ms=stock.get("ms"),
                             ucudnn_ms=ours.get("ms"), reference_ms=ref.get("ms"),
                             speedup=speedup, plan=ours.get("plan"), max_rel_err=err,
                             stock_per_repeat_ms=stock.get("per_repeat_ms"),
                             ucudnn_per_repeat_ms=ours.get("per_repeat_ms"),
                             reference_per_repeat_ms=ref.get("per_repeat_ms"),
                             plans=ours.get("plans")))
    return rows, errors, check_failures


def run(args, layers, data_format, on_gpu, argv):
    """``tf-ucudnn bench layers``: one worker per (mode, limit), the
    table, the per-limit summary and the check against stock TF; writes
    ``--json`` and ``--png`` if given.

    Args:
      args: the parsed options (:func:`tf_ucudnn.bench.cli.parse_args`).
      layers: :class:`ConvLayer` list.
      data_format: ``"NHWC"`` or ``"NCHW"``.
      on_gpu: whether a GPU is visible (else ``--allow-cpu``: the mechanics only).
      argv: the command line, recorded in the report.

    Returns:
      The exit status: 0, or 1 when a worker, a layer or a check failed.
    """
    notes = []
    if not on_gpu and data_format == "NCHW":
        data_format = "NHWC"
        notes.append("no GPU (--allow-cpu): NHWC, since stock TF's CPU convolution has no NCHW")

    environment = harness.describe_environment(on_gpu)
    device = ", ".join(environment["gpus"]) if on_gpu else f"CPU ({platform.machine()})"
    print(f"tf_ucudnn.bench: {device}; TensorFlow {environment['tensorflow']}"
          + (f", cuDNN {environment['cudnn']}" if on_gpu else ""))
    print(f"{'quick' if args.quick else args.csv or 'set ' + args.set}: "
          f"{len(layers)} layer shapes, N={args.batch}, {data_format}, {args.dtype}, "
          f"TF32 {args.tf32}, policy {args.policy or 'default'}; limits "
          f"{', '.join(format_bytes(l) for l in args.limits)}; reference stock TF at "
          f"{format_bytes(REFERENCE_LIMIT)}; per figure: {args.warmup} warm-up calls, median of "
          f"{args.repeats} repeats x {args.iters} calls; ms per {' + '.join(args.passes)}, no XLA")
    for note in notes:
        print(f"note: {note}")

    measured, workers = run_all_workers(layers, args, data_format)
    rows, errors, check_failures = collect_rows(layers, args, measured, workers)
    print()
    report.print_layer_table(rows)
    print()
    summary = report.summarize(rows, args.limits)
    for line in errors:
        print(f"error: {line}")
    for line in check_failures:
        print(f"check: {line}")
    checked = [r["max_rel_err"] for r in rows if r["max_rel_err"] is not None]
    if checked and not check_failures:
        print(f"check: tf_ucudnn's outputs match stock TF's in all {len(checked)} (layer, limit) "
              f"pairs measured (relative L2 error {max(checked):.1e} <= {tolerance(args):g})")

    result = dict(environment=environment, device=device,
                  settings=dict(batch=args.batch, data_format=data_format, dtype=args.dtype,
                                tf32=args.tf32 == "on", policy=args.policy,
                                limits=args.limits, reference_limit=REFERENCE_LIMIT,
                                warmup=args.warmup, repeats=args.repeats, iters=args.iters,
                                quick=args.quick, csv=args.csv, set=args.set,
                                passes=args.passes,
                                xla=False, argv=argv),
                  notes=notes, layers=[l.to_json() for l in layers], results=rows,
                  summary=summary, errors=errors, check_failures=check_failures,
                  workers=workers)
    from tf_ucudnn.bench import figures

    figures.save_report(result, args.json, args.png)
    return 1 if errors or check_failures else 0
