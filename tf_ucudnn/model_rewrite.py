"""``rewrite_model``: a copy of a Keras model whose convolutions (and, on
request, Conv2D -> BatchNormalization chains and max-pools) are tf_ucudnn's
layers, with the same weights. The Keras-level alternative to
:func:`tf_ucudnn.enable_rewrite`. ``stock_model``: the way back, a copy in
Keras' own layers."""

import warnings

import keras

from tf_ucudnn import environment, gradients, max_pool, nn
from tf_ucudnn.model_walk import (batch_norm_chains, nested_models, preactivation_norms,
                                  stock_layer_classes)


def rewrite_model(model, workspace_limit=None, batch_size_policy=None, *, verbose=1,
                  fuse_batch_norm=False, recompute=None, max_pool_gradient=None):
    """A copy of a Keras model with each ``keras.layers.Conv2D`` replaced by
    ``tf_ucudnn.layers.Conv2D``, and each ``keras.layers.Conv2DTranspose`` by
    ``tf_ucudnn.layers.Conv2DTranspose``, of the same configuration and weights.

    Works for Sequential and functional models, and for the Sequential and
    functional models nested in them, at any depth
    (``keras.models.clone_model(..., recursive=True)``); other layers are
    cloned unchanged and keep their weights. Layers already tf_ucudnn's keep
    their own knobs. Subclasses of ``keras.layers.Conv2D`` and
    ``Conv2DTranspose`` (whose ``call`` may differ), layers computing in a
    dtype other than float32, float16 or bfloat16, and convolutions inside
    subclassed layers or models are left stock, with a warning naming them.

    Args:
      model: a built ``keras.Model``, Sequential or functional (a subclassed
        model has no graph of layers to copy: build its convolutions with
        ``tf_ucudnn.layers.Conv2D``, or use :func:`tf_ucudnn.enable_rewrite`).
      workspace_limit: bytes per kernel for the new layers, an int or a
        string such as ``"64MiB"``, or ``"auto"``; None: the op's default
        (``UCUDNN_DEFAULT_WORKSPACE_LIMIT``, 64 MiB).
      batch_size_policy: as for ``tf_ucudnn.layers.Conv2D``.
      verbose: 1 prints one line saying how many layers were replaced
        (and how many of them in nested models); 0 prints nothing.
      fuse_batch_norm: True also replaces each ``keras.layers.Conv2D``
        (no activation, float32 / float16 / bfloat16) whose output goes
        only to a ``keras.layers.BatchNormalization`` over its channels (no
        renorm, not synchronized) by one ``tf_ucudnn.layers.Conv2DBatchNorm``
        holding copies of both, the batch norm's place taken by a
        pass-through ``tf_ucudnn.layers.BatchNormInConv`` of its name: the
        convolution then computes the batch norm's statistics
        (``conv2d_with_statistics``), and inference folds the batch norm
        into it. The ReLU after it stays a layer of its own; a fused layer
        whose input is another's output (or a ReLU of it) applies that
        normalization and ReLU as its convolution's prologue in training,
        in float16 (``Conv2DBatchNorm``'s ``input_prologue``). A
        ``keras.layers.BatchNormalization`` read by a ``Conv2D`` (directly
        or through a ReLU layer: the pre-activation order of ResNet v2 and
        DenseNet) becomes ``tf_ucudnn.layers.BatchNormalization``, whose
        normalization and ReLU that convolution applies as its prologue
        alike. Default False.
      recompute: with ``fuse_batch_norm``, each ``Conv2DBatchNorm``'s
        ``recompute_output``: ``"1x1"`` True for 1x1 convolutions (ResNet
        v1's reducing convolutions, whose output the 3x3 after them reads
        through its prologue) and False for the others, ``"off"`` False for
        all, None (default) None: ``UCUDNN_RECOMPUTE`` decides.
      max_pool_gradient: ``"first-max-index"`` replaces each
        ``keras.layers.MaxPooling2D`` that
        :func:`tf_ucudnn.max_pool.routable` accepts (``channels_last``,
        either padding, windows of up to 9 elements) by
        ``tf_ucudnn.layers.MaxPooling2D``, whose gradient under XLA is
        elementwise selects that XLA fuses (the same tensor as its
        select-and-scatter; without XLA, TF's);
        ``"select-and-scatter"`` keeps them. None (default):
        ``UCUDNN_MAX_POOL_GRADIENT`` (unset: ``"first-max-index"``).

    Returns:
      A new ``keras.Model``; the input model is unchanged
      (:func:`stock_model` copies the new one back into Keras' layers).

    Raises:
      ValueError: ``model`` is not a ``keras.Model`` (the message names the
        type given), is a subclassed model, or is not built; or a knob is
        out of range (``recompute``: not ``"off"``, ``"1x1"`` or None;
        ``max_pool_gradient``: not one of those above or None).
    """
    from tf_ucudnn import layers

    nn.ucudnn_attrs(workspace_limit=workspace_limit, batch_size_policy=batch_size_policy)
    if recompute is not None:
        environment.checked_choice(recompute, environment.RECOMPUTE_CHOICES, "recompute")
    if max_pool_gradient is not None:
        environment.checked_choice(max_pool_gradient, environment.MAX_POOL_GRADIENTS,
                                    "max_pool_gradient")
    pool_gradient = max_pool_gradient or environment.max_pool_gradient()
    _check_copyable(model, "rewrite_model", "build its convolutions with "
                    "tf_ucudnn.layers.Conv2D, or run it under tf_ucudnn.enable_rewrite()")
    replaced, skipped, nested, pools = [], [], set(), []
    for outer in nested_models(model):
        nested.update(id(layer) for layer in outer.layers)

    stock = stock_layer_classes()
    ours = tuple(stock.values())
    chains = batch_norm_chains(model) if fuse_batch_norm else {}
    fused_norms = {id(bn) for bn in chains.values()}
    recorded_norms = set(preactivation_norms(model)) - fused_norms if fuse_batch_norm else set()
    clones = {}  # id(layer) -> its clone, for the weights when chains are fused

    def clone(layer):
        new_layer = clone_one(layer)
        clones[id(layer)] = new_layer
        return new_layer

    def clone_one(layer):
        if id(layer) in chains:
            bn = chains[id(layer)]
            return layers.Conv2DBatchNorm.from_layers(
                keras.layers.Conv2D.from_config(layer.get_config()),
                keras.layers.BatchNormalization.from_config(bn.get_config()),
                workspace_limit=workspace_limit, batch_size_policy=batch_size_policy,
                recompute_output=(None if recompute is None
                                  else gradients.recompute_1x1(layer.kernel_size, recompute)))
        if id(layer) in fused_norms:
            return layers.BatchNormInConv(name=layer.name, dtype=layer.dtype_policy)
        if id(layer) in recorded_norms:
            return layers.BatchNormalization.from_config(layer.get_config())
        config = layer.get_config()
        if (type(layer) is keras.layers.MaxPooling2D and pool_gradient == "first-max-index"
                and max_pool.routable(layer)):
            pools.append(layer)
            return layers.MaxPooling2D.from_config(config)
        supported = getattr(layer, "compute_dtype", None) in layers._COMPUTE_DTYPES
        if type(layer) in stock and supported:
            replaced.append(layer)
            return stock[type(layer)].from_config(dict(config, workspace_limit=workspace_limit,
                                                       batch_size_policy=batch_size_policy))
        if type(layer) in stock:
            skipped.append(f"{layer.name} ({type(layer).__name__}, {layer.compute_dtype})")
        elif isinstance(layer, tuple(stock)) and not isinstance(layer, ours):
            skipped.append(f"{layer.name} ({type(layer).__name__})")
        else:
            skipped.extend(f"{inner.name} (inside {layer.name}, {type(layer).__name__})"
                           for inner in _stock_convolutions_within(layer))
        return layer.__class__.from_config(config)

    new = keras.models.clone_model(model, clone_function=clone, recursive=True)
    if chains or recorded_norms:
        _copy_weights(model, clones, chains)
    else:
        new.set_weights(model.get_weights())
    if skipped:
        warnings.warn(f"tf_ucudnn.rewrite_model left {len(skipped)} convolution layer(s) stock: "
                      f"{', '.join(skipped)}. It replaces keras.layers.Conv2D and Conv2DTranspose "
                      f"themselves (not their subclasses, whose call may differ) computing in "
                      f"float32, float16 or bfloat16 in Sequential and functional models; to run "
                      f"the others through tf_ucudnn, derive them from "
                      f"(or build them with) tf_ucudnn.layers.Conv2D or Conv2DTranspose.",
                      stacklevel=2)
    if verbose:
        inside = sum(id(layer) in nested for layer in replaced)
        transposed = sum(isinstance(layer, keras.layers.Conv2DTranspose) for layer in replaced)
        print(f"tf_ucudnn.rewrite_model: "
              + (f"fused {len(chains)} Conv2D -> BatchNormalization chain(s) into "
                 f"tf_ucudnn.layers.Conv2DBatchNorm; " if chains else "")
              + (f"replaced {len(recorded_norms)} BatchNormalization layer(s) before a "
                 f"Conv2D with tf_ucudnn.layers.BatchNormalization; " if recorded_norms else "")
              + f"replaced {len(replaced) - transposed} "
              f"keras.layers.Conv2D layer(s) with tf_ucudnn.layers.Conv2D"
              + (f" and {transposed} keras.layers.Conv2DTranspose with "
                 f"tf_ucudnn.layers.Conv2DTranspose" if transposed else "")
              + (f" ({inside} in nested models)" if inside else "")
              + (f"; replaced {len(pools)} keras.layers.MaxPooling2D with "
                 f"tf_ucudnn.layers.MaxPooling2D" if pools else "")
              + (f"; left {len(skipped)} stock (see the warning)" if skipped else ""))
    return new


