"""Which fused convolution + batch-norm training graphs does this GPU's cuDNN build,
per data type and layout, and what do they cost against the convolution alone?

Asks the machine's own cuDNN, through the cudnn-frontend Python API and PyTorch
(no TensorFlow), for every graph of a Conv–BatchNorm–ReLU training step that the
fused engine would use, at ResNet-50's layer shapes and N = 256:

- the convolution alone (forward, backward-data, backward-filter): the baselines;
- forward: a scale-bias-ReLU prologue on the input (the previous layer's batch
  norm and ReLU applied inside this convolution) and a statistics epilogue
  (per-channel sum and sum of squares of the output) as `genstats` or as sum
  reductions (the sum of squares as square → sum), apart and together;
- batch-norm finalize (sums → scale and bias, moving mean and variance);
- backward: backward-data with the ReLU's backward fused, with the batch norm's
  apply recomputed for the ReLU's mask, and with the batch norm's weight
  gradients (`dbn_weight`, or as two sum reductions); backward-filter with the
  prologue recomputed;
- a block's end: batch norm + residual add + ReLU and its backward
  (ReLU backward + batch-norm backward).

A graph "builds" when validate, build_operation_graph, create_execution_plans
(heuristics A, then FALLBACK), check_support and build_plans all succeed; its
error text is kept when one does not. A graph that builds is executed on random
tensors, timed with CUDA events (warm-up, then the median of --iters runs, the
GPU kept busy so that host time does not count) and one of its outputs is
compared with a PyTorch float32 reference (relative error, Frobenius norm), so
that "builds" also means "computes the right thing". Layouts are given to cuDNN
as strides only: NHWC is PyTorch's channels_last, NCHW its contiguous layout.

On the GPU machine (PyTorch with CUDA and cuDNN 9; the frontend is one wheel,
fetched where PyPI can be reached into the checkout's `.whl/`, which git ignores):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --implementation cp --platform manylinux_2_28_x86_64 -d .whl nvidia-cudnn-frontend
    python3 -m pip install -q --no-deps .whl/nvidia_cudnn_frontend-*.whl   # on the GPU machine
    python3 benchmarks/cudnn_fusion_probe.py --json OUT/x.json
    python3 benchmarks/cudnn_fusion_probe.py --summarize OUT/x.json   # the tables again

Rows go to --json as they come; the tables print at the end, one per shape and
layout, graph × data type, in Markdown. Batch-norm results are compared on
their first 32 channels (channels are independent), the others whole. Each
graph runs under a watchdog: one still building or running after
--graph-seconds (some NCHW fallbacks run for minutes) ends its process with
its row marked "timeout", and the run goes on in a new process (--resume
keeps the rows a file has). --seconds bounds the whole run; cells past it are
recorded as skipped and probed by a later --resume. On an H200 the NHWC half
of the default run takes about 3 minutes; NCHW adds --graph-seconds for each
graph that hangs. Split a long run with --shapes or --layouts (one JSON each,
joined by --summarize A.json B.json). --list prints the graphs and shapes.
"""
import argparse
import datetime
import faulthandler
import gc
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import time

# Imported in main(): --help, --list and --summarize run without them.
torch = None
cudnn = None

DTYPES = ("bfloat16", "float16", "float32")
LAYOUTS = ("NHWC", "NCHW")
# Relative error (Frobenius) above which a result is marked wrong: float32 may
# run on TF32 tensor cores (10 mantissa bits), as TensorFlow's default allows.
TOLERANCE = {"bfloat16": 5e-2, "float16": 2e-2, "float32": 1e-2}
EPSILON = 1e-3   # Keras BatchNormalization's default
MOMENTUM = 0.99  # Keras: moving = moving * momentum + batch * (1 - momentum)
# Batch-norm results are checked on their first channels (each channel is independent):
# full float32 references of 256 × 256 × 56 × 56 tensors would not fit the memory cap.
CHECK_CHANNELS = 32


class Shape:
    """A convolution of ResNet-50: input [N, C, H, H], filter [K, C, R, R]."""

    def __init__(self, c, h, k, r, stride=1, pad=None):
        self.c, self.h, self.k, self.r, self.stride = c, h, k, r, stride
        self.pad = r // 2 if pad is None else pad
        self.ho = (h + 2 * self.pad - r) // stride + 1

    def describe(self):
        text = f"{self.h}² {self.c}→{self.k} {self.r}×{self.r}"
        return text + (f" stride {self.stride}" if self.stride != 1 else "")


SHAPES = {
    "56_64_64_3": Shape(64, 56, 64, 3),
    "56_64_256_1": Shape(64, 56, 256, 1),
    "28_128_128_3": Shape(128, 28, 128, 3),
    "14_256_256_3": Shape(256, 14, 256, 3),
    "7_512_512_3": Shape(512, 7, 512, 3),
    "28_256_512_1_s2": Shape(256, 28, 512, 1, stride=2),
    "224_3_64_7_s2": Shape(3, 224, 64, 7, stride=2),  # the stem; not in the default list
}
DEFAULT_SHAPES = tuple(SHAPES)[:-1]


class NotInApi(Exception):
    """The installed frontend's Python API has no such operation."""


class Pattern:
    """One graph to probe.

    Args:
      name: the key in the JSON and on the command line.
      baseline: the convolution alone it is compared with: "fprop", "dgrad" or "wgrad".
      title: the row's name in the tables.
      build: function(cell) -> (graph, variant pack, check); see the builders below.
    """

    def __init__(self, name, baseline, title, build):
        self.name, self.baseline, self.title, self.build = name, baseline, title, build


# --------------------------------------------------------------------------
# Tensors and graphs of one cell (data type, layout, shape, N)
# --------------------------------------------------------------------------

