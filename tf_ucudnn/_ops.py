"""Loads the op library (`_ucudnn_ops.so`) and checks what it was built for.

The library holds the three ops (``Ucudnn>Conv2D``,
``Ucudnn>Conv2DBackpropInput``, ``Ucudnn>Conv2DBackpropFilter``) and a small C
interface to the planner, used through ctypes by :mod:`tf_ucudnn.planner`.
"""

import ctypes
import os

import tensorflow as tf

LIBRARY_NAME = "_ucudnn_ops.so"
LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
_BUILD_HINT = "build it with `make build` in the tf_ucudnn checkout (or install the wheel)"


# C callbacks (see cc/kernels/engine/division_groups.h and plan_cache.h).
DIVISION_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int64)
PLAN_LISTENER = ctypes.CFUNCTYPE(None)


def _tf_major_minor(version):
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _load():
    if not os.path.exists(LIBRARY_PATH):
        raise ImportError(f"tf_ucudnn's op library {LIBRARY_PATH} is missing: {_BUILD_HINT}.")
    # tf.load_op_library must dlopen the library first: it collects the ops
    # registered while the library loads.
    try:
        ops = tf.load_op_library(LIBRARY_PATH)
    except tf.errors.NotFoundError as e:
        raise ImportError(f"could not load {LIBRARY_PATH} ({e}): {_BUILD_HINT}.") from e
    clib = ctypes.CDLL(LIBRARY_PATH)
    major, minor = ctypes.c_int32(), ctypes.c_int32()
    clib.ucudnn_built_for_tf(ctypes.byref(major), ctypes.byref(minor))
    built = (major.value, minor.value)
    running = _tf_major_minor(tf.__version__)
    if built != running:
        raise ImportError(
            f"tf_ucudnn's op library was built for TensorFlow {built[0]}.{built[1]} but "
            f"TensorFlow {tf.__version__} is installed: rebuild it ({_BUILD_HINT}) or "
            f"install tensorflow=={built[0]}.{built[1]}.*.")
    _declare_c_api(clib)
    return ops, clib


def _declare_c_api(clib):
    i32, i64, f64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_double
    p_i64, p_i32, p_f64 = ctypes.POINTER(i64), ctypes.POINTER(i32), ctypes.POINTER(f64)
    clib.ucudnn_micro_batch_sizes.argtypes = [i32, i64, p_i64, i64]
    clib.ucudnn_micro_batch_sizes.restype = i64
    clib.ucudnn_plan.argtypes = [i64, p_i64, p_i32, p_f64, p_i64, i64, i32, i32, i64, i64,
                                 p_i64, i64]
    clib.ucudnn_plan.restype = i64
    clib.ucudnn_plans_json.argtypes = [ctypes.c_char_p, i64]
    clib.ucudnn_plans_json.restype = i64
    clib.ucudnn_clear_plans.argtypes = []
    clib.ucudnn_cudnn_version.argtypes = [ctypes.c_char_p, i64]
    clib.ucudnn_cudnn_version.restype = i64
    clib.ucudnn_kernels_json.argtypes = [ctypes.c_char_p, i64]
    clib.ucudnn_kernels_json.restype = i64
    clib.ucudnn_set_kernel_limit.argtypes = [i64, i64, ctypes.c_char_p, i64]
    clib.ucudnn_set_kernel_limit.restype = i32
    p_i32 = ctypes.POINTER(i32)
    clib.ucudnn_seed_kernel.argtypes = [p_i64, i64, i64, p_i64, p_i64, i64, p_i64, p_i32,
                                        ctypes.POINTER(ctypes.c_double), p_i64]
    clib.ucudnn_seed_kernel.restype = i32
    clib.ucudnn_rewrite_stats.argtypes = [p_i64, p_i64, p_i64]
    clib.ucudnn_rewrite_stats.restype = None
    clib.ucudnn_set_division_callback.argtypes = [DIVISION_CALLBACK]
    clib.ucudnn_set_division_callback.restype = None
    clib.ucudnn_set_plan_listener.argtypes = [PLAN_LISTENER]
    clib.ucudnn_set_plan_listener.restype = None
    clib.ucudnn_time_overhead.argtypes = [i64, i32, p_f64, ctypes.c_char_p, i64]
    clib.ucudnn_time_overhead.restype = i32


def read_c_string(fn):
    """Calls a C function of the form ``int64 fn(char* out, int64 capacity)``."""
    capacity = 4096
    while True:
        buf = ctypes.create_string_buffer(capacity)
        needed = fn(buf, capacity)
        if needed <= capacity:
            return buf.value.decode()
        capacity = needed


ops, clib = _load()