def stock_model(model, *, verbose=1):
    """A copy of a Keras model with tf_ucudnn's layers replaced by Keras' own,
    of the same configuration and weights: the inverse of
    :func:`rewrite_model`, for files and exports that load without tf_ucudnn
    (a ``.keras`` file, a ``.weights.h5`` file for the original stock model,
    a SavedModel of stock ops).

    ``tf_ucudnn.layers.Conv2D``, ``Conv2DTranspose``, ``MaxPooling2D`` and
    ``BatchNormalization`` become the Keras layers they derive from, without
    μ-cuDNN's knobs (``workspace_limit``, ``batch_size_policy``,
    ``micro_batch_size``, ``input_prologue``). A ``Conv2DBatchNorm`` that
    ``rewrite_model(fuse_batch_norm=True)`` made (its output read by the
    ``BatchNormInConv`` holding the batch norm's place) becomes the
    ``keras.layers.Conv2D`` and ``keras.layers.BatchNormalization`` it
    holds, each in its own place under its own name, so the copy has the
    original's layers, names and order of weights; any other
    ``Conv2DBatchNorm`` becomes a ``keras.Sequential`` of its name holding
    ``Conv2D`` (``"conv"``), ``BatchNormalization`` (``"batch_norm"``) and,
    where it has one, the ``Activation``. Moving statistics, ``trainable``
    flags and dtype policies are kept; other layers are cloned unchanged.
    Nested Sequential and functional models are copied at any depth
    (``keras.models.clone_model(..., recursive=True)``); layers inside
    subclassed layers are left as they are.

    Args:
      model: a built ``keras.Model``, Sequential or functional.
      verbose: 1 prints one line saying how many layers were replaced; 0
        prints nothing.

    Returns:
      A new ``keras.Model`` whose outputs equal ``model``'s in inference (in
      training up to float32 rounding: tf_ucudnn's batch norm takes the
      variance from sums); the input model is unchanged.

    Raises:
      ValueError: ``model`` is not a built ``keras.Model``, or is a
        subclassed model.
    """
    from tf_ucudnn import layers

    _check_copyable(model, "stock_model", "its own code builds its layers (use keras.layers there)")
    stock_of = {ours: stock for stock, ours in stock_layer_classes().items()}
    stock_of.update({layers.MaxPooling2D: keras.layers.MaxPooling2D,
                     layers.BatchNormalization: keras.layers.BatchNormalization})
    # The rewrite's fused chains: {id(its BatchNormInConv): its Conv2DBatchNorm}.
    split = {}
    for outer in [model] + nested_models(model):
        for fused in outer.layers:
            readers = [node.operation for node in fused._outbound_nodes]
            if (type(fused) is layers.Conv2DBatchNorm and len(fused._inbound_nodes) == 1
                    and len(readers) == 1 and type(readers[0]) is layers.BatchNormInConv
                    and fused.activation in (None, keras.activations.linear)):
                split[id(readers[0])] = fused
    split_convs = {id(fused) for fused in split.values()}
    clones = {}  # id(layer) -> its clone

    def clone(layer):
        clones[id(layer)] = new_layer = clone_one(layer)
        return new_layer

    def clone_one(layer):
        if id(layer) in split_convs:
            return keras.layers.Conv2D.from_config(layer.conv.get_config())
        if id(layer) in split:
            return keras.layers.BatchNormalization.from_config(
                dict(split[id(layer)].batch_norm.get_config(), name=layer.name))
        if type(layer) is layers.Conv2DBatchNorm:
            parts = [keras.layers.Conv2D.from_config(layer.conv.get_config()),
                     keras.layers.BatchNormalization.from_config(layer.batch_norm.get_config())]
            if layer.activation not in (None, keras.activations.linear):
                parts.append(keras.layers.Activation(layer.activation, name="activation",
                                                     dtype=layer.dtype_policy))
            return keras.Sequential(parts, name=layer.name, trainable=layer.trainable)
        if type(layer) is layers.BatchNormInConv:  # after no fused layer: a pass-through
            return keras.layers.Identity(name=layer.name, dtype=layer.dtype_policy)
        if type(layer) in stock_of:
            stock = stock_of[type(layer)]
            return stock.from_config(stock.get_config(layer))  # Keras' config, not the knobs
        return layer.__class__.from_config(layer.get_config())

    new = keras.models.clone_model(model, clone_function=clone, recursive=True)
    replaced = 0
    for layer, target in _layers_and_clones(model, clones):
        replaced += type(target) is not type(layer)
        if id(layer) in split_convs:
            target.set_weights(layer.conv.get_weights())
        elif id(layer) in split:
            target.set_weights(split[id(layer)].batch_norm.get_weights())
        elif type(layer) is layers.Conv2DBatchNorm:
            target.layers[0].set_weights(layer.conv.get_weights())
            target.layers[1].set_weights(layer.batch_norm.get_weights())
        elif layer.weights:
            target.set_weights(layer.get_weights())
    if verbose:
        print(f"tf_ucudnn.stock_model: replaced {replaced} tf_ucudnn layer(s) with Keras' own")
    return new


