"""One (model, mode, limit) of the model mode, in a worker process of its own:
one training step timed, its memory and its plans. Started as ``python -m
tf_ucudnn.bench.models --worker MODEL MODE BYTES N PRECISION [PROFILE_DIR]``
(:func:`tf_ucudnn.bench.models.runner.launch`)."""

import os
import time

from tf_ucudnn.bench.models.builders import batch_norm_fused_for_mode, build_model
from tf_ucudnn.bench.models.plans import kernel_plans
from tf_ucudnn.bench.models.specs import loss_for, synthetic_batch

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def run_worker(model_name, mode, bytes_, batch, precision="float32", profile_dir=None):
    """One (model, mode, limit) in this process; returns the result dict.

    The model is trained on one random mini-batch (:func:`synthetic_batch`)
    with its loss (:func:`loss_for`).

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
    from tf_ucudnn.plan_registry import table_reuse

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
    if mode.startswith("ucudnn-bn"):
        model = batch_norm_fused_for_mode(model, bytes_, mode)
    elif mode.startswith("ucudnn-xla"):
        model = tf_ucudnn.rewrite_model(model, workspace_limit=bytes_, verbose=0)
    if mode.startswith("ucudnn-xla") or mode.startswith("ucudnn-bn"):
        # The stock model's weights would stay on the GPU until Python's cycle
        # collector ran, and count in this run's peak (VGG-16: 0.52 GiB).
        gc.collect()
    x, y = (tf.constant(a) for a in synthetic_batch(model_name, batch, model.output_shape))
    optimizer = keras.optimizers.SGD(0.01)
    scaled = precision == "mixed_float16"
    if scaled:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    loss_fn = loss_for(model_name)

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
    if mode.startswith("rewrite") or mode.startswith("ucudnn-"):
        result["rewrite_stats"] = tf_ucudnn.rewrite_stats()
        # Kernels planned wholly from stored tables (the database's, or other N's).
        result["from_database"] = sum((table_reuse(r) or (0, 1))[1] == 0
                                      for r in tf_ucudnn.plans())
        result["kernels_planned"] = len([r for r in tf_ucudnn.plans() if "GPU" in r["device"]])
        result["planning_s"] = planning_s
        result["kernels"] = kernel_plans()
        if profile_dir:  # for benchmarks/xla_profile.py's plan table
            result["plans"] = [dict(r) for r in tf_ucudnn.plans()]
    if mode == "rewrite-wd":
        reports = tf_ucudnn.division.division_reports()
        result["division"] = [dict(kernels=len(r.kernels), workspace_bytes=r.workspace_bytes,
                                   predicted_ms=r.time_ms) for r in reports.values()]
    return result
