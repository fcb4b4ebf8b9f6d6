"""Layer benchmark: stock TensorFlow vs tf_ucudnn under cuDNN workspace limits.

Run as ``tf-ucudnn bench`` or ``python -m tf_ucudnn.bench`` (``make bench``).
For every convolution layer of a layer set and every workspace limit, times
forward + backward-data + backward-filter (``--passes`` picks a subset) at
N=256:

* stock TF with ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` set to the limit,
* tf_ucudnn with ``workspace_limit`` set to the limit,
* stock TF at 8 GiB (TF's default limit), the reference.

TF reads ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` once per process, so every (mode,
limit) runs in its own worker process (this module re-invoked with a hidden
``--worker`` flag) that writes its timings as JSON. Layers of the same shape
are measured once.

Layer sets (``--set``): ``deepbench`` (default: the 3x3 and 5x5 training
convolutions of Baidu's DeepBench, ``data/deepbench_conv_train.csv``, as in
the paper's DeepBench figure), ``alexnet``, ``resnet18``, ``models`` (both),
or ``--csv`` with a table of your own. ``--json PATH`` writes every figure
and the GPU, driver, cuDNN and TF versions; ``--png PREFIX`` (default: the
JSON path without ``.json``) draws ``PREFIX_speedup.png`` (speedup per layer
and limit) and ``PREFIX_plans.png`` (the chosen micro-batches and algorithms
per layer) with matplotlib; ``--plot JSON`` redraws them from a saved JSON on
any machine. ``--models alexnet,resnet18,vgg16`` runs the model mode instead
(:mod:`tf_ucudnn.bench_models`).

Without a GPU the benchmark does not run: a CPU self-check of tf_ucudnn
against ``tf.nn.conv2d`` runs instead and the exit status is non-zero.
"""

import argparse
import csv
import dataclasses
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from tf_ucudnn import table
from tf_ucudnn.cli_args import at_least, positive_int
from tf_ucudnn.units import format_bytes, parse_bytes

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
DEFAULT_CSV = os.path.join(DATA_DIR, "model_convs.csv")
DEEPBENCH_CSV = os.path.join(DATA_DIR, "deepbench_conv_train.csv")
LAYER_SETS = ("deepbench", "alexnet", "resnet18", "models")
DEFAULT_LIMITS = "64MiB,256MiB"
REFERENCE_LIMIT = 8 << 30  # TF's default TF_CUDNN_WORKSPACE_LIMIT_IN_MB (8192)
PASSES = ("forward", "backward-data", "backward-filter")
_PASS_LABELS = {"forward": "F", "backward-data": "D", "backward-filter": "W"}
# Relative L2 error allowed between tf_ucudnn and stock TF, which may pick
# different algorithms: each side rounds to its own precision (TF32: 10
# mantissa bits, float16: 10, bfloat16: 7).
_TOLERANCE = {"float32": 1e-5, "tf32": 1e-2, "float16": 5e-3, "bfloat16": 3e-2}
EXIT_NO_GPU = 2


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


def _pass_list(text):
    passes = [t.strip() for t in text.split(",") if t.strip()]
    bad = [p for p in passes if p not in PASSES]
    if bad or not passes:
        raise argparse.ArgumentTypeError(
            f"passes must be a comma list of {', '.join(PASSES)}, got {text!r}")
    return [p for p in PASSES if p in passes]


