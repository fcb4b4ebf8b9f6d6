"""tf_ucudnn.divide_workspace_budget: Workspace Division applied to a Keras model."""

import contextlib
import io
import json
import os
from unittest import mock

import keras
import pytest
import tensorflow as tf

import tf_ucudnn
from testing_utils import rel_l2
from tf_ucudnn import division

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


class ProgressBarTest(tf.test.TestCase):
    """The bar of divide_workspace_budget(verbose=1) counts the kernels the step plans
    (on the CPU too: its kernels record their plans the same way)."""

    def test_the_bar_reaches_its_target_of_one_step_per_kernel(self):
        # Shapes no other test plans: each kernel is new to this process.
        inputs = keras.Input((13, 11, 7))
        x = tf_ucudnn.layers.Conv2D(9, 3, padding="same", name="c1")(inputs)
        x = tf_ucudnn.layers.Conv2D(9, 3, padding="same", name="c2")(x)
        model = keras.Model(inputs, tf_ucudnn.layers.Conv2D(5, 5, strides=2, name="c3")(x))
        progress = division._plan_forward_backward(model, 3, verbose=0)
        # 3 layers x 3 passes, less c1's backward-data (the input needs no gradient).
        self.assertEqual(progress.target, 8)
        self.assertEqual(progress.count, 8)
        self.assertEqual(progress.bar._seen_so_far, 8)  # Keras' Progbar: where the bar stands

    def test_layers_of_one_shape_share_their_kernels(self):
        inputs = keras.Input((10, 9, 6))
        x = tf_ucudnn.layers.Conv2D(6, 3, padding="same", name="a")(inputs)
        x = tf_ucudnn.layers.Conv2D(6, 3, padding="same", name="b")(x)  # a's shape: its kernels
        model = keras.Model(inputs, tf_ucudnn.layers.Conv2D(6, 3, padding="same", name="c")(x))
        progress = division._plan_forward_backward(model, 5, verbose=0)
        self.assertEqual((progress.target, progress.count), (3, 3))

    def test_kernels_planned_before_complete_the_bar_at_the_end(self):
        inputs = keras.Input((9, 10, 5))
        model = keras.Model(inputs, tf_ucudnn.layers.Conv2D(3, 3, name="only")(inputs))
        first = division._plan_forward_backward(model, 4, verbose=0)
        again = division._plan_forward_backward(model, 4, verbose=0)
        self.assertEqual((first.target, first.count), (2, 2))
        self.assertEqual((again.target, again.count), (2, 0))  # nothing new to plan
        self.assertEqual(again.bar._seen_so_far, 2)


class DebugOutputTest(tf.test.TestCase):

    def divide_group(self, debug_output):
        """Runs the engine's division callback on one fake kernel; returns (stdout, stderr)."""
        kernel = dict(id=1, device=0, total_workspace=MiB, key=dict(conv=dict(batch=16)),
                      **{"pass": "forward"})
        share = division.KernelShare(layers=[], pass_name="forward", shape="N=16", micro_batches=[
            dict(size=16, algo="ALGO_1", workspace_bytes=MiB, time_ms=0.5)], workspace_bytes=MiB,
            time_ms=0.5, fastest_ms=0.5, fastest_workspace_bytes=MiB)
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(division, "kernels", return_value=[kernel]), \
                mock.patch.object(division, "_divide", return_value=[share]), \
                mock.patch.dict(os.environ, UCUDNN_DEBUG_OUTPUT=debug_output), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            division._divide_group(0, MiB)
        return out.getvalue(), err.getvalue()

    def test_the_run_time_division_report_goes_to_stderr_like_the_plan_lines(self):
        out, err = self.divide_group("1")
        self.assertEqual(out, "")
        self.assertIn("tf_ucudnn: Workspace Division on GPU:0", err)
        self.assertIn("1x16 ALGO_1", err)

    def test_without_debug_output_nothing_is_printed(self):
        self.assertEqual(self.divide_group("0"), ("", ""))


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
