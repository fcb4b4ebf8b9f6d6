"""tf_ucudnn: μ-cuDNN for TensorFlow 2 and Keras 3.

Micro-batched convolutions that let fast cuDNN algorithms fit a small
workspace, with the same results as ``tf.nn.conv2d`` (Oyama et al. 2018,
arXiv:1804.04806).

    import tf_ucudnn
    y = tf_ucudnn.conv2d(x, w, strides=1, padding="SAME", workspace_limit="64MiB")
    layer = tf_ucudnn.layers.Conv2D(64, 3, padding="same")
    print(tf_ucudnn.plans())

``import tf_ucudnn`` imports TensorFlow and loads the op library, which
registers the ops (so that SavedModels and ``.keras`` files using them load).
Import it before TensorFlow runs its first op: TensorFlow makes the XLA
kernels of the ops it knows then, once, and ``jit_compile`` functions with
tf_ucudnn's ops would find none (``import tf_ucudnn`` warns when that is so).
The one exception is the ``tf-ucudnn`` command itself (and ``python -m
tf_ucudnn``): there the API is bound on first use, so that ``--help``,
``--version`` and ``cache`` answer without TensorFlow.
"""

__version__ = "0.1.0"

import os as _os
import sys as _sys

__all__ = ["DEFAULT_WORKSPACE_LIMIT", "MiB", "__version__", "cache", "clear_plans", "conv2d",
           "conv2d_backprop_filter", "conv2d_backprop_input", "conv2d_transpose",
           "conv2d_with_statistics",
           "cudnn_version", "database",
           "disable_rewrite", "divide_workspace_budget", "enable_rewrite", "layers", "planner",
           "plans", "rewrite_model", "rewrite_settings", "rewrite_stats", "stock_model"]
# Submodules among those names; `cache` is the benchmark database's former name.
_SUBMODULES = {"cache": "database", "database": "database", "layers": "layers",
               "planner": "planner"}

_COMMAND = "tf-ucudnn"


def _started_as_the_command():
    """Whether this process is the ``tf-ucudnn`` command starting up.

    True for the console script (``sys.argv[0]`` is the ``tf-ucudnn`` script)
    and for ``python -m tf_ucudnn`` while Python imports this package to find
    its ``__main__`` (``sys.argv[0]`` is ``"-m"`` until the module is found, as
    the documentation of ``-m`` says; ``sys.orig_argv`` names the module).
    """
    argv0 = _sys.argv[0] if _sys.argv else ""
    if _os.path.basename(argv0) == _COMMAND:
        return True
    if argv0 != "-m":
        return False
    args = getattr(_sys, "orig_argv", [])
    for i, arg in enumerate(args[1:], start=1):
        if arg.startswith("-m"):
            module = arg[2:] or (args[i + 1] if i + 1 < len(args) else "")
            return module == __name__
    return False


def _bind_api():
    """Imports TensorFlow and the API (tf_ucudnn._api) and binds its names here."""
    import tf_ucudnn._api as _api

    globals().update({name: getattr(_api, name) for name in __all__ if name != "__version__"})


if _started_as_the_command():
    def __getattr__(name):  # PEP 562: the command binds the API when it is first used
        if name in __all__ and name not in _SUBMODULES:
            _bind_api()
            return globals()[name]
        import importlib

        try:  # a submodule (tf_ucudnn.database, .division, ...): just that one
            return importlib.import_module(f"{__name__}.{_SUBMODULES.get(name, name)}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
else:
    _bind_api()
