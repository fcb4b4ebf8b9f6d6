"""UCUDNN_BENCHMARK_DEVICES: a kernel's micro-batch sizes are benchmarked on
several GPUs at once (GPU). With two GPUs the plan says both benchmarked and
the results match TensorFlow's; a bad value or an unknown GPU id is an
InvalidArgumentError naming what is allowed (one GPU is enough for those)."""

import json
import textwrap

import pytest
import tensorflow as tf

from testing_utils import run_python

# Forward, backward-data and backward-filter of one layer on GPU:0, with
# powerOfTwo sizes of N = 64 to spread; the reference is TF's own on the CPU.
_CHILD = textwrap.dedent("""
    import json, numpy as np, tensorflow as tf
    tf.config.experimental.enable_tensor_float_32_execution(False)
    import tf_ucudnn
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 20, 20, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 32)).astype(np.float32)
    dy = rng.standard_normal((64, 20, 20, 32)).astype(np.float32)
    with tf.device("/CPU:0"):
        want = [tf.nn.conv2d(x, w, 1, "SAME"),
                tf.raw_ops.Conv2DBackpropInput(input_sizes=x.shape, filter=w, out_backprop=dy,
                                               strides=[1, 1, 1, 1], padding="SAME"),
                tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=w.shape, out_backprop=dy,
                                                strides=[1, 1, 1, 1], padding="SAME")]
    result = {}
    try:
        with tf.device("/GPU:0"):
            got = [tf_ucudnn.conv2d(x, w, 1, "SAME"),
                   tf_ucudnn.conv2d_backprop_input(x.shape, w, dy, 1, "SAME"),
                   tf_ucudnn.conv2d_backprop_filter(x, w.shape, dy, 1, "SAME")]
        rel = lambda a, b: float(np.linalg.norm(np.asarray(a) - np.asarray(b)) /
                                 np.linalg.norm(np.asarray(b)))
        result["errors"] = [rel(g, r) for g, r in zip(got, want)]
        result["notes"] = [p["note"] for p in tf_ucudnn.plans()]
    except tf.errors.InvalidArgumentError as e:
        result["invalid_argument"] = e.message
    print(json.dumps(result))
""")


def _run(devices):
    done = run_python(_CHILD, UCUDNN_BENCHMARK_DEVICES=devices)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
class BenchmarkDevicesTest(tf.test.TestCase):

    def test_two_gpus_benchmark_one_kernel_and_results_match(self):
        if len(tf.config.list_physical_devices("GPU")) < 2:
            self.skipTest("needs two GPUs")
        for devices in ("all", "0,1"):
            result = _run(devices)
            self.assertNotIn("invalid_argument", result)
            for error in result["errors"]:
                self.assertLessEqual(error, 1e-5, (devices, result))
            self.assertEqual(result["notes"], ["benchmarked on GPUs 0, 1"] * 3,
                             (devices, result))

    def test_unknown_gpu_id_is_invalid_argument(self):
        result = _run("0,97")
        self.assertIn("names GPU 97", result.get("invalid_argument", ""), result)
        self.assertIn("'all'", result["invalid_argument"])

    def test_malformed_value_is_invalid_argument(self):
        result = _run("gpu0")
        self.assertIn("must be 'all' or comma-separated GPU ids", result.get("invalid_argument", ""),
                      result)

    def test_own_gpu_alone_benchmarks_as_without_the_variable(self):
        result = _run("0")
        self.assertNotIn("invalid_argument", result)
        for error in result["errors"]:
            self.assertLessEqual(error, 1e-5, result)
        self.assertEqual(result["notes"], [""] * 3, result)
