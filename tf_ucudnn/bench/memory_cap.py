"""Memory-cap mode of the benchmark: when GPU memory is the limit.

``tf-ucudnn bench memory-cap --models vgg16,unet --caps 8GiB,16GiB`` finds, per
model, memory cap and setting, the largest mini-batch that trains and the
throughput it gives. A setting is a mode of :data:`MODES` (at each workspace
limit of ``--limits`` for tf_ucudnn's):

* ``stock``: the Keras model compiled with ``jit_compile=False``;
* ``stock-xla``: compiled with ``jit_compile=True``;
* ``ucudnn``: ``tf_ucudnn.enable_rewrite(workspace_limit=limit)``, then
  ``jit_compile=False`` (the Grappler rewrite);
* ``ucudnn-xla``: the same with ``jit_compile=True`` (the rewrite routes the
  model's ``keras.layers.Conv2D`` layers to tf_ucudnn's XLA custom calls).

A limit is a byte count or ``auto`` (passed to ``enable_rewrite`` as it is).

Each measurement is one worker process (this module with ``--worker``): it
caps TensorFlow's GPU allocator at the cap before the GPU starts
(``tf.config.set_logical_device_configuration`` with ``memory_limit``) and
trains as users do: ``model.fit`` over a ``tf.data`` pipeline of one random
mini-batch (:func:`tf_ucudnn.bench.models.synthetic_batch`), SGD, the model's
loss. The first ``fit`` of one step (tracing, compiling, planning) is timed
as the first step; then ``fit(steps_per_epoch=S, epochs=R)`` with the
device synced at each epoch's start and end gives R epoch times, and the
step time is the median epoch over S. Peak memory is TF's allocator's
(``tf.config.experimental.get_memory_info``).

A sweep (one model, cap and setting) starts at ``--start-batch`` (default
the model's :attr:`~tf_ucudnn.bench.models.ModelSpec.start_batch`), doubles N
until it fails or reaches ``--max-batch``, then bisects ``--bisect-steps``
times between the largest N that trained and the smallest that failed
(:func:`search_batch`). If the start fails with out-of-memory (or a
timeout), N halves until one trains. A failure is ``oom`` (a
``tf.errors.ResourceExhaustedError``, or another exception or a worker's
death whose message says out of memory: :func:`failure_status`),
``timeout`` or ``error``; never the benchmark's end. With ``--runs K`` each N runs in K processes: it trains if all
do, and the medians count.

Sweeps run in parallel, one per GPU (``--gpus``, else every visible GPU:
:func:`visible_gpus`), each worker pinned with ``CUDA_VISIBLE_DEVICES``; a
sweep's own processes run one after another. The table gives per sweep the
largest N, the best images/s and its N, and both against the better of
``stock`` and ``stock-xla`` at the same cap (:func:`summarize`); ``--json``
writes every run (:func:`report`), and ``PREFIX_memory_cap.png``
(:func:`tf_ucudnn.bench.figures.draw_memory_cap`) plots images/s against N.
"""

import concurrent.futures
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

from tf_ucudnn import table
from tf_ucudnn.bench import harness
from tf_ucudnn.bench.models import model_spec
from tf_ucudnn.units import format_bytes

KIND = "memory_cap"  # the JSON's "kind": figures.draw tells the reports apart by it
MODES = ("stock", "stock-xla", "ucudnn", "ucudnn-xla")
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
_LOG_LINES = 400  # tf_ucudnn's stderr lines that a run keeps (plans are one line each)
_STEP_DOWN = "running a plan that needs"  # in tf_ucudnn's line for a kernel that stepped down


def failure_status(message):
    """``"oom"`` if ``message`` (an exception's text or a worker's stderr)
    reads as an allocation that failed, else ``"error"``."""
    return "oom" if _OOM_PATTERN.search(message or "") else "error"


def limit_label(limit):
    """A workspace limit as the table and figure show it: ``64 MiB``, ``auto``; ``-`` for None."""
    if limit is None:
        return "-"
    return AUTO if limit == AUTO else format_bytes(limit)


def setting_label(mode, limit):
    """``stock``, ``stock-xla``, ``ucudnn 64 MiB``, ``ucudnn-xla auto``."""
    return mode if limit is None else f"{mode} {limit_label(limit)}"


def sweeps_of(models, caps, modes=MODES, limits=DEFAULT_LIMITS):
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