def _check_copyable(model, caller, instead):
    """Raises ValueError unless ``model`` is a built Sequential or functional
    ``keras.Model``, which ``keras.models.clone_model`` copies; ``instead``:
    what to do with a subclassed model, for its message."""
    if not isinstance(model, keras.Model):
        raise ValueError(f"{caller} needs a keras.Model (Sequential or functional), got "
                         f"{type(model).__module__}.{type(model).__qualname__}: {model!r:.80}")
    if not isinstance(model, keras.Sequential) and not _is_functional(model):
        raise ValueError(f"{caller} copies Sequential and functional models; "
                         f"{model.name!r} is a subclassed keras.Model "
                         f"({type(model).__qualname__}), whose call() it cannot copy: {instead}")
    if not model.built:
        raise ValueError(f"{caller} needs a built model (call it once or build it first)")


def _copy_weights(model, clones, chains):
    """The weights of ``model``'s layers into their clones (``clones``: id of
    a layer -> its clone), each fused chain's convolution and batch norm into
    the ``Conv2DBatchNorm`` that holds their copies."""
    norms = {id(bn) for bn in chains.values()}
    for layer, target in _layers_and_clones(model, clones):
        if id(layer) in norms or not layer.weights:
            continue
        if id(layer) in chains:
            target.conv.set_weights(layer.get_weights())
            target.batch_norm.set_weights(chains[id(layer)].get_weights())
        else:
            target.set_weights(layer.get_weights())