class Cell:
    """The tensors' data type and layout, the convolution and the batch size."""

    def __init__(self, dtype, layout, shape, batch):
        self.dtype_name, self.layout, self.shape, self.n = dtype, layout, shape, batch
        self.dtype = getattr(torch, dtype)
        self.format = torch.channels_last if layout == "NHWC" else torch.contiguous_format

    # Tensors: [N, C, H, W] dims, strides of the cell's layout.
    def empty(self, dims, dtype=None):
        return torch.empty(dims, device="cuda", dtype=dtype or self.dtype, memory_format=self.format)

    def normal(self, dims, std=1.0, mean=0.0, dtype=None):
        return self.empty(dims, dtype).normal_(mean, std)

    def uniform(self, dims, low, high, dtype=None):
        return self.empty(dims, dtype).uniform_(low, high)

    def x(self):  # the convolution's input
        s = self.shape
        return self.normal((self.n, s.c, s.h, s.h))

    def y_dims(self):  # the convolution's output
        s = self.shape
        return (self.n, s.k, s.ho, s.ho)

    def x_dims(self):
        s = self.shape
        return (self.n, s.c, s.h, s.h)

    def w(self):  # [K, C, R, S], KRSC in NHWC: unit-variance outputs
        s = self.shape
        return self.normal((s.k, s.c, s.r, s.r), std=1.0 / math.sqrt(s.c * s.r * s.r))

    def channel(self, c, dtype=None):  # [1, C, 1, 1]
        return self.empty((1, c, 1, 1), dtype)

    def conv_args(self):
        s = self.shape
        return dict(padding=[s.pad, s.pad], stride=[s.stride, s.stride], dilation=[1, 1])

    def torch_conv_args(self):
        return dict(stride=self.shape.stride, padding=self.shape.pad)

    def graph(self):
        return cudnn.pygraph(io_data_type=cudnn_type(self.dtype),
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, handle=HANDLE)


HANDLE = None


def cudnn_type(dtype):
    return {torch.float16: cudnn.data_type.HALF, torch.bfloat16: cudnn.data_type.BFLOAT16,
            torch.float32: cudnn.data_type.FLOAT}[dtype]


def tin(graph, name, t):
    """A graph input described by torch tensor t's dims, strides and type."""
    return graph.tensor(name=name, dim=list(t.shape), stride=list(t.stride()),
                        data_type=cudnn_type(t.dtype))


def host_scalar(graph, name, value):
    """A pass-by-value float32 scalar: (graph tensor, host tensor for the variant pack)."""
    t = torch.full((1, 1, 1, 1), float(value), dtype=torch.float32)
    return graph.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                        data_type=cudnn.data_type.FLOAT, is_pass_by_value=True), t


def out(tensor, t):
    """Marks a graph tensor an output laid out as torch tensor t."""
    tensor.set_output(True).set_dim(list(t.shape)).set_stride(list(t.stride()))
    tensor.set_data_type(cudnn_type(t.dtype))
    return tensor


def rel_err(got, ref):
    got, ref = got.float(), ref.float()
    return float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))


def checker(**pairs):
    """check() for the pack's outputs: the largest relative error of (got, reference())."""
    def check():
        errors = {name: rel_err(got, ref()) for name, (got, ref) in pairs.items()}
        worst = max(errors, key=errors.get)
        return errors[worst], ",".join(sorted(errors))
    return check


def channel_sums(y):  # [N, C, H, W] -> sum and sum of squares, [1, C, 1, 1] float32
    y = y.float()
    return y.sum((0, 2, 3), keepdim=True), (y * y).sum((0, 2, 3), keepdim=True)


def ref_conv(x, w, cell):
    return torch.nn.functional.conv2d(x.float(), w.float(), **cell.torch_conv_args())


def prologue(graph, cell, X):
    """scale-bias-ReLU on X in the graph: (output, scale, bias, pack entries, reference fn)."""
    c = cell.shape.c
    s = cell.channel(c).uniform_(0.5, 1.5)
    b = cell.channel(c).normal_(0.0, 0.1)
    S, B = tin(graph, "prologue_scale", s), tin(graph, "prologue_bias", b)
    A = graph.relu(input=graph.bias(input=graph.scale(input=X, scale=S), bias=B))
    return A, {S: s, B: b}, lambda x: torch.relu(x.float() * s.float() + b.float())


def stats_epilogue(graph, cell, Y, kind):
    """Statistics of the conv output Y: "genstats", "sum", "sqsum" or "sum_sqsum".

    Returns (pack entries, {name: buffer}) with float32 [1, K, 1, 1] buffers.
    """
    k = cell.shape.k
    bufs, pack = {}, {}
    if kind == "genstats":
        SUM, SQ = graph.genstats(input=Y)
        bufs = {"sum": cell.channel(k, torch.float32), "sqsum": cell.channel(k, torch.float32)}
        pack = {out(SUM, bufs["sum"]): bufs["sum"], out(SQ, bufs["sqsum"]): bufs["sqsum"]}
        return pack, bufs
    if kind in ("sum", "sum_sqsum"):
        bufs["sum"] = cell.channel(k, torch.float32)
        R = graph.reduction(input=Y, mode=cudnn.reduction_mode.ADD, compute_data_type=cudnn.data_type.FLOAT)
        pack[out(R, bufs["sum"])] = bufs["sum"]
    if kind in ("sqsum", "sum_sqsum"):
        bufs["sqsum"] = cell.channel(k, torch.float32)
        R2 = graph.reduction(input=graph.mul(a=Y, b=Y), mode=cudnn.reduction_mode.ADD,
                             compute_data_type=cudnn.data_type.FLOAT)
        pack[out(R2, bufs["sqsum"])] = bufs["sqsum"]
    return pack, bufs


# --------------------------------------------------------------------------
# The graphs. Each returns (graph, variant pack, check).
# --------------------------------------------------------------------------

def conv_fprop(cell):
    g = cell.graph()
    x, w, y = cell.x(), cell.w(), cell.empty(cell.y_dims())
    X, W = tin(g, "X", x), tin(g, "W", w)
    Y = out(g.conv_fprop(image=X, weight=W, **cell.conv_args()), y)
    return g, {X: x, W: w, Y: y}, checker(y=(y, lambda: ref_conv(x, w, cell)))


def conv_dgrad(cell):
    g = cell.graph()
    dy, w, dx = cell.normal(cell.y_dims()), cell.w(), cell.empty(cell.x_dims())
    DY, W = tin(g, "DY", dy), tin(g, "W", w)
    DX = out(g.conv_dgrad(loss=DY, filter=W, **cell.conv_args()), dx)
    ref = lambda: torch.nn.grad.conv2d_input(cell.x_dims(), w.float(), dy.float(), **cell.torch_conv_args())
    return g, {DY: dy, W: w, DX: dx}, checker(dx=(dx, ref))