def _names(text, what, allowed):
    """A comma list of names from `allowed` (argparse type), in the order given."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or any(n not in allowed for n in names):
        raise argparse.ArgumentTypeError(
            f"{what} must be a comma list of {', '.join(allowed)}, got {text!r}")
    return names


def _model_list(text):
    from tf_ucudnn.bench_models import MODELS

    return _names(text, "models", MODELS)


def _mode_list(text):
    from tf_ucudnn.bench_models import MODES

    return _names(text, "modes", MODES)


def _limit_list(text):
    try:
        limits = [parse_bytes(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not limits:
        raise argparse.ArgumentTypeError("need at least one limit")
    for limit in limits:
        if limit % (1 << 20) or limit == 0:
            raise argparse.ArgumentTypeError(
                f"limits must be whole, positive MiB (TF_CUDNN_WORKSPACE_LIMIT_IN_MB), got {limit}")
    return limits


def _optional_limit_list(text):
    return _limit_list(text) if text.strip() else []


def parse_args(argv=None):
    """Parses the benchmark's command line.

    Args:
      argv: arguments without the program name; None uses sys.argv.

    Returns:
      An argparse.Namespace.
    """
    parser = argparse.ArgumentParser(
        prog="tf-ucudnn bench",
        description="Time forward + backward-data + backward-filter per convolution layer: "
                    "stock TF with TF_CUDNN_WORKSPACE_LIMIT_IN_MB = limit, tf_ucudnn with "
                    "workspace_limit = limit, and stock TF at 8 GiB (its default) as the "
                    "reference. Each (mode, limit) runs in its own process, since TF reads "
                    "the variable once per process.",
        epilog="Exit status: 0 done; 1 a worker, layer or check failed; 2 no GPU (the CPU "
               "self-check ran instead).")
    parser.add_argument("--set", default="deepbench", choices=LAYER_SETS,
                        help="layer set (default deepbench: its 3x3 and 5x5 training layers)")
    parser.add_argument("--csv", default=None,
                        help="a layer table of your own instead of --set (columns model,layer,"
                             "C,H,W,K,R,S,pad_h,pad_w,stride_h,stride_w, or DeepBench's)")
    parser.add_argument("--passes", type=_pass_list, default=",".join(PASSES),
                        help="comma list of forward, backward-data, backward-filter (default all)")
    parser.add_argument("--png", metavar="PREFIX",
                        help="write PREFIX_speedup.png and PREFIX_plans.png (default with "
                             "--json: the JSON path without .json)")
    parser.add_argument("--plot", metavar="JSON",
                        help="only draw the figures of a saved --json result (no GPU needed)")
    parser.add_argument("--models", type=_model_list, default=None,
                        help="model mode: comma list of alexnet, resnet18, vgg16, resnet50; one "
                             "training step per setting (stock TF and tf_ucudnn's rewrite at "
                             "--limits, Workspace Division at --totals, stock TF at 8 GiB)")
    parser.add_argument("--precision", default="float32",
                        choices=("float32", "mixed_float16", "mixed_bfloat16"),
                        help="model mode: the Keras dtype policy of every run (default float32)")
    parser.add_argument("--modes", type=_mode_list, default=None,
                        help="model mode: only these settings, a comma list of "
                             "stock, rewrite, rewrite-wd, stock-xla, ucudnn-xla (default: all)")
    parser.add_argument("--xla", action="store_true",
                        help="model mode: also stock TF compiled with XLA and tf_ucudnn under XLA "
                             "(rewrite_model, jit_compile=True) at --limits")
    parser.add_argument("--totals", type=_optional_limit_list, default="",
                        help="model mode: total workspace budgets for Workspace Division")
    parser.add_argument("--overhead", action="store_true",
                        help="execution-overhead mode: per layer and pass, a one-micro-batch "
                             "plan through the engine against one direct cuDNN call with the "
                             "same algorithm (tf_ucudnn.bench_overhead); limit: the first of "
                             "--limits if given, else 8 GiB")
    parser.add_argument("--planning", action="store_true",
                        help="model mode: also time planning cold and with a warm database")
    parser.add_argument("--layers", default="all",
                        help="comma list of model/layer, layer or model names, or 'all' "
                             "(default); layers of equal shape are measured once")
    parser.add_argument("--batch", type=positive_int, default=None,
                        help=f"mini-batch size N (default 256; {QUICK_BATCH} with --quick)")
    parser.add_argument("--limits", type=_limit_list, default=None,
                        help="comma list of workspace limits, whole MiB (default 64MiB,256MiB)")
    parser.add_argument("--data-format", choices=("NCHW", "NHWC"), default="NHWC",
                        help="layout of the tensors given to both (default NHWC, what Keras "
                             "models use). Stock TF's layout optimizer may transpose float32 "
                             "NHWC convolutions to NCHW on a GPU, and those transposes are "
                             "timed as part of its layer; tf_ucudnn runs cuDNN in the layout "
                             "it is given. NCHW compares the convolutions in NCHW on both sides.")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    parser.add_argument("--tf32", choices=("on", "off"), default="on",
                        help="TensorFloat-32 for float32 convolutions, both modes (default on)")
    parser.add_argument("--policy", choices=("undivided", "powerOfTwo", "all"), default=None,
                        help="tf_ucudnn batch-size policy (default: UCUDNN_BATCH_SIZE_POLICY, "
                             "else powerOfTwo)")
    parser.add_argument("--warmup", type=at_least(3), default=3,
                        help="warm-up iterations, >= 3 (they also trigger tf_ucudnn's planning "
                             "and TF's autotuning)")
    parser.add_argument("--repeats", type=at_least(5), default=5,
                        help="timed repeats, >= 5; the median is reported")
    parser.add_argument("--iters", type=positive_int, default=10,
                        help="iterations per repeat, timed together between device syncs "
                             "(default 10)")
    parser.add_argument("--json", metavar="PATH", help="also write all results to PATH")
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny shapes ({len(QUICK_LAYERS)} layers, N={QUICK_BATCH}) and "
                             "2 iterations per repeat: a fast smoke test")
    parser.add_argument("--worker-timeout", type=positive_int, default=1800,
                        help="seconds before a worker process is killed (default 1800)")
    # Hidden: run the table on the CPU (for testing the mechanics), and the worker side.
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.limits_given = args.limits is not None
    if args.limits is None:
        args.limits = DEFAULT_LIMITS
    for name, parse in (("limits", _limit_list), ("totals", _optional_limit_list), ("passes", _pass_list)):
        if isinstance(getattr(args, name), str):
            setattr(args, name, parse(getattr(args, name)))
    args.batch_given = args.batch
    if args.batch is None:
        args.batch = QUICK_BATCH if args.quick else 256
    if args.quick and args.iters == 10:
        args.iters = 2
    return args


# ----------------------------------------------------------------------------- worker side


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


def _random_tensors(layer, batch, data_format, dtype):
    import tensorflow as tf

    x_shape, w_shape, y_shape, _, _ = _conv_geometry(layer, batch, data_format)
    tensors = []
    for i, shape in enumerate((x_shape, w_shape, y_shape)):
        t = tf.random.stateless_uniform(shape, seed=(1, i), minval=-1.0, maxval=1.0)
        tensors.append(tf.cast(t, dtype))
    return tensors


def sync_devices(outputs=()):
    """Waits for the device to finish queued work.

    Uses ``tf.test.experimental.sync_devices()`` where it exists; otherwise
    copies one scalar that depends on every output to the host.

    Args:
      outputs: tensors of the last call (used by the fallback).
    """
    import tensorflow as tf

    sync = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
    if sync is not None:
        sync()
    elif outputs:
        float(tf.add_n([tf.cast(tf.reshape(t, [-1])[0], tf.float32) for t in outputs]))


def time_ms(fn, args, *, warmup, repeats, iters):
    """Median time of one call of ``fn(*args)`` in ms.

    Runs ``warmup`` calls, then ``repeats`` repeats of ``iters`` calls, each
    repeat timed from a synced device to a synced device.

    Args:
      fn: the function (a ``tf.function``).
      args: its arguments.
      warmup: untimed calls first.
      repeats: timed repeats.
      iters: calls per repeat.

    Returns:
      ``(median_ms, per_repeat_ms)``.
    """
    out = ()
    for _ in range(warmup):
        out = fn(*args)
    sync_devices(out)
    per_repeat = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            out = fn(*args)
        sync_devices(out)
        per_repeat.append(1e3 * (time.perf_counter() - start) / iters)
    return statistics.median(per_repeat), per_repeat


def _relative_error(got, want):
    import numpy as np

    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def plan_summary(record):
    """A plan record of ``tf_ucudnn.plans()`` as ``2x128 FFT_TILING`` or ``128 FFT + 2x64 ALGO_1``.

    Args:
      record: one dict of :func:`tf_ucudnn.plans`.

    Returns:
      The micro-batch sizes (runs of equal ones grouped) with their
      algorithms (without the math type).
    """
    groups = []  # [count, size, algo]
    for mb in record["micro_batches"]:
        algo = str(mb["algo"]).split("/")[0]
        if groups and groups[-1][1:] == [mb["size"], algo]:
            groups[-1][0] += 1
        else:
            groups.append([1, mb["size"], algo])
    algos = {g[2] for g in groups}
    sizes = [f"{n}x{size}" if n > 1 else f"{size}" for n, size, _ in groups]
    if len(algos) == 1:
        return "+".join(sizes) + " " + algos.pop()
    return " + ".join(f"{s} {g[2]}" for s, g in zip(sizes, groups))


def _bench_layer(spec, layer):
    import tensorflow as tf

    import tf_ucudnn

    mode, batch, data_format = spec["mode"], spec["batch"], spec["data_format"]
    x, w, dy = _random_tensors(layer, batch, data_format, spec["dtype"])
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
        result["plan"] = {p: plan_summary(records[p]) for p in PASSES if p in records}
        # Once, untimed: the same results as stock TF in this process?
        want = tf.function(make_passes("stock", layer, batch, data_format, passes=passes))(x, w, dy)
        result["max_rel_err"] = max(_relative_error(a, b) for a, b in zip(out, want))
    median, per_repeat = time_ms(fn, (x, w, dy), warmup=spec["warmup"], repeats=spec["repeats"],
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


# ----------------------------------------------------------------------------- parent side


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
    env = dict(os.environ, TF_CUDNN_WORKSPACE_LIMIT_IN_MB=str(limit >> 20))
    # The worker imports this very package, wherever the parent was started from.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "tf_ucudnn.bench", "--worker", spec_path, "--worker-out", out_path]
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


def _timing_variables():
    """The set environment variables that change what is timed.

    Returns:
      ``{name: value}`` for tf_ucudnn's knobs (``UCUDNN_*``), TensorFlow's
      cuDNN settings (``TF_CUDNN_*``, which workers set per limit as well) and
      ``CUDA_MODULE_LOADING`` (with CUDA's default, lazy loading, stock TF's
      autotuner can time candidates' first, module-loading runs and pick a
      slower engine; see docs/benchmarks.md, §2).
    """
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(("UCUDNN_", "TF_CUDNN_")) or k == "CUDA_MODULE_LOADING"}


def _environment(on_gpu):
    import tensorflow as tf

    env = dict(python=platform.python_version(), tensorflow=tf.__version__,
               build_info={k: v for k, v in tf.sysconfig.get_build_info().items()},
               host=platform.node())
    gpus = tf.config.list_physical_devices("GPU")
    names = []
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=60)
            names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
        except (OSError, subprocess.SubprocessError):
            names = []
    if not names and gpus:
        names = [tf.config.experimental.get_device_details(g).get("device_name", g.name)
                 for g in gpus]
    env["gpus"] = names
    env["variables"] = _timing_variables()
    if on_gpu:
        import tf_ucudnn

        env["cudnn"] = tf_ucudnn.cudnn_version()
    return env


def _fmt_ms(value):
    if value is None:
        return "error"
    return f"{value:.3f}" if value < 10 else f"{value:.2f}"


def _print_table(rows):
    header = ("layer", "shape", "limit", "stock ms", "tf_ucudnn ms", "speedup", "8 GiB ms",
              "tf_ucudnn plan (F forward | D backward-data | W backward-filter)")
    cells = []
    for r in rows:
        plan = " | ".join(f"{_PASS_LABELS[p]}: {r['plan'][p]}" for p in PASSES
                          if p in (r["plan"] or {}))
        cells.append((r["name"], r["shape"], format_bytes(r["limit"]), _fmt_ms(r["stock_ms"]),
                      _fmt_ms(r["ucudnn_ms"]),
                      "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
                      _fmt_ms(r["reference_ms"]), plan or "-"))
    print(table.render(header, cells, align="lllrrrrl"))


def geometric_mean(values):
    """Geometric mean of positive numbers (None if empty)."""
    values = list(values)
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


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
    x, w, dy = _random_tensors(layer, batch, "NHWC", "float32")
    want = make_passes("stock", layer, batch, "NHWC")(x, w, dy)
    got = make_passes("ucudnn", layer, batch, "NHWC", micro_batch_size=micro_batch_size)(x, w, dy)
    ok, lines = True, []
    for name, a, b in zip(PASSES, got, want):
        err = _relative_error(a, b)
        passed = a.shape == b.shape and err <= _TOLERANCE["float32"]
        ok &= passed
        lines.append(f"  {name:15s} {layer.describe()} N={batch}, micro-batches of "
                     f"{micro_batch_size}: relative L2 error {err:.1e} "
                     f"{'ok' if passed else 'MISMATCH'}")
    return ok, lines


def _tolerance(args):
    if args.dtype == "float32":
        return _TOLERANCE["tf32" if args.tf32 == "on" else "float32"]
    return _TOLERANCE[args.dtype]


def _mode_label(mode):
    return "stock TF" if mode == "stock" else "tf_ucudnn"


def _run_all_workers(layers, args, data_format):
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


def _collect_rows(layers, args, measured, workers):
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
    tolerance = _tolerance(args)
    for limit in args.limits:
        for layer in layers:
            stock, ours = lookup("stock", limit, layer), lookup("ucudnn", limit, layer)
            ref = lookup("stock", REFERENCE_LIMIT, layer)
            speedup = stock["ms"] / ours["ms"] if "ms" in stock and "ms" in ours else None
            err = ours.get("max_rel_err")
            if err is not None and not err <= tolerance:
                check_failures.append(f"{layer.name} at {format_bytes(limit)}: tf_ucudnn vs "
                                      f"stock TF relative L2 error {err:.2e} > {tolerance:g}")
            rows.append(dict(layer=layer.names[0], name=layer.name, names=list(layer.names),
                             shape=layer.describe(), limit=limit, stock_ms=stock.get("ms"),
                             ucudnn_ms=ours.get("ms"), reference_ms=ref.get("ms"),
                             speedup=speedup, plan=ours.get("plan"), max_rel_err=err,
                             stock_per_repeat_ms=stock.get("per_repeat_ms"),
                             ucudnn_per_repeat_ms=ours.get("per_repeat_ms"),
                             reference_per_repeat_ms=ref.get("per_repeat_ms"),
                             plans=ours.get("plans")))
    return rows, errors, check_failures


def _summarize(rows, limits):
    """Per limit: geometric-mean speedup, worst layer, and tf_ucudnn's gap to stock at 8 GiB."""
    summary = {}
    for limit in limits:
        done = [r for r in rows if r["limit"] == limit and r["speedup"] is not None]
        if not done:
            print(f"{format_bytes(limit)}: no layer measured in both modes")
            continue
        worst = min(done, key=lambda r: r["speedup"])
        gap = geometric_mean(r["ucudnn_ms"] / r["reference_ms"] for r in done
                             if r["reference_ms"])
        s = dict(limit=limit, layers=len(done),
                 geomean_speedup=geometric_mean(r["speedup"] for r in done),
                 worst_speedup=worst["speedup"], worst_layer=worst["layer"],
                 geomean_ucudnn_vs_8gib=gap)
        summary[str(limit)] = s
        print(f"{format_bytes(limit)}: geometric-mean speedup {s['geomean_speedup']:.2f}x over "
              f"{len(done)} layer shape{'s' if len(done) > 1 else ''}; worst "
              f"{s['worst_speedup']:.2f}x ({worst['name']})"
              + (f"; tf_ucudnn time / stock-8 GiB time, geometric mean {gap:.2f}" if gap else ""))
    return summary


