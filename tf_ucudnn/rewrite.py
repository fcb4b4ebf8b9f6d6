"""μ-cuDNN for existing graphs: ``enable_rewrite()``.

``enable_rewrite`` switches on the op library's Grappler custom graph
optimizer ("UcudnnRewriter") through the rewriter config of the eager
context's function calls, as TF's own former
``enable_mixed_precision_graph_rewrite`` did. Every ``tf.function`` that runs
afterwards (Keras ``fit``/``evaluate``/``predict`` without XLA, the functions of
a loaded SavedModel) has its ``Conv2D``, ``Conv2DBackpropInput`` and
``Conv2DBackpropFilter`` nodes replaced by the tf_ucudnn ops with the same
attributes. ``_FusedConv2D`` nodes that Grappler's remapper made of a
convolution, a ``BiasAdd`` and optionally ``Relu``/``Relu6``/``Elu``/
``LeakyRelu``/``Tanh``/``Sigmoid`` become ``Ucudnn>Conv2DWithBias`` (the
bias, and a ``Relu``, in the convolution's kernel) followed by the same
activation for the others; other fused
convolutions (batch-norm fusions) are left alone and counted in
:func:`rewrite_stats`. Like TF's function-call options it is set through, the
rewrite is per thread.

Layout: on a GPU, Grappler's layout optimizer turns NHWC float32 training
graphs into NCHW wrapped in transposes, and does so to pooling and batch
norm even when no stock convolution is left. Where cuDNN's kernels are
faster in NHWC (Hopper: TF32, float16, bfloat16), the rewrite therefore
turns that pass off for the functions it rewrites while it covers a GPU:
convolutions and the ops around them run in the layout the model was
written in (``layout_optimizer=True`` gives the pass back).

XLA-compiled functions (``jit_compile=True``, and Keras' ``jit_compile="auto"``
on a GPU) are compiled by XLA from their TF graph, which Grappler never sees.
For Keras models the rewrite takes another route there: while it is on, the
stock ``keras.layers.Conv2D`` and ``keras.layers.Conv2DTranspose`` layers of
a model compiled with XLA run their convolutions (and biases) through
tf_ucudnn's ops, whose XLA kernels are the micro-batched custom calls, and the model's functions are traced again when
that changes.
Other ``jit_compile`` functions keep XLA's own convolutions. With
``fuse_batch_norm=True`` the same route runs Keras models' Conv2D ->
BatchNormalization chains on the convolution's statistics, with or without
XLA.

:func:`tf_ucudnn.rewrite_model` (``tf_ucudnn/model_rewrite.py``) is the
Keras-level alternative: a copy of a model whose ``keras.layers.Conv2D`` and
``Conv2DTranspose`` layers are tf_ucudnn's.
"""

import dataclasses
import functools
import logging
import threading
import warnings

import keras
import tensorflow as tf
from tensorflow.python.eager import context as _context

from tf_ucudnn import (_engine, batch_norm_chain, database_link, environment, gradients,
                       max_pool, nn)
from tf_ucudnn.model_walk import batch_norm_chains, preactivation_norms, stock_layer_classes
from tf_ucudnn.units import AUTO_WORKSPACE_LIMIT, to_bytes, to_workspace_limit

OPTIMIZER_NAME = "UcudnnRewriter"
_DEVICE_TYPES = ("CPU", "GPU")

_log = logging.getLogger("tf_ucudnn")
_lock = threading.Lock()
# The settings in force, per thread, as TF keeps function-call options per thread.
_local = threading.local()


def _settings():
    return getattr(_local, "settings", None)


