"""The public API that ``import tf_ucudnn`` binds: importing this module imports
TensorFlow, loads the op library (registering the ops, their gradients and the
Keras layer) and the modules behind the names in ``tf_ucudnn.__all__``."""

from tf_ucudnn import database, layers, planner
from tf_ucudnn import database as cache  # its former name
from tf_ucudnn._engine import cudnn_version
from tf_ucudnn.division import divide_workspace_budget
from tf_ucudnn.nn import (DEFAULT_WORKSPACE_LIMIT, MiB, conv2d, conv2d_backprop_filter,
                          conv2d_backprop_input, conv2d_transpose, conv2d_with_statistics)
from tf_ucudnn.plan_registry import clear_plans, plans
from tf_ucudnn.model_rewrite import rewrite_model, stock_model
from tf_ucudnn.rewrite import disable_rewrite, enable_rewrite, rewrite_settings, rewrite_stats