def conv_wgrad(cell):
    g = cell.graph()
    x, dy, dw = cell.x(), cell.normal(cell.y_dims()), cell.empty(tuple(cell.w().shape))
    X, DY = tin(g, "X", x), tin(g, "DY", dy)
    DW = out(g.conv_wgrad(image=X, loss=DY, **cell.conv_args()), dw)
    ref = lambda: torch.nn.grad.conv2d_weight(x.float(), tuple(dw.shape), dy.float(), **cell.torch_conv_args())
    return g, {X: x, DY: dy, DW: dw}, checker(dw=(dw, ref))


def fprop_with(with_prologue, stats):
    """conv fprop, with the scale-bias-ReLU prologue or not, with a statistics epilogue or not."""
    def build(cell):
        g = cell.graph()
        x, w, y = cell.x(), cell.w(), cell.empty(cell.y_dims())
        X, W = tin(g, "X", x), tin(g, "W", w)
        pack, image, ref_in = {X: x, W: w}, X, (lambda t: t.float())
        if with_prologue:
            image, extra, ref_in = prologue(g, cell, X)
            pack.update(extra)
        Y = out(g.conv_fprop(image=image, weight=W, **cell.conv_args()), y)
        pack[Y] = y
        ref_y = lambda: torch.nn.functional.conv2d(ref_in(x), w.float(), **cell.torch_conv_args())
        if not stats:
            return g, pack, checker(y=(y, ref_y))
        extra, bufs = stats_epilogue(g, cell, Y, stats)
        pack.update(extra)
        memo = {}

        def ref_stat(i):
            if "sums" not in memo:
                memo["sums"] = channel_sums(ref_y())
            return memo["sums"][i]
        pairs = {name: (buf, (lambda i=("sum", "sqsum").index(name): ref_stat(i))) for name, buf in bufs.items()}
        return g, pack, checker(**pairs)
    return build


def sums(t, count):
    """Fills t["sum"] and t["sqsum"] as the statistics of `count` values (variance 0.5 to 1.5)."""
    mean = torch.randn_like(t["sum"])
    t["sum"].copy_(mean * count)
    t["sqsum"].copy_((mean * mean + torch.rand_like(mean) + 0.5) * count)


def bn_finalize(cell):
    """cudnn-frontend's bn_finalize node, where the Python API has it."""
    g = cell.graph()
    if not hasattr(g, "bn_finalize"):
        raise NotInApi(f"cudnn-frontend {cudnn.__version__}'s Python graph has no bn_finalize")
    k, count = cell.shape.k, cell.n * cell.shape.ho * cell.shape.ho
    t = {name: cell.channel(k, torch.float32) for name in ("sum", "sqsum", "gamma", "beta", "rmean", "rvar")}
    sums(t, count)
    t["gamma"].uniform_(0.5, 1.5), t["beta"].normal_(0.0, 0.1), t["rmean"].zero_(), t["rvar"].fill_(1.0)
    T = {name: tin(g, name, v) for name, v in t.items()}
    EPS, eps = host_scalar(g, "epsilon", EPSILON)
    CNT = g.tensor(name="accum_count", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                   data_type=cudnn.data_type.INT64, is_pass_by_value=True)
    cnt = torch.full((1, 1, 1, 1), count, dtype=torch.int64)
    MOM, mom = host_scalar(g, "momentum", 1.0 - MOMENTUM)
    # The C++ signature: bn_finalize(sum, sq_sum, scale, bias, epsilon, accum_count, attributes
    # with the previous running mean, variance and momentum).
    outs = g.bn_finalize(T["sum"], T["sqsum"], T["gamma"], T["beta"], EPS, CNT,
                         prev_running_mean=T["rmean"], prev_running_var=T["rvar"], momentum=MOM)
    bufs = [cell.channel(k, torch.float32) for _ in outs]
    pack = {T[n]: v for n, v in t.items()}
    pack.update({EPS: eps, CNT: cnt, MOM: mom})
    pack.update({out(O, b): b for O, b in zip(outs, bufs)})
    mean = t["sum"] / count
    var = t["sqsum"] / count - mean * mean
    scale = t["gamma"] * torch.rsqrt(var + EPSILON)
    return g, pack, checker(eq_scale=(bufs[0], lambda: scale), eq_bias=(bufs[1], lambda: t["beta"] - mean * scale))


def bn_finalize_pointwise(cell):
    """Batch-norm finalize as pointwise operations on [1, K, 1, 1] float32 tensors:
    mean, variance, the scale and bias that apply the batch norm, and the moving
    mean and variance updated as Keras does (biased variance)."""
    g = cell.graph()
    k, count = cell.shape.k, cell.n * cell.shape.ho * cell.shape.ho
    t = {name: cell.channel(k, torch.float32) for name in ("sum", "sqsum", "gamma", "beta", "rmean", "rvar")}
    sums(t, count)
    t["gamma"].uniform_(0.5, 1.5), t["beta"].normal_(0.0, 0.1)
    t["rmean"].normal_(0.0, 0.1), t["rvar"].uniform_(0.5, 1.5)
    T = {name: tin(g, name, v) for name, v in t.items()}
    pack = {T[n]: v for n, v in t.items()}
    scalars = {}
    for name, value in (("inv_count", 1.0 / count), ("epsilon", EPSILON),
                        ("momentum", MOMENTUM), ("one_minus_momentum", 1.0 - MOMENTUM)):
        S, s = host_scalar(g, name, value)
        scalars[name] = S
        pack[S] = s
    mean = g.mul(a=T["sum"], b=scalars["inv_count"])
    var = g.sub(a=g.mul(a=T["sqsum"], b=scalars["inv_count"]), b=g.mul(a=mean, b=mean))
    eq_scale = g.mul(a=T["gamma"], b=g.rsqrt(input=g.add(a=var, b=scalars["epsilon"])))
    eq_bias = g.sub(a=T["beta"], b=g.mul(a=mean, b=eq_scale))
    next_mean = g.add(a=g.mul(a=T["rmean"], b=scalars["momentum"]), b=g.mul(a=mean, b=scalars["one_minus_momentum"]))
    next_var = g.add(a=g.mul(a=T["rvar"], b=scalars["momentum"]), b=g.mul(a=var, b=scalars["one_minus_momentum"]))
    bufs = {name: cell.channel(k, torch.float32) for name in ("eq_scale", "eq_bias", "next_mean", "next_var")}
    for O, name in ((eq_scale, "eq_scale"), (eq_bias, "eq_bias"), (next_mean, "next_mean"), (next_var, "next_var")):
        pack[out(O, bufs[name])] = bufs[name]
    r_mean = t["sum"] / count
    r_var = t["sqsum"] / count - r_mean * r_mean
    r_scale = t["gamma"] * torch.rsqrt(r_var + EPSILON)
    refs = dict(eq_scale=lambda: r_scale, eq_bias=lambda: t["beta"] - r_mean * r_scale,
                next_mean=lambda: t["rmean"] * MOMENTUM + r_mean * (1 - MOMENTUM),
                next_var=lambda: t["rvar"] * MOMENTUM + r_var * (1 - MOMENTUM))
    return g, pack, checker(**{n: (bufs[n], refs[n]) for n in bufs})


