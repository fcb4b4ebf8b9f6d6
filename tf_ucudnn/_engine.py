"""The op library (``_ucudnn_ops.so``): loading it, and every call into it.

This module alone holds the library handle. It loads the library with
``tf.load_op_library`` (which registers the three ops ``Ucudnn>Conv2D``,
``Ucudnn>Conv2DBackpropInput`` and ``Ucudnn>Conv2DBackpropFilter``, their
XLA kernels and the Grappler rewriter), checks the TensorFlow version it was
built for, and wraps each function of its C interface
(``cc/engine/c_api.cc``) in a typed Python function. The rest of the
package calls these functions; none of it uses ctypes.

Records cross the C boundary as JSON with named fields (the names of the
engine's C++ structs: ``ConvParams``, ``KernelKey``, ``CudnnAlgo``,
``AlgoPerf``), never as positional arrays; enums cross as their names
(``"forward"``, ``"NHWC"``, ``"float32"``, ``"powerOfTwo"``, ``"all"``).
"""

import ctypes
import json
import os
import warnings

import tensorflow as tf

LIBRARY_NAME = "_ucudnn_ops.so"
LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
_BUILD_HINT = "build it with `make build` in the tf_ucudnn checkout (or install the wheel)"

# C callbacks (see cc/engine/division_groups.h and plan_records.h).
_DIVISION_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int64)
_PLAN_LISTENER = ctypes.CFUNCTYPE(None)


def _tf_major_minor(version):
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _load():
    if not os.path.exists(LIBRARY_PATH):
        raise ImportError(f"tf_ucudnn's op library {LIBRARY_PATH} is missing: {_BUILD_HINT}.")
    # tf.load_op_library must dlopen the library first: it collects the ops
    # registered while the library loads.
    try:
        op_module = tf.load_op_library(LIBRARY_PATH)
    except tf.errors.NotFoundError as e:
        raise ImportError(f"could not load {LIBRARY_PATH} ({e}): {_BUILD_HINT}.") from e
    lib = ctypes.CDLL(LIBRARY_PATH)
    major, minor = ctypes.c_int32(), ctypes.c_int32()
    lib.ucudnn_built_for_tf(ctypes.byref(major), ctypes.byref(minor))
    built = (major.value, minor.value)
    running = _tf_major_minor(tf.__version__)
    if built != running:
        raise ImportError(
            f"tf_ucudnn's op library was built for TensorFlow {built[0]}.{built[1]} but "
            f"TensorFlow {tf.__version__} is installed: rebuild it ({_BUILD_HINT}) or "
            f"install tensorflow=={built[0]}.{built[1]}.*.")
    _declare(lib)
    return op_module, lib


def _declare(lib):
    i32, i64, text, doc = ctypes.c_int32, ctypes.c_int64, ctypes.c_char_p, ctypes.c_void_p
    signatures = {
        # name: (argument types, result type); `doc` is a JSON document to free.
        "ucudnn_free": ([doc], None),
        "ucudnn_micro_batch_sizes": ([text, i64, ctypes.POINTER(i64), i64], i64),
        "ucudnn_plan": ([text], doc),
        "ucudnn_float_accumulator_bytes": ([i64], i64),
        "ucudnn_plan_records": ([], doc),
        "ucudnn_clear_plan_records": ([], None),
        "ucudnn_cudnn_version": ([], doc),
        "ucudnn_kernels": ([], doc),
        "ucudnn_tables": ([], doc),
        "ucudnn_seed_kernel": ([text], doc),
        "ucudnn_set_kernel_limit": ([i64, i64], doc),
        "ucudnn_set_division_callback": ([_DIVISION_CALLBACK], None),
        "ucudnn_set_plan_listener": ([_PLAN_LISTENER], None),
        "ucudnn_rewrite_stats": ([ctypes.POINTER(i64)] * 3, None),
    }
    for name, (argtypes, restype) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype



def _xla_kernels_missing():
    """Whether TensorFlow made its XLA JIT kernels before the op library
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


ops, _lib = _load()
# Checked where the library loads, so that every way in (import tf_ucudnn, the
# tf-ucudnn command, a benchmark worker) warns alike.
if _xla_kernels_missing():
    warnings.warn("tf_ucudnn was imported after TensorFlow ran its first op, so tf_ucudnn's XLA "
                  "kernels are not registered: functions compiled with XLA (jit_compile=True, "
                  "and Keras' jit_compile='auto' on a GPU) that use tf_ucudnn's ops will fail "
                  "with \"No registered 'Ucudnn>Conv2D' OpKernel for XLA_*_JIT devices\". "
                  "Import tf_ucudnn before running any TensorFlow op.", stacklevel=2)


class EngineError(ValueError):
    """The engine refused a request; the message is the engine's."""


