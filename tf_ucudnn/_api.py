"""The public API that ``import tf_ucudnn`` binds: importing this module imports
TensorFlow, loads the op library (registering the ops, their gradients and the
Keras layer) and the modules behind the names in ``tf_ucudnn.__all__``."""

import warnings

from tf_ucudnn import database, layers, planner
from tf_ucudnn import database as cache  # its former name
from tf_ucudnn._engine import cudnn_version
from tf_ucudnn.division import divide_workspace_budget
from tf_ucudnn.nn import (DEFAULT_WORKSPACE_LIMIT, MiB, conv2d, conv2d_backprop_filter,
                          conv2d_backprop_input, conv2d_transpose)
from tf_ucudnn.plan_registry import clear_plans, plans
from tf_ucudnn.rewrite import (disable_rewrite, enable_rewrite, rewrite_model, rewrite_settings,
                               rewrite_stats)


def _xla_kernels_missing():
    """Whether TensorFlow made its XLA JIT kernels before tf_ucudnn's op library
    loaded, so that tf_ucudnn's XLA kernels are not among them.

    TensorFlow turns the XLA kernels registered so far into kernels of its
    ``XLA_CPU_JIT`` / ``XLA_GPU_JIT`` devices once, when it runs its first
    op; an op library loaded after that has none there, and ``jit_compile``
    functions with its ops fail ("No registered 'Ucudnn>Conv2D' OpKernel for
    XLA_CPU_JIT devices").
    """
    from tensorflow.python.framework import kernels

    def jit_devices(op):
        return {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel
                if k.device_type.endswith("_JIT")}

    return bool(jit_devices("Conv2D")) and not jit_devices("Ucudnn>Conv2D")


if _xla_kernels_missing():
    warnings.warn("tf_ucudnn was imported after TensorFlow ran its first op, so tf_ucudnn's XLA "
                  "kernels are not registered: functions compiled with XLA (jit_compile=True, "
                  "and Keras' jit_compile='auto' on a GPU) that use tf_ucudnn's ops will fail "
                  "with \"No registered 'Ucudnn>Conv2D' OpKernel for XLA_*_JIT devices\". "
                  "Import tf_ucudnn before running any TensorFlow op.", stacklevel=2)
