"""Runs the sweeps of ``tf-ucudnn bench memory-cap``: in parallel, one per
GPU, each run a worker process, with progress lines and the table at the end."""

import concurrent.futures
import os
import queue
import shutil
import subprocess
import sys
import threading

from tf_ucudnn.bench.memory_cap.launcher import launch
from tf_ucudnn.bench.memory_cap.search import run_sweep
from tf_ucudnn.bench.memory_cap.settings import (DEFAULT_BISECT_STEPS, DEFAULT_EPOCHS,
                                                 DEFAULT_LIMITS, DEFAULT_MAX_BATCH,
                                                 DEFAULT_MODES, DEFAULT_STEPS_PER_EPOCH,
                                                 check_steps_per_execution, setting_label,
                                                 sweeps_of)
from tf_ucudnn.bench.memory_cap.summary import print_table, summarize
from tf_ucudnn.bench.models.specs import model_spec
from tf_ucudnn.units import format_bytes

_STEP_DOWN = "running a plan that needs"  # in tf_ucudnn's line for a kernel that stepped down


def run_parallel(sweeps, run_one, gpus):
    """Runs independent sweeps at once, one per GPU.

    Args:
      sweeps: the sweeps (any objects).
      run_one: ``run_one(sweep, gpu)`` runs one sweep pinned to ``gpu`` (an
        entry of ``gpus``) and returns its result.
      gpus: the devices to share out: ``CUDA_VISIBLE_DEVICES`` values, or
        ``[None]`` to run one sweep at a time without pinning.

    Returns:
      ``run_one``'s results, in the order of ``sweeps``.
    """
    free = queue.Queue()
    for gpu in gpus or [None]:
        free.put(gpu)

    def task(sweep):
        gpu = free.get()
        try:
            return run_one(sweep, gpu)
        finally:
            free.put(gpu)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(gpus or [None]))) as pool:
        return list(pool.map(task, sweeps))