def _layers_and_clones(model, clones):
    """``(layer, clone)`` for each layer of ``model`` and of its nested models
    that has a clone in ``clones`` (id of a layer -> its clone), the nested
    models themselves left out (their layers are listed)."""
    for outer in [model] + nested_models(model):
        for layer in outer.layers:
            target = clones.get(id(layer))
            if target is not None and not isinstance(layer, (keras.Sequential, keras.Model)):
                yield layer, target


def _is_functional(model):
    """Whether ``model`` is a functional model (``keras.Model(inputs, outputs)``,
    or a subclass built that way), which ``keras.models.clone_model`` copies."""
    try:
        from keras.src.models.functional import Functional
    except ImportError:  # another Keras layout: leave the check to clone_model
        return True
    return isinstance(model, Functional)


def _stock_convolutions_within(layer):
    """``keras.layers.Conv2D`` and ``Conv2DTranspose`` layers (and subclasses)
    held inside a layer that clone_model copies as a whole (a subclassed layer
    or model)."""
    flatten = getattr(layer, "_flatten_layers", None)  # Keras 3's walk over tracked sublayers
    if flatten is None:
        return []
    stock = stock_layer_classes()
    return [inner for inner in flatten(include_self=False, recursive=True)
            if isinstance(inner, tuple(stock)) and not isinstance(inner, tuple(stock.values()))]