def bn_stats(cell, x):
    """Batch statistics of x as cuDNN's batch-norm nodes take them: mean and 1/sqrt(var + eps)."""
    xf = x.float()
    mean = xf.mean((0, 2, 3), keepdim=True)
    var = xf.var((0, 2, 3), unbiased=False, keepdim=True)
    m, v = cell.channel(x.shape[1], torch.float32), cell.channel(x.shape[1], torch.float32)
    m.copy_(mean), v.copy_(torch.rsqrt(var + EPSILON))
    return m, v


def dgrad_with(mask, dbn):
    """backward-data → ReLU backward, the ReLU's input stored ("stored") or recomputed
    from the previous conv's output X as (X - mean) * inv_var * gamma + beta ("bn");
    with the batch norm's weight gradients: None, "node" (dbn_weight) or "sums"
    (dbeta = sum(dZ), dgamma = sum(dZ * xhat) as two reductions)."""
    def build(cell):
        g = cell.graph()
        if dbn == "node" and not hasattr(g, "dbn_weight"):
            raise NotInApi(f"cudnn-frontend {cudnn.__version__}'s Python graph has no dbn_weight")
        c = cell.shape.c
        dy, w, z = cell.normal(cell.y_dims()), cell.w(), cell.normal(cell.x_dims(), mean=0.2)
        dz = cell.empty(cell.x_dims())
        DY, W, Z = tin(g, "DY", dy), tin(g, "W", w), tin(g, "X", z)
        pack = {DY: dy, W: w, Z: z}
        DA = g.conv_dgrad(loss=DY, filter=W, **cell.conv_args())
        DA.set_dim(list(cell.x_dims()))
        if mask == "stored":
            relu_in, ref_relu_in = Z, (lambda: z.float())
        else:
            m, v = bn_stats(cell, z)
            gamma = cell.channel(c, torch.float32).uniform_(0.5, 1.5)
            beta = cell.channel(c, torch.float32).normal_(0.0, 0.1)
            M, V, G, B = tin(g, "mean", m), tin(g, "inv_var", v), tin(g, "gamma", gamma), tin(g, "beta", beta)
            pack.update({M: m, V: v, G: gamma, B: beta})
            xhat = g.mul(a=g.sub(a=Z, b=M), b=V)
            relu_in = g.add(a=g.mul(a=xhat, b=G), b=B)
            ref_xhat = lambda: (z.float() - m) * v
            ref_relu_in = lambda: ref_xhat() * gamma + beta
        DZ = out(g.relu_backward(loss=DA, input=relu_in), dz)
        pack[DZ] = dz
        memo = {}

        def ref_dz():
            if "dz" not in memo:
                da = torch.nn.grad.conv2d_input(cell.x_dims(), w.float(), dy.float(), **cell.torch_conv_args())
                memo["dz"] = da * (ref_relu_in() > 0)
            return memo["dz"]
        if dbn is None:
            return g, pack, checker(dz=(dz, ref_dz))
        if dbn == "node":
            outs = g.dbn_weight(DZ, Z, M, V, G)  # C++ order: dy, x, mean, inv_variance, scale
            bufs = [cell.channel(c, torch.float32) for _ in outs]
            pack.update({out(O, b): b for O, b in zip(outs, bufs)})
            # dscale, dbias, eq_scale_dy, eq_scale_x, eq_bias
            return g, pack, checker(dbias=(bufs[1], lambda: ref_dz().sum((0, 2, 3), keepdim=True)))
        dbeta, dgamma = cell.channel(c, torch.float32), cell.channel(c, torch.float32)
        R1 = g.reduction(input=DZ, mode=cudnn.reduction_mode.ADD, compute_data_type=cudnn.data_type.FLOAT)
        R2 = g.reduction(input=g.mul(a=DZ, b=xhat), mode=cudnn.reduction_mode.ADD,
                         compute_data_type=cudnn.data_type.FLOAT)
        pack.update({out(R1, dbeta): dbeta, out(R2, dgamma): dgamma})
        return g, pack, checker(dbeta=(dbeta, lambda: ref_dz().sum((0, 2, 3), keepdim=True)),
                                dgamma=(dgamma, lambda: (ref_dz() * ref_xhat()).sum((0, 2, 3), keepdim=True)))
    return build


def sbr_wgrad(cell):
    g = cell.graph()
    x, dy, dw = cell.x(), cell.normal(cell.y_dims()), cell.empty(tuple(cell.w().shape))
    X, DY = tin(g, "X", x), tin(g, "DY", dy)
    A, pack, ref_a = prologue(g, cell, X)
    DW = out(g.conv_wgrad(image=A, loss=DY, **cell.conv_args()), dw)
    pack.update({X: x, DY: dy, DW: dw})
    ref = lambda: torch.nn.grad.conv2d_weight(ref_a(x), tuple(dw.shape), dy.float(), **cell.torch_conv_args())
    return g, pack, checker(dw=(dw, ref))


