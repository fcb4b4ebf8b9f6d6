"""Workspace Division for a Keras model: one total workspace budget shared by
every convolution kernel of the model (Oyama et al. 2018, §III-C).

Each kernel (forward, backward-data and backward-filter of every
``tf_ucudnn.layers.Conv2D``) is benchmarked once on the GPU with the whole
budget as its limit; the Pareto front of its benchmark table is handed to the
ILP of :func:`tf_ucudnn.planner.divide_workspace`, and each kernel is then
replanned within its share. Later training and inference steps at that batch
size run the divided plans.
"""

import dataclasses
import json

import tensorflow as tf

from tf_ucudnn._ops import clib, read_c_string
from tf_ucudnn.planner import check_bytes, divide_workspace
from tf_ucudnn.plan_registry import describe_micro_batches, format_bytes


def kernels():
    """Every planned GPU kernel of this process with its Pareto front.

    Returns:
      A list of dicts: ``id``, ``device`` (GPU ordinal), ``pass``, ``shape``,
      ``conv`` (the convolution's fields, batch first), ``workspace_limit``
      (the op's, bytes), ``planned_limit`` (the limit its plan uses now),
      ``plan`` and ``front`` (plans as dicts with ``time_ms``,
      ``workspace_bytes`` and ``micro_batches``).
    """
    return json.loads(read_c_string(clib.ucudnn_kernels_json))


def set_kernel_limit(kernel_id, workspace_limit):
    """Replans one kernel (an ``id`` of :func:`kernels`) within ``workspace_limit``
    bytes from its benchmark table, without benchmarking again.

    Raises:
      ValueError: unknown id, a kernel not yet planned, or no plan that fits.
    """
    import ctypes

    error = ctypes.create_string_buffer(1024)
    if clib.ucudnn_set_kernel_limit(int(kernel_id), check_bytes(workspace_limit, "workspace_limit"),
                                    error, len(error)) != 0:
        raise ValueError(error.value.decode())


@dataclasses.dataclass
class KernelShare:
    """One kernel's share of the budget: the chosen Pareto point."""

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
    """The outcome of :func:`divide_workspace_budget`; prints as a table."""

    total_workspace: int  # the budget, bytes
    batch_size: int
    kernels: list         # KernelShare per kernel

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
                               kernels=[dataclasses.asdict(k) for k in self.kernels]), indent=1)
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text

    def __str__(self):
        header = ("layers", "pass", "micro-batches", "workspace", "ms", "fastest ms (workspace)")
        rows = [header]
        for k in self.kernels:
            rows.append((",".join(k.layers) or "?", k.pass_name, describe_micro_batches(k.micro_batches),
                         format_bytes(k.workspace_bytes), f"{k.time_ms:.3f}",
                         f"{k.fastest_ms:.3f} ({format_bytes(k.fastest_workspace_bytes)})"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"total: {format_bytes(self.workspace_bytes)} of {format_bytes(self.total_workspace)}"
                     f" workspace, {self.time_ms:.3f} ms predicted, batch {self.batch_size}")
        return "\n".join(lines)


def _ucudnn_layers(model):
    from tf_ucudnn.layers import Conv2D

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


def _kernel_signature(conv):
    # ConvParams::Fields(): N C H W K R S groups sh sw dh dw pt pb pl pr P Q layout dtype
    return (conv[1], conv[4], conv[5], conv[6], conv[8], conv[9], conv[10], conv[11], conv[7])


def divide_workspace_budget(model, total_workspace, batch_size):
    """Workspace Division for a Keras model built from ``tf_ucudnn.layers.Conv2D``.

    Sets every such layer's ``workspace_limit`` to ``total_workspace``, runs one
    forward and backward pass on random data of ``batch_size`` samples (which
    benchmarks every kernel within the whole budget), divides the budget among
    the kernels with the ILP of :func:`tf_ucudnn.planner.divide_workspace`
    (Oyama et al. 2018, §III-C), and replans each kernel within its share.
    Training and inference at this batch size then run the divided plans; the
    model's compiled functions are reset so that they pick the limit up.

    Args:
      model: a built ``keras.Model`` with ``tf_ucudnn.layers.Conv2D`` layers;
        inputs of shape ``[batch, ...]`` as ``model.inputs`` declares.
      total_workspace: bytes for all kernels together.
      batch_size: the mini-batch size training will use.

    Returns:
      A :class:`DivisionReport`.

    Raises:
      ValueError: no tf_ucudnn layers, bad budget or batch size, or a budget
        below the smallest feasible one (named in the message).
      RuntimeError: no GPU (the division plans cuDNN kernels).
    """
    total_workspace = check_bytes(total_workspace, "total_workspace")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
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

    inputs = [tf.random.normal([batch_size, *t.shape[1:]], dtype=t.dtype) for t in model.inputs]

    @tf.function
    def forward_backward(inputs):
        with tf.GradientTape() as tape:
            outputs = tf.nest.flatten(model(inputs if len(inputs) > 1 else inputs[0], training=True))
            # Squared, so the gradient needs every output: no forward kernel is pruned.
            loss = tf.add_n([tf.reduce_sum(tf.square(tf.cast(o, tf.float32))) for o in outputs])
        return tape.gradient(loss, model.trainable_variables)

    forward_backward(inputs)
    by_signature = {}
    for layer in layers:
        by_signature.setdefault(_layer_signature(layer), []).append(layer.name)
    mine = [k for k in kernels()
            if k["workspace_limit"] == total_workspace and k["conv"][0] == batch_size
            and _kernel_signature(k["conv"]) in by_signature]
    chosen = divide_workspace([k["front"] for k in mine], total_workspace)
    shares = []
    for kernel, point in zip(mine, chosen):
        set_kernel_limit(kernel["id"], point["workspace_bytes"])
        fastest = min(kernel["front"], key=lambda p: p["time_ms"])
        shares.append(KernelShare(
            layers=by_signature[_kernel_signature(kernel["conv"])], pass_name=kernel["pass"],
            shape=kernel["shape"], micro_batches=point["micro_batches"],
            workspace_bytes=point["workspace_bytes"], time_ms=point["time_ms"],
            fastest_ms=fastest["time_ms"], fastest_workspace_bytes=fastest["workspace_bytes"]))
    return DivisionReport(total_workspace=total_workspace, batch_size=batch_size, kernels=shares)
