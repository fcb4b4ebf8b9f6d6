"""Compiler options shared by every target of tf_ucudnn."""

# GOOGLE_CUDA builds the cuDNN kernels with the host compiler: they only call
# host APIs, which libtensorflow_framework.so.2 exports (no nvcc needed).
# AVX2/FMA: every machine that runs pip TensorFlow 2.21 here has them.
UCUDNN_COPTS = [
    "-DGOOGLE_CUDA=1",
    "-mavx2",
    "-mfma",
    "-Wno-sign-compare",
    "-Wno-unused-function",
]