# --- The search --------------------------------------------------------------------------


def search_batch(trains, *, start, max_batch=DEFAULT_MAX_BATCH,
                 bisect_steps=DEFAULT_BISECT_STEPS):
    """The largest mini-batch size that trains, found cheaply.

    From ``start``, doubles N while it trains (up to ``max_batch``), then
    bisects ``bisect_steps`` times between the largest N that trained and
    the smallest that failed. If ``start`` fails with ``oom`` or
    ``timeout``, N halves until one trains (or 1 fails); an ``error`` there
    ends the search (it seldom depends on N, and each try is a process).

    Args:
      trains: ``trains(n)`` runs N and returns its status (:data:`STATUSES`).
      start: the first N, >= 1.
      max_batch: the largest N tried, >= 1.
      bisect_steps: bisection steps, >= 0.

    Returns:
      ``(largest, failed)``: the largest N that trained (None if none did)
      and the smallest N above it that failed (None if none did).

    Raises:
      ValueError: ``start`` or ``max_batch`` below 1, or ``bisect_steps`` below 0.
    """
    if start < 1 or max_batch < 1 or bisect_steps < 0:
        raise ValueError(f"need start >= 1, max_batch >= 1 and bisect_steps >= 0, got "
                         f"{start}, {max_batch} and {bisect_steps}")
    n = min(start, max_batch)
    status = trains(n)
    if status == "ok":
        good, bad = n, None
        while good < max_batch:
            n = min(2 * good, max_batch)
            if trains(n) != "ok":
                bad = n
                break
            good = n
    else:
        good, bad = None, n
        while status in ("oom", "timeout") and bad > 1:
            n = bad // 2
            status = trains(n)
            if status == "ok":
                good = n
                break
            bad = n
        if good is None:
            return None, bad
    for _ in range(bisect_steps):
        if bad is None or bad - good <= 1:
            break
        middle = (good + bad) // 2
        if trains(middle) == "ok":
            good = middle
        else:
            bad = middle
    return good, bad


def run_sweep(sweep, measure, *, start_batch=None, max_batch=DEFAULT_MAX_BATCH,
              bisect_steps=DEFAULT_BISECT_STEPS, runs=1, on_run=None):
    """One sweep: :func:`search_batch` with ``runs`` processes per N.

    Args:
      sweep: a dict of :func:`sweeps_of`.
      measure: ``measure(sweep, batch)`` runs one process and returns its
        run dict (``status`` and, where ``"ok"``, the timings; :func:`run_worker`).
      start_batch: the first N; None: the model's ``start_batch``.
      max_batch: the largest N tried.
      bisect_steps: bisection steps.
      runs: processes per N (>= 1): N trains if every one does; after the
        first that fails, N's other runs are skipped.
      on_run: called with each run dict as it comes (progress lines).

    Returns:
      ``sweep`` with ``runs``: every run dict in the order run, each with
      ``batch`` and ``run`` (its index among N's runs).
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    done = []

    def trains(batch):
        for i in range(runs):
            result = dict(measure(sweep, batch), batch=batch, run=i)
            done.append(result)
            if on_run:
                on_run(sweep, result)
            if result["status"] != "ok":
                return result["status"]
        return "ok"

    start = start_batch or model_spec(sweep["model"]).start_batch
    search_batch(trains, start=start, max_batch=max_batch, bisect_steps=bisect_steps)
    return dict(sweep, runs=done)


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


# --- One run, in a worker process --------------------------------------------------------


def cap_gpu_memory(cap):
    """Caps TensorFlow's allocator on the first visible GPU at ``cap`` bytes
    (whole MiB) and hides the other GPUs. Call before anything starts the GPU.

    Returns:
      A note for the run: the cap applied, or that there is no GPU (on the
      CPU nothing is capped).

    Raises:
      RuntimeError: TensorFlow's GPU has started already.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "no GPU: the memory cap is not applied (CPU run)"
    tf.config.set_visible_devices(gpus[0], "GPU")
    tf.config.set_logical_device_configuration(
        gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=cap >> 20)])
    return f"TensorFlow's GPU allocator capped at {format_bytes(cap >> 20 << 20)}"


def _memory_info(key):
    import tensorflow as tf

    try:
        return tf.config.experimental.get_memory_info("GPU:0")[key]
    except (ValueError, RuntimeError, tf.errors.OpError):
        return None  # no GPU