@dataclasses.dataclass(frozen=True)
class RewriteSettings:
    """What the rewrite gives every substituted kernel, as :func:`enable_rewrite`
    took it (None: the op's default).

    Attributes:
      workspace_limit: bytes of workspace per kernel (int), or ``"auto"``;
        None: ``UCUDNN_DEFAULT_WORKSPACE_LIMIT`` (default 64 MiB).
      total_workspace: bytes shared by the kernels of a device (Workspace
        Division), or None.
      batch_size_policy: ``"undivided"``, ``"powerOfTwo"`` or ``"all"``; None:
        ``UCUDNN_BATCH_SIZE_POLICY`` (default ``"powerOfTwo"``).
      devices: the devices rewritten, as a tuple of types and names such as
        ``("GPU",)`` or ``("CPU:0", "GPU:1")``; None: every device.
      layout_optimizer: whether Grappler's layout optimizer runs on the
        rewritten functions.
      fuse_batch_norm: whether Keras models' Conv2D -> BatchNormalization
        chains train on the convolution's statistics.
      recompute: ``"off"``, ``"1x1"``, or None (``UCUDNN_RECOMPUTE``): which
        chain convolutions' outputs the backward pass computes again.
      max_pool_gradient: ``"first-max-index"``, ``"select-and-scatter"``, or
        None (``UCUDNN_MAX_POOL_GRADIENT``): the gradient of XLA-compiled
        models' ``keras.layers.MaxPooling2D`` layers.
    """

    workspace_limit: int = None
    total_workspace: int = None
    batch_size_policy: str = None
    devices: tuple = None
    layout_optimizer: bool = False
    fuse_batch_norm: bool = False
    recompute: str = None
    max_pool_gradient: str = None


class _Enabled:
    """Returned by :func:`enable_rewrite`; as a context manager it restores
    the settings that were in force before (or turns the rewrite off)."""

    def __init__(self, previous):
        self._previous = previous

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._previous is None:
            disable_rewrite()
        else:
            _apply(self._previous)
        return False


_DEVICE_FORMS = ("None, a device type or name such as 'GPU', 'GPU:1' or '/device:CPU:0', a "
                 "tf.config.LogicalDevice, or a list of those")


def _device_name(device):
    """One entry of ``devices`` as ``"GPU"`` or ``"GPU:1"`` (the rewriter's form).

    Raises:
      ValueError: not a string or ``tf.config.LogicalDevice``, or not a CPU or
        GPU type with an optional index.
    """
    if isinstance(device, _context.LogicalDevice):
        device = device.name
    if not isinstance(device, str) or not device:
        raise ValueError(f"devices must be {_DEVICE_FORMS}; got the entry {device!r}")
    last = device.rsplit("/", 1)[-1]
    if last.lower().startswith("device:"):
        last = last[len("device:"):]
    kind, colon, index = last.partition(":")
    kind = kind.upper()
    if kind not in _DEVICE_TYPES or (colon and not index.isdigit()):
        raise ValueError(f"devices: {device!r} is not one of {', '.join(_DEVICE_TYPES)} "
                         f"(optionally with ':index'); tf_ucudnn has kernels for those only")
    # "GPU:01" is GPU:1, as TF names it (the rewriter compares names).
    return f"{kind}:{int(index)}" if colon else kind


def _normalize_devices(devices):
    """``enable_rewrite``'s ``devices`` as a tuple of ``"GPU"`` / ``"GPU:1"``
    names, each checked against this process's logical devices.

    A device type (``"GPU"``) stands for every device of that type, also
    none: with no GPU visible, ``devices="GPU"`` rewrites nothing, and says so
    in a warning. A device with an index must be one of the logical devices
    (``tf.config.list_logical_devices()``), since the rewriter would never
    meet a node placed on another.

    Raises:
      ValueError: a form not allowed (naming the allowed ones), a type other
        than CPU or GPU, or a device that this process does not have
        (naming the devices it has).
    """
    if devices is None:
        return None
    if isinstance(devices, (str, _context.LogicalDevice)):
        out = (_device_name(devices),)
    elif isinstance(devices, (bytes, dict)) or not hasattr(devices, "__iter__"):
        raise ValueError(f"devices must be {_DEVICE_FORMS}; got {devices!r} "
                         f"({type(devices).__name__})")
    else:
        out = tuple(_device_name(d) for d in devices)
    if not out:
        raise ValueError("devices must name at least one device (or be None for every device)")
    import tensorflow as tf

    present = [_device_name(d) for d in tf.config.list_logical_devices()
               if d.device_type in _DEVICE_TYPES]
    for name in out:
        if ":" in name and name not in present:
            raise ValueError(f"devices: {name!r} is not a device of this process; its devices "
                             f"are {', '.join(present)} (tf.config.list_logical_devices())")
    for kind in sorted({name for name in out if ":" not in name}):
        if not any(p.startswith(kind + ":") for p in present):
            warnings.warn(f"tf_ucudnn.enable_rewrite(devices={devices!r}): this process has no "
                          f"{kind} (its devices: {', '.join(present)}), so the rewrite replaces "
                          f"no convolution on one", stacklevel=3)
    return out


