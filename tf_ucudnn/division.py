"""Workspace Division for a Keras model: one total workspace budget shared by
every convolution kernel of the model (Oyama et al. 2018, §III-C).

Each kernel (forward, backward-data and backward-filter of every
``tf_ucudnn.layers.Conv2D``) is benchmarked once on the GPU with the whole
budget as its limit; the Pareto front of its benchmark table is handed to the
ILP of :func:`tf_ucudnn.division_solver.divide_workspace`, and each kernel is then
replanned within its share. Later training and inference steps at that batch
size run the divided plans.

Two ways in:

* :func:`divide_workspace_budget` divides now, for a Keras model, and returns
  a :class:`DivisionReport`.
* Ops with a ``total_workspace`` (``UCUDNN_TOTAL_WORKSPACE_SIZE`` in the
  environment, or ``tf_ucudnn.enable_rewrite(total_workspace=...)``) divide
  at run time: the engine groups the kernels that share a total on a device,
  and once every kernel of the group has run (one training step) it calls
  :func:`_divide_group` here, which divides and replans them; kernels that
  appear later (another batch size, evaluation) trigger a new division of the
  grown group. :func:`division_reports` shows the latest division per group.
"""

import dataclasses
import json
import logging
import numbers
import sys
import threading

import tensorflow as tf

from tf_ucudnn import _engine, environment, table
from tf_ucudnn.layers import Conv2D
from tf_ucudnn.division_solver import divide_workspace
from tf_ucudnn.planner import check_int
from tf_ucudnn.plan_registry import format_ms, micro_batch_pieces
from tf_ucudnn.units import format_bytes, to_bytes


kernels = _engine.kernels  # every planned GPU kernel with its Pareto front


def set_kernel_limit(kernel_id, workspace_limit):
    """Replans one kernel (an ``id`` of :func:`kernels`) within ``workspace_limit``
    bytes from its benchmark table, without benchmarking again.

    Raises:
      ValueError: unknown id, a kernel not yet planned, or no plan that fits.
    """
    _engine.set_kernel_limit(check_int(kernel_id, "kernel_id", 0),
                             to_bytes(workspace_limit, "workspace_limit"))


@dataclasses.dataclass
class KernelShare:
    """One kernel's share of the budget: the point of its Pareto front (of
    workspace against time, Oyama et al. 2018, §III-C) that the division chose.

    Attributes:
      layers: names of the model's layers with this convolution (empty for
        a run-time division, which does not know the layers).
      pass_name: ``"forward"``, ``"backward-data"`` or ``"backward-filter"``.
      shape: the convolution, as a :func:`tf_ucudnn.plans` record's
        ``shape`` (``"N=256 C=64 H=56 W=56 K=64 R=3 S=3 ..."``).
      micro_batches: the chosen plan, a list of dicts with ``size``
        (samples), ``algo``, ``workspace_bytes`` (bytes) and ``time_ms``
        (benchmarked ms), as in :func:`tf_ucudnn.plans`.
      workspace_bytes: the kernel's share, bytes: the chosen plan's
        workspace (the largest of its micro-batches').
      time_ms: the chosen plan's predicted time, ms (the sum of its
        micro-batches' benchmarked times).
      fastest_ms: the kernel's fastest plan, ms, whatever its workspace.
      fastest_workspace_bytes: the workspace that fastest plan needs, bytes.
    """

    layers: list          # names of the model's layers with this convolution
    pass_name: str        # forward | backward-data | backward-filter
    shape: str            # the convolution, e.g. "N=256 C=64 H=56 ..."
    micro_batches: list   # [{"size", "algo", "workspace_bytes", "time_ms"}]
    workspace_bytes: int  # bytes
    time_ms: float        # predicted (benchmarked) ms
    fastest_ms: float     # the kernel's fastest plan, whatever its workspace
    fastest_workspace_bytes: int


