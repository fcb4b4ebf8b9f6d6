"""The walks over a Keras model's layers that both rewrites share
(:func:`tf_ucudnn.enable_rewrite`'s Keras route and
:func:`tf_ucudnn.rewrite_model`): the Sequential and functional models nested
in it, the stock convolution layers they replace, its Conv2D ->
BatchNormalization chains and its pre-activation batch norms."""

import keras


def stock_layer_classes():
    """The stock Keras layers that the rewrite's XLA route and
    :func:`tf_ucudnn.rewrite_model` replace, each with its tf_ucudnn layer."""
    from tf_ucudnn import layers

    return {keras.layers.Conv2D: layers.Conv2D,
            keras.layers.Conv2DTranspose: layers.Conv2DTranspose}


def batch_norm_chains(model):
    """``{id(conv): batch_norm}`` for each ``keras.layers.Conv2D`` of ``model``
    (and its nested Sequential and functional models) that
    ``rewrite_model(fuse_batch_norm=True)`` fuses: called once, no
    activation, computing in float32, float16 or bfloat16, its output used
    only by a ``keras.layers.BatchNormalization`` called once over the
    convolution's channel axis, without renorm or synchronized statistics,
    in the same dtype policy, and not an output of its model."""
    from tf_ucudnn.layers import _COMPUTE_DTYPES, batch_norm_fusion_refusal

    chains = {}
    for outer in [model] + nested_models(model):
        produced_outputs = {id(t._keras_history.operation) for t in outer.outputs}
        for conv in outer.layers:
            if (type(conv) is not keras.layers.Conv2D or id(conv) in produced_outputs
                    or conv.compute_dtype not in _COMPUTE_DTYPES
                    or len(conv._inbound_nodes) != 1 or len(conv._outbound_nodes) != 1):
                continue
            bn = conv._outbound_nodes[0].operation
            if (type(bn) is not keras.layers.BatchNormalization or len(bn._inbound_nodes) != 1
                    or bn.dtype_policy.name != conv.dtype_policy.name
                    or batch_norm_fusion_refusal(conv, bn)):
                continue
            chains[id(conv)] = bn
    return chains


def preactivation_norms(model):
    """``{id(layer): layer}`` for ``model``'s ``keras.layers.BatchNormalization``
    layers (and its nested models') that ``rewrite_model(fuse_batch_norm=True)`` replaces
    by ``tf_ucudnn.layers.BatchNormalization``: called once, in float32,
    float16 or bfloat16, and read by a ``keras.layers.Conv2D`` directly or
    through a ReLU layer (``ReLU()`` with its defaults, ``Activation("relu")``)
    called once: the pre-activation order, whose normalization the
    convolution can apply as its prologue. A ``ZeroPadding2D`` called once
    may sit between them (as before ResNet v2's 3x3 convolutions) where the
    convolution's padding is ``"valid"``: the padding then becomes the
    convolution's own (:func:`tf_ucudnn.batch_norm_chain.prologue_of`)."""
    from tf_ucudnn.layers import _COMPUTE_DTYPES

    def consumers(layer):
        return [node.operation for node in layer._outbound_nodes]

    def called_once(layer):
        return len(layer._inbound_nodes) == 1

    def is_relu(layer):
        if not called_once(layer):
            return False
        if type(layer) is keras.layers.ReLU:
            return (layer.negative_slope == 0 and layer.max_value is None
                    and layer.threshold == 0)
        return (type(layer) is keras.layers.Activation
                and layer.activation is keras.activations.relu)

    found = {}
    for outer in [model] + nested_models(model):
        for bn in outer.layers:
            if (type(bn) is not keras.layers.BatchNormalization or not called_once(bn)
                    or bn.compute_dtype not in _COMPUTE_DTYPES):
                continue
            readers = consumers(bn)
            readers += [c for relu in readers if is_relu(relu) for c in consumers(relu)]
            padded = [c for pad in readers if type(pad) is keras.layers.ZeroPadding2D
                      and called_once(pad) for c in consumers(pad)]
            if (any(type(c) is keras.layers.Conv2D for c in readers)
                    or any(type(c) is keras.layers.Conv2D and c.padding == "valid"
                           for c in padded)):
                found[id(bn)] = bn
    return found


def nested_models(model):
    """The Sequential and functional models nested in ``model``, at any depth."""
    found, stack = [], [model]
    while stack:
        for layer in stack.pop().layers:
            if isinstance(layer, (keras.Sequential, keras.Model)) and hasattr(layer, "layers"):
                found.append(layer)
                stack.append(layer)
    return found