def _covers_gpu(devices):
    """Whether a rewrite restricted to ``devices`` (None: every device) reaches GPUs."""
    return devices is None or any(d.startswith("GPU") for d in devices)


def _function_config(settings):
    """The eager context's ConfigProto with our custom optimizer added (or removed).

    While the rewrite covers a GPU (and ``layout_optimizer`` is False), Grappler's
    layout optimizer is off in it: that pass would make NHWC float32 training
    graphs NCHW with transposes, and, run after the rewrite, it would still
    transpose pooling and batch norm (it counts no convolution then and
    defaults to NCHW). See docs/design.md, "The graph rewrite".
    """
    from tensorflow.core.protobuf import rewriter_config_pb2

    config = _context.context().config
    rewrite_options = config.graph_options.rewrite_options
    if settings is not None and not settings.layout_optimizer and _covers_gpu(settings.devices):
        rewrite_options.layout_optimizer = rewriter_config_pb2.RewriterConfig.OFF
    kept = [c for c in rewrite_options.custom_optimizers if c.name != OPTIMIZER_NAME]
    del rewrite_options.custom_optimizers[:]
    for c in kept:
        rewrite_options.custom_optimizers.add().CopyFrom(c)
    if settings is not None:
        custom = rewrite_options.custom_optimizers.add()
        custom.name = OPTIMIZER_NAME
        params = custom.parameter_map
        params["workspace_limit"].i = (-1 if settings.workspace_limit is None else
                                       to_workspace_limit(settings.workspace_limit))
        params["total_workspace"].i = -1 if settings.total_workspace is None else settings.total_workspace
        params["batch_size_policy"].s = (settings.batch_size_policy or "").encode()
        params["devices"].s = ",".join(settings.devices or ()).encode()
    return config


def _apply(settings):
    """Sets the calling thread's function-call options (TF keeps them per thread)."""
    ctx = _context.context()
    ctx.ensure_initialized()
    # None gives TF's own default options back (recomputed from the context).
    ctx.function_call_options = None if settings is None else _context.FunctionCallOptions(
        config_proto=_function_config(settings))
    _local.settings = settings


def _rewriting_here():
    """Whether the calling thread's function-call options hold the rewriter,
    whatever the bookkeeping says."""
    from tensorflow.core.protobuf import config_pb2

    serialized = _context.context().function_call_options.config_proto_serialized
    config = config_pb2.ConfigProto.FromString(serialized)
    return any(c.name == OPTIMIZER_NAME
               for c in config.graph_options.rewrite_options.custom_optimizers)