def _no_gpu():
    message = ("tf_ucudnn.bench: no GPU found. The benchmark compares cuDNN algorithms under "
               "workspace limits and needs a GPU; nothing was timed.")
    print(message)
    print("Running the CPU self-check instead (tf_ucudnn vs tf.nn.conv2d, one tiny layer):")
    ok, lines = self_check()
    print("\n".join(lines))
    print(f"self-check {'PASSED' if ok else 'FAILED'}")
    print(message)
    return EXIT_NO_GPU if ok else 1


def main(argv=None):
    """Runs the benchmark (or, with the hidden --worker flag, one worker).

    Args:
      argv: arguments without the program name; None uses sys.argv.

    Returns:
      The exit status: 0 done, 1 a worker, a layer or a check failed (or a bad
      layer table), 2 no GPU (the CPU self-check passed).
    """
    args = parse_args(argv)
    if args.worker:
        return run_worker(args.worker, args.worker_out)
    if args.plot:
        from tf_ucudnn import bench_figures

        with open(args.plot) as f:
            report = json.load(f)
        for path in bench_figures.draw(report, args.png or os.path.splitext(args.plot)[0]):
            print(f"wrote {path}")
        return 0

    import tensorflow as tf

    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    if not on_gpu and not args.allow_cpu:
        return _no_gpu()
    if args.models:
        return _run_models(args, on_gpu)
    try:
        if args.quick:
            layers = list(QUICK_LAYERS)
        elif args.csv:
            layers = select_layers(read_layers(args.csv), args.layers)
        else:
            layers = select_layers(layer_set(args.set), args.layers)
    except (OSError, ValueError) as e:
        print(f"tf_ucudnn.bench: error: {e}", file=sys.stderr)
        return 1
    data_format = args.data_format
    if args.overhead:
        return _run_overhead(args, layers, data_format)
    notes = []
    if not on_gpu and data_format == "NCHW":
        data_format = "NHWC"
        notes.append("no GPU (--allow-cpu): NHWC, since stock TF's CPU convolution has no NCHW")

    environment = _environment(on_gpu)
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

    measured, workers = _run_all_workers(layers, args, data_format)
    rows, errors, check_failures = _collect_rows(layers, args, measured, workers)
    print()
    _print_table(rows)
    print()
    summary = _summarize(rows, args.limits)
    for line in errors:
        print(f"error: {line}")
    for line in check_failures:
        print(f"check: {line}")
    checked = [r["max_rel_err"] for r in rows if r["max_rel_err"] is not None]
    if checked and not check_failures:
        print(f"check: tf_ucudnn's outputs match stock TF's in all {len(checked)} (layer, limit) "
              f"pairs measured (relative L2 error {max(checked):.1e} <= {_tolerance(args):g})")

    report = dict(environment=environment, device=device,
                  settings=dict(batch=args.batch, data_format=data_format, dtype=args.dtype,
                                tf32=args.tf32 == "on", policy=args.policy,
                                limits=args.limits, reference_limit=REFERENCE_LIMIT,
                                warmup=args.warmup, repeats=args.repeats, iters=args.iters,
                                quick=args.quick, csv=args.csv, set=args.set,
                                passes=args.passes,
                                xla=False, argv=sys.argv[1:] if argv is None else argv),
                  notes=notes, layers=[l.to_json() for l in layers], results=rows,
                  summary=summary, errors=errors, check_failures=check_failures,
                  workers=workers)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
        print(f"wrote {args.json}")
        if not args.png:
            args.png = os.path.splitext(args.json)[0]
    if args.png:
        from tf_ucudnn import bench_figures

        try:
            for path in bench_figures.draw(report, args.png):
                print(f"wrote {path}")
        except ImportError as e:
            print(f"figures skipped: {e} (pip install matplotlib; or --plot the JSON elsewhere)")
    return 1 if errors or check_failures else 0


