"""The benchmark's models: what each takes and is trained against
(:class:`ModelSpec`), its loss and a random mini-batch for it."""

import dataclasses


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
    "resnet101": ModelSpec(224, "classification", batch=128, start_batch=64),
    "inceptionv3": ModelSpec(299, "classification", batch=64, start_batch=32),
    "resnet50-nobias": ModelSpec(224, "classification", batch=128, start_batch=64),
    "resnet50v2": ModelSpec(224, "classification", batch=128, start_batch=64),
    "densenet121": ModelSpec(224, "classification", batch=64, start_batch=32),
    "unet": ModelSpec(512, "segmentation", batch=8, start_batch=4),
    "unet-bn": ModelSpec(384, "segmentation", batch=8, start_batch=8),
    "resnet50-640": ModelSpec(640, "detection", batch=16, start_batch=8),
    "edsr": ModelSpec(128, "super-resolution", batch=16, start_batch=8),
}
MODELS = tuple(MODEL_SPECS)
DEFAULT_BATCH = {name: spec.batch for name, spec in MODEL_SPECS.items()}
INPUT_SIZE = {name: spec.input_size for name, spec in MODEL_SPECS.items()}  # pixels, H = W


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