def bn_add_relu(inference):
    """A block's end on the conv output X: relu(batch_norm(X) + residual). Training
    computes the batch statistics (cuDNN's batchnorm node); inference applies given
    mean and inv_var (batchnorm_inference), as a fused engine applies finalized ones."""
    def build(cell):
        g = cell.graph()
        k = cell.shape.k
        x, r, y = cell.normal(cell.y_dims(), mean=0.3), cell.normal(cell.y_dims()), cell.empty(cell.y_dims())
        gamma = cell.channel(k, torch.float32).uniform_(0.5, 1.5)
        beta = cell.channel(k, torch.float32).normal_(0.0, 0.1)
        X, R, G, B = tin(g, "X", x), tin(g, "residual", r), tin(g, "gamma", gamma), tin(g, "beta", beta)
        pack = {X: x, R: r, G: gamma, B: beta}
        if inference:
            m, v = bn_stats(cell, x)
            M, V = tin(g, "mean", m), tin(g, "inv_var", v)
            pack.update({M: m, V: v})
            YB = g.batchnorm_inference(input=X, mean=M, inv_variance=V, scale=G, bias=B)
        else:
            rm, rv = cell.channel(k, torch.float32).zero_(), cell.channel(k, torch.float32).fill_(1.0)
            RM, RV = tin(g, "running_mean", rm), tin(g, "running_var", rv)
            EPS, eps = host_scalar(g, "epsilon", EPSILON)
            MOM, mom = host_scalar(g, "momentum", 1.0 - MOMENTUM)  # cuDNN weighs the batch by it
            pack.update({RM: rm, RV: rv, EPS: eps, MOM: mom})
            YB, mean, inv_var, next_rm, next_rv = g.batchnorm(
                input=X, scale=G, bias=B, in_running_mean=RM, in_running_var=RV, epsilon=EPS, momentum=MOM)
            for O in (mean, inv_var, next_rm, next_rv):
                b = cell.channel(k, torch.float32)
                pack[out(O, b)] = b
        Y = out(g.relu(input=g.add(a=YB, b=R)), y)
        pack[Y] = y
        kc = min(k, CHECK_CHANNELS)

        def ref():  # channels are independent: the first kc
            yb = torch.nn.functional.batch_norm(x[:, :kc].float(), None, None, gamma.flatten()[:kc],
                                                beta.flatten()[:kc], training=True, eps=EPSILON)
            return torch.relu(yb + r[:, :kc].float())
        return g, pack, checker(y=(y[:, :kc], ref))
    return build


def drelu_dbn(recompute):
    """The backward of relu(batch_norm(X) [+ residual]): ReLU backward, then batch-norm
    backward (dX, dgamma, dbeta). The ReLU's mask comes from the stored block output
    (with the residual's gradient written out: it is the ReLU backward's output), or
    from batch_norm_inference(X) recomputed (no residual)."""
    def build(cell):
        g = cell.graph()
        k = cell.shape.k
        x, dy = cell.normal(cell.y_dims(), mean=0.3), cell.normal(cell.y_dims())
        gamma = cell.channel(k, torch.float32).uniform_(0.5, 1.5)
        beta = cell.channel(k, torch.float32).normal_(0.0, 0.1)
        m, v = bn_stats(cell, x)
        X, DY, G, M, V = (tin(g, n, t) for n, t in (("X", x), ("DY", dy), ("gamma", gamma), ("mean", m), ("inv_var", v)))
        pack = {X: x, DY: dy, G: gamma, M: m, V: v}
        if recompute:
            B = tin(g, "beta", beta)
            pack[B] = beta
            YB = g.batchnorm_inference(input=X, mean=M, inv_variance=V, scale=G, bias=B)
            DA = g.relu_backward(loss=DY, input=YB)
            y = None
        else:  # the stored block output relu(bn(x) + residual), the residual random
            y = cell.empty(cell.y_dims())
            pre = x.float() - m
            pre.mul_(v * gamma).add_(beta).add_(cell.normal(cell.y_dims()).float())
            y.copy_(pre.relu_())
            del pre
            Y = tin(g, "Y", y)
            pack[Y] = y
            dres = cell.empty(cell.y_dims())
            DA = out(g.relu_backward(loss=DY, input=Y), dres)
            pack[DA] = dres
        dx, dgamma, dbeta = cell.empty(cell.y_dims()), cell.channel(k, torch.float32), cell.channel(k, torch.float32)
        DX, DG, DB = g.batchnorm_backward(grad=DA, input=X, scale=G, mean=M, inv_variance=V)
        pack.update({out(DX, dx): dx, out(DG, dgamma): dgamma, out(DB, dbeta): dbeta})
        kc = min(k, CHECK_CHANNELS)

        def ref_dx():  # channels are independent: the first kc, by autograd
            xr = x[:, :kc].float().requires_grad_(True)
            yb = torch.nn.functional.batch_norm(xr, None, None, gamma.flatten()[:kc], beta.flatten()[:kc],
                                                training=True, eps=EPSILON)
            mask = (yb > 0) if y is None else (y[:, :kc] > 0)  # the stored output's mask, as the graph reads it
            (grad,) = torch.autograd.grad(yb, xr, dy[:, :kc].float() * mask)
            return grad
        return g, pack, checker(dx=(dx[:, :kc], ref_dx))
    return build


