"""Runs the model mode: every (model, setting) in a worker process of its own,
the cold and warm planning pair, and the table at the end."""

import json
import os
import subprocess
import sys
import tempfile

from tf_ucudnn.bench import harness
from tf_ucudnn.bench.models.specs import DEFAULT_BATCH
from tf_ucudnn.bench.models.summary import REFERENCE_LIMIT, _label, print_table, summarize


def launch(model_name, mode, bytes_, batch, timeout, extra_env=None, precision="float32",
           profile_dir=None):
    """Runs :func:`run_worker` in a new Python process and returns its result dict.

    A process per setting, because TensorFlow reads
    ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` once per process (it is set to
    ``bytes_`` here). ``extra_env`` adds environment variables (e.g.
    ``XLA_FLAGS``) or overrides those set here (its
    ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` changes stock TF's limit only:
    tf_ucudnn's is ``bytes_``, passed to the worker); the benchmark database
    is off unless ``extra_env`` sets ``UCUDNN_DATABASE``. On a failure or
    after ``timeout`` seconds the dict has ``error`` (the exit status and the
    end of stderr) instead of timings.
    """
    env = dict(os.environ, TF_CUDNN_WORKSPACE_LIMIT_IN_MB=str(max(bytes_ >> 20, 0)),
               TF_CPP_MIN_LOG_LEVEL="2")
    env.update(extra_env or {})
    env.setdefault("UCUDNN_DATABASE", "off")
    env = harness.with_package_on_path(env)
    cmd = [sys.executable, "-m", "tf_ucudnn.bench.models", "--worker", model_name, mode,
           str(bytes_), str(batch), precision] + ([profile_dir] if profile_dir else [])
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(model=model_name, mode=mode, bytes=bytes_, error=f"timed out after {timeout} s")
    lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return dict(model=model_name, mode=mode, bytes=bytes_,
                    error=f"exit status {done.returncode}: {done.stderr.strip()[-600:]}")
    return json.loads(lines[-1][len("RESULT "):])


MODES = ("stock", "rewrite", "rewrite-layout", "rewrite-wd", "stock-xla", "ucudnn-xla",
         "ucudnn-xla-buffer", "ucudnn-bn", "ucudnn-bn-xla", "ucudnn-bnstats",
         "ucudnn-bnstats-xla", "ucudnn-bnrecompute", "ucudnn-bnrecompute-xla")


def run_models(models, limits, totals, batch=None, planning=False, timeout=600, xla=False,
               modes=None, precision="float32", runs=1):
    """Runs every (model, setting) in its own process (``runs`` processes
    each); prints the table of their medians.

    Args:
      models: names from :data:`MODELS`.
      limits: per-kernel workspace limits, bytes (stock TF and ``rewrite``).
      totals: total budgets, bytes (stock TF and ``rewrite-wd``).
      batch: mini-batch size; None: 256 (AlexNet, ResNet-18) or 64 (VGG-16).
      planning: also time the first step of ``rewrite`` at the first limit
        (or 64 MiB) cold and with a warm benchmark database, for the first model.
      timeout: seconds per process.
      xla: also stock TF compiled with XLA, and tf_ucudnn under XLA at each limit.
      modes: None for every setting above in the order above, else only the
        settings of these modes (names from :data:`MODES`), run in their
        order (e.g. tf_ucudnn's before stock TF's).
      precision: the Keras dtype policy of every run (:data:`PRECISIONS`).
      runs: processes per setting, and cold/warm planning pairs (each pair
        with a fresh database), >= 1.

    Returns:
      The list of result dicts, one per process, ``run`` numbering the runs
      of a setting (``error`` set where a run failed).
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    results = []
    for model in models:
        n = batch or DEFAULT_BATCH[model]
        settings = [("stock", REFERENCE_LIMIT)]
        settings += [("stock", b) for b in sorted(set(limits) | set(totals))]
        settings += [("rewrite", b) for b in limits]
        if modes and "rewrite-layout" in modes:  # a comparison, not run by default
            settings += [("rewrite-layout", b) for b in limits]
        settings += [("rewrite-wd", b) for b in totals]
        for mode in ("ucudnn-bn", "ucudnn-bnstats", "ucudnn-bnrecompute"):  # asked for only
            if modes and mode in modes:
                settings += [(mode, b) for b in limits]
        if xla:
            settings += [("stock-xla", REFERENCE_LIMIT)] + [("ucudnn-xla", b) for b in limits]
            if modes and "ucudnn-xla-buffer" in modes:  # a comparison, not run by default
                settings += [("ucudnn-xla-buffer", b) for b in limits]
            for mode in ("ucudnn-bn-xla", "ucudnn-bnstats-xla", "ucudnn-bnrecompute-xla"):
                if modes and mode in modes:
                    settings += [(mode, b) for b in limits]
        if modes:  # in the order of modes, each mode's limits as above
            settings = sorted(((m, b) for m, b in settings if m in modes),
                              key=lambda s: list(modes).index(s[0]))
        for mode, bytes_ in settings:
            for i in range(runs):
                r = launch(model, mode, bytes_, n, timeout, precision=precision)
                r["run"] = i
                print(f"  {model} {_label(r)}: "
                      + (r["error"] if "error" in r else
                         f"{r['step_ms']:.1f} ms, first step {r['first_step_s']:.2f} s"),
                      flush=True)
                results.append(r)
    if planning and models:
        limit = limits[0] if limits else 64 << 20
        for i in range(runs):
            with tempfile.TemporaryDirectory(prefix="tf_ucudnn_db_") as tmp:
                db = os.path.join(tmp, "benchmarks.sqlite3")
                for label in ("cold", "warm"):
                    r = launch(models[0], "rewrite", limit, batch or DEFAULT_BATCH[models[0]],
                               timeout, {"UCUDNN_DATABASE": db}, precision=precision)
                    r["planning"] = label
                    r["run"] = i
                    print(f"  planning {label}: {models[0]} first step "
                          + (r["error"] if "error" in r else
                             f"{r['first_step_s']:.2f} s, steady {r['step_ms']:.1f} ms, "
                             f"{r['from_database']} of {r['kernels_planned']} kernels from the "
                             f"database"), flush=True)
                    results.append(r)
        if runs > 1:
            for row in summarize([r for r in results if "planning" in r]):
                if row["runs"]:
                    print(f"  planning {row['planning']}: median first step "
                          f"{row['first_step_s']:.2f} s of {row['runs']} runs "
                          f"({', '.join(f'{t:.2f}' for t in row['first_step_runs_s'])})")
    print()
    print_table([r for r in results if "planning" not in r])
    return results