def _call(fn, *args):
    """Calls a C function that returns a JSON document; returns it parsed.

    Raises:
      EngineError: the document is ``{"error": message}``.
    """
    pointer = fn(*args)
    if not pointer:
        raise MemoryError(f"{fn.__name__}: the engine could not allocate its answer")
    try:
        answer = json.loads(ctypes.string_at(pointer).decode())
    finally:
        _lib.ucudnn_free(pointer)
    if isinstance(answer, dict) and "error" in answer:
        raise EngineError(answer["error"])
    return answer


def _request(value):
    return json.dumps(value).encode()


def cudnn_version():
    """The cuDNN version the library loaded, e.g. ``"9.19.0"`` (``""`` without
    cuDNN; loads cuDNN on the first call)."""
    return _call(_lib.ucudnn_cudnn_version)["cudnn"]


def micro_batch_sizes(policy, batch_size):
    """The sizes a batch-size policy allows for ``batch_size`` samples, ascending.

    Args:
      policy: ``"undivided"``, ``"powerOfTwo"`` or ``"all"``.
      batch_size: N, a positive int64.

    Returns:
      A list of ints (memory is by the answer: only as many as the policy allows).

    Raises:
      EngineError: an unknown policy.
    """
    name = policy.encode()
    count = _lib.ucudnn_micro_batch_sizes(name, batch_size, None, 0)
    if count < 0:
        raise EngineError(f"unknown batch-size policy {policy!r}")
    out = (ctypes.c_int64 * count)()
    _lib.ucudnn_micro_batch_sizes(name, batch_size, out, count)
    return list(out)


def plan(table, batch_size, *, policy, mode, workspace_limit=0, accumulator_bytes=0):
    """The engine's planner (``cc/engine/planner.cc``) on a benchmark table.

    Args:
      table: rows ``{"size", "algo", "time_ms", "workspace_bytes"}``; ``algo``
        is the caller's int index (int32), handed back in the plans; times in
        ms, workspaces in bytes.
      batch_size: N, samples.
      policy: the batch-size policy's name.
      mode: ``"best"`` (Workspace Reuse within ``workspace_limit`` bytes: zero
        or one plan) or ``"front"`` (the Pareto front).
      workspace_limit: bytes, for ``"best"``.
      accumulator_bytes: bytes of the float32 accumulator that a plan of
        several micro-batches holds in its workspace (float16/bfloat16
        backward-filter; :func:`float_accumulator_bytes`); 0: none.

    Returns:
      A list of plans, each ``{"micro_batches": [{"size", "algo"}, ...],
      "workspace_bytes", "accumulator_bytes"}`` (bytes, the accumulator
      included); or None when ``batch_size`` is too large to plan for this table.

    Raises:
      EngineError: a malformed request.
    """
    answer = _call(_lib.ucudnn_plan, _request(dict(
        table=table, batch_size=batch_size, policy=policy, mode=mode,
        workspace_limit=workspace_limit, accumulator_bytes=accumulator_bytes)))
    if answer.get("too_large"):
        return None
    return answer["plans"]


def float_accumulator_bytes(filter_elements):
    """Bytes of the float32 accumulator of a float16/bfloat16 backward-filter
    plan of several micro-batches, for a filter of ``filter_elements``.

    Raises:
      EngineError: a negative or too large count.
    """
    got = _lib.ucudnn_float_accumulator_bytes(filter_elements)
    if got < 0:
        raise EngineError(f"filter_elements must be in [0, 2**60], got {filter_elements}")
    return got


def plan_records():
    """The plan records of this process (``cc/engine/plan_records.h``),
    a list of dicts as :func:`tf_ucudnn.plans` documents them."""
    return _call(_lib.ucudnn_plan_records)


def clear_plan_records():
    """Forgets the plan records (the kernels keep their plans)."""
    _lib.ucudnn_clear_plan_records()


def kernels():
    """Every planned GPU kernel of this process with its tables and Pareto front.

    Returns:
      A list of dicts: ``id`` (for :func:`set_kernel_limit`), ``device`` (GPU
      ordinal), ``pass``, ``shape`` (the convolution as text), ``key`` (what
      the kernel's benchmark table holds for: ``pass``, ``conv`` (the
      ``ConvParams`` fields by name: ``batch``, ``in_channels``, ...,
      ``layout``, ``dtype``), ``allow_tf32``, ``deterministic``,
      ``workspace_limit`` (the op's, bytes), ``policy``,
      ``forced_micro_batch``, ``engines``, ``graph``: ``search``, ``layouts``,
      ``prune_factor``, the ``UCUDNN_GRAPH_*`` knobs it was searched with),
      ``total_workspace`` (bytes of its
      Workspace Division group, 0 for none), ``seeded`` (it planned from the
      stored table of its convolution: the database's, or one a kernel of
      another N measured), ``algos`` (candidates: ``algo``, ``math_type``,
      ``deterministic`` and, for a graph-API engine, ``engine``: ``id``,
      ``transposed``, ``knobs`` as ``[knob, value]`` pairs), ``table``
      (``{"size", "algo" (index into algos), "time_ms", "workspace_bytes"}``
      rows), ``planned_limit`` (the limit its plan uses now, bytes), ``plan``
      and ``front`` (plans: ``time_ms``, ``workspace_bytes``,
      ``micro_batches`` of ``size``, ``algo`` (name), ``workspace_bytes``,
      ``time_ms``). Empty without cuDNN.
    """
    return _call(_lib.ucudnn_kernels)


