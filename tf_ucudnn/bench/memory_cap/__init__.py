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
  model's ``keras.layers.Conv2D`` layers to tf_ucudnn's XLA custom calls);
* ``ucudnn-bn`` and ``ucudnn-bn-xla``, only when asked for (``--modes``):
  ``tf_ucudnn.rewrite_model(model, workspace_limit=limit,
  fuse_batch_norm=True)``, without and with ``jit_compile`` (Conv2D ->
  BatchNormalization chains as ``Conv2DBatchNorm``, each applying the
  previous one's normalization as its prologue; under XLA its convolution
  and statistics are one custom call); ``ucudnn-bnstats`` and
  ``ucudnn-bnstats-xla`` the same without the prologue;
  ``ucudnn-bnrecompute`` and ``ucudnn-bnrecompute-xla`` the same with it and
  ``recompute="1x1"`` (1x1 outputs read through a prologue computed again in
  the backward pass).

A limit is a byte count or ``auto`` (passed to ``enable_rewrite`` as it is).

Each measurement is one worker process (this module with ``--worker``): it
caps TensorFlow's GPU allocator at the cap before the GPU starts
(``tf.config.set_logical_device_configuration`` with ``memory_limit``) and
trains as users do: ``model.fit`` over a ``tf.data`` pipeline of one random
mini-batch (:func:`tf_ucudnn.bench.models.synthetic_batch`), SGD, the model's
loss. The first ``fit`` of one step (tracing, compiling, planning) is timed
as the first step; then ``fit(steps_per_epoch=S, epochs=R)`` with the
device synced at each epoch's start and end gives R epoch times, and the
step time is the median epoch over S. By default each step waits for the
previous one's loss (Keras' ``steps_per_execution=1``) and then copies its
batch to the GPU; ``--steps-per-execution K`` runs K steps per call of the
training function and ``--prefetch-to-device`` ends the pipeline with
``tf.data.experimental.prefetch_to_device``, so that the copy runs during
the previous step (``benchmarks/fit_profile.py`` shows where a step's time
goes). Peak memory is TF's allocator's
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

from tf_ucudnn._lazy import lazy_exports

# The public names and the module of each, bound on first use (PEP 562), as
# tf_ucudnn.bench binds its own: importing this package imports none of its modules, so
# that a worker (`python -m tf_ucudnn.bench.memory_cap --worker SPEC`, __main__.py)
# loads only what it runs.
_EXPORTS = {
    "settings": ("AUTO", "DEFAULT_BISECT_STEPS", "DEFAULT_EPOCHS", "DEFAULT_LIMITS",
                 "DEFAULT_MAX_BATCH", "DEFAULT_MODES", "DEFAULT_STEPS_PER_EPOCH", "MODES", "STATUSES",
                 "STOCK_MODES", "check_steps_per_execution", "failure_status", "limit_label",
                 "setting_label", "sweeps_of"),
    "search": ("run_sweep", "search_batch", "step_batch"),
    "worker": ("cap_gpu_memory", "run_worker"),
    "launcher": ("launch", "parse_worker_output", "ucudnn_log"),
    "summary": ("KIND", "compare_limits", "merge_reports", "print_limit_comparison",
                "print_table", "report", "summarize"),
    "runner": ("run_memory_cap", "run_parallel", "visible_gpus"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