@dataclasses.dataclass
class DivisionReport:
    """The outcome of a Workspace Division (:func:`divide_workspace_budget`,
    or a run-time division of :func:`division_reports`); prints as a table,
    one row per kernel, and a total line.

    Attributes:
      total_workspace: the budget shared by the kernels, bytes.
      batch_size: the mini-batch size the kernels were planned for (the
        largest among a run-time group's kernels).
      kernels: a :class:`KernelShare` per kernel, its share and plan.
      gap: the division's relative optimality gap, ``(time_ms - bound) /
        time_ms`` for the best known lower bound on the optimal total time
        (0.0: optimal; the solver's ``Division.gap``).
      workspace_bytes: (property) the kernels' shares summed, bytes, at
        most ``total_workspace``.
      time_ms: (property) the kernels' predicted times summed, ms.
    """

    total_workspace: int  # the budget, bytes
    batch_size: int
    kernels: list         # KernelShare per kernel
    gap: float = 0.0      # the division's relative optimality gap (division_solver.Division.gap)

    @property
    def workspace_bytes(self):
        """The sum of the kernels' workspace, bytes (<= total_workspace)."""
        return sum(k.workspace_bytes for k in self.kernels)

    @property
    def time_ms(self):
        """The predicted sum of the kernels' times, ms."""
        return sum(k.time_ms for k in self.kernels)

    def to_json(self, path=None):
        """The report as a JSON string; also written to ``path`` if given."""
        text = json.dumps(dict(total_workspace=self.total_workspace, batch_size=self.batch_size,
                               workspace_bytes=self.workspace_bytes, time_ms=self.time_ms,
                               gap=self.gap, kernels=[dataclasses.asdict(k) for k in self.kernels]), indent=1)
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text

    def to_string(self, max_width=120):
        """The report as a table and a total line, cells wrapped to fit
        ``max_width`` columns where they can (None: one line per kernel)."""
        rows = [([f"{name}," for name in k.layers[:-1]] + k.layers[-1:] or "?", k.pass_name,
                 micro_batch_pieces(k.micro_batches), format_bytes(k.workspace_bytes),
                 format_ms(k.time_ms),
                 f"{format_ms(k.fastest_ms)} ({format_bytes(k.fastest_workspace_bytes)})")
                for k in self.kernels]
        text = table.render(("layers", "pass", "micro-batches", "workspace", "ms",
                             "fastest ms (workspace)"), rows, align="lllrrr", max_width=max_width)
        return (f"{text}\ntotal: {format_bytes(self.workspace_bytes)} of "
                f"{format_bytes(self.total_workspace)} workspace, {format_ms(self.time_ms)} ms "
                f"predicted, batch {self.batch_size}")

    def __str__(self):
        return self.to_string()


_log = logging.getLogger("tf_ucudnn")
_reports = {}  # (device, total_workspace) -> DivisionReport of the group's latest division
_reports_lock = threading.Lock()


def _share(kernel, point, layers=()):
    fastest = min(kernel["front"], key=lambda p: p["time_ms"])
    return KernelShare(
        layers=list(layers), pass_name=kernel["pass"], shape=kernel["shape"],
        micro_batches=point["micro_batches"], workspace_bytes=point["workspace_bytes"],
        time_ms=point["time_ms"], fastest_ms=fastest["time_ms"],
        fastest_workspace_bytes=fastest["workspace_bytes"])


class _Shares(list):
    """The :class:`KernelShare` list of a division, with its optimality gap."""

    gap = 0.0


def _divide(group, total_workspace, layers_of=lambda kernel: ()):
    """Solves the ILP over the kernels' Pareto fronts, replans each kernel
    within its share and returns the :class:`KernelShare` list (with the
    division's optimality gap as ``.gap``).

    Raises:
      ValueError: the budget is below the smallest feasible one, or a kernel
        cannot be replanned.
    """
    chosen = divide_workspace([k["front"] for k in group], total_workspace)
    for kernel, point in zip(group, chosen):
        set_kernel_limit(kernel["id"], point["workspace_bytes"])
    shares = _Shares(_share(k, p, layers_of(k)) for k, p in zip(group, chosen))
    shares.gap = chosen.gap
    return shares


