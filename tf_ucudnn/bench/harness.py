"""The benchmark harness: what every measurement of tf_ucudnn shares.

Timing a function from a synced device to a synced device (:func:`time_ms`),
the environment a figure was measured in (:func:`describe_environment`),
geometric means and relative errors, and writing a report as JSON
(:func:`write_json`). ``tf-ucudnn bench`` and the scripts in ``benchmarks/``
use these rather than their own.
"""

import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import time

from tf_ucudnn import environment

PASSES = ("forward", "backward-data", "backward-filter")
# The folder that holds the tf_ucudnn package: worker processes import it from there.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sync_devices(outputs=()):
    """Waits for the device to finish queued work.

    Uses ``tf.test.experimental.sync_devices()`` where it exists; otherwise
    copies one scalar that depends on every output to the host.

    Args:
      outputs: tensors of the last call (used by the fallback).
    """
    import tensorflow as tf

    sync = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
    if sync is not None:
        sync()
    elif outputs:
        float(tf.add_n([tf.cast(tf.reshape(t, [-1])[0], tf.float32) for t in outputs]))

def time_ms(fn, args, *, warmup, repeats, iters):
    """Median time of one call of ``fn(*args)`` in ms.

    Runs ``warmup`` calls, then ``repeats`` repeats of ``iters`` calls, each
    repeat timed from a synced device to a synced device.

    Args:
      fn: the function (a ``tf.function``).
      args: its arguments.
      warmup: untimed calls first.
      repeats: timed repeats.
      iters: calls per repeat.

    Returns:
      ``(median_ms, per_repeat_ms)``.
    """
    out = ()
    for _ in range(warmup):
        out = fn(*args)
    sync_devices(out)
    per_repeat = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            out = fn(*args)
        sync_devices(out)
        per_repeat.append(1e3 * (time.perf_counter() - start) / iters)
    return statistics.median(per_repeat), per_repeat


def relative_error(got, want):
    """Relative L2 error ``|got - want| / |want|`` of two arrays (float64)."""
    import numpy as np

    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def geometric_mean(values):
    """Geometric mean of positive numbers (None if empty)."""
    values = list(values)
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def timing_variables():
    """The set environment variables that change what is timed.

    Returns:
      ``{name: value}`` for tf_ucudnn's knobs (``UCUDNN_*``), TensorFlow's
      cuDNN settings (``TF_CUDNN_*``, which workers set per limit as well) and
      ``CUDA_MODULE_LOADING`` (with CUDA's default, lazy loading, stock TF's
      autotuner can time candidates' first, module-loading runs and pick a
      slower engine; see docs/benchmarks.md, §2), and XLA's flags
      (``XLA_FLAGS``, ``TF_XLA_FLAGS``: e.g. the memory limit its
      rematerialization plans within), and the CUDA driver's JIT cache
      (``CUDA_CACHE_*``: the fused kernels' run-time compiled plans come
      from it, which changes the first step's and the planning time).
    """
    others = {k: v for k, v in os.environ.items()
              if k.startswith("TF_CUDNN_") or k.startswith("CUDA_CACHE_")
              or k in ("CUDA_MODULE_LOADING", "XLA_FLAGS", "TF_XLA_FLAGS")}
    return dict(sorted({**environment.ucudnn_variables(), **others}.items()))


def describe_environment(on_gpu):
    """What a figure was measured on: a dict of ``python``, ``tensorflow``,
    ``build_info`` (TF's), ``host``, ``gpus`` (names and drivers from
    ``nvidia-smi``, else TF's device names), ``variables``
    (:func:`timing_variables`) and, with ``on_gpu``, ``cudnn`` (the version
    tf_ucudnn loaded)."""
    import tensorflow as tf

    env = dict(python=platform.python_version(), tensorflow=tf.__version__,
               build_info={k: v for k, v in tf.sysconfig.get_build_info().items()},
               host=platform.node())
    gpus = tf.config.list_physical_devices("GPU")
    names = []
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=60)
            names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
        except (OSError, subprocess.SubprocessError):
            names = []
    if not names and gpus:
        names = [tf.config.experimental.get_device_details(g).get("device_name", g.name)
                 for g in gpus]
    env["gpus"] = names
    env["variables"] = timing_variables()
    if on_gpu:
        import tf_ucudnn

        env["cudnn"] = tf_ucudnn.cudnn_version()
    return env


def write_json(path, report, *, say=True):
    """Writes ``report`` (a JSON-ready dict) to ``path``, indented, and says
    so (unless ``say`` is False). The file is replaced whole (written beside
    it, then renamed), so a process killed while writing leaves the last one."""
    partial = path + ".partial"
    with open(partial, "w") as f:
        json.dump(report, f, indent=2)
    os.replace(partial, path)
    if say:
        print(f"wrote {path}")


def with_package_on_path(env):
    """``env`` (a dict of environment variables) with :data:`PACKAGE_ROOT`
    first on ``PYTHONPATH``, so that a worker imports this very package."""
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    return env
