"""One run of the memory-cap benchmark, in a worker process of its own: the
GPU's allocator capped before the GPU starts, then ``model.fit`` timed per
epoch. Started as ``python -m tf_ucudnn.bench.memory_cap --worker SPEC``
(:mod:`tf_ucudnn.bench.memory_cap.launcher` starts it)."""

import json
import os
import statistics
import sys
import time

from tf_ucudnn.bench import harness
from tf_ucudnn.bench.memory_cap.settings import (_MESSAGE_CHARS, DEFAULT_EPOCHS,
                                                 DEFAULT_STEPS_PER_EPOCH,
                                                 check_steps_per_execution, failure_status)
from tf_ucudnn.units import format_bytes


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
               epochs=DEFAULT_EPOCHS, precision="float32", input_size=None,
               steps_per_execution=1, prefetch_to_device=False, profile_dir=None):
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
      steps_per_execution: Keras' ``compile(steps_per_execution=)``: steps per
        call of the training function; it must divide ``steps_per_epoch``.
        At 1 (Keras' default) ``fit`` waits for every step's loss before it
        starts the next, so that, without ``prefetch_to_device``, the next
        batch's copy to the GPU cannot overlap the step.
      prefetch_to_device: end the ``tf.data`` pipeline with
        ``tf.data.experimental.prefetch_to_device`` (the GPU, else the CPU),
        so that the next batch's copy to the GPU runs during the step, as
        TensorFlow's input-pipeline guide advises; False: ``prefetch`` on the
        host, and each step copies its batch before it starts.
      profile_dir: where one more epoch after the timed ones runs under
        TensorFlow's profiler (its trace; CUPTI on a GPU); None: no profile.

    Returns:
      The run dict: ``status`` (``"ok"``, or ``"oom"`` / ``"error"`` with
      ``message``, the end of the exception's text), ``note`` (the cap),
      ``first_step_s``, ``step_ms``, ``step_ms_repeats``, ``images_per_s``
      (N / step time), ``peak_bytes`` (the whole run, first step included:
      what decides OOM), ``steady_peak_bytes`` (the timed epochs), ``loss``;
      with tf_ucudnn, ``rewrite_stats``. Peaks are None without a GPU.
    """
    import tensorflow as tf

    check_steps_per_execution(steps_per_execution, steps_per_epoch)
    result = dict(status="ok")
    try:
        result["note"] = cap_gpu_memory(cap)
        result.update(_train(model, mode, limit, batch, steps_per_epoch=steps_per_epoch,
                             epochs=epochs, precision=precision, input_size=input_size,
                             steps_per_execution=steps_per_execution,
                             prefetch_to_device=prefetch_to_device, profile_dir=profile_dir))
    except tf.errors.ResourceExhaustedError as e:
        result.update(status="oom", message=_message_end(e))
    except Exception as e:  # noqa: BLE001: a run's failure is a result, never a crash
        result.update(status=failure_status(f"{type(e).__name__}: {e}"), message=_message_end(e))
    result.setdefault("peak_bytes", _memory_info("peak"))
    return result


def _message_end(exception):
    return f"{type(exception).__name__}: {exception}".strip()[-_MESSAGE_CHARS:]


def _train(model_name, mode, limit, batch, *, steps_per_epoch, epochs, precision, input_size,
           steps_per_execution, prefetch_to_device, profile_dir):
    """:func:`run_worker`'s training; returns the timings."""
    import keras
    import tensorflow as tf

    from tf_ucudnn.bench import models

    keras.mixed_precision.set_global_policy(precision)
    if mode.startswith("ucudnn"):  # stock runs never load the op library
        import tf_ucudnn
    if mode in ("ucudnn", "ucudnn-xla"):
        tf_ucudnn.enable_rewrite(workspace_limit=limit)
    model = models.build_model(model_name, input_size)
    if mode.startswith("ucudnn-bn"):
        model = models.batch_norm_fused_for_mode(model, limit, mode)
    # Keras wraps SGD in a LossScaleOptimizer itself under mixed_float16.
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=models.loss_for(model_name),
                  jit_compile=mode.endswith("xla"), steps_per_execution=steps_per_execution)
    x, y = models.synthetic_batch(model_name, batch, model.output_shape, input_size=input_size)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    if prefetch_to_device:
        device = (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU"))[0]
        data = data.apply(tf.data.experimental.prefetch_to_device(device.name))
    else:
        data = data.prefetch(tf.data.AUTOTUNE)
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
    if profile_dir:
        tf.profiler.experimental.start(profile_dir)
        model.fit(data, steps_per_epoch=steps_per_epoch, epochs=1, verbose=0, shuffle=False)
        harness.sync_devices()
        tf.profiler.experimental.stop()
    median_ms = statistics.median(step_ms)
    result = dict(first_step_s=first_step_s, step_ms=median_ms, step_ms_repeats=step_ms,
                  images_per_s=1e3 * batch / median_ms, steady_peak_bytes=steady_peak,
                  peak_bytes=None if run_peak is None else max(run_peak, steady_peak),
                  loss=float(history.history["loss"][-1]))
    if mode.startswith("ucudnn"):
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
                        precision=spec["precision"],
                        steps_per_execution=spec.get("steps_per_execution", 1),
                        prefetch_to_device=spec.get("prefetch_to_device", False),
                        profile_dir=spec.get("profile_dir"))
    print("RESULT " + json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)
