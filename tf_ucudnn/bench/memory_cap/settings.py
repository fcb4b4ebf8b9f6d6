"""The memory-cap sweep's settings: the modes, tf_ucudnn's workspace limits,
the search's defaults and labels, every sweep of a run, and a run's statuses."""

import re

from tf_ucudnn.units import format_bytes

MODES = ("stock", "stock-xla", "ucudnn", "ucudnn-xla", "ucudnn-bn", "ucudnn-bn-xla",
         "ucudnn-bnstats", "ucudnn-bnstats-xla", "ucudnn-bnrecompute", "ucudnn-bnrecompute-xla")
DEFAULT_MODES = MODES[:4]  # the batch-norm modes run when asked for
STOCK_MODES = ("stock", "stock-xla")
AUTO = "auto"  # a workspace limit that follows the free memory
DEFAULT_LIMITS = (64 << 20,)
DEFAULT_MAX_BATCH = 4096
DEFAULT_BISECT_STEPS = 2
DEFAULT_STEPS_PER_EPOCH = 5
DEFAULT_EPOCHS = 3
STATUSES = ("ok", "oom", "error", "timeout")

# Messages of an allocation that failed: TF's allocator ("OOM when allocating tensor",
# "ran out of memory"), XLA's ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate"),
# CUDA's and cuDNN's.
_OOM_PATTERN = re.compile(r"out of memory|resource.?exhausted|\bOOM\b|failed to allocate|"
                          r"CUDA_ERROR_OUT_OF_MEMORY|CUDNN_STATUS_ALLOC_FAILED",
                          re.IGNORECASE)
_MESSAGE_CHARS = 600  # the end of a failure's message that a run keeps


def failure_status(message):
    """``"oom"`` if ``message`` (an exception's text or a worker's stderr)
    reads as an allocation that failed, else ``"error"``."""
    return "oom" if _OOM_PATTERN.search(message or "") else "error"


def check_steps_per_execution(steps_per_execution, steps_per_epoch):
    """Raises ``ValueError`` unless ``steps_per_execution`` divides
    ``steps_per_epoch``: a timed epoch must be whole calls of Keras' training
    function."""
    if steps_per_epoch % steps_per_execution:
        raise ValueError(f"steps_per_execution={steps_per_execution} must divide "
                         f"steps_per_epoch={steps_per_epoch}: each timed epoch must be whole "
                         "calls of Keras' training function")


def limit_label(limit):
    """A workspace limit as the table and figure show it: ``64 MiB``, ``auto``; ``-`` for None."""
    if limit is None:
        return "-"
    return AUTO if limit == AUTO else format_bytes(limit)


def setting_label(mode, limit):
    """``stock``, ``stock-xla``, ``ucudnn 64 MiB``, ``ucudnn-xla auto``."""
    return mode if limit is None else f"{mode} {limit_label(limit)}"


def sweeps_of(models, caps, modes=DEFAULT_MODES, limits=DEFAULT_LIMITS):
    """Every sweep to run, in order: per model, cap and mode; tf_ucudnn's modes at each limit.

    Args:
      models: names of :data:`tf_ucudnn.bench.models.MODELS`.
      caps: memory caps, bytes.
      modes: names of :data:`MODES`.
      limits: tf_ucudnn's workspace limits: bytes or ``"auto"``.

    Returns:
      Dicts of ``model``, ``cap`` (bytes), ``mode`` and ``limit`` (bytes,
      ``"auto"``, or None for the stock modes).
    """
    sweeps = []
    for model in models:
        for cap in caps:
            for mode in modes:
                for limit in ([None] if mode in STOCK_MODES else limits):
                    sweeps.append(dict(model=model, cap=cap, mode=mode, limit=limit))
    return sweeps