PATTERNS = [
    Pattern("conv_fprop", "fprop", "conv forward alone", conv_fprop),
    Pattern("conv_dgrad", "dgrad", "conv backward-data alone", conv_dgrad),
    Pattern("conv_wgrad", "wgrad", "conv backward-filter alone", conv_wgrad),
    Pattern("sbr_conv_genstats", "fprop", "scale-bias-ReLU → conv → genstats", fprop_with(True, "genstats")),
    Pattern("conv_genstats", "fprop", "conv → genstats", fprop_with(False, "genstats")),
    Pattern("conv_sum", "fprop", "conv → sum reduction", fprop_with(False, "sum")),
    Pattern("conv_sqsum", "fprop", "conv → square → sum reduction", fprop_with(False, "sqsum")),
    Pattern("conv_sum_sqsum", "fprop", "conv → sum and square → sum (two reductions)", fprop_with(False, "sum_sqsum")),
    Pattern("sbr_conv", "fprop", "scale-bias-ReLU → conv", fprop_with(True, None)),
    Pattern("sbr_conv_sum", "fprop", "scale-bias-ReLU → conv → sum reduction", fprop_with(True, "sum")),
    Pattern("sbr_conv_sum_sqsum", "fprop", "scale-bias-ReLU → conv → two reductions", fprop_with(True, "sum_sqsum")),
    Pattern("bn_finalize", "fprop", "batch-norm finalize (bn_finalize node)", bn_finalize),
    Pattern("bn_finalize_pointwise", "fprop", "batch-norm finalize as pointwise ops", bn_finalize_pointwise),
    Pattern("dgrad_drelu", "dgrad", "dgrad → dReLU (stored input)", dgrad_with("stored", None)),
    Pattern("dgrad_bn_drelu", "dgrad", "dgrad → dReLU (BN apply recomputed)", dgrad_with("bn", None)),
    Pattern("dgrad_bn_drelu_dbn_weight", "dgrad", "dgrad → dReLU → dbn_weight", dgrad_with("bn", "node")),
    Pattern("dgrad_bn_drelu_dbn_sums", "dgrad", "dgrad → dReLU → dgamma, dbeta reductions", dgrad_with("bn", "sums")),
    Pattern("sbr_wgrad", "wgrad", "scale-bias-ReLU → wgrad", sbr_wgrad),
    Pattern("bn_add_relu", "fprop", "batch norm (training) + add + ReLU", bn_add_relu(False)),
    Pattern("bn_inference_add_relu", "fprop", "batch-norm apply + add + ReLU", bn_add_relu(True)),
    Pattern("drelu_dbn", "dgrad", "dReLU (stored output) → dBN, dResidual out", drelu_dbn(False)),
    Pattern("bn_inference_drelu_dbn", "dgrad", "BN apply recomputed → dReLU → dBN", drelu_dbn(True)),
]
PATTERN_BY_NAME = {p.name: p for p in PATTERNS}
# The convolution alone, by direction: timed in every cell whose graphs compare with it.
BASELINES = {"fprop": "conv_fprop", "dgrad": "conv_dgrad", "wgrad": "conv_wgrad"}


# --------------------------------------------------------------------------
# Building, timing, checking
# --------------------------------------------------------------------------

class Failure(Exception):
    def __init__(self, stage, error):
        super().__init__(f"{stage}: {error}")
        self.stage, self.error = stage, error


def build(graph, workspace_bytes):
    """Validates and builds graph; raises Failure naming the step that failed."""
    steps = [("validate", graph.validate), ("build_operation_graph", graph.build_operation_graph),
             ("create_execution_plans",
              lambda: graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])),
             ("check_support", graph.check_support),
             ("workspace limit", lambda: limit_workspace(graph, workspace_bytes)),
             ("build_plans", graph.build_plans)]
    for stage, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 -- every failure is a result here
            raise Failure(stage, f"{type(e).__name__}: {e}") from None


def limit_workspace(graph, workspace_bytes):
    """Plans over the limit are not built (where the API can say so)."""
    deselect = getattr(graph, "deselect_workspace_greater_than", None)
    if deselect is not None:
        deselect(workspace_bytes)


def plan_name(graph):
    try:
        return graph.get_plan_name_at_index(getattr(graph, "_plan_index", 0))
    except Exception:  # noqa: BLE001 -- a name is a nicety
        return None


def median_ms(run, warmup, iters):
    """Median GPU time of run() in ms, and the host time of one call in ms.

    The GPU is first given a spin kernel longer than the host needs to enqueue
    all runs, so that each run's events enclose its kernels only."""
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        run()
    host_s = (time.perf_counter() - t0) / 3
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:  # cycles; 2e9 per second is an upper bound of the clock
        sleep(int(min(2.0, 1.5 * host_s * iters + 1e-3) * 2e9))
    for start, end in zip(starts, ends):
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)), host_s * 1e3


def torch_conv_ms(cell, direction, warmup, iters):
    """PyTorch's own convolution (cudnn.benchmark, TF32 allowed as TensorFlow allows it)."""
    x, w, dy = cell.x(), cell.w(), cell.normal(cell.y_dims())
    args = cell.torch_conv_args()
    run = {"fprop": lambda: torch.nn.functional.conv2d(x, w, **args),
           "dgrad": lambda: torch.nn.grad.conv2d_input(cell.x_dims(), w, dy, **args),
           "wgrad": lambda: torch.nn.grad.conv2d_weight(x, tuple(w.shape), dy, **args)}[direction]
    torch.backends.cudnn.allow_tf32 = True
    try:
        return median_ms(run, warmup, iters)[0]
    finally:
        torch.backends.cudnn.allow_tf32 = False


def probe(pattern, cell, args):
    """One graph in one cell: a result row (see the module docstring)."""
    row = dict(builds=False, stage=None, error=None, plan=None, workspace_bytes=None,
               time_ms=None, host_ms=None, rel_err=None, checked=None, ok=None)
    t0 = time.perf_counter()
    try:
        graph, pack, check = pattern.build(cell)
    except NotInApi as e:
        row.update(stage="api", error=str(e))
        return row
    except Exception as e:  # noqa: BLE001
        row.update(stage="graph", error=f"{type(e).__name__}: {e}")
        return row
    try:
        build(graph, args.workspace_mib << 20)
    except Failure as f:
        row.update(stage=f.stage, error=f.error[:2000], build_s=round(time.perf_counter() - t0, 3))
        return row
    row.update(builds=True, plan=plan_name(graph), build_s=round(time.perf_counter() - t0, 3))
    try:
        size = graph.get_workspace_size()
        row["workspace_bytes"] = int(size)
        workspace = torch.empty(max(int(size), 1), device="cuda", dtype=torch.uint8)
        run = lambda: graph.execute(pack, workspace, handle=HANDLE)
        run()
        torch.cuda.synchronize()
        err, checked = check()
        row.update(rel_err=err, checked=checked, ok=bool(err <= TOLERANCE[cell.dtype_name]))
        row["time_ms"], row["host_ms"] = median_ms(run, args.warmup, args.iters)
    except Exception as e:  # noqa: BLE001
        row.update(stage="execute", error=f"{type(e).__name__}: {e}"[:2000])
    return row


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------

def cell_text(row):
    if row is None:
        return "—"
    if row.get("skipped"):
        return "skipped"
    if not row.get("builds"):
        stage = row.get("stage")
        return {"api": "not in API", "graph": "error", "validate": "invalid", "timeout": "timeout",
                "build_operation_graph": "invalid"}.get(stage, "no engine")
    if row.get("time_ms") is None:
        return "builds; failed to run"
    text = f"{row['time_ms']:.3f}"
    base = row.get("conv_alone_ms")
    if row["pattern"] in BASELINES.values():
        if row.get("torch_ms") is not None:
            text += f" (torch {row['torch_ms']:.3f})"
    elif base:
        text += f" ({row['time_ms'] / base:.2f}×)"
    if row.get("ok") is False:
        text += f" **wrong: rel err {row['rel_err']:.1e}**"
    return text


