"""tf_ucudnn: μ-cuDNN for TensorFlow 2 and Keras 3.

Micro-batched convolutions that let fast cuDNN algorithms fit a small
workspace, with the same results as ``tf.nn.conv2d`` (Oyama et al. 2018,
arXiv:1804.04806).

    import tf_ucudnn
    y = tf_ucudnn.conv2d(x, w, strides=1, padding="SAME", workspace_limit=64 << 20)
    layer = tf_ucudnn.layers.Conv2D(64, 3, padding="same")
    print(tf_ucudnn.plans())
"""

__version__ = "0.1.0"

from tf_ucudnn import cache, layers, planner
from tf_ucudnn.division import divide_workspace_budget
from tf_ucudnn._ops import clib as _clib, read_c_string as _read_c_string
from tf_ucudnn.nn import (DEFAULT_WORKSPACE_LIMIT, MiB, conv2d, conv2d_backprop_filter,
                          conv2d_backprop_input)
from tf_ucudnn.plan_registry import clear_plans, plans
from tf_ucudnn.rewrite import (disable_rewrite, enable_rewrite, rewrite_model, rewrite_settings,
                               rewrite_stats)


def cudnn_version():
    """The cuDNN version the library loaded, e.g. ``"9.19.0"`` (loads cuDNN on first call)."""
    return _read_c_string(_clib.ucudnn_cudnn_version)


__all__ = ["DEFAULT_WORKSPACE_LIMIT", "MiB", "__version__", "cache", "clear_plans", "conv2d",
           "conv2d_backprop_filter", "conv2d_backprop_input", "cudnn_version",
           "disable_rewrite", "divide_workspace_budget", "enable_rewrite", "layers", "planner",
           "plans", "rewrite_model", "rewrite_settings", "rewrite_stats"]
