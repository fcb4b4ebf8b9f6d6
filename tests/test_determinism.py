"""With tf.config.experimental.enable_op_determinism(), only deterministic cuDNN
algorithms are planned and repeated runs are bitwise identical (GPU)."""

import json
import textwrap

import pytest
import tensorflow as tf

from testing_utils import run_python

# cuDNN's legacy algorithms documented as non-deterministic.
NON_DETERMINISTIC = {("backward-data", "ALGO_0"), ("backward-filter", "ALGO_0"),
                     ("backward-filter", "ALGO_3")}

# Determinism is process-wide and cannot be turned off again, so it runs in a child.
_CHILD = textwrap.dedent("""
    import json, numpy as np, tensorflow as tf, tf_ucudnn
    tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((64, 28, 28, 64)), tf.float32)
    w = tf.constant(rng.standard_normal((3, 3, 64, 64)), tf.float32)

    def run():
        with tf.device("/GPU:0"), tf.GradientTape() as tape:
            tape.watch([x, w])
            y = tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit=64 << 20)
            loss = tf.reduce_sum(y * y)
        return [t.numpy() for t in [y, *tape.gradient(loss, [x, w])]]

    first, second = run(), run()
    print(json.dumps(dict(
        identical=[bool(np.array_equal(a, b)) for a, b in zip(first, second)],
        algos=[[r["pass"], m["algo"].split("/")[0]] for r in tf_ucudnn.plans()
               for m in r["micro_batches"]])))
""")


@pytest.mark.gpu
class OpDeterminismTest(tf.test.TestCase):

    def test_deterministic_algorithms_only_and_bitwise_identical_repeats(self):
        done = run_python(_CHILD)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertEqual(result["identical"], [True, True, True],
                         "output, input gradient, filter gradient must repeat bitwise")
        self.assertNotEmpty(result["algos"])
        chosen = {tuple(a) for a in result["algos"]}
        self.assertEmpty(chosen & NON_DETERMINISTIC,
                         f"non-deterministic algorithms planned under op determinism: {chosen}")
