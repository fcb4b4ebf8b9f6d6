"""When a cached plan's workspace cannot be allocated, the kernel runs the fastest
benchmarked plan that fits, logs that once, and the result is still right (GPU)."""

import json
import textwrap

import pytest
import tensorflow as tf

from testing_utils import run_python

# The GPU is capped, planned with room to spare, then nearly filled by another
# tensor so that the plan's workspace no longer fits. Runs in a child so the cap
# applies before TensorFlow initialises the GPU.
_CHILD = textwrap.dedent("""
    import json, numpy as np, tensorflow as tf
    gpu = tf.config.list_physical_devices("GPU")[0]
    limit_mib = 6144
    tf.config.set_logical_device_configuration(
        gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit_mib)])
    tf.config.experimental.enable_tensor_float_32_execution(False)
    import tf_ucudnn
    rng = np.random.default_rng(0)
    # 5x5 filters: the fastest algorithms want far more workspace than the slowest.
    x_host = rng.standard_normal((256, 27, 27, 96)).astype(np.float32)
    w_host = rng.standard_normal((5, 5, 96, 256)).astype(np.float32)
    # The reference runs on the CPU: under a memory cap stock TF's GPU conv may
    # fail to create its cuBLAS handle, which has nothing to do with tf_ucudnn.
    with tf.device("/CPU:0"):
        want = tf.nn.conv2d(x_host, w_host, 1, "SAME").numpy()
    with tf.device("/GPU:0"):
        x = tf.constant(x_host)
        w = tf.constant(w_host)
        conv = lambda: tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit=2 << 30)
        first = conv().numpy()
        planned = tf_ucudnn.plans()[-1]["workspace_bytes"]
        out_bytes = first.nbytes
        # Fill the GPU with 16 MiB blocks, then give back just enough for the
        # output, half of the plan's workspace and 64 MiB of slack (the filter
        # copy and the allocator's fragmentation): the plan no longer fits.
        blocks = []
        try:
            while True:
                blocks.append(tf.zeros([4 << 20], tf.float32))
        except tf.errors.ResourceExhaustedError:
            pass
        freed = 0
        while blocks and freed < out_bytes + planned // 2 + (64 << 20):
            blocks.pop()
            freed += 16 << 20
        hog_bytes = len(blocks) * (16 << 20)
        second = conv().numpy()
        del blocks
    rel = lambda a: float(np.linalg.norm(a - want) / np.linalg.norm(want))
    print(json.dumps(dict(planned=planned, hog=hog_bytes, first=rel(first), second=rel(second))))
""")


@pytest.mark.gpu
class WorkspaceFallbackTest(tf.test.TestCase):

    def test_unallocatable_workspace_falls_back_to_a_plan_that_fits(self):
        done = run_python(_CHILD, TF_CPP_MIN_LOG_LEVEL="1")  # WARNING, the fallback message
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertGreater(result["planned"], 64 << 20,
                           f"the plan needs too little workspace to force a fallback: {result}")
        self.assertLessEqual(result["first"], 1e-5, result)
        self.assertLessEqual(result["second"], 1e-5, result)
        self.assertEqual(done.stderr.count("running a plan that needs"), 1,
                         f"expected one fallback message; stderr tail:\n{done.stderr[-2000:]}")
