"""When a cached plan's workspace cannot be allocated, the kernel runs the fastest
benchmarked plan that fits, logs that once, and the result is still right (GPU)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

# The GPU is capped, planned with room to spare, then nearly filled by another
# tensor so that the plan's workspace no longer fits. Runs in a child so the cap
# applies before TensorFlow initialises the GPU.
_CHILD = textwrap.dedent("""
    import json, numpy as np, tensorflow as tf
    gpu = tf.config.list_physical_devices("GPU")[0]
    limit_mib = 3072
    tf.config.set_logical_device_configuration(
        gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit_mib)])
    tf.config.experimental.enable_tensor_float_32_execution(False)
    import tf_ucudnn
    rng = np.random.default_rng(0)
    with tf.device("/GPU:0"):
        x = tf.constant(rng.standard_normal((128, 64, 56, 56)), tf.float32)
        w = tf.constant(rng.standard_normal((3, 3, 64, 64)), tf.float32)
        conv = lambda: tf_ucudnn.conv2d(x, w, 1, "SAME", "NCHW", workspace_limit=1 << 30)
        want = tf.nn.conv2d(x, w, 1, "SAME", "NCHW").numpy()
        first = conv().numpy()
        planned = tf_ucudnn.plans()[-1]["workspace_bytes"]
        out_bytes = first.nbytes
        used = tf.config.experimental.get_memory_info("GPU:0")["current"]
        free = (limit_mib << 20) - used
        hog_bytes = free - out_bytes - planned // 2 - (64 << 20)
        hog = tf.zeros([max(hog_bytes, 0) // 4], tf.float32)
        second = conv().numpy()
        del hog
    rel = lambda a: float(np.linalg.norm(a - want) / np.linalg.norm(want))
    print(json.dumps(dict(planned=planned, hog=hog_bytes, first=rel(first), second=rel(second))))
""")


@pytest.mark.gpu
class WorkspaceFallbackTest(tf.test.TestCase):

    def test_unallocatable_workspace_falls_back_to_a_plan_that_fits(self):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]), TF_CPP_MIN_LOG_LEVEL="1")
        done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                              text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertGreater(result["planned"], 0, f"the plan needs no workspace: {result}")
        self.assertLessEqual(result["first"], 1e-5, result)
        self.assertLessEqual(result["second"], 1e-5, result)
        self.assertEqual(done.stderr.count("running a plan that needs"), 1,
                         f"expected one fallback message; stderr tail:\n{done.stderr[-2000:]}")
