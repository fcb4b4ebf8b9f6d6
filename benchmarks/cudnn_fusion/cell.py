"""The tensors and graph pieces of one cell of the probe (data type, layout,
shape, N): PyTorch tensors laid out as the cell's layout, their cudnn-frontend
graph tensors, the checks against a float32 PyTorch reference, and the pieces
that several graphs share (the scale-bias-ReLU prologue, the statistics
epilogue)."""

import math

# Bound by the worker (cudnn_fusion_probe.py's main) once it has imported them:
# --help, --list and --summarize run without PyTorch and cudnn-frontend.
torch = None
cudnn = None


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
