"""Model mode of the benchmark: one Keras training step per model and setting.

``tf-ucudnn bench --models alexnet,resnet18,vgg16 --limits 64MiB --totals 256MiB``
times one training step (SGD, softmax cross-entropy, 224x224x3 inputs;
299x299x3 for InceptionV3) of models built from ``keras.layers.Conv2D``
(VGG-16, ResNet-50 and InceptionV3 are ``keras.applications``' with
``weights=None``), each setting in its own process:

* ``stock`` at each limit and total: ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB``;
* ``rewrite`` at each limit: ``tf_ucudnn.enable_rewrite(workspace_limit=limit)``
  (Workspace Reuse, one limit per kernel);
* ``rewrite-layout`` at each limit, only when asked for (``--modes``): the
  same with Grappler's layout optimizer on (``layout_optimizer=True``, the
  rewrite's behaviour before it kept the model's layout);
* ``rewrite-wd`` at each total: ``enable_rewrite(total_workspace=total)``
  (Workspace Division: the kernels share the total);
* ``stock`` at 8 GiB, TF's default, the reference;
* with ``--xla``: ``stock-xla`` (the step compiled with ``jit_compile=True``;
  XLA's convolutions have no run-time workspace limit) and ``ucudnn-xla`` at
  each limit (``tf_ucudnn.rewrite_model(model, workspace_limit=limit)``,
  compiled with XLA: each pass is a custom call running the micro-batched plan);
  ``ucudnn-xla-buffer`` only when asked for (``--modes``): the same with
  ``UCUDNN_XLA_WORKSPACE=buffer`` (each call's workspace a buffer of the limit's
  size that XLA places, instead of XLA's scratch allocator).

Per run: median step time (ms) over 5 repeats of 5 steps after warm-up, the
first step's time (planning included, s), and the peak GPU memory of the
timed steps and of the whole run (``tf.config.experimental.get_memory_info``,
bytes). With ``--planning`` the first model is also run twice under
``rewrite`` with one fresh benchmark database (``UCUDNN_DATABASE``): the
first step's time cold, then warm. With ``--runs K`` every setting (and the
cold/warm pair, each pair with a database of its own) runs in K processes
and the table gives their medians (:func:`summarize`): one process's first
step varies by seconds on an H200 (InceptionV3 ``mixed_float16``: 14.2 and
18.1 s for stock TF in two processes of one session).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from tf_ucudnn import table
from tf_ucudnn.bench import harness
from tf_ucudnn.units import format_bytes

MODELS = ("alexnet", "resnet18", "vgg16", "resnet50", "inceptionv3", "resnet50-nobias")
DEFAULT_BATCH = {"alexnet": 256, "resnet18": 256, "vgg16": 64, "resnet50": 128, "inceptionv3": 64,
                 "resnet50-nobias": 128}
INPUT_SIZE = {"inceptionv3": 299}  # pixels (height = width); 224 for the others
REFERENCE_LIMIT = 8 << 30


def build_model(name):
    """A Keras model of ``keras.layers.Conv2D`` layers, NHWC images in
    (224x224x3; 299x299x3 for InceptionV3, see :data:`INPUT_SIZE`), 1000
    logits out.

    Args:
      name: ``"alexnet"`` (the torchvision variant's convolutions),
        ``"resnet18"`` (basic blocks with batch normalization), ``"vgg16"``
        (``keras.applications.VGG16(weights=None)``), ``"resnet50"``
        (``keras.applications.ResNet50(weights=None)``) or ``"inceptionv3"``
        (``keras.applications.InceptionV3(weights=None)``); or
        ``"resnet50-nobias"``: ResNet-50 with ``use_bias=False`` in every
        convolution. Batch normalization follows each of them and absorbs a
        bias, so the model computes the same functions; it measures what a
        convolution's bias costs where it cannot join the convolution's
        kernel (an XLA custom call), docs/benchmarks.md §5.

    Raises:
      ValueError: an unknown name.
    """
    import keras

    L = keras.layers
    if name == "vgg16":
        return keras.applications.VGG16(weights=None)
    if name == "resnet50":
        return keras.applications.ResNet50(weights=None)
    if name == "inceptionv3":
        return keras.applications.InceptionV3(weights=None)
    if name == "resnet50-nobias":
        def without_bias(layer):
            config = layer.get_config()
            if isinstance(layer, L.Conv2D):
                config["use_bias"] = False
            return layer.__class__.from_config(config)

        return keras.models.clone_model(keras.applications.ResNet50(weights=None),
                                        clone_function=without_bias)
    inputs = keras.Input((224, 224, 3))
    if name == "alexnet":
        x = L.Conv2D(64, 11, strides=4, padding="same", activation="relu")(inputs)
        x = L.MaxPooling2D(3, 2)(x)
        x = L.Conv2D(192, 5, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(3, 2)(x)
        for filters in (384, 256, 256):
            x = L.Conv2D(filters, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(3, 2)(x)
        x = L.Flatten()(x)
        x = L.Dense(4096, activation="relu")(x)
        x = L.Dense(4096, activation="relu")(x)
    elif name == "resnet18":
        x = L.Conv2D(64, 7, strides=2, padding="same", use_bias=False)(inputs)
        x = L.ReLU()(L.BatchNormalization()(x))
        x = L.MaxPooling2D(3, 2, padding="same")(x)
        for filters, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1),
                                (512, 2), (512, 1)]:
            y = L.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
            y = L.ReLU()(L.BatchNormalization()(y))
            y = L.BatchNormalization()(L.Conv2D(filters, 3, padding="same", use_bias=False)(y))
            if stride != 1 or x.shape[-1] != filters:
                x = L.BatchNormalization()(L.Conv2D(filters, 1, strides=stride, use_bias=False)(x))
            x = L.ReLU()(x + y)
        x = L.GlobalAveragePooling2D()(x)
    else:
        raise ValueError(f"unknown model {name!r}; models are {', '.join(MODELS)}")
    return keras.Model(inputs, L.Dense(1000)(x))


PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def run_worker(model_name, mode, bytes_, batch, precision="float32", profile_dir=None):
    """One (model, mode, limit) in this process; returns the result dict.

    ``precision`` is a Keras dtype policy from :data:`PRECISIONS`; with
    ``mixed_float16`` the loss is scaled (``keras.optimizers.LossScaleOptimizer``).
    With ``profile_dir``, three more steps after the timed ones run under
    TensorFlow's profiler (``tf.profiler.experimental``; on a GPU it needs
    CUPTI), which writes its trace there (see ``benchmarks/xla_profile.py``).
    The result's ``model_bytes`` is the GPU memory in use once the model and
    its data exist, before the first step.
    """
    import gc

    import keras
    import numpy as np
    import tensorflow as tf

    import tf_ucudnn

    keras.mixed_precision.set_global_policy(precision)

    if mode == "rewrite":
        tf_ucudnn.enable_rewrite(workspace_limit=bytes_)
    elif mode == "rewrite-layout":
        tf_ucudnn.enable_rewrite(workspace_limit=bytes_, layout_optimizer=True)
    elif mode == "rewrite-wd":
        tf_ucudnn.enable_rewrite(total_workspace=bytes_)
    if mode == "ucudnn-xla-buffer":  # read when the step is compiled
        os.environ["UCUDNN_XLA_WORKSPACE"] = "buffer"
    model = build_model(model_name)
    if mode.startswith("ucudnn-xla"):
        model = tf_ucudnn.rewrite_model(model, workspace_limit=bytes_, verbose=0)
        # The stock model's weights would stay on the GPU until Python's cycle
        # collector ran, and count in this run's peak (VGG-16: 0.52 GiB).
        gc.collect()
    size = INPUT_SIZE.get(model_name, 224)
    x = tf.random.normal([batch, size, size, 3], seed=1)
    y = tf.random.uniform([batch], 0, 1000, tf.int32, seed=2)
    optimizer = keras.optimizers.SGD(0.01)
    scaled = precision == "mixed_float16"
    if scaled:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile="xla" in mode)
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            target = optimizer.scale_loss(loss) if scaled else loss
        grads = tape.gradient(target, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    sync = tf.test.experimental.sync_devices
    sync()
    model_bytes = tf.config.experimental.get_memory_info("GPU:0")["current"]
    start = time.perf_counter()
    step()
    sync()
    first_step_s = time.perf_counter() - start
    # The kernels' own planning within the first step (benchmarks or the
    # database, then Workspace Reuse): the rest of it is TensorFlow's.
    planning_s = sum(r["planning_ms"] for r in tf_ucudnn.plans()
                     if r["planning_ms"] is not None and "GPU" in r["device"]) / 1e3
    for _ in range(3):  # Workspace Division happens after the first step
        step()
    sync()
    run_peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    tf.config.experimental.reset_memory_stats("GPU:0")
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(5):
            loss = step()
        sync()
        times.append((time.perf_counter() - start) / 5 * 1e3)
    steady_peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    if profile_dir:
        tf.profiler.experimental.start(profile_dir)
        for _ in range(3):
            step()
        sync()
        tf.profiler.experimental.stop()
    result = dict(model=model_name, mode=mode, bytes=bytes_, batch=batch, precision=precision,
                  step_ms=float(np.median(times)), step_ms_repeats=times,
                  first_step_s=first_step_s, peak_bytes=steady_peak,
                  run_peak_bytes=max(run_peak, steady_peak), model_bytes=model_bytes,
                  loss=float(loss))
    if mode.startswith("rewrite") or mode.startswith("ucudnn-xla"):
        result["rewrite_stats"] = tf_ucudnn.rewrite_stats()
        result["from_database"] = sum(r["note"].endswith("benchmarks from the database")
                                      for r in tf_ucudnn.plans())
        result["kernels_planned"] = len([r for r in tf_ucudnn.plans() if "GPU" in r["device"]])
        result["planning_s"] = planning_s
        if profile_dir:  # for benchmarks/xla_profile.py's plan table
            result["plans"] = [dict(r) for r in tf_ucudnn.plans()]
    if mode == "rewrite-wd":
        reports = tf_ucudnn.division.division_reports()
        result["division"] = [dict(kernels=len(r.kernels), workspace_bytes=r.workspace_bytes,
                                   predicted_ms=r.time_ms) for r in reports.values()]
    return result


def launch(model_name, mode, bytes_, batch, timeout, extra_env=None, precision="float32",
           profile_dir=None):
    """Runs :func:`run_worker` in a new Python process and returns its result dict.

    A process per setting, because TensorFlow reads
    ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` once per process (it is set to
    ``bytes_`` here). ``extra_env`` adds environment variables (e.g.
    ``XLA_FLAGS``); the benchmark database is off unless ``extra_env`` sets
    ``UCUDNN_DATABASE``. On a failure or after ``timeout`` seconds the dict
    has ``error`` (the exit status and the end of stderr) instead of timings.
    """
    env = dict(os.environ, TF_CUDNN_WORKSPACE_LIMIT_IN_MB=str(max(bytes_ >> 20, 0)),
               TF_CPP_MIN_LOG_LEVEL="2", **(extra_env or {}))
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


def _label(r):
    where = "8 GiB" if r["bytes"] == REFERENCE_LIMIT else format_bytes(r["bytes"])
    kind = {"stock": "stock TF", "rewrite": "tf_ucudnn WR (per kernel)",
            "rewrite-layout": "tf_ucudnn WR, layout optimizer on",
            "rewrite-wd": "tf_ucudnn WD (total)", "stock-xla": "stock TF, XLA",
            "ucudnn-xla": "tf_ucudnn WR under XLA",
            "ucudnn-xla-buffer": "tf_ucudnn WR under XLA, workspace buffer"}.get(r["mode"],
                                                                                 r["mode"])
    label = kind if r["mode"] == "stock-xla" else f"{kind} at {where}"  # XLA: no limit
    precision = r.get("precision", "float32")
    return label if precision == "float32" else f"{label}, {precision}"


def summarize(results):
    """One row per setting: the runs of the same model, mode, bytes, precision
    (and ``planning`` label) joined, in the order they first appear.

    Args:
      results: result dicts of :func:`launch` (``error`` set where a run failed).

    Returns:
      Dicts like a run's, with the median ``step_ms`` and ``first_step_s``
      and the largest ``peak_bytes`` and ``run_peak_bytes`` of the runs that
      succeeded, ``runs`` (their count) and ``first_step_runs_s`` (each run's
      first step, s); or, where every run failed, the first run's dict with
      ``runs`` = 0.
    """
    import statistics

    groups = {}
    for r in results:
        key = (r["model"], r["mode"], r["bytes"], r.get("precision", "float32"),
               r.get("planning"))
        groups.setdefault(key, []).append(r)
    rows = []
    for runs in groups.values():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            rows.append(dict(runs[0], runs=0))
            continue
        row = dict(ok[0], runs=len(ok),
                   step_ms=statistics.median(r["step_ms"] for r in ok),
                   first_step_s=statistics.median(r["first_step_s"] for r in ok),
                   first_step_runs_s=[r["first_step_s"] for r in ok],
                   peak_bytes=max(r["peak_bytes"] for r in ok),
                   run_peak_bytes=max(r["run_peak_bytes"] for r in ok))
        row.pop("run", None)
        rows.append(row)
    return rows


def print_table(results):
    """Prints one row per setting (runs of one setting joined by :func:`summarize`:
    medians, and ", median of K runs" in the label): model, setting, step ms,
    first step s, peak GiB."""
    header = ("model", "setting", "step ms", "vs stock 8 GiB", "first step s", "peak GiB",
              "run peak GiB")
    rows = []
    results = summarize(results)
    reference = {r["model"]: r.get("step_ms") for r in results
                 if r["mode"] == "stock" and r["bytes"] == REFERENCE_LIMIT and "error" not in r}
    for r in results:
        if "error" in r:
            rows.append((r["model"], _label(r), "error", "", "", "", ""))
            continue
        ref = reference.get(r["model"])
        label = _label(r) + (f", median of {r['runs']} runs" if r["runs"] > 1 else "")
        rows.append((r["model"], label, f"{r['step_ms']:.1f}",
                     f"{r['step_ms'] / ref:.2f}x" if ref else "", f"{r['first_step_s']:.2f}",
                     f"{r['peak_bytes'] / 2**30:.2f}", f"{r['run_peak_bytes'] / 2**30:.2f}"))
    print(table.render(header, rows, align="llrrrrr"))


MODES = ("stock", "rewrite", "rewrite-layout", "rewrite-wd", "stock-xla", "ucudnn-xla",
         "ucudnn-xla-buffer")


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
      modes: None for every setting above, else only the settings of these
        modes (names from :data:`MODES`).
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
        if xla:
            settings += [("stock-xla", REFERENCE_LIMIT)] + [("ucudnn-xla", b) for b in limits]
            if modes and "ucudnn-xla-buffer" in modes:  # a comparison, not run by default
                settings += [("ucudnn-xla-buffer", b) for b in limits]
        if modes:
            settings = [(m, b) for m, b in settings if m in modes]
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


if __name__ == "__main__":
    if len(sys.argv) in (7, 8) and sys.argv[1] == "--worker":
        out = run_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
                         *sys.argv[7:])
        print("RESULT " + json.dumps(out), flush=True)
        sys.exit(0)
    print("run through `tf-ucudnn bench --models ...`", file=sys.stderr)
    sys.exit(2)