def enable_rewrite(workspace_limit=None, total_workspace=None, batch_size_policy=None,
                   devices=None, *, layout_optimizer=False, fuse_batch_norm=False,
                   recompute=None, max_pool_gradient=None):
    """Runs the convolutions of every ``tf.function`` executed from now on through tf_ucudnn.

    While enabled, graphs have their ``Conv2D``, ``Conv2DBackpropInput`` and
    ``Conv2DBackpropFilter`` nodes (float32, float16, bfloat16; NHWC or NCHW)
    replaced by the tf_ucudnn ops, by a Grappler custom graph optimizer that
    runs after TF's own passes. Functions traced before enabling are
    re-instantiated with the rewrite the next time they are called. Enabling
    again replaces the settings.

    The convolutions keep the layout the model was written in: while the
    rewrite covers a GPU, Grappler's layout optimizer (which would make
    float32 NHWC training graphs NCHW, wrapped in transposes) is off for the
    functions it rewrites. cuDNN's NHWC kernels are the faster ones on
    Hopper for TF32, float16 and bfloat16.

    Per thread: TF keeps function-call options per thread, and so does the
    rewrite. It holds for the functions the calling thread runs; other
    threads enable and disable it for themselves, and
    :func:`rewrite_settings` and :func:`disable_rewrite` act on the calling
    thread only.

    Usable as a context manager, which restores the previous state on exit::

        with tf_ucudnn.enable_rewrite(workspace_limit=64 * tf_ucudnn.MiB):
            model.fit(...)

    Args:
      workspace_limit: bytes of workspace per kernel (forward, backward-data,
        backward-filter each), an int or a string such as ``"64MiB"``;
        ``"auto"``: what the GPU's allocator has free when a kernel is
        planned, and at each run the fastest planned plan that fits what is
        free then (:data:`tf_ucudnn.units.AUTO_WORKSPACE_LIMIT`); None:
        ``UCUDNN_DEFAULT_WORKSPACE_LIMIT`` (default 64 MiB).
      total_workspace: bytes shared by all substituted kernels of a device (an
        int or e.g. ``"256MiB"``), divided among them by Workspace Division
        (Oyama et al. 2018, §III-C):
        each kernel is benchmarked within the whole budget on its first run,
        and after one step the ILP of
        :func:`tf_ucudnn.division_solver.divide_workspace` gives each its share.
        Exclusive with ``workspace_limit``; None:
        ``UCUDNN_TOTAL_WORKSPACE_SIZE`` if set.
      batch_size_policy: ``"undivided"``, ``"powerOfTwo"`` or ``"all"``;
        None: ``UCUDNN_BATCH_SIZE_POLICY`` (default ``"powerOfTwo"``).
      devices: the devices whose convolutions are rewritten. None: every
        device with a tf_ucudnn kernel (CPU and GPU). Else a device type
        (``"GPU"``: every GPU, none where there is none, with a warning), a
        device of this process by name (``"GPU:1"``, ``"/device:CPU:0"``,
        as ``tf.config.list_logical_devices()`` names them), a
        ``tf.config.LogicalDevice``, or a list of those.
      layout_optimizer: whether Grappler's layout optimizer runs on the
        rewritten functions. False (default): off while the rewrite covers a
        GPU, so tensors stay in the model's layout (NHWC for Keras' default
        ``channels_last``), also around convolutions the rewrite does not
        replace (``DepthwiseConv2dNative``, ``Conv3D``). True: TF's default,
        under which float32 NHWC training graphs on a GPU run NCHW between
        transposes.
      fuse_batch_norm: True also runs the chains that
        ``rewrite_model(fuse_batch_norm=True)`` fuses (a ``keras.layers.Conv2D``
        whose output goes only to a ``keras.layers.BatchNormalization`` over
        its channels) of Keras models trained while the rewrite covers a GPU,
        with and without XLA, on the convolution's statistics: the
        convolution computes its output's per-channel sums
        (``conv2d_with_statistics``), and in training the batch norm takes
        its mean and variance from them (the same variables and moving
        statistics; inference runs the batch norm as Keras does). Where
        such a chain's input is another chain's batch norm output, or a ReLU
        of it, its convolution applies that normalization and ReLU as its
        prologue where it computes in float16 (as ``Conv2DBatchNorm``'s
        default ``input_prologue``); so does a chain's convolution after a
        pre-activation ``BatchNormalization`` (one a ``Conv2D`` reads
        directly or through a ReLU layer), and under XLA any ``Conv2D``
        after either.
        :func:`rewrite_stats` counts the chains as ``bn_fused`` and the
        prologues as ``bn_prologue``. Default False.
      recompute: with ``fuse_batch_norm``, ``"1x1"`` computes a 1x1 chain
        convolution's output again in the backward pass where the next
        convolution reads it through its prologue, instead of keeping it;
        ``"off"`` keeps every one; None (default): ``UCUDNN_RECOMPUTE``
        decides (as ``Conv2DBatchNorm``'s ``recompute_output``).
      max_pool_gradient: for models compiled with XLA, how their
        ``keras.layers.MaxPooling2D`` layers (``channels_last``, either
        padding, windows up to :data:`tf_ucudnn.max_pool.MAX_WINDOW`
        elements) compute their gradient: ``"first-max-index"`` from
        elementwise selects and pads that XLA fuses, the forward the
        maximum of the window's views in one fusion with the index the
        gradient takes (:func:`tf_ucudnn.max_pool.max_pool2d`: the same
        tensors, faster and smaller than XLA's reduce-window and
        select-and-scatter on an H200), or
        ``"select-and-scatter"`` (XLA's own). :func:`rewrite_stats` counts
        the first as ``max_pool``. None (default):
        ``UCUDNN_MAX_POOL_GRADIENT`` (unset: ``"first-max-index"``).

    Returns:
      A context manager that restores the previous state on exit.

    Raises:
      ValueError: a knob out of range (``workspace_limit``,
        ``total_workspace``, ``batch_size_policy``), both limits given, a
        ``devices`` of another form (an int, say) or naming a device type
        other than CPU and GPU, a device this process does not have
        (``"GPU:9"``; the message lists those it has), a
        ``layout_optimizer`` or ``fuse_batch_norm`` that is not a bool, or
        a ``recompute`` other than ``"off"``, ``"1x1"`` and None, or a
        ``max_pool_gradient`` other than those above and None.
    """
    for name, value in (("layout_optimizer", layout_optimizer),
                        ("fuse_batch_norm", fuse_batch_norm)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    if recompute is not None:
        environment.checked_choice(recompute, environment.RECOMPUTE_CHOICES, "recompute")
    if max_pool_gradient is not None:
        environment.checked_choice(max_pool_gradient, environment.MAX_POOL_GRADIENTS,
                                    "max_pool_gradient")
    if workspace_limit is not None and total_workspace is not None:
        raise ValueError("pass either workspace_limit (bytes per kernel) or total_workspace "
                         "(bytes shared by all kernels), not both")
    knobs = nn.ucudnn_attrs(workspace_limit=workspace_limit, batch_size_policy=batch_size_policy)
    if total_workspace is not None:
        total_workspace = to_bytes(total_workspace, "total_workspace")
        if total_workspace == 0:
            raise ValueError("total_workspace must be positive (bytes); use workspace_limit=0 "
                             "for kernels without workspace")
    settings = RewriteSettings(
        workspace_limit=(None if knobs["workspace_limit"] == -1 else
                         "auto" if knobs["workspace_limit"] == AUTO_WORKSPACE_LIMIT
                         else knobs["workspace_limit"]),
        total_workspace=total_workspace,
        batch_size_policy=knobs["batch_size_policy"] or None,
        devices=_normalize_devices(devices),
        layout_optimizer=layout_optimizer,
        fuse_batch_norm=fuse_batch_norm,
        recompute=recompute,
        max_pool_gradient=max_pool_gradient)
    # The substituted kernels plan from (and save to) the benchmark database too.
    database_link.load()
    previous = _settings()
    _apply(settings)
    with _lock:
        _install_xla_warning()
    return _Enabled(previous)


def disable_rewrite():
    """Turns the rewrite off for the functions the calling thread calls from now on.

    Per thread, as :func:`enable_rewrite`: other threads keep their own state.
    Harmless when off.
    """
    if _settings() is not None or _rewriting_here():
        _apply(None)


def rewrite_settings():
    """The :class:`RewriteSettings` in force for the calling thread, or None
    when the rewrite is off there."""
    return _settings()


def rewrite_stats():
    """Counts of the rewriter's work in this process since the op library loaded.

    What is counted: the nodes of every graph that Grappler optimizes while
    the rewrite is on, in any thread: each ``tf.function`` when it is
    instantiated with the rewrite (its first call, a new trace for new
    input shapes, and the first call after :func:`enable_rewrite` changed
    the settings), and a loaded SavedModel's functions alike. Calling an
    instantiated function again counts nothing; XLA-compiled functions,
    which Grappler does not see, count nothing (their Keras layers take the
    XLA route, see :func:`enable_rewrite`), nor do :func:`tf_ucudnn.rewrite_model`
    and ``tf_ucudnn.layers``.

    The counters only grow: they are shared by all threads and never reset.
    To count one piece of work, take the difference of two calls around
    it.

    Returns:
      A dict of node counts: ``rewritten`` (``Conv2D``,
      ``Conv2DBackpropInput`` and ``Conv2DBackpropFilter`` nodes replaced by
      tf_ucudnn's ops), ``fused_rewritten`` (``_FusedConv2D`` nodes replaced
      by ``Ucudnn>Conv2DWithBias`` and, for an activation other than ReLU,
      that activation), ``fused_left`` (fused convolutions left alone:
      batch-norm fusions and other filter formats; counted on each of
      Grappler's passes over a graph, by default two, so one such node
      usually counts twice), and ``bn_fused`` (Conv2D -> BatchNormalization
      chains of Keras models run on the convolution's statistics, with
      ``enable_rewrite(fuse_batch_norm=True)``: counted each time a function
      of the model is traced with them, in training), and ``bn_prologue``
      (convolutions that applied the batch norm before them as their
      prologue, from ``enable_rewrite(fuse_batch_norm=True)`` and
      tf_ucudnn's layers alike, counted per trace), and ``bn_recomputed``
      (convolution outputs read through such a prologue that the backward
      pass computes again instead of keeping them: ``recompute`` of
      ``enable_rewrite`` and ``rewrite_model``, ``Conv2DBatchNorm``'s
      ``recompute_output``, ``UCUDNN_RECOMPUTE``; counted per traced
      gradient), and ``max_pool`` (max-pool gradients traced under XLA as
      elementwise selects: ``tf_ucudnn.layers.MaxPooling2D``, and the
      ``keras.layers.MaxPooling2D`` layers that ``max_pool_gradient`` of
      ``enable_rewrite`` and ``rewrite_model`` sends there; counted per
      traced gradient).
    """
    return dict(_engine.rewrite_stats(), bn_fused=_bn_fused_count[0],
                bn_prologue=batch_norm_chain.prologues_taken[0],
                bn_recomputed=gradients.recomputed_outputs[0],
                max_pool=max_pool.first_max_gradients[0])


def _install_xla_warning():
    """Wraps Keras' TF trainer so that models compiled with XLA are routed
    through tf_ucudnn while the rewrite is on (see :func:`_route_layers`)."""
    try:
        from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
    except ImportError:  # another Keras layout: no XLA route, nothing else changes
        return
    if getattr(TensorFlowTrainer, "_tf_ucudnn_wrapped", False):
        return
    for name in ("make_train_function", "make_test_function", "make_predict_function"):
        original = getattr(TensorFlowTrainer, name)

        def wrapped(self, *args, _original=original, **kwargs):
            _route_layers(self)
            return _original(self, *args, **kwargs)

        setattr(TensorFlowTrainer, name, wrapped)
    TensorFlowTrainer._tf_ucudnn_wrapped = True


def _xla_call(layer, settings, inputs):
    """A stock ``keras.layers.Conv2D`` or ``Conv2DTranspose``'s ``call``
    through tf_ucudnn, with the rewrite's settings (for ``Conv2D`` the
    convolution and its bias in one op, with a ReLU activation, as XLA fuses
    bias and ReLU into its own convolutions), then any other activation."""
    from tf_ucudnn import layers

    call = (layers.conv2d_transpose_call if isinstance(layer, keras.layers.Conv2DTranspose)
            else layers.conv2d_call)
    attrs = layers.layer_attrs(layer, workspace_limit=settings.workspace_limit,
                               batch_size_policy=settings.batch_size_policy,
                               total_workspace=settings.total_workspace)
    if call is layers.conv2d_call and settings.fuse_batch_norm:
        return call(layer, inputs, attrs,
                    batch_norm_chain.prologue_by_default(layer.compute_dtype))
    return call(layer, inputs, attrs)


# Conv2D -> BatchNormalization chains traced fused (rewrite_stats' bn_fused).
_bn_fused_count = [0]


def _chain_conv_call(layer, settings, inputs):
    """A fused chain's ``keras.layers.Conv2D``: its output (with its bias,
    what Keras' batch norm reads where it runs instead), the output without
    the bias and the sums, kept on the layer for the batch norm's call."""
    from tf_ucudnn import layers

    attrs = layers.layer_attrs(layer, workspace_limit=settings.workspace_limit,
                               batch_size_policy=settings.batch_size_policy,
                               total_workspace=settings.total_workspace)
    y, statistics = layers.conv_statistics_call(
        layer, inputs, attrs, batch_norm_chain.prologue_by_default(layer.compute_dtype))
    if settings.recompute is not None:
        gradients.choose_recompute(
            y, gradients.recompute_1x1(layer.kernel_size, settings.recompute))
    outputs = y
    if layer.use_bias:
        outputs = tf.nn.bias_add(y, tf.cast(layer.bias, y.dtype),
                                 data_format=attrs["data_format"])
    layer._tf_ucudnn_statistics = (outputs, y, statistics, attrs["data_format"])
    return outputs


def _chain_batch_norm_call(batch_norm, conv, inputs, training=None, mask=None):
    """A fused chain's ``keras.layers.BatchNormalization``: in training, on
    the statistics its convolution just computed of these very inputs;
    otherwise (or on other inputs) Keras' own call."""
    from tf_ucudnn import layers

    kept = conv.__dict__.pop("_tf_ucudnn_statistics", None)  # the trace's tensors: not kept
    if training and batch_norm.trainable and kept is not None and kept[0] is inputs:
        _, y, statistics, data_format = kept
        _bn_fused_count[0] += 1
        return layers.batch_norm_from_statistics(batch_norm, y, statistics, data_format)
    return type(batch_norm).call(batch_norm, inputs, training=training, mask=mask)


def _reroute(layer, route, call):
    """Gives ``layer`` the ``call`` of ``route`` (a tuple naming it), or back
    Keras' own where ``route`` is None, dropping what a previous route kept
    on it; whether anything changed."""
    if getattr(layer, "_tf_ucudnn_route", None) == route:
        return False
    if "call" in layer.__dict__:
        del layer.call
    layer.__dict__.pop("_tf_ucudnn_statistics", None)
    layer.__dict__.pop("_tf_ucudnn_route", None)
    if route is not None:
        layer.call = call
        layer._tf_ucudnn_route = route
    return True


def _route_layers(model):
    """The Keras route of ``enable_rewrite``, taken by Keras'
    ``make_*_function`` before it builds (or reuses) them; when it changes
    a layer, the model's functions are traced anew.

    * XLA: Grappler never sees the body of an XLA-compiled function, so
      while the rewrite is on, the stock ``keras.layers.Conv2D`` and
      ``Conv2DTranspose`` layers of a model compiled with XLA run their
      convolution and bias through tf_ucudnn's ops (whose XLA kernels are
      the micro-batched custom calls).
    * ``max_pool_gradient``: under XLA, the ``keras.layers.MaxPooling2D``
      layers that :func:`tf_ucudnn.max_pool.routable` accepts pool through
      :func:`tf_ucudnn.max_pool.max_pool2d` (``"first-max-index"``).
    * ``fuse_batch_norm``: with or without XLA, the Conv2D ->
      BatchNormalization chains of ``rewrite_model(fuse_batch_norm=True)``
      run on the convolution's statistics (``_chain_conv_call``,
      ``_chain_batch_norm_call``), and pre-activation batch norms record
      their output for the next convolution's prologue
      (``layers.recording_batch_norm_call``).

    When the rewrite is off again, or its settings change, the layers go
    back (or over)."""
    settings = _settings()
    if settings is not None and not _covers_gpu(settings.devices):
        settings = None  # the rewrite is for the CPU only; XLA on the CPU is XLA's own conv
    xla = settings if settings is not None and getattr(model, "jit_compile", False) else None
    fused = settings if settings is not None and settings.fuse_batch_norm else None
    from tf_ucudnn.layers import _COMPUTE_DTYPES, recording_batch_norm_call

    stock = stock_layer_classes()
    # Layers in other dtypes (float64) keep XLA's convolution.
    layers = [layer for layer in model._flatten_layers(include_self=False)
              if type(layer) in stock and layer.compute_dtype in _COMPUTE_DTYPES]
    chains = batch_norm_chains(model)  # their convolutions are among `layers`
    convs = {id(chains[id(layer)]): layer for layer in layers if id(layer) in chains}
    # Pre-activation batch norms: recorded for the next convolution's prologue.
    recorded = {key: bn for key, bn in preactivation_norms(model).items() if key not in convs}
    changed = False
    for layer in layers + [chains[id(conv)] for conv in convs.values()] + list(recorded.values()):
        is_batch_norm = id(layer) in convs
        if id(layer) in recorded:
            kind, wanted = "record", fused
        elif fused is not None and (is_batch_norm or id(layer) in chains):
            kind, wanted = "chain", fused
        else:  # a batch norm runs as Keras' unless its chain is fused
            kind, wanted = "xla", None if is_batch_norm else xla
        if kind == "record":
            call = functools.partial(recording_batch_norm_call, layer)
        elif kind == "chain" and is_batch_norm:
            call = functools.partial(_chain_batch_norm_call, layer, convs[id(layer)])
        elif kind == "chain":
            call = functools.partial(_chain_conv_call, layer, wanted)
        else:
            call = functools.partial(_xla_call, layer, wanted)
        changed |= _reroute(layer, (kind, wanted) if wanted is not None else None, call)
    gradient = None if xla is None else (xla.max_pool_gradient
                                         or environment.max_pool_gradient())
    pools = 0
    for layer in model._flatten_layers(include_self=False):
        if type(layer) is not keras.layers.MaxPooling2D:
            continue
        route = (("max_pool", gradient) if gradient == "first-max-index"
                 and max_pool.routable(layer) else None)
        pools += route is not None
        changed |= _reroute(layer, route, functools.partial(max_pool.pool_call, layer))
    routed = [layer for layer in layers if getattr(layer, "_tf_ucudnn_route", ("",))[0] == "xla"]
    chained = sum(getattr(layer, "_tf_ucudnn_route", ("",))[0] == "chain" for layer in layers)
    if changed:
        # Traced with the other layers: trace again when next needed.
        model.train_function = model.test_function = model.predict_function = None
        if routed:
            transposed = sum(isinstance(layer, keras.layers.Conv2DTranspose) for layer in routed)
            _log.info("tf_ucudnn.enable_rewrite: model %r is compiled with XLA; its %d "
                      "keras.layers.Conv2D%s layers run tf_ucudnn's XLA kernels while the "
                      "rewrite is on", model.name, len(routed) - transposed,
                      f" and {transposed} keras.layers.Conv2DTranspose" if transposed else "")
        if pools:
            _log.info("tf_ucudnn.enable_rewrite: model %r is compiled with XLA; its %d "
                      "keras.layers.MaxPooling2D layers take their gradient from elementwise "
                      "selects (max_pool_gradient='first-max-index')", model.name, pools)
        if chained:
            _log.info("tf_ucudnn.enable_rewrite: model %r: its %d keras.layers.Conv2D -> "
                      "BatchNormalization chains train on the convolution's statistics while "
                      "the rewrite is on", model.name, chained)
