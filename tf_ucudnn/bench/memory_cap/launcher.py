"""The parent's side of a memory-cap run: the worker process started, timed
out or read back (its ``RESULT`` line, its failure, tf_ucudnn's own lines
of its stderr)."""

import json
import os
import subprocess
import sys
import time

from tf_ucudnn.bench import harness
from tf_ucudnn.bench.memory_cap.settings import (_MESSAGE_CHARS, DEFAULT_EPOCHS,
                                                 DEFAULT_STEPS_PER_EPOCH, failure_status)

_LOG_LINES = 400  # tf_ucudnn's stderr lines that a run keeps (plans are one line each)


def launch(sweep, batch, *, gpu=None, timeout=1800, steps_per_epoch=DEFAULT_STEPS_PER_EPOCH,
           epochs=DEFAULT_EPOCHS, precision="float32", steps_per_execution=1,
           prefetch_to_device=False, profile_dir=None):
    """Runs :func:`run_worker` in a new Python process; returns its run dict.

    Args:
      sweep: a dict of :func:`sweeps_of` (model, cap, mode, limit).
      batch: the mini-batch size N.
      gpu: a ``CUDA_VISIBLE_DEVICES`` value for the process (None: inherited).
      timeout: seconds before the process is killed.
      steps_per_epoch, epochs, precision, steps_per_execution,
      prefetch_to_device, profile_dir:
        as :func:`run_worker`'s.

    Returns:
      The worker's run dict (it reports a ``ResourceExhaustedError`` and
      exits cleanly), or, where it timed out or failed without a result,
      ``status`` ``"timeout"``, ``"oom"`` (an out-of-memory message in its
      stderr) or ``"error"``, and ``message`` (the exit status and the end of
      stderr). ``wall_s``: the process's seconds, start-up included.
    """
    spec = dict(model=sweep["model"], mode=sweep["mode"], limit=sweep["limit"], cap=sweep["cap"],
                batch=batch, steps_per_epoch=steps_per_epoch, epochs=epochs, precision=precision,
                steps_per_execution=steps_per_execution, prefetch_to_device=prefetch_to_device,
                profile_dir=profile_dir)
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
