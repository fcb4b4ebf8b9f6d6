"""Many threads running many convolution shapes through tf_ucudnn at once (plan
cache, plan records): no crash and every result right."""

import concurrent.futures

import numpy as np
import tensorflow as tf

import tf_ucudnn
from testing_utils import reference_conv2d, rel_l2

DEVICE = "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"


def one_call(i):
    rng = np.random.default_rng(i)
    n, hw, c, k = 2 + i % 5, 5 + i % 7, 2 + i % 3, 3 + i % 4
    x = tf.constant(rng.standard_normal((n, hw, hw, c)), tf.float32)
    w = tf.constant(rng.standard_normal((3, 3, c, k)), tf.float32)
    with tf.device(DEVICE):
        got = tf_ucudnn.conv2d(x, w, 1 + i % 2, "SAME", micro_batch_size=1 + i % 3)
    want = reference_conv2d(x, w, 1 + i % 2, "SAME")
    return rel_l2(got, want)


class ConcurrencyStressTest(tf.test.TestCase):

    def test_many_threads_many_shapes(self):
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            errors = list(pool.map(one_call, range(160)))
        self.assertLen(errors, 160)
        self.assertLessEqual(max(errors), 1e-5, f"worst relative L2 error {max(errors):.2e}")
        self.assertNotEmpty(tf_ucudnn.plans())