def visible_gpus(environ=None, nvidia_smi=None):
    """The GPUs a sweep can be pinned to, found without starting TensorFlow.

    ``CUDA_VISIBLE_DEVICES`` if set (its entries, indices or UUIDs; empty or
    ``-1``: none), else the indices ``nvidia-smi`` lists.

    Args:
      environ: the environment (None: ``os.environ``).
      nvidia_smi: the path of ``nvidia-smi`` (None: found on ``PATH``).

    Returns:
      A list of ``CUDA_VISIBLE_DEVICES`` values, maybe empty.
    """
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        return [] if entries[:1] == ["-1"] else entries
    nvidia_smi = nvidia_smi or shutil.which("nvidia-smi")
    if not nvidia_smi:
        return []
    try:
        out = subprocess.run([nvidia_smi, "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()]


def _run_line(sweep, r):
    where = "" if r.get("gpu") is None else f"[GPU {r['gpu']}] "
    what = (f"{where}{sweep['model']} at {format_bytes(sweep['cap'])}, "
            f"{setting_label(sweep['mode'], sweep['limit'])}, N={r['batch']}"
            + (f" run {r['run'] + 1}" if r["run"] else ""))
    if r["status"] == "ok":
        return (f"  {what}: {r['step_ms']:.1f} ms/step, {r['images_per_s']:.1f} img/s, first "
                f"step {r['first_step_s']:.1f} s"
                + ("" if r.get("peak_bytes") is None else
                   f", peak {r['peak_bytes'] / 2**30:.2f} GiB") + _step_downs(r))
    message = (r.get("message") or "").replace("\n", " ")
    return f"  {what}: {r['status']}" + (f" ({message[-160:]})" if message else "")


def _step_downs(r):
    count = sum(_STEP_DOWN in line for line in r.get("ucudnn_log", ()))
    return f", {count} kernel{'s' if count != 1 else ''} stepped down" if count else ""


def run_memory_cap(models, caps, *, modes=DEFAULT_MODES, limits=DEFAULT_LIMITS,
                   start_batch=None, max_batch=DEFAULT_MAX_BATCH, bisect_steps=DEFAULT_BISECT_STEPS,
                   steps_per_epoch=DEFAULT_STEPS_PER_EPOCH, epochs=DEFAULT_EPOCHS, runs=1,
                   gpus=None, timeout=1800, precision="float32", steps_per_execution=1,
                   prefetch_to_device=False, launcher=None, progress=True, on_sweep=None):
    """Runs every sweep, in parallel over ``gpus``; prints progress and the table.

    Args:
      models: names of :data:`tf_ucudnn.bench.models.MODELS`.
      caps: memory caps, bytes (whole MiB).
      modes, limits: the settings (:func:`sweeps_of`).
      start_batch: every sweep's first N; None: each model's own.
      max_batch, bisect_steps, runs: the search (:func:`run_sweep`).
      steps_per_epoch, epochs, precision, steps_per_execution, prefetch_to_device:
        each run's (:func:`run_worker`).
      gpus: ``CUDA_VISIBLE_DEVICES`` values to share the sweeps out over, one
        sweep per GPU at a time; None or empty: one sweep at a time, unpinned.
      timeout: seconds per process.
      launcher: runs one process: ``launcher(sweep, batch, gpu=, timeout=,
        steps_per_epoch=, epochs=, precision=, steps_per_execution=,
        prefetch_to_device=)`` returns a run dict; None:
        :func:`launch` (tests pass a fake).
      progress: show a progress bar over the sweeps (``keras.utils.Progbar``).
      on_sweep: called after each run with the sweeps so far: the finished
        ones, then those still running with the runs they have and
        ``unfinished: True`` (the command saves them, so that a run cut off
        by a time limit keeps every N it measured).

    Returns:
      :func:`run_sweep`'s results, in the order of :func:`sweeps_of`.
    """
    for model in models:
        model_spec(model)
    check_steps_per_execution(steps_per_execution, steps_per_epoch)
    launcher = launcher or launch
    sweeps = sweeps_of(models, caps, modes, limits)
    lock = threading.Lock()
    bar = None
    if progress and sweeps:
        import keras

        bar = keras.utils.Progbar(len(sweeps), unit_name="sweep")
    finished = []
    running = {}  # id of a sweep in progress -> (the sweep, its runs so far)

    def so_far():
        return list(finished) + [dict(s, runs=list(rs), unfinished=True)
                                 for s, rs in running.values()]

    def on_run(sweep, r):
        with lock:
            print(_run_line(sweep, r), flush=True)
            running.setdefault(id(sweep), (sweep, []))[1].append(r)
            if on_sweep:
                on_sweep(so_far())

    def run_one(sweep, gpu):
        def measure(s, batch):
            try:
                return launcher(s, batch, gpu=gpu, timeout=timeout,
                                steps_per_epoch=steps_per_epoch, epochs=epochs,
                                precision=precision, steps_per_execution=steps_per_execution,
                                prefetch_to_device=prefetch_to_device)
            except Exception as e:  # noqa: BLE001: the parent's own fault ends this run only
                return dict(status="error", gpu=gpu,
                            message=f"launching the worker: {type(e).__name__}: {e}"[-600:])

        result = run_sweep(sweep, measure, start_batch=start_batch, max_batch=max_batch,
                           bisect_steps=bisect_steps, runs=runs, on_run=on_run)
        result["gpu"] = gpu
        with lock:
            running.pop(id(sweep), None)
            finished.append(result)
            if on_sweep:
                on_sweep(so_far())
            if bar is not None:
                bar.update(len(finished))
                sys.stdout.write("\n")
                sys.stdout.flush()
        return result

    results = run_parallel(sweeps, run_one, list(gpus or []) or [None])
    print()
    print_table(summarize(results))
    return results
