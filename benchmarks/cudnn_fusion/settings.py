"""What the cuDNN fusion probe covers: data types, layouts, ResNet-50's
convolution shapes, and the constants of its batch norm and of its checks."""

DTYPES = ("bfloat16", "float16", "float32")
LAYOUTS = ("NHWC", "NCHW")
# Relative error (Frobenius) above which a result is marked wrong: float32 may
# run on TF32 tensor cores (10 mantissa bits), as TensorFlow's default allows.
TOLERANCE = {"bfloat16": 5e-2, "float16": 2e-2, "float32": 1e-2}
EPSILON = 1e-3   # Keras BatchNormalization's default
MOMENTUM = 0.99  # Keras: moving = moving * momentum + batch * (1 - momentum)
# Batch-norm results are checked on their first channels (each channel is independent):
# full float32 references of 256 × 256 × 56 × 56 tensors would not fit the memory cap.
CHECK_CHANNELS = 32


class Shape:
    """A convolution of ResNet-50: input [N, C, H, H], filter [K, C, R, R]."""

    def __init__(self, c, h, k, r, stride=1, pad=None):
        self.c, self.h, self.k, self.r, self.stride = c, h, k, r, stride
        self.pad = r // 2 if pad is None else pad
        self.ho = (h + 2 * self.pad - r) // stride + 1

    def describe(self):
        text = f"{self.h}² {self.c}→{self.k} {self.r}×{self.r}"
        return text + (f" stride {self.stride}" if self.stride != 1 else "")


SHAPES = {
    "56_64_64_3": Shape(64, 56, 64, 3),
    "56_64_256_1": Shape(64, 56, 256, 1),
    "28_128_128_3": Shape(128, 28, 128, 3),
    "14_256_256_3": Shape(256, 14, 256, 3),
    "7_512_512_3": Shape(512, 7, 512, 3),
    "28_256_512_1_s2": Shape(256, 28, 512, 1, stride=2),
    "224_3_64_7_s2": Shape(3, 224, 64, 7, stride=2),  # the stem; not in the default list
}
DEFAULT_SHAPES = tuple(SHAPES)[:-1]