def tables(result):
    """Markdown: one table per shape and layout, graph × data type."""
    rows = result["results"]
    index = {(r["pattern"], r["dtype"], r["layout"], r["shape"]): r for r in rows}
    order = [p.name for p in PATTERNS]
    patterns = [p for p in order if any(r["pattern"] == p for r in rows)]
    dtypes = [d for d in DTYPES if any(r["dtype"] == d for r in rows)]
    lines = [f"cuDNN fused graphs on {result.get('gpu')}, cuDNN {result.get('cudnn_version')}, "
             f"cudnn-frontend {result.get('frontend_version')}, torch {result.get('torch_version')}, "
             f"{result.get('date')}, N = {result.get('batch')}. Median ms; (r×): over the convolution "
             "alone of the same direction, type and layout; \"no engine\": no plan builds.", ""]
    seen = []
    for r in rows:
        if (r["shape"], r["layout"]) not in seen:
            seen.append((r["shape"], r["layout"]))
    for shape, layout in seen:
        title = SHAPES[shape].describe() if shape in SHAPES else shape
        lines += [f"#### {title}, {layout}", "", "| graph | " + " | ".join(dtypes) + " |",
                  "| --- |" + " --- |" * len(dtypes)]
        for p in patterns:
            if not any((p, d, layout, shape) in index for d in dtypes):
                continue
            cells = [cell_text(index.get((p, d, layout, shape))) for d in dtypes]
            lines.append(f"| {PATTERN_BY_NAME[p].title} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def errors_text(result):
    """The distinct errors, one line each, with the cells they came from."""
    by_error = {}
    for r in result["results"]:
        if r.get("error"):
            key = (r["pattern"], r.get("stage"), r["error"].splitlines()[0][:300])
            by_error.setdefault(key, []).append(f"{r['dtype']}/{r['layout']}/{r['shape']}")
    return "\n".join(f"- {p} [{stage}] {err} ({len(cells)} cells, e.g. {cells[0]})"
                     for (p, stage, err), cells in by_error.items())


def summarize(paths):
    merged = None
    for path in paths:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            result = json.load(f)
        if merged is None:
            merged = result
        else:
            merged["results"] = merged["results"] + result["results"]
    print(tables(merged))
    errors = errors_text(merged)
    if errors:
        print("Errors:\n" + errors)


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------

def write_json(path, result):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


def parse_list(text, allowed, what):
    items = [t.strip() for t in text.split(",") if t.strip()]
    if items == ["all"]:
        return list(allowed)
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise SystemExit(f"--{what}: {', '.join(bad) or 'nothing'} not among {', '.join(allowed)}")
    return items


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Graphs and shapes: --list.")
    parser.add_argument("--json", default="cudnn_fusion_probe.json", help="result file (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=256, help="N (default: %(default)s)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated (default: %(default)s)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--shapes", default=",".join(DEFAULT_SHAPES),
                        help="comma-separated names from --list, or all (adds the stem; default: the six)")
    parser.add_argument("--patterns", default="all", help="comma-separated graph names from --list (default: all)")
    parser.add_argument("--seconds", type=float, default=240.0,
                        help="time budget; cells after it are recorded as skipped (default: %(default)s)")
    parser.add_argument("--graph-seconds", type=float, default=30.0,
                        help="a graph still building or running after this is marked \"timeout\" and the "
                             "run goes on in a new process (default: %(default)s)")
    parser.add_argument("--memory-gib", type=float, default=8.0,
                        help="PyTorch's allocator cap on the GPU, workspaces included (default: %(default)s)")
    parser.add_argument("--workspace-mib", type=int, default=1024,
                        help="plans needing more workspace are not built (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="runs before timing (default: %(default)s)")
    parser.add_argument("--iters", type=int, default=20, help="timed runs; the median counts (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true",
                        help="keep the cells already in --json and probe the others")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # a child of supervise()
    parser.add_argument("--list", action="store_true", help="print the graphs and shapes, and exit")
    parser.add_argument("--summarize", nargs="+", metavar="JSON",
                        help="print the tables of written result files (.json or .json.gz, joined), and exit")
    args = parser.parse_args(argv)
    args.dtypes = parse_list(args.dtypes, DTYPES, "dtypes")
    args.layouts = parse_list(args.layouts, LAYOUTS, "layouts")
    args.shapes = parse_list(args.shapes, tuple(SHAPES), "shapes")
    args.patterns = parse_list(args.patterns, tuple(PATTERN_BY_NAME), "patterns")
    if args.batch < 1 or args.iters < 1 or args.warmup < 0:
        raise SystemExit(f"--batch and --iters must be at least 1 and --warmup at least 0; got "
                         f"{args.batch}, {args.iters}, {args.warmup}")
    return args


def list_text():
    lines = ["graphs (--patterns):"]
    lines += [f"  {p.name:28s} {p.title}  [against conv {p.baseline}]" for p in PATTERNS]
    lines.append("shapes (--shapes; input H×W, C→K, filter):")
    lines += [f"  {name:28s} {s.describe()}{'' if name in DEFAULT_SHAPES else '  (not by default)'}"
              for name, s in SHAPES.items()]
    return "\n".join(lines)


def recorded(path):
    """The cells an earlier run's JSON at path has probed (not skipped), or []."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in json.load(f).get("results", []) if not r.get("skipped")]


def supervise(argv, args):
    """Runs the probe in child processes until every cell has a row.

    A graph that hangs or crashes ends its process (see --graph-seconds) with
    its row marked; the next child resumes after it, within what is left of
    --seconds."""
    deadline = time.monotonic() + args.seconds
    if not args.resume and os.path.exists(args.json):
        os.remove(args.json)
    while True:
        before = len(recorded(args.json))
        left = max(0.0, deadline - time.monotonic())
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), *argv,
                              "--worker", "--resume", "--seconds", f"{left:.0f}"])
        if rc == 0:
            return 0
        if len(recorded(args.json)) <= before:
            print(f"the probe's process ended with status {rc} before recording a cell; stopping", flush=True)
            return rc
        print(f"the probe's process ended with status {rc} (a graph past --graph-seconds, or a crash: "
              "its row says); going on in a new one", flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.list:
        print(list_text())
        return 0
    if args.summarize:
        summarize(args.summarize)
        return 0
    if not args.worker:
        return supervise(argv, args)
    global torch, cudnn, HANDLE
    import torch as torch_module
    torch = torch_module
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to PyTorch")
    import cudnn as cudnn_module
    cudnn = cudnn_module
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # float32 references in full precision
    torch.backends.cuda.matmul.allow_tf32 = False
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, args.memory_gib * 2**30 / total))
    HANDLE = cudnn.create_handle()
    cudnn.set_stream(handle=HANDLE, stream=torch.cuda.current_stream().cuda_stream)

    result = dict(
        question="which fused conv + batch-norm training graphs build, per data type and layout, "
                 "and their time against the convolution alone",
        gpu=torch.cuda.get_device_name(), cudnn_version=cudnn.backend_version(),
        frontend_version=getattr(cudnn, "__version__", None), torch_version=torch.__version__,
        torch_cuda=torch.version.cuda, torch_cudnn=torch.backends.cudnn.version(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        batch=args.batch, options={k: v for k, v in vars(args).items() if k not in ("list", "summarize")},
        tolerance=TOLERANCE, patterns={p.name: p.title for p in PATTERNS},
        shapes={name: SHAPES[name].describe() for name in args.shapes}, results=[], notes=[], complete=False)
    if args.resume and os.path.exists(args.json):
        with open(args.json) as f:
            earlier = json.load(f)
        # cells skipped for time are probed again; the rest are kept
        result["results"] = [r for r in earlier.get("results", []) if not r.get("skipped")]
        result["notes"] = [n for n in earlier.get("notes", []) if not n.startswith("time budget")]
    done = {(r["pattern"], r["dtype"], r["layout"], r["shape"]) for r in result["results"]}
    print(f"{result['gpu']}, cuDNN {result['cudnn_version']}, cudnn-frontend {result['frontend_version']}, "
          f"torch {result['torch_version']}", flush=True)
    start = time.monotonic()
    baselines = [BASELINES[d] for d in ("fprop", "dgrad", "wgrad")
                 if any(PATTERN_BY_NAME[p].baseline == d for p in args.patterns)]
    order = baselines + [p for p in args.patterns if p not in baselines]
    over_budget = False
    for layout in args.layouts:  # NHWC, the fused engines' layout, first
        for shape_name in args.shapes:
            for dtype in args.dtypes:
                cell = Cell(dtype, layout, SHAPES[shape_name], args.batch)
                conv_alone = {r["pattern"]: r.get("time_ms") for r in result["results"]
                              if (r["dtype"], r["layout"], r["shape"]) == (dtype, layout, shape_name)
                              and r["pattern"] in BASELINES.values()}
                conv_alone = {d: conv_alone[p] for d, p in BASELINES.items() if p in conv_alone}
                for name in order:
                    pattern = PATTERN_BY_NAME[name]
                    key = dict(pattern=name, dtype=dtype, layout=layout, shape=shape_name)
                    if (name, dtype, layout, shape_name) in done or (
                            name in baselines and name not in args.patterns and pattern.baseline in conv_alone):
                        continue
                    if not over_budget and time.monotonic() - start > args.seconds:
                        over_budget = True
                        result["notes"].append(f"time budget (--seconds) spent at {name} {dtype} {layout} "
                                               f"{shape_name}; the rest skipped")
                    if over_budget:
                        if name in args.patterns:
                            result["results"].append(dict(key, skipped=True))
                        continue
                    torch.manual_seed(args.seed)
                    # A graph that hangs (a plan's build can take minutes) ends the process:
                    # its row, written first, says so, and the rows before it are kept.
                    limit = max(10.0, min(args.graph_seconds, args.seconds - (time.monotonic() - start) + 30))
                    pending = dict(key, builds=False, stage="timeout",
                                   error=f"process ended after {limit:.0f} s in this graph (--graph-seconds, --seconds)")
                    if name in args.patterns:
                        result["results"].append(pending)
                        write_json(args.json, result)
                    faulthandler.dump_traceback_later(limit, exit=True)
                    began = time.monotonic()
                    row = probe(pattern, cell, args)
                    if name in baselines:
                        conv_alone[pattern.baseline] = row.get("time_ms")
                        if name in args.patterns:
                            try:
                                row["torch_ms"] = torch_conv_ms(cell, pattern.baseline, args.warmup, args.iters)
                            except Exception as e:  # noqa: BLE001
                                row["torch_error"] = f"{type(e).__name__}: {e}"[:500]
                    faulthandler.cancel_dump_traceback_later()
                    gc.collect()  # the graph and its tensors, before the next cell's (--memory-gib)
                    torch.cuda.empty_cache()
                    if name not in args.patterns:
                        continue  # timed as a baseline only
                    result["results"] = [r for r in result["results"] if r is not pending]
                    row["seconds"] = round(time.monotonic() - began, 2)
                    row = dict(key, **row, conv_alone_ms=conv_alone.get(pattern.baseline))
                    result["results"].append(row)
                    status = (f"{row['time_ms']:.3f} ms, rel err {row['rel_err']:.1e}" if row.get("time_ms")
                              is not None else f"{row.get('stage')}: {(row.get('error') or '')[:120]}")
                    print(f"{time.monotonic() - start:6.0f} s  {shape_name:16s} {layout} {dtype:9s} {name:28s} "
                          f"{status}", flush=True)
                    write_json(args.json, result)
                    try:
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001 -- a lost context ends the run
                        result["notes"].append(f"CUDA context lost after {name} {dtype} {layout} "
                                               f"{shape_name}: {e}; run stopped")
                        write_json(args.json, result)
                        print(tables(result))
                        return 1
            torch.cuda.empty_cache()
    result["complete"] = not over_budget
    write_json(args.json, result)
    print()
    print(tables(result))
    errors = errors_text(result)
    if errors:
        print("Errors:\n" + errors)
    for note in result["notes"]:
        print("Note:", note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