def _run_overhead(args, layers, data_format):
    """Overhead mode (tf_ucudnn.bench_overhead); writes --json if given."""
    import tensorflow as tf

    from tf_ucudnn import bench_overhead

    for gpu in tf.config.list_physical_devices("GPU"):  # the engine cudaMallocs its buffers
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.experimental.enable_tensor_float_32_execution(args.tf32 == "on")
    limit = args.limits[0] if args.limits_given else REFERENCE_LIMIT
    environment = _environment(True)
    print(f"tf_ucudnn.bench --overhead: {', '.join(environment['gpus'])}; TensorFlow "
          f"{environment['tensorflow']}, cuDNN {environment['cudnn']}; N={args.batch}, "
          f"{data_format}, {args.dtype}, TF32 {args.tf32}; ms per call, {args.iters} calls "
          f"per repeat, median of 5")
    rows = bench_overhead.run_overhead(layers, batch=args.batch, data_format=data_format,
                                       dtype=args.dtype, workspace_limit=limit,
                                       iters=args.iters, passes=args.passes)
    bench_overhead.print_overhead(rows, limit)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(environment=environment, batch=args.batch, data_format=data_format,
                           dtype=args.dtype, tf32=args.tf32 == "on", workspace_limit=limit,
                           iters=args.iters, results=rows), f, indent=2)
        print(f"wrote {args.json}")
    return 1 if any("error" in r for r in rows) else 0


def _run_models(args, on_gpu):
    """Model mode (tf_ucudnn.bench_models): needs a GPU; writes --json if given."""
    from tf_ucudnn import bench_models

    if not on_gpu:
        return _no_gpu()
    environment = _environment(on_gpu)
    print(f"tf_ucudnn.bench --models: {', '.join(environment['gpus'])}; TensorFlow "
          f"{environment['tensorflow']}, cuDNN {environment['cudnn']}; one training step"
          + (", with and without XLA" if args.xla else ", no XLA"))
    # Only --totals given: no per-kernel limits.
    limits = args.limits if args.limits_given or not args.totals else []
    results = bench_models.run_models(args.models, limits, args.totals, batch=args.batch_given,
                                      planning=args.planning, timeout=args.worker_timeout,
                                      xla=args.xla, modes=args.modes, precision=args.precision)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(environment=environment, models=args.models, limits=limits, xla=args.xla,
                           precision=args.precision,
                           totals=args.totals, results=results), f, indent=2)
        print(f"wrote {args.json}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
