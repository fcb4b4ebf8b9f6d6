"""Model mode of the benchmark: one Keras training step per model and setting.

``tf-ucudnn bench models --models alexnet,resnet18,vgg16 --limits 64MiB --totals 256MiB``
times one training step (SGD on one random mini-batch) of models built from
``keras.layers.Conv2D`` (VGG-16, ResNet-50 and InceptionV3 are
``keras.applications``' with ``weights=None``), each setting in its own
process. Each model's :class:`ModelSpec` (:data:`MODEL_SPECS`) says what it
takes and is trained against: the classifiers 224x224x3 images (299x299x3 for
InceptionV3) and softmax cross-entropy on 1000 classes; ``unet`` 512x512x3
images and per-pixel cross-entropy; ``resnet50-640`` 640x640x3 images and
mean squared error on its head; ``edsr`` 128x128x3 crops and L1 on a
512x512x3 image. The settings:

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
  size that XLA places, instead of XLA's scratch allocator);
* ``ucudnn-bn`` at each limit, only when asked for (``--modes``):
  ``tf_ucudnn.rewrite_model(model, workspace_limit=limit, fuse_batch_norm=True)``
  without XLA (Conv2D -> BatchNormalization chains as ``Conv2DBatchNorm``, whose
  convolution computes the batch norm's statistics, and applies the previous
  one's normalization as its prologue); ``ucudnn-bn-xla`` the same compiled
  with XLA (asked for only, with ``--xla``); ``ucudnn-bnstats`` and
  ``ucudnn-bnstats-xla`` (asked for only) the same without the prologue;
  ``ucudnn-bnrecompute`` and ``ucudnn-bnrecompute-xla`` (asked for only) the
  same with it and ``recompute="1x1"`` (1x1 outputs read through a prologue
  computed again in the backward pass).

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

from tf_ucudnn._lazy import lazy_exports

# The public names and the module of each, bound on first use (PEP 562), as
# tf_ucudnn.bench binds its own: importing this package imports none of its modules, so
# that a worker (`python -m tf_ucudnn.bench.models --worker ...`, __main__.py) loads only
# what it runs.
_EXPORTS = {
    "specs": ("DEFAULT_BATCH", "INPUT_SIZE", "MODELS", "MODEL_SPECS", "TASKS", "ModelSpec",
              "loss_for", "model_spec", "synthetic_batch"),
    "builders": ("CLASSES", "DETECTION_ANCHORS", "DETECTION_CLASSES", "EDSR_SCALE",
                 "UNET_CLASSES", "batch_norm_fused", "batch_norm_fused_for_mode", "build_model", "detection_backbone", "edsr", "unet"),
    "worker": ("PRECISIONS", "run_worker"),
    "plans": ("candidate_name", "kernel_plans"),
    "summary": ("REFERENCE_LIMIT", "print_table", "summarize"),
    "runner": ("MODES", "launch", "run_models"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
