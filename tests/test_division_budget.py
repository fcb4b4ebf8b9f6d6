"""tf_ucudnn.divide_workspace_budget: Workspace Division applied to a Keras model."""

import json

import keras
import pytest
import tensorflow as tf

import tf_ucudnn
from testing_utils import rel_l2

MiB = 1 << 20


def small_cnn(conv, **knobs):
    inputs = keras.Input((32, 32, 16))
    x = conv(64, 3, padding="same", activation="relu", name="c1", **knobs)(inputs)
    x = conv(64, 3, padding="same", name="c2", **knobs)(x)
    x = conv(128, 5, strides=2, padding="same", name="c3", **knobs)(x)
    return keras.Model(inputs, x)


class DivideWorkspaceBudgetArgumentsTest(tf.test.TestCase):

    def test_model_without_tf_ucudnn_layers_raises_value_error(self):
        model = small_cnn(keras.layers.Conv2D)
        with self.assertRaisesRegex(ValueError, "no tf_ucudnn.layers.Conv2D"):
            tf_ucudnn.divide_workspace_budget(model, 64 * MiB, 8)

    def test_bad_budget_and_batch_size_raise_value_error(self):
        model = small_cnn(tf_ucudnn.layers.Conv2D)
        with self.assertRaisesRegex(ValueError, "total_workspace"):
            tf_ucudnn.divide_workspace_budget(model, -1, 8)
        with self.assertRaisesRegex(ValueError, "batch_size"):
            tf_ucudnn.divide_workspace_budget(model, 64 * MiB, 0)

    def test_without_a_gpu_says_it_needs_one(self):
        if tf.config.list_physical_devices("GPU"):
            self.skipTest("a GPU is visible")
        with self.assertRaisesRegex(RuntimeError, "needs a GPU"):
            tf_ucudnn.divide_workspace_budget(small_cnn(tf_ucudnn.layers.Conv2D), 64 * MiB, 8)


@pytest.mark.gpu
class DivideWorkspaceBudgetGpuTest(tf.test.TestCase):

    def test_division_fits_the_budget_and_keeps_results(self):
        batch, budget = 64, 24 * MiB
        ours = small_cnn(tf_ucudnn.layers.Conv2D)
        stock = small_cnn(keras.layers.Conv2D)
        stock.set_weights(ours.get_weights())
        report = tf_ucudnn.divide_workspace_budget(ours, budget, batch)
        # c1's backward-data is never needed (the input needs no gradient).
        self.assertLen(report.kernels, 8, str(report))
        self.assertLessEqual(report.workspace_bytes, budget, str(report))
        for k in report.kernels:
            self.assertEqual(sum(m["size"] for m in k.micro_batches), batch, str(report))
            self.assertGreaterEqual(k.time_ms, k.fastest_ms - 1e-9)
        self.assertEqual(json.loads(report.to_json())["total_workspace"], budget)
        divided = [r for r in tf_ucudnn.plans() if r["note"] == "Workspace Division"]
        self.assertLen(divided, len(report.kernels))
        self.assertLessEqual(sum(r["workspace_bytes"] for r in divided), budget)

        # The divided plans run and give the same tensors as keras.layers.Conv2D.
        x = tf.random.normal([batch, 32, 32, 16], seed=3)
        with tf.device("/GPU:0"):
            def loss_and_grads(model):
                with tf.GradientTape() as tape:
                    y = model(x)
                    loss = tf.reduce_sum(y * y)
                return [y, *tape.gradient(loss, model.trainable_variables)]
            got = tf.function(lambda: loss_and_grads(ours))()
            want = loss_and_grads(stock)
        for a, b in zip(got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-5)
