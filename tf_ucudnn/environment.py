"""The ``UCUDNN_*`` environment variables that Python reads, read here only.

The engine reads the others (``UCUDNN_DEFAULT_WORKSPACE_LIMIT``,
``UCUDNN_BATCH_SIZE_POLICY``, ``UCUDNN_ENGINES``, ``UCUDNN_GRAPH_*``, ...)
itself when a kernel is created (``ResolvePlanningKnobs`` in ``cc/engine/knobs.cc``); the README's
table lists them all. Each function here reads the variable when called, so a
change made in-process takes effect at the next read.
"""

import os

PREFIX = "UCUDNN_"


def database():
    """``UCUDNN_DATABASE`` as set (a path, ``""``, ``"off"``), or None when unset;
    :func:`tf_ucudnn.database.database_path` interprets it."""
    return os.environ.get("UCUDNN_DATABASE")


def debug_output():
    """Whether ``UCUDNN_DEBUG_OUTPUT`` asks for plans and divisions on stderr
    (set and neither ``""`` nor ``"0"``, as the engine reads it)."""
    return os.environ.get("UCUDNN_DEBUG_OUTPUT", "0") not in ("", "0")


def checked_choice(value, choices, name):
    """``value`` if it is one of ``choices`` (the first: what an unset
    variable means).

    Raises:
      ValueError: anything else, naming ``name`` and the allowed values.
    """
    if value not in choices:
        unset = f" (unset: {choices[0]})" if name.startswith(PREFIX) else ""
        raise ValueError(f"{name} must be one of {', '.join(choices)}{unset}, got {value!r}")
    return value


def _choice(variable, choices):
    """Environment variable ``variable``, one of ``choices``; unset or ``""``: the first."""
    return checked_choice(os.environ.get(variable, "") or choices[0], choices, variable)


# Recompute policies (Conv2DBatchNorm's recompute_output, UCUDNN_RECOMPUTE); unset: the first.
RECOMPUTE_CHOICES = ("off", "1x1")


def recompute():
    """``UCUDNN_RECOMPUTE``: which forward convolution outputs a traced
    training step computes again in its backward pass instead of keeping them
    (``tf_ucudnn.gradients``), where no layer chose
    (``Conv2DBatchNorm``'s ``recompute_output``): ``"off"`` (unset or
    ``""``: none) or ``"1x1"`` (a 1x1 convolution's output whose batch norm
    the next convolution applies as its prologue).

    Raises:
      ValueError: any other value, naming the allowed ones.
    """
    return _choice("UCUDNN_RECOMPUTE", RECOMPUTE_CHOICES)


# A max-pool's gradient under XLA (max_pool_gradient); unset: the first.
MAX_POOL_GRADIENTS = ("first-max-index", "select-and-scatter")


def max_pool_gradient():
    """``UCUDNN_MAX_POOL_GRADIENT``: how channels-last
    ``keras.layers.MaxPooling2D`` layers (windows of up to 9 elements)
    compute their gradient under XLA where ``rewrite_model`` or
    ``enable_rewrite`` was not told:
    ``"first-max-index"`` (unset or ``""``; elementwise selects that XLA
    fuses, the forward from the window's views, ``tf_ucudnn.max_pool``) or
    ``"select-and-scatter"`` (XLA's own, and its reduce-window forward).

    Raises:
      ValueError: any other value, naming the allowed ones.
    """
    return _choice("UCUDNN_MAX_POOL_GRADIENT", MAX_POOL_GRADIENTS)


# Input channels up to which a convolution's batch-norm statistics are reduced
# after it rather than in its cuDNN graph (statistics_after_channels).
DEFAULT_STATISTICS_AFTER_CHANNELS = 4


def statistics_after_channels():
    """``UCUDNN_STATISTICS_AFTER_CHANNELS``: a convolution whose input has at
    most this many channels (an RGB stem: 3) gives a following batch norm
    its statistics as float32 reductions of its output after it (XLA's
    fusions under XLA, TF's reductions without), not from the statistics
    epilogue of its cuDNN graph, which for so few channels runs on slow
    run-time generated engines (ResNet-50's 7x7 stem on an H200: 2.6 ms in
    float16 and bfloat16, 3.3 ms in float32, against 1.6-1.9 ms for the
    plain convolution and XLA's reductions; docs/benchmarks.md section 12).
    Unset: 4 (default); 0: every convolution fuses its statistics.

    Raises:
      ValueError: not a whole number from 0 to 65536.
    """
    value = os.environ.get("UCUDNN_STATISTICS_AFTER_CHANNELS", "")
    if value == "":
        return DEFAULT_STATISTICS_AFTER_CHANNELS
    try:
        channels = int(value)
    except ValueError:
        channels = -1
    if not 0 <= channels <= 65536:
        raise ValueError("UCUDNN_STATISTICS_AFTER_CHANNELS must be a whole number of input "
                         f"channels from 0 to 65536 (0: always fused); got {value!r}")
    return channels


def ucudnn_variables():
    """Every ``UCUDNN_*`` variable that is set, as ``{name: value}``, sorted by name
    (what a benchmark report records of tf_ucudnn's settings)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(PREFIX)}