def _divide_group(device, total_workspace):
    """The engine's division callback (cc/engine/division_groups.h):
    divides ``total_workspace`` bytes among the group's kernels on GPU
    ``device`` and replans them. Never raises: on failure it splits the budget
    evenly instead and logs why."""
    try:
        group = [k for k in kernels()
                 if k["device"] == device and k["total_workspace"] == total_workspace]
        if not group:
            return
        try:
            shares = _divide(group, total_workspace)
        except Exception as e:  # noqa: BLE001  (the engine's thread must not see a Python error)
            even = total_workspace // len(group)
            _log.warning("tf_ucudnn: Workspace Division of %d bytes among %d kernels on GPU:%d "
                         "failed (%s); giving each kernel %d bytes instead",
                         total_workspace, len(group), device, e, even)
            for k in group:
                set_kernel_limit(k["id"], even)
            return
        report = DivisionReport(total_workspace=total_workspace,
                                batch_size=max(k["key"]["conv"]["batch"] for k in group),
                                kernels=list(shares), gap=getattr(shares, "gap", 0.0))
        with _reports_lock:
            _reports[(device, total_workspace)] = report
        _log.info("tf_ucudnn: divided %s among %d kernels on GPU:%d: %s in use, %.3f ms predicted",
                  format_bytes(total_workspace), len(group), device,
                  format_bytes(report.workspace_bytes), report.time_ms)
        if environment.debug_output():
            # Where the engine prints its plan lines under UCUDNN_DEBUG_OUTPUT: stderr.
            print(f"tf_ucudnn: Workspace Division on GPU:{device}\n{report}", file=sys.stderr,
                  flush=True)
    except Exception as e:  # noqa: BLE001
        _log.warning("tf_ucudnn: Workspace Division on GPU:%d failed: %s", device, e)


def division_reports():
    """The latest run-time Workspace Division of each group.

    Returns:
      A dict ``{(gpu_ordinal, total_workspace_bytes): DivisionReport}`` for
      the groups formed by ops with a ``total_workspace``
      (``UCUDNN_TOTAL_WORKSPACE_SIZE`` or ``enable_rewrite(total_workspace=)``)
      that have been divided so far; empty before the first division.
    """
    with _reports_lock:
        return dict(_reports)


class _Progress:
    """A Keras progress bar advanced by the engine's plan listener (one step
    per planned kernel) while :func:`divide_workspace_budget` benchmarks.

    The target is the number of distinct kernels in the traced step (see
    :func:`_distinct_kernels`). Kernels planned before (by an earlier call in
    this process) are not planned again, so on success the bar is completed
    at the end: every kernel of the step has a plan then.
    """

    active = None

    def __init__(self, target, verbose):
        import keras

        self.bar = keras.utils.Progbar(target, unit_name="kernel", verbose=verbose)
        self.target = target
        self.count = 0
        self.lock = threading.Lock()

    def __enter__(self):
        _Progress.active = self
        return self

    def __exit__(self, exc_type, *exc):
        _Progress.active = None
        with self.lock:
            if exc_type is None and self.count < self.target:
                self.bar.update(self.target, finalize=True)
        return False

    def planned(self):
        with self.lock:
            self.count += 1
            self.bar.update(self.count)


def _on_plan():
    progress = _Progress.active
    if progress is not None:
        progress.planned()


_engine.set_division_callback(_divide_group)
_engine.set_plan_listener(_on_plan)


def _ucudnn_layers(model):
    found, stack = [], [model]
    while stack:
        layer = stack.pop()
        if isinstance(layer, Conv2D):
            found.append(layer)
        stack.extend(getattr(layer, "layers", []) or [])
    return found


def _layer_signature(layer):
    """(C, K, R, S, stride_h, stride_w, dilation_h, dilation_w, groups) of a layer."""
    r, s, cg, k = layer.kernel.shape
    return (int(cg) * layer.groups, int(k), int(r), int(s), *layer.strides, *layer.dilation_rate,
            layer.groups)


_UCUDNN_OP_TYPES = ("Ucudnn>Conv2D", "Ucudnn>Conv2DWithBias", "Ucudnn>Conv2DBackpropInput",
                    "Ucudnn>Conv2DBackpropFilter")


def _distinct_kernels(function):
    """How many kernels the engine will plan for the tf_ucudnn ops that a
    traced function (a ``ConcreteFunction``) runs.

    The engine plans one kernel per pass and convolution (shapes and
    attributes), however many ops share it. Ops whose results the function
    does not return are pruned and never run: the backward-data op of the
    first layer is one (the model's input needs no gradient), so a model of n
    layers of distinct shapes has 3n - 1 kernels, not 3n.
    """
    graph = function.graph
    stack = [t.op for t in function.outputs] + list(graph.control_outputs)
    seen = set()
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    kernels = set()
    for op in graph.get_operations():
        if op.name in seen and op.type in _UCUDNN_OP_TYPES:
            shapes = tuple(tuple(t.shape.as_list()) for t in (*op.inputs, *op.outputs))
            attrs = tuple(sorted((k, v.SerializeToString()) for k, v in op.node_def.attr.items()))
            kernels.add((op.type, op.device, shapes, attrs))
    return len(kernels)


