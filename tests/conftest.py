"""Test configuration: quiet TensorFlow, the `gpu` marker, TF32 off.

TF_CPP_MIN_LOG_LEVEL must be set before TensorFlow is first imported, which is
why it is set here, at the top of the first module pytest loads.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests plan afresh and leave the user's benchmark database alone; the tests of
# the database set their own file.
os.environ.setdefault("UCUDNN_DATABASE", "off")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Comparisons at 1e-5 relative need full float32 products on Ampere and later
# GPUs (TF32 keeps 10 mantissa bits); harmless on the CPU.
tf.config.experimental.enable_tensor_float_32_execution(False)

# GPU tests start child processes on the same GPUs: this process must not take
# all of their memory up front (its children keep TF's default).
for _gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(_gpu, True)


def pytest_collection_modifyitems(config, items):
    # tf.test.TestCase.test_session is a context manager, not a test.
    items[:] = [item for item in items if item.name != "test_session"]
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items or tf.config.list_physical_devices("GPU"):
        return
    skip = pytest.mark.skip(
        reason="no GPU: tf.config.list_physical_devices('GPU') is empty")
    for item in gpu_items:
        item.add_marker(skip)