def tables():
    """The stored benchmark tables of this process: one per convolution and
    settings, whatever N (the sizes every kernel of it measured or took from
    the database). Kernels of a new N plan from them and benchmark only the
    sizes they lack.

    Returns:
      A list of dicts: ``shape`` (the convolution as text, without N),
      ``key`` (as in :func:`kernels`, with ``conv["batch"]`` 0; its
      ``policy`` and ``forced_micro_batch`` do not matter), ``algos`` and
      ``table`` (as in :func:`kernels`). Empty without cuDNN.
    """
    return _call(_lib.ucudnn_tables)


def seed_kernel(record):
    """Hands the benchmark table of one convolution to the engine: kernels
    created later with ``record["key"]`` (whatever their N, batch-size policy
    or GPU) plan from its sizes and benchmark only the sizes it lacks.

    Args:
      record: ``{"key", "algos", "table"}`` as :func:`tables` names them.

    Raises:
      EngineError: a malformed record, or a library without cuDNN.
    """
    _call(_lib.ucudnn_seed_kernel, _request(record))


def set_kernel_limit(kernel_id, workspace_limit):
    """Replans kernel ``kernel_id`` (an ``id`` of :func:`kernels`) within
    ``workspace_limit`` bytes from its benchmark table and records the plan.

    Raises:
      EngineError: an unknown id, no plan that fits, or no cuDNN.
    """
    _call(_lib.ucudnn_set_kernel_limit, kernel_id, workspace_limit)


OVERHEAD_LIBRARY_NAME = "_ucudnn_overhead.so"
_overhead_lib = None


def _load_overhead():
    """The benchmark-only library of the overhead measurement
    (``cc/engine/overhead.cc``), loaded once beside the op library, whose
    kernels it runs; it is not in the wheel.

    Raises:
      EngineError: the library is missing.
    """
    global _overhead_lib
    if _overhead_lib is None:
        path = os.path.join(os.path.dirname(LIBRARY_PATH), OVERHEAD_LIBRARY_NAME)
        if not os.path.exists(path):
            raise EngineError(
                f"the overhead measurement's library {path} is missing: build it with "
                "`make build-bench` in the tf_ucudnn checkout (it is not part of the wheel)")
        lib = ctypes.CDLL(path)
        lib.ucudnn_overhead_time.argtypes = [ctypes.c_int64, ctypes.c_int32]
        lib.ucudnn_overhead_time.restype = ctypes.c_void_p
        _overhead_lib = lib
    return _overhead_lib


def time_overhead(kernel_id, iters):
    """Times kernel ``kernel_id``'s plan (one micro-batch) against a direct
    cuDNN call, ``iters`` calls each, through ``_ucudnn_overhead.so``
    (``make build-bench``).

    Returns:
      A dict of ms per call: ``plan_ms`` (through the engine), ``direct_ms``
      (the direct call), ``transform_ms`` (the filter's layout transform),
      ``plan_host_ms`` and ``direct_host_ms`` (host time to enqueue each).

    Raises:
      EngineError: the overhead library is missing, an unknown id, a plan of
        several micro-batches, or no cuDNN.
    """
    return _call(_load_overhead().ucudnn_overhead_time, kernel_id, iters)


def rewrite_stats():
    """The Grappler rewriter's counters: a dict of ``rewritten``,
    ``fused_rewritten`` and ``fused_left`` node counts."""
    values = [ctypes.c_int64() for _ in range(3)]
    _lib.ucudnn_rewrite_stats(*[ctypes.byref(v) for v in values])
    return dict(zip(("rewritten", "fused_rewritten", "fused_left"), (v.value for v in values)))


# The C function pointers, kept alive for as long as the library may call them.
_callbacks = {}


def set_division_callback(divide):
    """Makes ``divide(device, total_workspace)`` the engine's run-time Workspace
    Division (``cc/engine/division_groups.h``). It runs on the
    engine's threads and must not raise."""
    _callbacks["division"] = _DIVISION_CALLBACK(divide)
    _lib.ucudnn_set_division_callback(_callbacks["division"])


def set_plan_listener(listener):
    """Makes ``listener()`` run after each new plan record (e.g. progress)."""
    _callbacks["plans"] = _PLAN_LISTENER(listener)
    _lib.ucudnn_set_plan_listener(_callbacks["plans"])