def _plan_forward_backward(model, batch_size, verbose):
    """Runs one forward and backward pass of ``model`` on random data of
    ``batch_size`` samples, which plans every kernel, with a progress bar of
    one step per kernel. Returns the :class:`_Progress` (count, target)."""
    inputs = [tf.random.normal([batch_size, *t.shape[1:]], dtype=t.dtype) for t in model.inputs]

    @tf.function
    def forward_backward(inputs):
        with tf.GradientTape() as tape:
            outputs = tf.nest.flatten(model(inputs if len(inputs) > 1 else inputs[0], training=True))
            # Squared, so the gradient needs every output: no forward kernel is pruned.
            loss = tf.add_n([tf.reduce_sum(tf.square(tf.cast(o, tf.float32))) for o in outputs])
        return tape.gradient(loss, model.trainable_variables)

    traced = forward_backward.get_concrete_function(inputs)
    with _Progress(target=_distinct_kernels(traced), verbose=verbose) as progress:
        forward_backward(inputs)
    return progress


def _kernel_signature(conv):
    """:func:`_layer_signature` of a kernel's ``key["conv"]``."""
    return tuple(conv[name] for name in ("in_channels", "out_channels", "filter_height",
                                         "filter_width", "stride_h", "stride_w", "dilation_h",
                                         "dilation_w", "groups"))


def divide_workspace_budget(model, total_workspace, batch_size, verbose=1):
    """Workspace Division for a Keras model built from ``tf_ucudnn.layers.Conv2D``.

    Sets every such layer's ``workspace_limit`` to ``total_workspace``, runs one
    forward and backward pass on random data of ``batch_size`` samples (which
    benchmarks every kernel within the whole budget), divides the budget among
    the kernels with the ILP of :func:`tf_ucudnn.division_solver.divide_workspace`
    (Oyama et al. 2018, §III-C), and replans each kernel within its share.
    Training and inference at this batch size then run the divided plans; the
    model's compiled functions are reset so that they pick the limit up.

    Args:
      model: a built ``keras.Model`` with ``tf_ucudnn.layers.Conv2D`` layers;
        inputs of shape ``[batch, ...]`` as ``model.inputs`` declares.
      total_workspace: bytes for all kernels together, an int or a string
        such as ``"256MiB"``.
      batch_size: the mini-batch size training will use (an int).
      verbose: 1 shows a progress bar while the kernels are benchmarked
        (one step per kernel), 0 shows none.

    Returns:
      A :class:`DivisionReport`.

    Raises:
      ValueError: ``model`` not a ``keras.Model`` (naming the type given),
        no tf_ucudnn layers, bad budget or batch size, or a budget below the
        smallest feasible one (named in the message).
      RuntimeError: no GPU (the division plans cuDNN kernels).
    """
    import keras

    if not isinstance(model, keras.Model):
        raise ValueError(f"divide_workspace_budget needs a keras.Model, got "
                         f"{type(model).__module__}.{type(model).__qualname__}: {model!r:.80}")
    total_workspace = to_bytes(total_workspace, "total_workspace")
    if (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
            or not 0 < batch_size < 1 << 63):
        raise ValueError(f"batch_size must be a positive int (at most 2**63 - 1), got {batch_size!r}")
    batch_size = int(batch_size)
    layers = _ucudnn_layers(model)
    if not layers:
        raise ValueError("the model has no tf_ucudnn.layers.Conv2D layer to divide a budget among")
    if not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("Workspace Division plans cuDNN kernels and needs a GPU; none is visible")
    for layer in layers:
        layer.workspace_limit = total_workspace
    for name in ("train_function", "test_function", "predict_function"):
        if hasattr(model, name):
            setattr(model, name, None)
    _plan_forward_backward(model, batch_size, verbose)
    by_signature = {}
    for layer in layers:
        by_signature.setdefault(_layer_signature(layer), []).append(layer.name)
    mine = [k for k in kernels()
            if k["key"]["workspace_limit"] == total_workspace and not k["total_workspace"]
            and k["key"]["conv"]["batch"] == batch_size
            and _kernel_signature(k["key"]["conv"]) in by_signature]
    shares = _divide(mine, total_workspace,
                     lambda kernel: by_signature[_kernel_signature(kernel["key"]["conv"])])
    return DivisionReport(total_workspace=total_workspace, batch_size=batch_size,
                          kernels=list(shares), gap=shares.gap)
