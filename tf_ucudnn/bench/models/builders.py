"""The benchmark's models built in Keras from ``keras.layers.Conv2D``: the
classifiers (AlexNet, ResNet-18, and ``keras.applications``' VGG-16,
ResNet-50, InceptionV3), and U-Net, a detection backbone and EDSR, whose
activations fill a GPU's memory."""

import functools

from tf_ucudnn.bench.models.specs import INPUT_SIZE, model_spec

CLASSES = 1000  # the classifiers' logits
UNET_CLASSES = 2  # Ronneberger et al. 2015: cell and background
DETECTION_ANCHORS, DETECTION_CLASSES = 9, 20  # the head: 9 x (20 + 4) channels per position
EDSR_SCALE = 4  # EDSR's output is 4 times its input's height and width


def build_model(name, input_size=None):
    """A Keras model of ``keras.layers.Conv2D`` layers, NHWC images in.

    Args:
      name: a classifier of 224x224x3 images (299x299x3 for InceptionV3) with
        1000 logits out: ``"alexnet"`` (the torchvision variant's
        convolutions), ``"resnet18"`` (basic blocks with batch
        normalization), ``"vgg16"`` (``keras.applications.VGG16(weights=None)``),
        ``"resnet50"`` (``keras.applications.ResNet50(weights=None)``),
        ``"resnet101"`` (``keras.applications.ResNet101(weights=None)``) or
        ``"inceptionv3"`` (``keras.applications.InceptionV3(weights=None)``);
        or ``"resnet50-nobias"``: ResNet-50 with ``use_bias=False`` in every
        convolution. Batch normalization follows each of them and absorbs a
        bias, so the model computes the same functions; it measures what a
        convolution's bias costs where it cannot join the convolution's
        kernel (an XLA custom call), docs/benchmarks.md §5. Pre-activation
        networks (BatchNormalization → ReLU → Conv2D): ``"resnet50v2"``
        (``keras.applications.ResNet50V2(weights=None)``) and
        ``"densenet121"`` (``keras.applications.DenseNet121(weights=None)``).
        Or a model whose activations, not its weights, fill a GPU's memory:
        ``"unet"`` (:func:`unet`: 512x512x3 in, 2 logits per pixel out),
        ``"unet-bn"`` (the same with batch normalization, 384x384x3 in),
        ``"resnet50-640"`` (:func:`detection_backbone`: 640x640x3 in, a
        20x20x216 head out) or ``"edsr"`` (:func:`edsr`: 128x128x3 in,
        512x512x3 out).
      input_size: the input's height and width, pixels; None: the model's
        own (:data:`MODEL_SPECS`). Smaller sizes build the same layers for
        tests (``unet``, ``unet-bn``: a multiple of 16; the ``keras.applications``
        models: at least 32, InceptionV3 75; AlexNet at least 63).

    Raises:
      ValueError: an unknown name.
    """
    import keras

    model_spec(name)
    L = keras.layers
    shape = None if input_size is None else (input_size, input_size, 3)
    size = input_size or INPUT_SIZE[name]
    if name in ("unet", "unet-bn"):
        return unet((size, size, 3), batch_norm=name == "unet-bn")
    if name == "resnet50-640":
        return detection_backbone((size, size, 3))
    if name == "edsr":
        return edsr((size, size, 3))
    if name == "vgg16":
        return keras.applications.VGG16(weights=None, input_shape=shape)
    if name == "resnet50":
        return keras.applications.ResNet50(weights=None, input_shape=shape)
    if name == "resnet101":
        return keras.applications.ResNet101(weights=None, input_shape=shape)
    if name == "inceptionv3":
        return keras.applications.InceptionV3(weights=None, input_shape=shape)
    if name == "resnet50v2":
        return keras.applications.ResNet50V2(weights=None, input_shape=shape)
    if name == "densenet121":
        return keras.applications.DenseNet121(weights=None, input_shape=shape)
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


