"""The public API that ``import tf_ucudnn`` binds: importing this module imports
TensorFlow, loads the op library (registering the ops, their gradients and the
Keras layer) and the modules behind the names in ``tf_ucudnn.__all__``."""

from tf_ucudnn import cache, layers, planner
from tf_ucudnn._ops import clib as _clib, read_c_string as _read_c_string
from tf_ucudnn.division import divide_workspace_budget
from tf_ucudnn.nn import (DEFAULT_WORKSPACE_LIMIT, MiB, conv2d, conv2d_backprop_filter,
                          conv2d_backprop_input)
from tf_ucudnn.plan_registry import clear_plans, plans
from tf_ucudnn.rewrite import (disable_rewrite, enable_rewrite, rewrite_model, rewrite_settings,
                               rewrite_stats)


def cudnn_version():
    """The cuDNN version the library loaded, e.g. ``"9.19.0"`` (loads cuDNN on first call)."""
    return _read_c_string(_clib.ucudnn_cudnn_version)

