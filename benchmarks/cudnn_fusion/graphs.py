"""The graphs the probe builds, one builder per pattern of a Conv–BatchNorm–ReLU
training step. Each builder takes a :class:`~cudnn_fusion.cell.Cell` and
returns (graph, variant pack, check)."""

from cudnn_fusion.cell import (channel_sums, checker, host_scalar, out, prologue, ref_conv,
                               stats_epilogue, tin)
from cudnn_fusion.settings import CHECK_CHANNELS, EPSILON, MOMENTUM

# Bound by the worker (cudnn_fusion_probe.py's main) once it has imported them:
# --help, --list and --summarize run without PyTorch and cudnn-frontend.
torch = None
cudnn = None


class NotInApi(Exception):
    """The installed frontend's Python API has no such operation."""


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