def unet(input_shape=(512, 512, 3), classes=UNET_CLASSES, base_filters=64, batch_norm=False):
    """U-Net (Ronneberger et al. 2015) with SAME padding, for segmentation.

    Four down stages of two 3x3 convolutions + ReLU (with ``batch_norm``:
    convolution without bias, ``BatchNormalization``, ReLU) and a 2x2 max-pool
    (64, 128, 256, 512 filters), two 3x3 convolutions of 1024 at the bottom,
    four up stages of a 2x2, stride-2 ``keras.layers.Conv2DTranspose``, the
    concatenation with the stage's skip and two 3x3 convolutions, then a 1x1
    convolution to the classes' logits (float32 under a mixed policy). The
    layers are named as Keras applications name ResNet's, one prefix per
    Conv -> BN -> ReLU: ``down0_1_conv``, ``down0_1_bn``, ``down0_1_relu``,
    ``down0_2_…``, ``down0_pool`` … ``bottom_2_relu``, ``up3_transpose``,
    ``up3_concat``, ``up3_1_conv`` … ``up0_2_relu``, ``logits``.

    Args:
      input_shape: ``(H, W, 3)``, H and W multiples of 16.
      classes: logits per pixel.
      base_filters: the first stage's filters (doubled per stage).
      batch_norm: each 3x3 convolution as Conv2D (no bias) ->
        BatchNormalization -> ReLU, as segmentation models are commonly
        written (``"unet-bn"``).

    Returns:
      A ``keras.Model``: ``[N, H, W, 3]`` to ``[N, H, W, classes]``.
    """
    import keras

    L = keras.layers

    def twice(x, filters, stage):
        for i in (1, 2):  # Keras applications' names, so that profiles group each chain
            name = f"{stage}_{i}"
            if batch_norm:
                x = L.Conv2D(filters, 3, padding="same", use_bias=False, name=f"{name}_conv")(x)
                x = L.BatchNormalization(name=f"{name}_bn")(x)
                x = L.ReLU(name=f"{name}_relu")(x)
            else:
                x = L.Conv2D(filters, 3, padding="same", activation="relu",
                             name=f"{name}_conv")(x)
        return x

    inputs = keras.Input(input_shape)
    x, skips = inputs, []
    for stage in range(4):
        x = twice(x, base_filters << stage, f"down{stage}")
        skips.append(x)
        x = L.MaxPooling2D(2, name=f"down{stage}_pool")(x)
    x = twice(x, base_filters << 4, "bottom")
    for stage in reversed(range(4)):
        x = L.Conv2DTranspose(base_filters << stage, 2, strides=2, name=f"up{stage}_transpose")(x)
        x = L.Concatenate(name=f"up{stage}_concat")([skips[stage], x])
        x = twice(x, base_filters << stage, f"up{stage}")
    return keras.Model(inputs, L.Conv2D(classes, 1, dtype="float32", name="logits")(x),
                       name="unet_bn" if batch_norm else "unet")


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


def batch_norm_fused(model, workspace_limit, input_prologue=True, recompute=None):
    """``tf_ucudnn.rewrite_model(model, workspace_limit, fuse_batch_norm=True,
    recompute=recompute)`` (the ``ucudnn-bn`` modes of ``bench models`` and
    ``bench memory-cap``; ``recompute="1x1"``: the ``ucudnn-bnrecompute``
    modes): every tf_ucudnn convolution's ``input_prologue`` set to
    ``input_prologue`` in every precision: with False, a ``Conv2DBatchNorm``
    computes the statistics only and every convolution reads its input as it
    is (the ``ucudnn-bnstats`` modes), so that the prologue's share can be
    measured apart."""
    import tf_ucudnn

    model = tf_ucudnn.rewrite_model(model, workspace_limit=workspace_limit, verbose=0,
                                    fuse_batch_norm=True, recompute=recompute)
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, (tf_ucudnn.layers.Conv2D, tf_ucudnn.layers.Conv2DBatchNorm)):
            layer.input_prologue = input_prologue
    return model


def batch_norm_fused_for_mode(model, workspace_limit, mode):
    """:func:`batch_norm_fused` with the arguments a ``ucudnn-bn*`` mode of
    ``bench models`` and ``bench memory-cap`` names: ``bnstats`` no prologue,
    ``bnrecompute`` ``recompute="1x1"``, ``bn`` the prologue alone."""
    return batch_norm_fused(model, workspace_limit, input_prologue="bnstats" not in mode,
                            recompute="1x1" if "bnrecompute" in mode else None)
