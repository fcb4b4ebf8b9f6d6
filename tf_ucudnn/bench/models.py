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

import dataclasses
import functools
import json
import os
import subprocess
import sys
import tempfile
import time

from tf_ucudnn import table
from tf_ucudnn.bench import harness
from tf_ucudnn.units import format_bytes


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How a benchmark model is fed and trained.

    Attributes:
      input_size: the input's height and width, pixels (3 channels, NHWC).
      task: what the model is trained against (:data:`TASKS`):
        ``"classification"``: integer labels, shape ``[N]``, in
        ``[0, classes)``; ``"segmentation"``: integer labels per pixel,
        shape ``[N, H, W]``; ``"detection"``: a float target of the head's
        shape; ``"super-resolution"``: a float image of the output's shape.
      batch: the model mode's mini-batch size (``--models`` without ``--batch``).
      start_batch: the memory-cap sweep's first mini-batch size, sized for a
        cap of 8 to 16 GiB (:mod:`tf_ucudnn.bench.memory_cap`).
    """

    input_size: int
    task: str
    batch: int
    start_batch: int


TASKS = ("classification", "segmentation", "detection", "super-resolution")

MODEL_SPECS = {
    "alexnet": ModelSpec(224, "classification", batch=256, start_batch=128),
    "resnet18": ModelSpec(224, "classification", batch=256, start_batch=128),
    "vgg16": ModelSpec(224, "classification", batch=64, start_batch=32),
    "resnet50": ModelSpec(224, "classification", batch=128, start_batch=64),
    "inceptionv3": ModelSpec(299, "classification", batch=64, start_batch=32),
    "resnet50-nobias": ModelSpec(224, "classification", batch=128, start_batch=64),
    "unet": ModelSpec(512, "segmentation", batch=8, start_batch=4),
    "resnet50-640": ModelSpec(640, "detection", batch=16, start_batch=8),
    "edsr": ModelSpec(128, "super-resolution", batch=16, start_batch=8),
}
MODELS = tuple(MODEL_SPECS)
DEFAULT_BATCH = {name: spec.batch for name, spec in MODEL_SPECS.items()}
INPUT_SIZE = {name: spec.input_size for name, spec in MODEL_SPECS.items()}  # pixels, H = W
REFERENCE_LIMIT = 8 << 30
CLASSES = 1000  # the classifiers' logits
UNET_CLASSES = 2  # Ronneberger et al. 2015: cell and background
DETECTION_ANCHORS, DETECTION_CLASSES = 9, 20  # the head: 9 x (20 + 4) channels per position
EDSR_SCALE = 4  # EDSR's output is 4 times its input's height and width


def model_spec(name):
    """The :class:`ModelSpec` of a model of :data:`MODELS`.

    Raises:
      ValueError: an unknown name.
    """
    if name not in MODEL_SPECS:
        raise ValueError(f"unknown model {name!r}; models are {', '.join(MODELS)}")
    return MODEL_SPECS[name]


def loss_for(name):
    """The Keras loss a model of :data:`MODELS` is trained with: softmax
    cross-entropy on logits (per image, or per pixel for ``unet``), mean
    squared error for ``resnet50-640``'s head, L1 for ``edsr`` (as Lim et al.
    2017 train it)."""
    import keras

    task = model_spec(name).task
    if task in ("classification", "segmentation"):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if task == "detection":
        return keras.losses.MeanSquaredError()
    return keras.losses.MeanAbsoluteError()


def synthetic_batch(name, batch, output_shape, *, input_size=None, seed=0):
    """One random mini-batch for a model of :data:`MODELS`, as numpy arrays.

    Args:
      name: the model's name.
      batch: the mini-batch size N.
      output_shape: the model's output shape (``model.output_shape``; the
        batch dimension is ignored): the labels' classes or the target's shape.
      input_size: the input's height and width; None: the model's
        (:data:`MODEL_SPECS`).
      seed: numpy's seed.

    Returns:
      ``(x, y)``: float32 images ``[N, H, W, 3]`` (standard normal) and the
      target: int32 labels ``[N]`` (classification) or ``[N, H, W]``
      (segmentation) below the output's channel count, or a float32 array of
      the output's shape, standard normal (detection) or uniform in [0, 1)
      (super-resolution).
    """
    import numpy as np

    task = model_spec(name).task
    size = input_size or model_spec(name).input_size
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, size, size, 3), dtype=np.float32)
    shape = (batch, *output_shape[1:])
    if task == "classification":
        y = rng.integers(0, shape[-1], (batch,), dtype=np.int32)
    elif task == "segmentation":
        y = rng.integers(0, shape[-1], shape[:-1], dtype=np.int32)
    elif task == "detection":
        y = rng.standard_normal(shape, dtype=np.float32)
    else:
        y = rng.random(shape, dtype=np.float32)
    return x, y


def build_model(name, input_size=None):
    """A Keras model of ``keras.layers.Conv2D`` layers, NHWC images in.

    Args:
      name: a classifier of 224x224x3 images (299x299x3 for InceptionV3) with
        1000 logits out: ``"alexnet"`` (the torchvision variant's
        convolutions), ``"resnet18"`` (basic blocks with batch
        normalization), ``"vgg16"`` (``keras.applications.VGG16(weights=None)``),
        ``"resnet50"`` (``keras.applications.ResNet50(weights=None)``) or
        ``"inceptionv3"`` (``keras.applications.InceptionV3(weights=None)``);
        or ``"resnet50-nobias"``: ResNet-50 with ``use_bias=False`` in every
        convolution. Batch normalization follows each of them and absorbs a
        bias, so the model computes the same functions; it measures what a
        convolution's bias costs where it cannot join the convolution's
        kernel (an XLA custom call), docs/benchmarks.md §5.
        Or a model whose activations, not its weights, fill a GPU's memory:
        ``"unet"`` (:func:`unet`: 512x512x3 in, 2 logits per pixel out),
        ``"resnet50-640"`` (:func:`detection_backbone`: 640x640x3 in, a
        20x20x216 head out) or ``"edsr"`` (:func:`edsr`: 128x128x3 in,
        512x512x3 out).
      input_size: the input's height and width, pixels; None: the model's
        own (:data:`MODEL_SPECS`). Smaller sizes build the same layers for
        tests (``unet``: a multiple of 16; the ``keras.applications``
        models: at least 32, InceptionV3 75; AlexNet at least 63).

    Raises:
      ValueError: an unknown name.
    """
    import keras

    model_spec(name)
    L = keras.layers
    shape = None if input_size is None else (input_size, input_size, 3)
    size = input_size or INPUT_SIZE[name]
    if name == "unet":
        return unet((size, size, 3))
    if name == "resnet50-640":
        return detection_backbone((size, size, 3))
    if name == "edsr":
        return edsr((size, size, 3))
    if name == "vgg16":
        return keras.applications.VGG16(weights=None, input_shape=shape)
    if name == "resnet50":
        return keras.applications.ResNet50(weights=None, input_shape=shape)
    if name == "inceptionv3":
        return keras.applications.InceptionV3(weights=None, input_shape=shape)
    if name == "resnet50-nobias":
        def without_bias(layer):
            config = layer.get_config()
            if isinstance(layer, L.Conv2D):
                config["use_bias"] = False
            return layer.__class__.from_config(config)

        return keras.models.clone_model(keras.applications.ResNet50(weights=None,
                                                                    input_shape=shape),
                                        clone_function=without_bias)
    inputs = keras.Input((size, size, 3))
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
    else:  # resnet18
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
    return keras.Model(inputs, L.Dense(CLASSES)(x))


def unet(input_shape=(512, 512, 3), classes=UNET_CLASSES, base_filters=64):
    """U-Net (Ronneberger et al. 2015) with SAME padding, for segmentation.

    Four down stages of two 3x3 convolutions + ReLU and a 2x2 max-pool
    (64, 128, 256, 512 filters), two 3x3 convolutions of 1024 at the bottom,
    four up stages of a 2x2, stride-2 ``keras.layers.Conv2DTranspose``, the
    concatenation with the stage's skip and two 3x3 convolutions, then a 1x1
    convolution to the classes' logits (float32 under a mixed policy).

    Args:
      input_shape: ``(H, W, 3)``, H and W multiples of 16.
      classes: logits per pixel.
      base_filters: the first stage's filters (doubled per stage).

    Returns:
      A ``keras.Model``: ``[N, H, W, 3]`` to ``[N, H, W, classes]``.
    """
    import keras

    L = keras.layers

    def twice(x, filters):
        for _ in range(2):
            x = L.Conv2D(filters, 3, padding="same", activation="relu")(x)
        return x

    inputs = keras.Input(input_shape)
    x, skips = inputs, []
    for stage in range(4):
        x = twice(x, base_filters << stage)
        skips.append(x)
        x = L.MaxPooling2D(2)(x)
    x = twice(x, base_filters << 4)
    for stage in reversed(range(4)):
        x = L.Conv2DTranspose(base_filters << stage, 2, strides=2)(x)
        x = twice(L.Concatenate()([skips[stage], x]), base_filters << stage)
    return keras.Model(inputs, L.Conv2D(classes, 1, dtype="float32")(x), name="unet")


def detection_backbone(input_shape=(640, 640, 3), anchors=DETECTION_ANCHORS,
                       classes=DETECTION_CLASSES):
    """A detector's backbone and head: ResNet-50 at 640x640 and a small
    convolutional head, as single-stage detectors (RetinaNet, SSD) train them.

    ``keras.applications.ResNet50(include_top=False, weights=None)``
    (stride 32), then a 3x3 convolution of 256 + ReLU and a 1x1 convolution
    to ``anchors * (classes + 4)`` channels (class logits and box offsets per
    anchor; float32 under a mixed policy).

    Args:
      input_shape: ``(H, W, 3)``, H and W at least 32.
      anchors: anchors per position.
      classes: object classes.

    Returns:
      A ``keras.Model``: ``[N, H, W, 3]`` to ``[N, H/32, W/32, anchors * (classes + 4)]``
      (640x640: 20x20x216).
    """
    import keras

    L = keras.layers
    base = keras.applications.ResNet50(include_top=False, weights=None, input_shape=input_shape)
    x = L.Conv2D(256, 3, padding="same", activation="relu")(base.output)
    head = L.Conv2D(anchors * (classes + 4), 1, dtype="float32")(x)
    return keras.Model(base.input, head, name="resnet50_640")


def edsr(input_shape=(128, 128, 3), features=64, blocks=16, scale=EDSR_SCALE):
    """EDSR-baseline (Lim et al. 2017), the super-resolution network.

    A 3x3 convolution to ``features`` channels; ``blocks`` residual blocks
    (3x3 convolution, ReLU, 3x3 convolution, added to the block's input;
    the baseline scales no residual); a 3x3 convolution added to the first
    convolution's output (the global skip); per factor 2 of ``scale`` a
    sub-pixel stage (3x3 convolution to ``4 * features`` channels and
    ``tf.nn.depth_to_space`` by 2); a 3x3 convolution to 3 channels
    (float32 under a mixed policy).

    Args:
      input_shape: ``(H, W, 3)``: low-resolution crops.
      features: channels of the body.
      blocks: residual blocks.
      scale: the upscaling factor, a power of 2.

    Returns:
      A ``keras.Model``: ``[N, H, W, 3]`` to ``[N, scale*H, scale*W, 3]``.

    Raises:
      ValueError: ``scale`` not a power of 2.
    """
    import keras

    if scale < 1 or scale & (scale - 1):
        raise ValueError(f"scale must be a power of 2, got {scale}")
    L = keras.layers
    inputs = keras.Input(input_shape)
    head = L.Conv2D(features, 3, padding="same")(inputs)
    x = head
    for _ in range(blocks):
        y = L.Conv2D(features, 3, padding="same", activation="relu")(x)
        x = L.Add()([x, L.Conv2D(features, 3, padding="same")(y)])
    x = L.Add()([head, L.Conv2D(features, 3, padding="same")(x)])
    for _ in range(scale.bit_length() - 1):
        x = L.Conv2D(4 * features, 3, padding="same")(x)
        x = _depth_to_space_layer()(2)(x)
    return keras.Model(inputs, L.Conv2D(3, 3, padding="same", dtype="float32")(x), name="edsr")


@functools.cache
def _depth_to_space_layer():
    """The Keras layer class of ``tf.nn.depth_to_space`` (sub-pixel
    convolution's shuffle): ``[N, H, W, r*r*C]`` to ``[N, r*H, r*W, C]``."""
    import keras
    import tensorflow as tf

    class DepthToSpace(keras.layers.Layer):
        def __init__(self, block_size, **kwargs):
            super().__init__(**kwargs)
            self.block_size = block_size

        def call(self, x):
            return tf.nn.depth_to_space(x, self.block_size)

        def compute_output_shape(self, shape):
            r = self.block_size
            return (shape[0], *(None if d is None else d * r for d in shape[1:3]),
                    shape[3] // (r * r))

        def get_config(self):
            return dict(super().get_config(), block_size=self.block_size)

    return DepthToSpace


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
    if mode.startswith("ucudnn-xla"):
        model = tf_ucudnn.rewrite_model(model, workspace_limit=bytes_, verbose=0)
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
    if mode.startswith("rewrite") or mode.startswith("ucudnn-xla"):
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


def kernel_plans(kernels=None):
    """The plan of each GPU kernel of this process (or of ``kernels``, records
    of :func:`tf_ucudnn.engine_info.kernels`), compact, for comparing processes: dicts of
    ``pass``, ``shape``, ``plan`` (its micro-batches as
    :func:`tf_ucudnn.plan_registry.describe_micro_batches` words them),
    ``micro_batches`` (``[size, candidate]`` pairs, :func:`candidate_name`),
    ``times`` (ms by ``"size candidate"``: the candidates within the
    kernel's limit at most 25 % slower than the fastest of their size, at
    most 6 a size: enough to price another process's plan with this
    process's timings) and ``gap``: how much slower
    the second-best candidate within the limit was than the best at its plan's
    first micro-batch size (0.05: 5 %; None with a single candidate there)."""
    from tf_ucudnn import engine_info
    from tf_ucudnn.plan_registry import describe_micro_batches

    out = []
    for k in engine_info.kernels() if kernels is None else kernels:
        plan = k["plan"]["micro_batches"]
        size = plan[0]["size"] if plan else None
        rows = [dict(r, name=candidate_name(k["algos"][r["algo"]])) for r in k["table"]
                if r["workspace_bytes"] <= k["planned_limit"]]
        by_size = {}
        for r in sorted(rows, key=lambda r: r["time_ms"]):
            by_size.setdefault(r["size"], []).append(r)
        times = {f"{s} {r['name']}": r["time_ms"] for s, rs in by_size.items()
                 for r in rs[:6] if r["time_ms"] <= 1.25 * rs[0]["time_ms"]}
        first = [r["time_ms"] for r in by_size.get(size, [])]
        gap = first[1] / first[0] - 1 if len(first) > 1 and first[0] > 0 else None
        out.append({"pass": k["pass"], "shape": k["shape"], "plan": describe_micro_batches(plan),
                    "micro_batches": [[m["size"], _row_name(m, by_size)] for m in plan],
                    "times": times, "gap": gap})
    return out


def candidate_name(algo):
    """A candidate of the ``algos`` of :func:`tf_ucudnn.engine_info.kernels` by a name that holds from one
    process to the next: a graph-API engine as the engine names it in plans
    (``"eng51{k2=0,k27=8}"``, ``/transposed`` appended), a legacy algorithm as
    ``"legacy 1/math 1"`` (algorithm and math type numbers)."""
    engine = algo.get("engine")
    if engine is None:
        return f"legacy {algo['algo']}/math {algo['math_type']}"
    knobs = ",".join(f"k{knob}={value}" for knob, value in engine["knobs"])
    return f"eng{engine['id']}{{{knobs}}}" + ("/transposed" if engine["transposed"] else "")


def _row_name(micro_batch, by_size):
    """The :func:`candidate_name` of a plan's micro-batch: its engine's name, or
    for a legacy algorithm (named by enum in plans) the legacy row of its size
    and workspace whose time is closest to the micro-batch's."""
    if micro_batch["algo"].startswith("eng"):
        return micro_batch["algo"]
    rows = [r for r in by_size.get(micro_batch["size"], [])
            if r["name"].startswith("legacy")
            and r["workspace_bytes"] == micro_batch.get("workspace_bytes", r["workspace_bytes"])]
    if not rows:
        return micro_batch["algo"]
    return min(rows, key=lambda r: abs(r["time_ms"] - micro_batch.get("time_ms", 0.0)))["name"]


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
    print("run through `tf-ucudnn bench models --models ...`", file=sys.stderr)
    sys.exit(2)