def run_worker(model, mode, limit, cap, batch, *, steps_per_epoch=DEFAULT_STEPS_PER_EPOCH,
               epochs=DEFAULT_EPOCHS, precision="float32", input_size=None):
    """One run in this process: trains ``model`` at ``batch`` under ``cap``.

    Caps the GPU first (:func:`cap_gpu_memory`), so it must run before
    TensorFlow's GPU starts, once per process; it sets the Keras dtype
    policy and, for tf_ucudnn's modes, turns the rewrite on.

    Args:
      model: a name of :data:`tf_ucudnn.bench.models.MODELS`.
      mode: a name of :data:`MODES`.
      limit: tf_ucudnn's workspace limit (bytes or ``"auto"``; None for the stock modes).
      cap: the memory cap, bytes.
      batch: the mini-batch size N.
      steps_per_epoch: steps per timed epoch (S).
      epochs: timed epochs (R): the step time is the median epoch / S.
      precision: a Keras dtype policy (``float32``, ``mixed_float16``, ...).
      input_size: the model's input height and width (None: its own; tests).

    Returns:
      The run dict: ``status`` (``"ok"``, or ``"oom"`` / ``"error"`` with
      ``message``, the end of the exception's text), ``note`` (the cap),
      ``first_step_s``, ``step_ms``, ``step_ms_repeats``, ``images_per_s``
      (N / step time), ``peak_bytes`` (the whole run, first step included:
      what decides OOM), ``steady_peak_bytes`` (the timed epochs), ``loss``;
      with tf_ucudnn, ``rewrite_stats``. Peaks are None without a GPU.
    """
    import tensorflow as tf

    result = dict(status="ok")
    try:
        result["note"] = cap_gpu_memory(cap)
        result.update(_train(model, mode, limit, batch, steps_per_epoch=steps_per_epoch,
                             epochs=epochs, precision=precision, input_size=input_size))
    except tf.errors.ResourceExhaustedError as e:
        result.update(status="oom", message=_message_end(e))
    except Exception as e:  # noqa: BLE001: a run's failure is a result, never a crash
        result.update(status=failure_status(f"{type(e).__name__}: {e}"), message=_message_end(e))
    result.setdefault("peak_bytes", _memory_info("peak"))
    return result


def _message_end(exception):
    return f"{type(exception).__name__}: {exception}".strip()[-_MESSAGE_CHARS:]


def _train(model_name, mode, limit, batch, *, steps_per_epoch, epochs, precision, input_size):
    """:func:`run_worker`'s training; returns the timings."""
    import keras
    import tensorflow as tf

    from tf_ucudnn.bench import models

    keras.mixed_precision.set_global_policy(precision)
    if mode.startswith("ucudnn"):
        import tf_ucudnn

        tf_ucudnn.enable_rewrite(workspace_limit=limit)
    model = models.build_model(model_name, input_size)
    # Keras wraps SGD in a LossScaleOptimizer itself under mixed_float16.
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=models.loss_for(model_name),
                  jit_compile=mode.endswith("xla"))
    x, y = models.synthetic_batch(model_name, batch, model.output_shape, input_size=input_size)
    data = tf.data.Dataset.from_tensors((x, y)).repeat().prefetch(tf.data.AUTOTUNE)
    del x, y

    start = time.perf_counter()
    model.fit(data, steps_per_epoch=1, epochs=1, verbose=0, shuffle=False)
    harness.sync_devices()
    first_step_s = time.perf_counter() - start
    run_peak = _memory_info("peak")
    if run_peak is not None:
        tf.config.experimental.reset_memory_stats("GPU:0")

    timer = _epoch_timer()
    history = model.fit(data, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=0,
                        shuffle=False, callbacks=[timer])
    step_ms = [1e3 * t / steps_per_epoch for t in timer.seconds]
    steady_peak = _memory_info("peak")
    median_ms = statistics.median(step_ms)
    result = dict(first_step_s=first_step_s, step_ms=median_ms, step_ms_repeats=step_ms,
                  images_per_s=1e3 * batch / median_ms, steady_peak_bytes=steady_peak,
                  peak_bytes=None if run_peak is None else max(run_peak, steady_peak),
                  loss=float(history.history["loss"][-1]))
    if mode.startswith("ucudnn"):
        import tf_ucudnn

        result["rewrite_stats"] = tf_ucudnn.rewrite_stats()
    return result


def _epoch_timer():
    """A Keras callback that times each epoch from a synced device to a synced device."""
    import keras

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            harness.sync_devices()
            self._start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            harness.sync_devices()
            self.seconds.append(time.perf_counter() - self._start)

    return EpochTimer()


# --- The parent's side -------------------------------------------------------------------


def launch(sweep, batch, *, gpu=None, timeout=1800, steps_per_epoch=DEFAULT_STEPS_PER_EPOCH,
           epochs=DEFAULT_EPOCHS, precision="float32"):
    """Runs :func:`run_worker` in a new Python process; returns its run dict.

    Args:
      sweep: a dict of :func:`sweeps_of` (model, cap, mode, limit).
      batch: the mini-batch size N.
      gpu: a ``CUDA_VISIBLE_DEVICES`` value for the process (None: inherited).
      timeout: seconds before the process is killed.
      steps_per_epoch, epochs, precision: as :func:`run_worker`'s.

    Returns:
      The worker's run dict (it reports a ``ResourceExhaustedError`` and
      exits cleanly), or, where it timed out or failed without a result,
      ``status`` ``"timeout"``, ``"oom"`` (an out-of-memory message in its
      stderr) or ``"error"``, and ``message`` (the exit status and the end of
      stderr). ``wall_s``: the process's seconds, start-up included.
    """
    spec = dict(model=sweep["model"], mode=sweep["mode"], limit=sweep["limit"], cap=sweep["cap"],
                batch=batch, steps_per_epoch=steps_per_epoch, epochs=epochs, precision=precision)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.setdefault("UCUDNN_DATABASE", "off")  # each run plans afresh, as the model mode's
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    env = harness.with_package_on_path(env)
    cmd = [sys.executable, "-m", "tf_ucudnn.bench.memory_cap", "--worker", json.dumps(spec)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return _with_ucudnn_log(dict(status="timeout", message=f"timed out after {timeout} s",
                                     gpu=gpu, wall_s=time.perf_counter() - start), e.stderr)
    return dict(parse_worker_output(done.returncode, done.stdout, done.stderr), gpu=gpu,
                wall_s=time.perf_counter() - start)


def ucudnn_log(stderr):
    """tf_ucudnn's own lines of a worker's stderr, in order.

    These are the kernels that ran a smaller plan than planned (one line per
    kernel: ``I tf_ucudnn: workspace_limit=auto: … running a plan that
    needs …``, or ``W`` where an allocation failed) and, with
    ``UCUDNN_DEBUG_OUTPUT=1`` in the benchmark's environment (workers inherit
    it), each plan with its workspace limit and planning notes, and after
    each ``tf_ucudnn: benchmarked …`` line its `` host: …`` line (where the
    planning's host seconds went: heuristics queries, plan builds). The
    debug output's per-candidate lines are left out.

    Args:
      stderr: the worker's stderr (str, bytes, or None after a timeout).

    Returns:
      A list of at most 400 lines (str).
    """
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    kept, after_benchmark = [], False
    for line in (stderr or "").splitlines():
        if "tf_ucudnn: " in line:
            kept.append(line)
            after_benchmark = "tf_ucudnn: benchmarked " in line
        else:
            if after_benchmark and line.startswith(" host: "):
                kept.append(line)
            after_benchmark = False
    return kept[:_LOG_LINES]


def _with_ucudnn_log(run, stderr):
    """``run`` with ``ucudnn_log`` (:func:`ucudnn_log` of ``stderr``) where it has lines."""
    log = ucudnn_log(stderr)
    return dict(run, ucudnn_log=log) if log else run


def parse_worker_output(returncode, stdout, stderr):
    """A worker's run dict from its exit status and output.

    The last ``RESULT {json}`` line of ``stdout`` wins, whatever the exit
    status (a worker may crash while TensorFlow shuts down). Without one,
    the run failed: ``"oom"`` if ``stderr`` says out of memory, else
    ``"error"``, with the exit status and the end of ``stderr``. Either way
    tf_ucudnn's own lines of ``stderr`` (:func:`ucudnn_log`), where there
    are any, are kept as ``ucudnn_log``.
    """
    lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
    if lines:
        result = json.loads(lines[-1][len("RESULT "):])
    else:
        tail = stderr.strip()[-_MESSAGE_CHARS:]
        result = dict(status=failure_status(tail), message=f"exit status {returncode}: {tail}")
    return _with_ucudnn_log(result, stderr)


def _best(runs):
    """Per N that trained in all its runs: the medians; returns ``{N: dict}``."""
    by_batch = {}
    for r in runs:
        by_batch.setdefault(r["batch"], []).append(r)
    trained = {}
    for batch, group in by_batch.items():
        if any(r["status"] != "ok" for r in group):
            continue
        step_ms = statistics.median(r["step_ms"] for r in group)
        peaks = [r["peak_bytes"] for r in group if r.get("peak_bytes") is not None]
        trained[batch] = dict(step_ms=step_ms, images_per_s=1e3 * batch / step_ms,
                              first_step_s=statistics.median(r["first_step_s"] for r in group),
                              peak_bytes=max(peaks) if peaks else None, runs=len(group))
    return trained


def summarize(sweeps):
    """One row per sweep: the largest N, the best throughput and both
    against the stock modes at the same model and cap.

    Args:
      sweeps: results of :func:`run_sweep`.

    Returns:
      Dicts of ``model``, ``cap``, ``mode``, ``limit``, ``setting`` (its
      label), ``largest_batch`` (None if no N trained), ``failed_batch``
      (the smallest N above it that failed; None if none did) and its
      ``failure`` (status and ``failure_message``), ``best_images_per_s``
      and ``best_batch`` (where N / step time peaks; medians of the runs),
      ``step_ms``, ``first_step_s`` (at ``best_batch``), ``peak_bytes`` (at
      ``largest_batch``, the largest of its runs), and ``images_per_s_vs_stock``
      and ``batch_vs_stock``: the ratios to the better of ``stock`` and
      ``stock-xla`` (None where neither trained or it was not run), and
      ``unfinished`` (True for a sweep cut off while running: its largest N
      is a lower bound).
    """
    rows = []
    for sweep in sweeps:
        trained = _best(sweep["runs"])
        largest = max(trained, default=None)
        failures = [r for r in sweep["runs"]
                    if r["status"] != "ok" and (largest is None or r["batch"] > largest)]
        failed = min(failures, key=lambda r: r["batch"], default=None)
        best = max(trained, key=lambda n: trained[n]["images_per_s"], default=None)
        at_best = trained.get(best, {})
        rows.append(dict(
            model=sweep["model"], cap=sweep["cap"], mode=sweep["mode"], limit=sweep["limit"],
            setting=setting_label(sweep["mode"], sweep["limit"]), largest_batch=largest,
            failed_batch=failed and failed["batch"], failure=failed and failed["status"],
            failure_message=failed and failed.get("message"),
            best_images_per_s=at_best.get("images_per_s"), best_batch=best,
            step_ms=at_best.get("step_ms"), first_step_s=at_best.get("first_step_s"),
            peak_bytes=trained[largest]["peak_bytes"] if largest else None,
            unfinished=bool(sweep.get("unfinished"))))
    for row in rows:
        stock = [r for r in rows if r["mode"] in STOCK_MODES and r["model"] == row["model"]
                 and r["cap"] == row["cap"]]
        for key, ratio in (("best_images_per_s", "images_per_s_vs_stock"),
                           ("largest_batch", "batch_vs_stock")):
            reference = max((r[key] for r in stock if r[key]), default=None)
            row[ratio] = row[key] / reference if reference and row[key] else None
    return rows


def print_table(rows):
    """Prints :func:`summarize`'s rows: per model and cap, each setting's
    largest N, where it failed, its best images/s and their ratios to stock."""
    header = ("model", "cap", "setting", "largest N", "failed at", "best img/s", "at N",
              "vs stock", "N vs stock", "first step s", "peak GiB")

    def ratio(value):
        return "" if value is None else f"{value:.2f}x"

    cells = []
    for r in rows:
        failed = "" if r["failed_batch"] is None else f"{r['failed_batch']} {r['failure']}"
        setting = r["setting"] + (" (cut off)" if r.get("unfinished") else "")
        if r["largest_batch"] is None:
            cells.append((r["model"], format_bytes(r["cap"]), setting, "none", failed,
                          "", "", "", "", "", ""))
            continue
        cells.append((r["model"], format_bytes(r["cap"]), setting, str(r["largest_batch"]),
                      failed, f"{r['best_images_per_s']:.1f}", str(r["best_batch"]),
                      ratio(r["images_per_s_vs_stock"]), ratio(r["batch_vs_stock"]),
                      f"{r['first_step_s']:.2f}",
                      "" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**30:.2f}"))
    print(table.render(header, cells, align="lllrlrrrrrr"))


def compare_limits(sweeps, candidate, reference, *, tolerance=0.03):
    """Whether tf_ucudnn's workspace limit ``candidate`` can stand in for
    ``reference`` (e.g. ``auto`` for the default 64 MiB): per model, cap
    and mode swept at both limits, ``candidate``'s images/s over
    ``reference``'s at each N both trained, and the N that ``reference``
    trained and ``candidate`` did not. The rule for a new default: never
    more than ``tolerance`` slower, never out of memory where the old one
    trains; it holds where every row's ``holds`` is True.

    Args:
      sweeps: :func:`run_sweep` results (a report's ``sweeps``); per N the
        medians of its runs, as in :func:`summarize`.
      candidate, reference: workspace limits as the sweeps hold them: bytes,
        or :data:`AUTO`.
      tolerance: the slowdown allowed, a fraction in [0, 1) (0.03: 3 %).

    Returns:
      One dict per (model, cap, mode) swept at both limits, in the sweeps'
      order: ``model``, ``cap``, ``mode``, ``ratios`` ({N: ratio} over the N
      both trained), ``worst_batch`` and ``worst_ratio`` (the smallest
      ratio; None without a common N), ``lost_batches`` (sorted N that
      ``reference`` trained and ``candidate`` failed or lay above its
      largest), ``largest_batches`` (``candidate``'s, ``reference``'s; None
      where nothing trained) and ``holds`` (a common N, no ratio below
      1 - ``tolerance``, no lost N).

    Raises:
      ValueError: ``tolerance`` outside [0, 1).
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a fraction in [0, 1), got {tolerance}")
    by_key = {}
    for sweep in sweeps:
        by_key.setdefault((sweep["model"], sweep["cap"], sweep["mode"]), {})[sweep["limit"]] = sweep
    rows = []
    for (model, cap, mode), limits in by_key.items():
        if candidate not in limits or reference not in limits:
            continue
        cand_runs = limits[candidate]["runs"]
        cand, ref = _best(cand_runs), _best(limits[reference]["runs"])
        cand_largest, ref_largest = max(cand, default=None), max(ref, default=None)
        failed = {r["batch"] for r in cand_runs if r["status"] != "ok"}
        ratios = {n: cand[n]["images_per_s"] / ref[n]["images_per_s"]
                  for n in sorted(set(cand) & set(ref))}
        lost = sorted(n for n in ref if n not in cand
                      and (n in failed or cand_largest is None or n > cand_largest))
        worst = min(ratios, key=ratios.get, default=None)
        rows.append(dict(model=model, cap=cap, mode=mode, ratios=ratios, worst_batch=worst,
                         worst_ratio=ratios.get(worst), lost_batches=lost,
                         largest_batches=(cand_largest, ref_largest),
                         holds=bool(ratios) and ratios[worst] >= 1 - tolerance and not lost))
    return rows


def print_limit_comparison(rows, candidate, reference, *, tolerance=0.03):
    """Prints :func:`compare_limits`' rows and the verdict over all of them."""
    header = ("model", "cap", "mode", "N both trained", "worst ratio", "at N", "lost N",
              "largest N", "holds")
    cells = [(r["model"], format_bytes(r["cap"]), r["mode"],
              ",".join(str(n) for n in r["ratios"]) or "none",
              "" if r["worst_ratio"] is None else f"{r['worst_ratio']:.3f}",
              "" if r["worst_batch"] is None else str(r["worst_batch"]),
              ",".join(str(n) for n in r["lost_batches"]) or "-",
              " / ".join("none" if n is None else str(n) for n in r["largest_batches"]),
              "yes" if r["holds"] else "no") for r in rows]
    names = f"{limit_label(candidate)} against {limit_label(reference)}"
    print(f"workspace limit {names}: ratio of images/s at each N, largest N "
          f"{limit_label(candidate)} / {limit_label(reference)}")
    print(table.render(header, cells, align="lllllrlll"))
    if not rows:
        print(f"verdict: no model, cap and mode was swept at both limits ({names})")
    else:
        held = sum(r["holds"] for r in rows)
        verdict = "holds" if held == len(rows) else "does not hold"
        print(f"verdict: never more than {tolerance:.0%} slower and never out of memory where "
              f"{limit_label(reference)} trains: {verdict} ({held} of {len(rows)} model, cap and "
              f"mode pairs hold)")


def report(sweeps, *, environment, args, complete=True):
    """The JSON report of a run: ``kind`` (:data:`KIND`), ``complete``
    (False while sweeps are still running), ``environment``
    (:func:`tf_ucudnn.bench.harness.describe_environment`), ``args`` (the
    settings), ``sweeps`` (:func:`run_sweep`'s results, every run in each)
    and ``summary`` (:func:`summarize`)."""
    return dict(kind=KIND, complete=complete, environment=environment, args=args, sweeps=sweeps,
                summary=summarize(sweeps))


def merge_reports(reports):
    """One report of several memory-cap reports, e.g. the modes of one model
    run in separate processes or on separate GPUs of one machine.

    Args:
      reports: :func:`report` dicts (``kind`` :data:`KIND`).

    Returns:
      A :func:`report` whose ``sweeps`` are all of theirs in order, whose
      ``summary`` is recomputed over them (so ratios to stock span the
      reports), ``environment`` is the first's with the GPUs of all, and
      ``args`` is ``{"merged": [each report's args]}``; ``complete`` only if
      every report was.

    Raises:
      ValueError: a report is not a memory-cap report, or two hold the same
        sweep (model, cap, mode and limit).
    """
    sweeps, seen, gpus = [], set(), []
    for i, r in enumerate(reports):
        if r.get("kind") != KIND:
            raise ValueError(f"report {i} is not a memory-cap report (kind {r.get('kind')!r}, "
                             f"expected {KIND!r})")
        for sweep in r["sweeps"]:
            key = (sweep["model"], sweep["cap"], sweep["mode"], sweep["limit"])
            if key in seen:
                raise ValueError(f"report {i} repeats the sweep {key}; merge each sweep once")
            seen.add(key)
            sweeps.append(sweep)
        gpus += [g for g in r.get("environment", {}).get("gpus", []) if g not in gpus]
    environment = dict(reports[0].get("environment", {}), gpus=gpus) if reports else {}
    return report(sweeps, environment=environment,
                  args=dict(merged=[r.get("args") for r in reports]),
                  complete=all(r.get("complete", True) for r in reports))


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


def run_memory_cap(models, caps, *, modes=MODES, limits=DEFAULT_LIMITS, start_batch=None,
                   max_batch=DEFAULT_MAX_BATCH, bisect_steps=DEFAULT_BISECT_STEPS,
                   steps_per_epoch=DEFAULT_STEPS_PER_EPOCH, epochs=DEFAULT_EPOCHS, runs=1,
                   gpus=None, timeout=1800, precision="float32", launcher=None,
                   progress=True, on_sweep=None):
    """Runs every sweep, in parallel over ``gpus``; prints progress and the table.

    Args:
      models: names of :data:`tf_ucudnn.bench.models.MODELS`.
      caps: memory caps, bytes (whole MiB).
      modes, limits: the settings (:func:`sweeps_of`).
      start_batch: every sweep's first N; None: each model's own.
      max_batch, bisect_steps, runs: the search (:func:`run_sweep`).
      steps_per_epoch, epochs, precision: each run's (:func:`run_worker`).
      gpus: ``CUDA_VISIBLE_DEVICES`` values to share the sweeps out over, one
        sweep per GPU at a time; None or empty: one sweep at a time, unpinned.
      timeout: seconds per process.
      launcher: runs one process: ``launcher(sweep, batch, gpu=, timeout=,
        steps_per_epoch=, epochs=, precision=)`` returns a run dict; None:
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
                                precision=precision)
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


def _worker_main(argv):
    """``python -m tf_ucudnn.bench.memory_cap --worker SPEC``: one run; prints
    ``RESULT {json}`` and exits at once (TensorFlow's shutdown after an
    out-of-memory error is left out: the result is already out)."""
    if len(argv) != 2 or argv[0] != "--worker":
        print("run through `tf-ucudnn bench memory-cap --models ... --caps ...`", file=sys.stderr)
        return 2
    spec = json.loads(argv[1])
    result = run_worker(spec["model"], spec["mode"], spec["limit"], spec["cap"], spec["batch"],
                        steps_per_epoch=spec["steps_per_epoch"], epochs=spec["epochs"],
                        precision=spec["precision"])
    print("RESULT " + json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
