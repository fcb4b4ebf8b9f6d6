"""tf_ucudnn.enable_rewrite (the Grappler rewriter) and tf_ucudnn.rewrite_model."""

import contextlib
import io
import os
import tempfile
import threading
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.eager import context

import tf_ucudnn
from tf_ucudnn.units import AUTO_WORKSPACE_LIMIT
from testing_utils import ONEDNN_CONV_OPS, registered_op_names, rel_l2, run_python, stock_op_name

MiB = 1 << 20
# Under their stock names: executed_ops maps oneDNN's names back to these.
STOCK_CONV_OPS = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "_FusedConv2D"}
UCUDNN_OPS = {"Ucudnn>Conv2D", "Ucudnn>Conv2DWithBias", "Ucudnn>Conv2DBackpropInput",
              "Ucudnn>Conv2DBackpropFilter"}
# The three passes, by the op of each (the forward with or without its bias).
UCUDNN_PASSES = {"Ucudnn>Conv2D", "Ucudnn>Conv2DBackpropInput", "Ucudnn>Conv2DBackpropFilter"}


def ucudnn_passes(op_types):
    """The UCUDNN_PASSES that tf_ucudnn ops among `op_types` run."""
    return {"Ucudnn>Conv2D" if op == "Ucudnn>Conv2DWithBias" else op
            for op in op_types if op in UCUDNN_OPS}


def executed_nodes(fn, *args):
    """Runs fn(*args) and returns (result, the NodeDefs of the partition graphs that ran)."""
    ctx = context.context()
    ctx.enable_run_metadata()
    # TF goes on gathering function graphs after disable_run_metadata: drop
    # those of earlier runs (seen: a stock run's graphs in the next export).
    ctx.export_run_metadata()
    try:
        result = fn(*args)
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
    return result, [node for function_graph in metadata.function_graphs
                    for graph in function_graph.partition_graphs for node in graph.node]


def executed_ops(fn, *args):
    """Runs fn(*args) and returns (result, the op types of the graphs that ran).

    oneDNN's convolutions (TensorFlow renames them after Grappler when oneDNN
    is on) are given under the stock name they stand for
    (``_MklNativeFusedConv2D`` -> ``_FusedConv2D``), so that the sets compare
    the same with oneDNN on and off.
    """
    result, nodes = executed_nodes(fn, *args)
    return result, {stock_op_name(node.op) for node in nodes}


def conv_bias_relu_with_grads(x, w, b):
    with tf.GradientTape() as tape:
        tape.watch([x, w, b])
        y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b))
        loss = tf.reduce_sum(y * y)
    return [y, *tape.gradient(loss, [x, w, b])]


def small_keras_cnn(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((16, 16, 3)),
        keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(8, 3, strides=2, padding="valid"),
        keras.layers.Flatten(),
        keras.layers.Dense(4),
    ])


def train_small_keras_cnn(samples, batch_size, seed):
    """Two epochs of SGD on random data; returns (losses, weights, predictions)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, 16, 16, 3)).astype("float32")
    y = rng.standard_normal((samples, 4)).astype("float32")
    model = small_keras_cnn()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=False)
    history = model.fit(x, y, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
    return history.history["loss"], model.get_weights(), model.predict(x, verbose=0)


class RewriteTestCase(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        tf_ucudnn.disable_rewrite()
        self.addCleanup(tf_ucudnn.disable_rewrite)
        rng = np.random.default_rng(0)
        self.x = tf.constant(rng.standard_normal((4, 12, 12, 3)), tf.float32)
        self.w = tf.constant(rng.standard_normal((3, 3, 3, 5)), tf.float32)
        self.b = tf.constant(rng.standard_normal((5,)), tf.float32)


class RewriteThreadsTest(RewriteTestCase):
    """The rewrite is per thread, as TF's function-call options are."""

    def in_thread(self, fn):
        """fn() in a new thread (joined): its result, or its exception raised here."""
        result = {}

        def run():
            try:
                result["value"] = fn()
            except BaseException as e:  # noqa: BLE001  (re-raised in the test's thread)
                result["error"] = e

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(300)
        if "error" in result:
            raise result["error"]
        return result["value"]

    def rewritten(self):
        """How many convolutions the rewriter replaced in a new function run by
        the calling thread (rewrite_stats, not run metadata: that is not per thread)."""
        before = tf_ucudnn.rewrite_stats()
        tf.function(conv_bias_relu_with_grads)(self.x, self.w, self.b)
        after = tf_ucudnn.rewrite_stats()
        return sum(after[k] - before[k] for k in ("rewritten", "fused_rewritten"))

    def test_another_threads_disable_does_not_stop_this_thread_disabling(self):
        tf_ucudnn.enable_rewrite(workspace_limit=4 * MiB)

        def enable_and_disable():
            tf_ucudnn.enable_rewrite()
            tf_ucudnn.disable_rewrite()
            return tf_ucudnn.rewrite_settings()

        self.assertIsNone(self.in_thread(enable_and_disable))
        self.assertEqual(self.rewritten(), 3)  # forward, backward-data, backward-filter
        tf_ucudnn.disable_rewrite()
        self.assertEqual(self.rewritten(), 0)
        self.assertIsNone(tf_ucudnn.rewrite_settings())
        with tf_ucudnn.enable_rewrite(workspace_limit=4 * MiB):
            self.in_thread(enable_and_disable)
            self.assertEqual(tf_ucudnn.rewrite_settings().workspace_limit, 4 * MiB)

    def test_enabling_in_one_thread_leaves_the_others_alone(self):
        with tf_ucudnn.enable_rewrite():
            settings, rewritten = self.in_thread(
                lambda: (tf_ucudnn.rewrite_settings(), self.rewritten()))
            self.assertIsNone(settings)
            self.assertEqual(rewritten, 0)

        def enable_here():
            tf_ucudnn.enable_rewrite(batch_size_policy="all")
            try:
                return tf_ucudnn.rewrite_settings(), self.rewritten()
            finally:
                tf_ucudnn.disable_rewrite()

        settings, rewritten = self.in_thread(enable_here)
        self.assertEqual(settings.batch_size_policy, "all")
        self.assertEqual(rewritten, 3)
        self.assertIsNone(tf_ucudnn.rewrite_settings())
        self.assertEqual(self.rewritten(), 0)


class OneDnnNamesTest(tf.test.TestCase):

    def test_every_onednn_name_the_tests_map_is_a_registered_op(self):
        # A misspelt name would never match and a oneDNN op would pass as "no stock op".
        registered = registered_op_names()
        self.assertEqual(set(ONEDNN_CONV_OPS) - registered, set())
        self.assertLessEqual(set(ONEDNN_CONV_OPS.values()), registered)

    def test_every_registered_onednn_float_convolution_is_mapped(self):
        # A oneDNN rename that TensorFlow adds later must be added to the table.
        onednn = {name for name in registered_op_names()
                  if name.startswith("_Mkl") and "Conv2D" in name and "Quantized" not in name}
        self.assertEqual(onednn - set(ONEDNN_CONV_OPS), set())


class EnableRewriteTest(RewriteTestCase):

    def test_enabled_graphs_run_tf_ucudnn_ops_and_disabled_graphs_stock_ops(self):
        fn = tf.function(conv_bias_relu_with_grads)
        want, before = executed_ops(fn, self.x, self.w, self.b)
        self.assertTrue(before & STOCK_CONV_OPS, before)
        self.assertFalse(before & UCUDNN_OPS, before)

        tf_ucudnn.enable_rewrite(workspace_limit=8 * MiB)
        got, during = executed_ops(fn, self.x, self.w, self.b)
        self.assertEqual(ucudnn_passes(during), UCUDNN_PASSES, during)
        self.assertFalse(during & STOCK_CONV_OPS, during)
        for a, b in zip(got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-5)

        tf_ucudnn.disable_rewrite()
        # A function instantiated before is reused as it was; a new one shows its graph.
        self.assertAllEqual(fn(self.x, self.w, self.b)[0], want[0])
        _, after = executed_ops(tf.function(conv_bias_relu_with_grads), self.x, self.w, self.b)
        self.assertTrue(after & STOCK_CONV_OPS, after)
        self.assertFalse(after & UCUDNN_OPS, after)

    def test_fused_conv_bias_relu_becomes_the_ucudnn_conv_with_bias_and_relu(self):
        # Grappler's remapper fuses conv + BiasAdd + Relu (inference; on the
        # CPU also in training).
        fn = tf.function(lambda x, w, b: tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b)))
        want, stock = executed_ops(fn, self.x, self.w, self.b)
        before = tf_ucudnn.rewrite_stats()
        with tf_ucudnn.enable_rewrite():
            got, ops = executed_ops(fn, self.x, self.w, self.b)
        self.assertEqual(ucudnn_passes(ops), {"Ucudnn>Conv2D"}, ops)
        self.assertFalse(ops & STOCK_CONV_OPS, ops)
        if "_FusedConv2D" in stock:  # the remapper fused it: bias and ReLU stay with the conv
            self.assertGreater(tf_ucudnn.rewrite_stats()["fused_rewritten"], before["fused_rewritten"])
            self.assertIn("Ucudnn>Conv2DWithBias", ops)
            self.assertNotIn("Relu", ops)
            self.assertNotIn("BiasAdd", ops)
        self.assertLessEqual(rel_l2(got, want), 1e-5)

    def test_fused_conv_bias_elu_becomes_the_ucudnn_conv_with_bias_then_elu(self):
        # Only the ReLU goes into the op; other fused activations stay nodes.
        fn = tf.function(lambda x, w, b: tf.nn.elu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b)))
        want, stock = executed_ops(fn, self.x, self.w, self.b)
        with tf_ucudnn.enable_rewrite():
            got, nodes = executed_nodes(fn, self.x, self.w, self.b)
        ops = {stock_op_name(node.op) for node in nodes}
        self.assertFalse(ops & STOCK_CONV_OPS, ops)
        if "_FusedConv2D" in stock:
            convs = [node for node in nodes if node.op == "Ucudnn>Conv2DWithBias"]
            self.assertEqual([node.attr["activation"].s for node in convs], [b"linear"])
            self.assertIn("Elu", ops)
        self.assertLessEqual(rel_l2(got, want), 1e-5)

    def test_context_manager_restores_the_previous_state(self):
        self.assertIsNone(tf_ucudnn.rewrite_settings())
        with tf_ucudnn.enable_rewrite(workspace_limit=4 * MiB):
            self.assertEqual(tf_ucudnn.rewrite_settings().workspace_limit, 4 * MiB)
            with tf_ucudnn.enable_rewrite(batch_size_policy="all"):
                self.assertEqual(tf_ucudnn.rewrite_settings().batch_size_policy, "all")
            self.assertEqual(tf_ucudnn.rewrite_settings().workspace_limit, 4 * MiB)
        self.assertIsNone(tf_ucudnn.rewrite_settings())

    def test_enabling_twice_is_harmless(self):
        fn = tf.function(conv_bias_relu_with_grads)
        want = fn(self.x, self.w, self.b)
        tf_ucudnn.enable_rewrite()
        tf_ucudnn.enable_rewrite()
        got, ops = executed_ops(fn, self.x, self.w, self.b)
        self.assertEqual(ucudnn_passes(ops), UCUDNN_PASSES)
        for a, b in zip(got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-5)
        tf_ucudnn.disable_rewrite()
        tf_ucudnn.disable_rewrite()
        self.assertIsNone(tf_ucudnn.rewrite_settings())

    def test_a_graph_without_convolutions_is_untouched(self):
        fn = tf.function(lambda a, b: tf.nn.relu(tf.matmul(a, b)) + 1.0)
        a = tf.random.normal([8, 8])
        want, stock_ops = executed_ops(fn, a, a)
        before = tf_ucudnn.rewrite_stats()
        with tf_ucudnn.enable_rewrite():
            got, ops = executed_ops(fn, a, a)
        self.assertEqual(ops, stock_ops)
        self.assertEqual(tf_ucudnn.rewrite_stats(), before)
        self.assertAllEqual(got, want)

    def test_devices_restrict_the_rewrite(self):
        if tf.config.list_physical_devices("GPU"):
            self.skipTest("checks that a CPU graph is left alone when only GPUs are chosen")
        fn = tf.function(conv_bias_relu_with_grads)
        with self.assertWarnsRegex(UserWarning, "this process has no GPU"):
            enabled = tf_ucudnn.enable_rewrite(devices="GPU")
        with enabled:
            _, ops = executed_ops(fn, self.x, self.w, self.b)
        self.assertFalse(ops & UCUDNN_OPS, ops)
        with tf_ucudnn.enable_rewrite(devices=["/device:CPU:0"]):
            _, ops = executed_ops(fn, self.x, self.w, self.b)
        self.assertEqual(ucudnn_passes(ops), UCUDNN_PASSES, ops)

    def test_a_device_this_process_lacks_raises_value_error_naming_those_it_has(self):
        present = [d.name.split("device:")[-1] for d in tf.config.list_logical_devices()
                   if d.device_type in ("CPU", "GPU")]
        for devices, named in [("GPU:9", "GPU:9"), ("/device:GPU:9", "GPU:9"),
                               (["CPU", "CPU:7"], "CPU:7")]:
            with self.subTest(devices=devices):
                with self.assertRaisesRegex(ValueError, rf"'{named}' is not a device of this "
                                                        rf"process; its devices are "
                                                        rf"{', '.join(present)}"):
                    tf_ucudnn.enable_rewrite(devices=devices)
                self.assertIsNone(tf_ucudnn.rewrite_settings())

    def test_devices_of_another_form_raise_value_error_naming_the_forms(self):
        for devices in [5, 1.5, b"GPU", {"GPU": 0}, [5], ["CPU", None], ""]:
            with self.subTest(devices=repr(devices)):
                with self.assertRaisesRegex(ValueError, r"devices must be None, a device type "
                                                        r"or name such as 'GPU'.*got"):
                    tf_ucudnn.enable_rewrite(devices=devices)
                self.assertIsNone(tf_ucudnn.rewrite_settings())

    def test_device_names_take_tf_forms_and_become_the_rewriters(self):
        cpu = tf.config.list_logical_devices("CPU")[0]
        for devices, want in [("cpu", ("CPU",)), ("/device:CPU:0", ("CPU:0",)),
                              ("/job:localhost/replica:0/task:0/device:CPU:0", ("CPU:0",)),
                              ("CPU:00", ("CPU:0",)), (cpu, ("CPU:0",)),
                              (("CPU:0", "cpu"), ("CPU:0", "CPU"))]:
            with self.subTest(devices=repr(devices)):
                with tf_ucudnn.enable_rewrite(devices=devices):
                    self.assertEqual(tf_ucudnn.rewrite_settings().devices, want)

    def test_bad_arguments_raise_value_error(self):
        cases = [
            (dict(workspace_limit=-1), "workspace_limit"),
            (dict(workspace_limit="64MB"), "workspace_limit"),  # decimal units are refused
            (dict(total_workspace=-5), "total_workspace"),
            (dict(total_workspace=0), "total_workspace must be positive"),
            (dict(workspace_limit=MiB, total_workspace=MiB), "not both"),
            (dict(batch_size_policy="half"), "batch_size_policy"),
            (dict(devices="TPU"), "devices"),
            (dict(devices=["GPU:x"]), "devices"),
            (dict(devices=[]), "devices"),
        ]
        for kwargs, message in cases:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaisesRegex(ValueError, message):
                    tf_ucudnn.enable_rewrite(**kwargs)
                self.assertIsNone(tf_ucudnn.rewrite_settings())

    def test_keras_training_matches_with_and_without_the_rewrite(self):
        want_loss, want_weights, want_pred = train_small_keras_cnn(32, 8, seed=1)
        before = tf_ucudnn.rewrite_stats()["rewritten"]
        with tf_ucudnn.enable_rewrite(workspace_limit=MiB):
            got_loss, got_weights, got_pred = train_small_keras_cnn(32, 8, seed=1)
        self.assertGreater(tf_ucudnn.rewrite_stats()["rewritten"], before)
        np.testing.assert_allclose(got_loss, want_loss, rtol=1e-4)
        for a, b in zip(got_weights, want_weights):
            self.assertLessEqual(rel_l2(a, b), 1e-4)
        self.assertLessEqual(rel_l2(got_pred, want_pred), 1e-4)

    def test_functions_of_a_loaded_saved_model_are_rewritten(self):
        module = tf.Module()
        module.w = tf.Variable(self.w)
        module.f = tf.function(lambda x: tf.nn.conv2d(x, module.w, 1, "SAME"),
                               input_signature=[tf.TensorSpec([None, 12, 12, 3], tf.float32)])
        path = os.path.join(tempfile.mkdtemp(), "saved")
        tf.saved_model.save(module, path)
        loaded = tf.saved_model.load(path)
        want, stock = executed_ops(loaded.f, self.x)
        self.assertIn("Conv2D", stock)
        with tf_ucudnn.enable_rewrite():
            got, ops = executed_ops(loaded.f, self.x)
        self.assertIn("Ucudnn>Conv2D", ops)
        self.assertNotIn("Conv2D", ops)
        self.assertLessEqual(rel_l2(got, want), 1e-5)

    def test_under_xla_a_float64_convolution_keeps_xlas_own(self):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((6, 6, 1)),
                                  keras.layers.Conv2D(2, 3, name="wide", dtype="float64"),
                                  keras.layers.Conv2D(2, 3, name="plain"),
                                  keras.layers.Flatten(), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse", jit_compile=True)
        x, y = np.ones((4, 6, 6, 1), np.float32), np.ones((4, 1), np.float32)
        with tf_ucudnn.enable_rewrite():
            with self.assertLogs("tf_ucudnn", level="INFO") as logs:
                history = model.fit(x, y, batch_size=4, verbose=0)
        self.assertIn("its 1 keras.layers.Conv2D layers run tf_ucudnn's XLA kernels",
                      "\n".join(logs.output))
        self.assertTrue(np.isfinite(history.history["loss"][0]))

    def test_a_model_compiled_with_xla_runs_tf_ucudnn_while_the_rewrite_is_on(self):
        from unittest import mock

        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 16, 16, 3)).astype("float32")
        y = rng.standard_normal((16, 4)).astype("float32")
        model, twin = small_keras_cnn(), small_keras_cnn()
        twin.set_weights(model.get_weights())
        for m in (model, twin):
            m.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=True)
        traced, biases = [], []
        original = tf_ucudnn.nn.ucudnn_conv2d_op

        def spy(*args, **kwargs):
            traced.append(args[2])
            biases.append(args[3] if len(args) > 3 else kwargs.get("bias"))
            return original(*args, **kwargs)

        with mock.patch.object(tf_ucudnn.nn, "ucudnn_conv2d_op", spy):
            with tf_ucudnn.enable_rewrite(workspace_limit=2 * MiB):
                with self.assertLogs("tf_ucudnn", level="INFO") as logs:
                    ours = model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
            self.assertTrue(model.jit_compile)
            self.assertIn("2 keras.layers.Conv2D layers run tf_ucudnn's XLA kernels",
                          "\n".join(logs.output))
            # Both layers were traced into the XLA function, with the rewrite's limit.
            self.assertGreaterEqual(len(traced), 2)
            self.assertTrue(all(a["workspace_limit"] == 2 * MiB for a in traced), traced)
            # Their biases with them, in the convolution's op.
            self.assertTrue(all(b is not None for b in biases), biases)
            stock = twin.fit(x, y, batch_size=8, shuffle=False, verbose=0)
            np.testing.assert_allclose(ours.history["loss"], stock.history["loss"], rtol=1e-5)
            # Off again: the layers are stock and the function is traced anew without tf_ucudnn.
            rewritten_function = model.train_function
            traced.clear()
            model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
            self.assertIsNot(model.train_function, rewritten_function)
            self.assertEqual(traced, [])
            for layer in model.layers:
                self.assertNotIn("call", vars(layer))


class RewriteModelTest(RewriteTestCase):

    def test_conv_layers_become_tf_ucudnn_layers_with_the_same_weights_and_outputs(self):
        model = small_keras_cnn()
        new = tf_ucudnn.rewrite_model(model, workspace_limit=2 * MiB)
        convs = [l for l in new.layers if isinstance(l, keras.layers.Conv2D)]
        self.assertLen(convs, 2)
        for layer, original in zip(convs, [l for l in model.layers if isinstance(l, keras.layers.Conv2D)]):
            self.assertIsInstance(layer, tf_ucudnn.layers.Conv2D)
            self.assertEqual(layer.workspace_limit, 2 * MiB)
            for key in ("filters", "kernel_size", "strides", "padding", "activation"):
                self.assertEqual(layer.get_config()[key], original.get_config()[key])
        x = np.random.default_rng(2).standard_normal((4, 16, 16, 3)).astype("float32")
        self.assertLessEqual(rel_l2(new(x), model(x)), 1e-5)
        self.assertNotIsInstance(model.layers[0], tf_ucudnn.layers.Conv2D)

    def test_nested_models_are_rewritten_at_any_depth_and_counted(self):
        keras.utils.set_random_seed(4)
        deepest = keras.Sequential([keras.Input((8, 8, 4)), keras.layers.Conv2D(4, 3, padding="same")],
                                   name="deepest")
        inner_in = keras.Input((8, 8, 4))
        inner = keras.Model(inner_in, deepest(keras.layers.Conv2D(4, 1)(inner_in)), name="inner")
        block = keras.Sequential([keras.Input((8, 8, 4)), keras.layers.Conv2D(4, 3, padding="same"),
                                  inner], name="block")
        inputs = keras.Input((8, 8, 3))
        outputs = block(keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inputs))
        model = keras.Model(inputs, keras.layers.Flatten()(outputs))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            new = tf_ucudnn.rewrite_model(model, workspace_limit="1MiB")
        self.assertEqual(out.getvalue().strip(),
                         "tf_ucudnn.rewrite_model: replaced 4 keras.layers.Conv2D layer(s) with "
                         "tf_ucudnn.layers.Conv2D (3 in nested models)")
        convs = [l for l in new._flatten_layers() if isinstance(l, keras.layers.Conv2D)]
        self.assertLen(convs, 4)
        for layer in convs:
            self.assertIsInstance(layer, tf_ucudnn.layers.Conv2D)
            self.assertEqual(layer.workspace_limit, "1MiB")
        x = np.random.default_rng(5).standard_normal((2, 8, 8, 3)).astype("float32")
        self.assertLessEqual(rel_l2(new(x), model(x)), 1e-5)
        for a, b in zip(new.get_weights(), model.get_weights()):
            self.assertAllEqual(a, b)

    def test_verbose_0_prints_nothing(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            tf_ucudnn.rewrite_model(small_keras_cnn(), verbose=0)
        self.assertEqual(out.getvalue(), "")

    def test_conv2d_subclasses_and_convolutions_inside_subclassed_layers_stay_with_a_warning(self):
        class MyConv(keras.layers.Conv2D):
            pass

        class Wrapper(keras.layers.Layer):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.conv = keras.layers.Conv2D(2, 1, name="hidden_conv")

            def call(self, x):
                return self.conv(x)

        inputs = keras.Input((6, 6, 2))
        x = keras.layers.Conv2D(2, 3, padding="same", name="plain")(inputs)
        x = MyConv(2, 1, name="mine")(x)
        model = keras.Model(inputs, Wrapper(name="wrapper")(x))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), \
                self.assertWarnsRegex(UserWarning, r"left 2 convolution layer\(s\) stock: "
                                                   r"mine \(MyConv\), hidden_conv \(inside wrapper"):
            new = tf_ucudnn.rewrite_model(model)
        self.assertIn("replaced 1 keras.layers.Conv2D layer(s)", out.getvalue())
        self.assertIn("left 2 stock", out.getvalue())
        by_name = {l.name: l for l in new.layers}
        self.assertIsInstance(by_name["plain"], tf_ucudnn.layers.Conv2D)
        self.assertIs(type(by_name["mine"]), MyConv)

    def test_a_float64_convolution_stays_stock_with_a_warning(self):
        model = keras.Sequential([keras.Input((6, 6, 1)),
                                  keras.layers.Conv2D(2, 3, name="wide", dtype="float64"),
                                  keras.layers.Conv2D(2, 3, name="plain")])
        with self.assertWarnsRegex(UserWarning, r"left 1 convolution layer\(s\) stock: "
                                                r"wide \(Conv2D, float64\)"):
            new = tf_ucudnn.rewrite_model(model, verbose=0)
        self.assertIs(type(new.get_layer("wide")), keras.layers.Conv2D)
        self.assertIsInstance(new.get_layer("plain"), tf_ucudnn.layers.Conv2D)
        x = np.ones((2, 6, 6, 1), np.float32)
        self.assertAllClose(new(x), model(x))

    def test_tf_ucudnn_layers_keep_their_own_knobs(self):
        model = keras.Sequential([keras.Input((6, 6, 1)),
                                  tf_ucudnn.layers.Conv2D(2, 3, workspace_limit=5, name="ours"),
                                  keras.layers.Conv2D(2, 3, name="stock")])
        new = tf_ucudnn.rewrite_model(model, workspace_limit=7, verbose=0)
        self.assertEqual(new.get_layer("ours").workspace_limit, 5)
        self.assertEqual(new.get_layer("stock").workspace_limit, 7)

    def test_what_is_not_a_keras_model_raises_value_error_naming_its_type(self):
        for model, named in [("x", "builtins.str"), (None, "builtins.NoneType"),
                             (keras.layers.Conv2D(2, 3), r"keras\.src\.layers.*\.Conv2D")]:
            with self.subTest(model=repr(model)):
                with self.assertRaisesRegex(ValueError, rf"rewrite_model needs a keras.Model "
                                                        rf"\(Sequential or functional\), got "
                                                        rf"{named}"):
                    tf_ucudnn.rewrite_model(model)

    def test_a_subclassed_model_raises_value_error_naming_it(self):
        class Subclassed(keras.Model):
            def __init__(self):
                super().__init__(name="subclassed")
                self.conv = keras.layers.Conv2D(2, 3)

            def call(self, x):
                return self.conv(x)

        model = Subclassed()
        model(np.zeros((1, 6, 6, 1), np.float32))
        with self.assertRaisesRegex(ValueError, r"'subclassed' is a subclassed keras.Model "
                                                r"\(.*Subclassed\).*tf_ucudnn.enable_rewrite"):
            tf_ucudnn.rewrite_model(model)

    def test_unbuilt_model_and_bad_knobs_raise_value_error(self):
        with self.assertRaisesRegex(ValueError, "built"):
            tf_ucudnn.rewrite_model(keras.Sequential([keras.layers.Conv2D(2, 3)]))
        with self.assertRaisesRegex(ValueError, "workspace_limit"):
            tf_ucudnn.rewrite_model(small_keras_cnn(), workspace_limit=-3)


def small_keras_decoder(seed=0):
    """A convolution, then two transposed convolutions (a decoder's upsampling)."""
    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((8, 8, 3)),
        keras.layers.Conv2D(6, 3, strides=2, padding="same", activation="relu"),
        keras.layers.Conv2DTranspose(6, 3, strides=2, padding="same", activation="relu"),
        keras.layers.Conv2DTranspose(3, 2, output_padding=0),
        keras.layers.Flatten(),
        keras.layers.Dense(2),
    ])


class TransposedConvolutionRewriteTest(RewriteTestCase):
    """keras.layers.Conv2DTranspose through rewrite_model and the XLA route."""

    def test_rewrite_model_replaces_transposed_convolutions_too(self):
        model = small_keras_decoder()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            new = tf_ucudnn.rewrite_model(model, workspace_limit="auto")
        self.assertIn("replaced 1 keras.layers.Conv2D layer(s) with tf_ucudnn.layers.Conv2D and "
                      "2 keras.layers.Conv2DTranspose with tf_ucudnn.layers.Conv2DTranspose",
                      out.getvalue())
        transposed = [l for l in new.layers if isinstance(l, keras.layers.Conv2DTranspose)]
        self.assertLen(transposed, 2)
        for layer in transposed:
            self.assertIsInstance(layer, tf_ucudnn.layers.Conv2DTranspose)
            self.assertEqual(layer.workspace_limit, "auto")
        x = np.random.default_rng(2).standard_normal((4, 8, 8, 3)).astype("float32")
        self.assertLessEqual(rel_l2(new(x), model(x)), 1e-5)

    def test_a_decoder_compiled_with_xla_runs_tf_ucudnn_while_the_rewrite_is_on(self):
        from unittest import mock

        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 8, 8, 3)).astype("float32")
        y = rng.standard_normal((16, 2)).astype("float32")
        model, twin = small_keras_decoder(), small_keras_decoder()
        twin.set_weights(model.get_weights())
        for m in (model, twin):
            m.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=True)
        traced = []
        original = tf_ucudnn.nn.ucudnn_conv2d_backprop_input_op

        def spy(*args, **kwargs):
            traced.append(args[3])
            return original(*args, **kwargs)

        with mock.patch.object(tf_ucudnn.nn, "ucudnn_conv2d_backprop_input_op", spy):
            with tf_ucudnn.enable_rewrite(workspace_limit="auto"):
                with self.assertLogs("tf_ucudnn", level="INFO") as logs:
                    ours = model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
            self.assertIn("1 keras.layers.Conv2D and 2 keras.layers.Conv2DTranspose layers run "
                          "tf_ucudnn's XLA kernels", "\n".join(logs.output))
            self.assertGreaterEqual(len(traced), 2)
            self.assertTrue(all(a["workspace_limit"] == AUTO_WORKSPACE_LIMIT
                                for a in traced), traced)
            stock = twin.fit(x, y, batch_size=8, shuffle=False, verbose=0)
            np.testing.assert_allclose(ours.history["loss"], stock.history["loss"], rtol=1e-5)
            traced.clear()
            model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
            self.assertEqual(traced, [])

    def test_the_graph_rewrite_runs_transposed_convolutions_as_backward_data(self):
        layer = keras.layers.Conv2DTranspose(4, 3, strides=2, padding="same")
        x = tf.constant(np.random.default_rng(5).standard_normal((2, 6, 6, 3)), tf.float32)
        want = layer(x)
        before = tf_ucudnn.rewrite_stats()["rewritten"]
        with tf_ucudnn.enable_rewrite(workspace_limit="auto"):
            self.assertEqual(tf_ucudnn.rewrite_settings().workspace_limit, "auto")
            got = tf.function(layer)(x)
        self.assertGreater(tf_ucudnn.rewrite_stats()["rewritten"], before)
        self.assertLessEqual(rel_l2(got, want), 1e-5)


class TotalWorkspaceAttributeTest(RewriteTestCase):

    def test_total_workspace_and_workspace_limit_together_are_invalid(self):
        from tf_ucudnn._engine import ops
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "not both"):
            ops.ucudnn_conv2d(input=self.x, filter=self.w, strides=[1, 1, 1, 1], padding="SAME",
                              workspace_limit=MiB, total_workspace=4 * MiB)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "total_workspace"):
            ops.ucudnn_conv2d(input=self.x, filter=self.w, strides=[1, 1, 1, 1], padding="SAME",
                              total_workspace=-7)

    def test_bad_total_workspace_environment_variable_is_invalid_argument(self):
        result = run_python("""
            import tensorflow as tf, tf_ucudnn
            try:
                tf_ucudnn.conv2d(tf.ones([1, 4, 4, 1]), tf.ones([1, 1, 1, 1]), 1, "SAME")
            except tf.errors.InvalidArgumentError as e:
                print("INVALID", e.message)
            """, UCUDNN_TOTAL_WORKSPACE_SIZE="lots")
        self.assertIn("INVALID", result.stdout, result.stderr)
        self.assertIn("UCUDNN_TOTAL_WORKSPACE_SIZE", result.stdout)

    def test_cpu_kernels_accept_a_total_and_give_the_same_result(self):
        fn = tf.function(conv_bias_relu_with_grads)
        want = fn(self.x, self.w, self.b)
        with tf_ucudnn.enable_rewrite(total_workspace=16 * MiB):
            got, ops = executed_ops(fn, self.x, self.w, self.b)
        self.assertEqual(ucudnn_passes(ops), UCUDNN_PASSES)
        for a, b in zip(got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-5)


# Grappler's layout optimizer converts only on GPUs, and it decides from the
# cluster's devices: a virtual cluster with one Hopper GPU (compute capability
# 9.0) and nodes placed on it shows, on a machine without one, what Grappler
# (the layout optimizer, the remapper, then the rewriter) makes of a graph.
VIRTUAL_GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


def conv_block_step(x, w, b, data_format="NHWC"):
    """conv -> BiasAdd -> Relu -> MaxPool -> FusedBatchNorm (training) and the
    gradients: the chain the layout optimizer converts as a whole (VGG's and
    ResNet's ops)."""
    channels = -1 if data_format == "NHWC" else 1
    with tf.GradientTape() as tape:
        tape.watch([x, w, b])
        y = tf.nn.conv2d(x, w, 1, "SAME", data_format=data_format)
        y = tf.nn.relu(tf.nn.bias_add(y, b, data_format=data_format))
        y = tf.nn.max_pool2d(y, 2, 2, "VALID", data_format=data_format)
        ones = tf.ones([y.shape[channels]], y.dtype)
        if y.dtype == tf.bfloat16:  # no bfloat16 batch norm on some builds: keep the chain
            z = y * 2.0
        else:
            z, _, _ = tf.compat.v1.nn.fused_batch_norm(
                y, tf.cast(ones, tf.float32), tf.cast(ones * 0, tf.float32),
                data_format=data_format, is_training=True)
        loss = tf.reduce_sum(tf.sin(tf.cast(z, tf.float32)))  # z * z: BN makes its sum constant
    return [y, *tape.gradient(loss, [x, w, b])]


def grappler_on_virtual_gpu(fn, specs, config):
    """Runs Grappler with ``config`` (a ConfigProto) on ``fn``'s graph placed on
    a virtual Hopper GPU; returns the optimized GraphDef and its output names."""
    from tensorflow.core.protobuf import device_properties_pb2
    from tensorflow.python.framework import meta_graph
    from tensorflow.python.grappler import cluster as grappler_cluster
    from tensorflow.python.grappler import tf_optimizer

    concrete = tf.function(fn).get_concrete_function(*specs)
    graph_def = concrete.graph.as_graph_def()
    for node in graph_def.node:
        node.device = VIRTUAL_GPU
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        for out in concrete.outputs:
            graph.add_to_collection("train_op", graph.get_tensor_by_name(out.name))
    hopper = device_properties_pb2.DeviceProperties(type="GPU", environment={"architecture": "9.0"})
    cluster = grappler_cluster.Cluster(devices=[
        device_properties_pb2.NamedDevice(name=VIRTUAL_GPU, properties=hopper)])
    optimized = tf_optimizer.OptimizeGraph(config, meta_graph.create_meta_graph_def(graph=graph),
                                           cluster=cluster)
    return optimized, [out.name for out in concrete.outputs]


def function_config():
    """The ConfigProto that the calling thread's tf.function calls run Grappler with."""
    from tensorflow.core.protobuf import config_pb2

    return config_pb2.ConfigProto.FromString(
        context.context().function_call_options.config_proto_serialized)


def conv_layouts(graph_def):
    """{op type: sorted data formats} of the convolution nodes of a GraphDef."""
    found = {}
    for node in graph_def.node:
        if "Conv2D" in node.op:
            found.setdefault(stock_op_name(node.op), set()).add(node.attr["data_format"].s.decode())
    return {op: sorted(formats) for op, formats in found.items()}


def op_count(graph_def, op):
    return sum(node.op == op for node in graph_def.node)


BLOCK_SPECS = [tf.TensorSpec([8, 16, 16, 3]), tf.TensorSpec([3, 3, 3, 8]), tf.TensorSpec([8])]


class LayoutUnderRewriteTest(parameterized.TestCase, RewriteTestCase):
    """Convolutions under the rewrite run in the model's layout,
    with no layout-optimizer transposes around them."""

    def optimized(self, dtype=tf.float32, data_format="NHWC", specs=None):
        specs = specs or BLOCK_SPECS
        if data_format == "NCHW":
            specs = [tf.TensorSpec([8, 3, 16, 16])] + list(specs[1:])
        specs = [tf.TensorSpec(s.shape, dtype) for s in specs]
        return grappler_on_virtual_gpu(
            lambda x, w, b: conv_block_step(x, w, b, data_format), specs, function_config())[0]

    def test_stock_grappler_makes_a_float32_training_graph_nchw_on_hopper(self):
        # The premise: with TF's function config, the layout optimizer converts
        # the chain (float32 gradients present: NCHW) and wraps it in transposes.
        graph = self.optimized()
        self.assertEqual(conv_layouts(graph), {"Conv2D": ["NCHW"], "Conv2DBackpropInput": ["NCHW"],
                                               "Conv2DBackpropFilter": ["NCHW"]})
        self.assertGreater(op_count(graph, "Transpose"), 0)

    @parameterized.named_parameters(("float32", tf.float32), ("float16", tf.float16),
                                    ("bfloat16", tf.bfloat16))
    def test_rewritten_convolutions_stay_nhwc_without_transposes(self, dtype):
        with tf_ucudnn.enable_rewrite(workspace_limit=4 * MiB):
            graph = self.optimized(dtype)
        self.assertEqual(conv_layouts(graph), {"Ucudnn>Conv2D": ["NHWC"],
                                               "Ucudnn>Conv2DBackpropInput": ["NHWC"],
                                               "Ucudnn>Conv2DBackpropFilter": ["NHWC"]})
        self.assertEqual(op_count(graph, "Transpose"), 0)
        for node in graph.node:
            if node.attr["data_format"].s:
                self.assertIn(node.attr["data_format"].s, (b"NHWC", b"NDHWC"), node.op)

    def test_convolutions_written_in_nchw_stay_nchw(self):
        # float16 on Hopper: the stock layout optimizer would make them NHWC.
        stock = self.optimized(tf.float16, "NCHW")
        self.assertEqual(conv_layouts(stock)["Conv2D"], ["NHWC"])
        with tf_ucudnn.enable_rewrite():
            graph = self.optimized(tf.float16, "NCHW")
        self.assertEqual(conv_layouts(graph), {"Ucudnn>Conv2D": ["NCHW"],
                                               "Ucudnn>Conv2DBackpropInput": ["NCHW"],
                                               "Ucudnn>Conv2DBackpropFilter": ["NCHW"]})
        self.assertEqual(op_count(graph, "Transpose"), 0)

    def test_the_layout_pass_run_after_the_rewrite_would_still_transpose_pooling(self):
        # Why the rewrite turns the pass off rather than running before it
        # (docs/design.md): with no stock convolution left, Grappler's layout
        # optimizer still makes MaxPool and MaxPoolGrad NCHW between transposes.
        from tensorflow.core.protobuf import rewriter_config_pb2

        with tf_ucudnn.enable_rewrite(layout_optimizer=True):
            config = function_config()
        rewrite_options = config.graph_options.rewrite_options
        rewrite_options.layout_optimizer = rewriter_config_pb2.RewriterConfig.OFF
        rewrite_options.custom_optimizers.add().name = "layout"  # after UcudnnRewriter
        graph = grappler_on_virtual_gpu(conv_block_step, BLOCK_SPECS, config)[0]
        self.assertEqual(conv_layouts(graph)["Ucudnn>Conv2D"], ["NHWC"])
        pooling = {n.op: n.attr["data_format"].s for n in graph.node if "MaxPool" in n.op}
        self.assertEqual(pooling, {"MaxPool": b"NCHW", "MaxPoolGrad": b"NCHW"})
        self.assertGreater(op_count(graph, "Transpose"), 0)

    def test_layout_optimizer_true_gives_the_stock_pass_back(self):
        with tf_ucudnn.enable_rewrite(layout_optimizer=True):
            graph = self.optimized()
        self.assertEqual(conv_layouts(graph), {"Ucudnn>Conv2D": ["NCHW"],
                                               "Ucudnn>Conv2DBackpropInput": ["NCHW"],
                                               "Ucudnn>Conv2DBackpropFilter": ["NCHW"]})
        self.assertGreater(op_count(graph, "Transpose"), 0)

    def test_a_rewrite_for_cpus_only_leaves_gpu_graphs_to_the_layout_optimizer(self):
        with tf_ucudnn.enable_rewrite(devices="CPU"):
            graph = self.optimized()
        self.assertEqual(conv_layouts(graph), {"Conv2D": ["NCHW"], "Conv2DBackpropInput": ["NCHW"],
                                               "Conv2DBackpropFilter": ["NCHW"]})

    def test_the_layout_optimizer_is_off_only_while_the_rewrite_covers_a_gpu(self):
        from tensorflow.core.protobuf import rewriter_config_pb2
        off = rewriter_config_pb2.RewriterConfig.OFF

        def layout_toggle():
            return function_config().graph_options.rewrite_options.layout_optimizer

        stock = layout_toggle()
        self.assertNotEqual(stock, off)
        for kwargs, want in [({}, off), (dict(devices="GPU"), off), (dict(devices="CPU"), stock),
                             (dict(layout_optimizer=True), stock)]:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with warnings.catch_warnings():  # "GPU" where there is none
                    warnings.simplefilter("ignore")
                    enabled = tf_ucudnn.enable_rewrite(**kwargs)
                with enabled:
                    self.assertEqual(layout_toggle(), want)
                    with tf_ucudnn.enable_rewrite(devices="CPU"):
                        self.assertEqual(layout_toggle(), stock)
                    self.assertEqual(layout_toggle(), want)
                self.assertEqual(layout_toggle(), stock)

    def test_layout_optimizer_must_be_a_bool(self):
        with self.assertRaisesRegex(ValueError, "layout_optimizer must be True or False"):
            tf_ucudnn.enable_rewrite(layout_optimizer="off")
        self.assertIsNone(tf_ucudnn.rewrite_settings())

    def test_the_nhwc_graph_made_for_the_gpu_gives_stock_results_and_gradients(self):
        # Grappler's output for the virtual GPU, placed back on the CPU and run.
        with tf_ucudnn.enable_rewrite(workspace_limit=MiB):
            graph, outputs = grappler_on_virtual_gpu(conv_block_step, BLOCK_SPECS,
                                                     function_config())
        for node in graph.node:
            node.device = ""
        self.assertIn("Ucudnn>Conv2DBackpropFilter", conv_layouts(graph))

        def imported(x, w, b):
            return tf.graph_util.import_graph_def(
                graph, input_map={"x:0": x, "w:0": w, "b:0": b}, return_elements=outputs)

        rng = np.random.default_rng(3)
        args = [tf.constant(rng.standard_normal(s.shape), tf.float32) for s in BLOCK_SPECS]
        got = tf.compat.v1.wrap_function(imported, BLOCK_SPECS)(*args)
        want = conv_block_step(*args)
        self.assertLen(got, 4)
        for name, a, b in zip(["y", "dx", "dw", "db"], got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-5, name)


@pytest.mark.gpu
class RewriteGpuTest(RewriteTestCase):

    def test_gpu_graph_is_rewritten_and_matches(self):
        with tf.device("/GPU:0"):
            fn = tf.function(conv_bias_relu_with_grads)
            want = fn(self.x, self.w, self.b)
            with tf_ucudnn.enable_rewrite(workspace_limit=MiB, devices="GPU"):
                got, ops = executed_ops(fn, self.x, self.w, self.b)
        self.assertEqual(ucudnn_passes(ops), UCUDNN_PASSES, ops)
        self.assertFalse(ops & STOCK_CONV_OPS, ops)
        for a, b in zip(got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-5)
        gpu_plans = [r for r in tf_ucudnn.plans() if "GPU" in r["device"]]
        self.assertTrue(gpu_plans)

    def test_keras_training_on_gpu_matches_with_and_without_the_rewrite(self):
        want = train_small_keras_cnn(64, 16, seed=3)[0]
        with tf_ucudnn.enable_rewrite(workspace_limit=MiB):
            got = train_small_keras_cnn(64, 16, seed=3)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4)

    def test_total_workspace_divides_the_budget_after_one_step(self):
        budget = 3 * MiB + 12345  # a total no other test uses: its own group
        x = tf.random.normal([32, 16, 16, 8], seed=1)
        w1 = tf.random.normal([3, 3, 8, 16], seed=2)
        w2 = tf.random.normal([5, 5, 16, 16], seed=3)

        def step(x, w1, w2):
            with tf.GradientTape() as tape:
                tape.watch([x, w1, w2])
                y = tf.nn.conv2d(tf.nn.relu(tf.nn.conv2d(x, w1, 1, "SAME")), w2, 1, "SAME")
                loss = tf.reduce_sum(y * y)
            return [y, *tape.gradient(loss, [x, w1, w2])]

        with tf.device("/GPU:0"):
            fn = tf.function(step)
            want = fn(x, w1, w2)
            with tf_ucudnn.enable_rewrite(total_workspace=budget):
                for _ in range(3):
                    got = fn(x, w1, w2)
        reports = tf_ucudnn.division.division_reports()
        self.assertIn((0, budget), reports)
        report = reports[(0, budget)]
        self.assertEqual(len(report.kernels), 6, str(report))
        self.assertLessEqual(report.workspace_bytes, budget, str(report))
        for a, b in zip(got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-5)


def train_keras_cnn_with_policy(policy, seed=3):
    """train_small_keras_cnn under a Keras dtype policy (set, then restored)."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        return train_small_keras_cnn(64, 16, seed=seed)
    finally:
        keras.config.set_dtype_policy(previous)


@pytest.mark.gpu
class LayoutUnderRewriteGpuTest(parameterized.TestCase, RewriteTestCase):
    """On a real GPU: a Keras NHWC model trained under the rewrite
    runs tf_ucudnn's convolutions in NHWC, with no layout-optimizer transposes."""

    @parameterized.named_parameters(("float32", "float32", 1e-4),
                                    ("mixed_float16", "mixed_float16", 2e-2),
                                    ("mixed_bfloat16", "mixed_bfloat16", 5e-2))
    def test_keras_training_runs_nhwc_ucudnn_convolutions_without_transposes(self, policy, rtol):
        want_loss, want_weights, _ = train_keras_cnn_with_policy(policy)
        with tf_ucudnn.enable_rewrite(workspace_limit=MiB):
            (got_loss, got_weights, _), nodes = executed_nodes(train_keras_cnn_with_policy, policy)
        ucudnn = [n for n in nodes if n.op in UCUDNN_OPS]
        self.assertEqual(ucudnn_passes(n.op for n in ucudnn), UCUDNN_PASSES)
        self.assertTrue(all("GPU" in n.device for n in ucudnn), [n.device for n in ucudnn])
        self.assertEqual({n.attr["data_format"].s for n in ucudnn}, {b"NHWC"})
        self.assertEqual([n.name for n in nodes if "LayoutOptimizer" in n.name], [])
        self.assertEqual([n.name for n in nodes if n.op == "Transpose"], [])
        self.assertFalse({stock_op_name(n.op) for n in nodes} & STOCK_CONV_OPS)
        np.testing.assert_allclose(got_loss, want_loss, rtol=rtol)
        for a, b in zip(got_weights, want_weights):
            self.assertLessEqual(rel_l2(a, b), rtol)

    def test_stock_float32_training_is_nchw_between_transposes_here(self):
        # The premise on this GPU (Grappler's layout optimizer, float32
        # gradients present): without the rewrite, the convolutions run NCHW.
        _, nodes = executed_nodes(train_keras_cnn_with_policy, "float32")
        convs = [n for n in nodes if stock_op_name(n.op) in STOCK_CONV_OPS]
        self.assertIn(b"NCHW", {n.attr["data_format"].s for n in convs})
        self.assertTrue([n for n in nodes if "LayoutOptimizer" in n.name])

    def test_layout_optimizer_true_gives_the_nchw_graph_back(self):
        with tf_ucudnn.enable_rewrite(workspace_limit=MiB, layout_optimizer=True):
            _, nodes = executed_nodes(train_keras_cnn_with_policy, "float32")
        ucudnn = [n for n in nodes if n.op in UCUDNN_OPS]
        self.assertEqual({n.attr["data_format"].s for n in ucudnn}, {b"NCHW"})

    def test_a_convolution_written_in_nchw_stays_nchw_and_matches(self):
        x = tf.transpose(self.x, [0, 3, 1, 2])

        def step(x, w):
            with tf.GradientTape() as tape:
                tape.watch([x, w])
                y = tf.nn.conv2d(x, w, 1, "SAME", data_format="NCHW")
                loss = tf.reduce_sum(tf.sin(y))
            return [y, *tape.gradient(loss, [x, w])]

        with tf.device("/GPU:0"):
            want = tf.function(step)(x, self.w)
            with tf_ucudnn.enable_rewrite(workspace_limit=MiB):
                got, nodes = executed_nodes(tf.function(step), x, self.w)
        ucudnn = [n for n in nodes if n.op in UCUDNN_OPS]
        self.assertEqual(ucudnn_passes(n.op for n in ucudnn), UCUDNN_PASSES)
        self.assertEqual({n.attr["data_format"].s for n in ucudnn}, {b"NCHW"})
        for a, b in zip(got, want):
            self.assertLessEqual(rel_l2(a, b), 1e-4)


TRAIN_WITH_ENV = """
    import json, keras, numpy as np, tensorflow as tf, tf_ucudnn
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((32, 32, 16)),
        tf_ucudnn.layers.Conv2D(64, 3, padding="same", activation="relu"),
        tf_ucudnn.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    x = np.random.default_rng(0).standard_normal((256, 32, 32, 16)).astype("float32")
    y = np.zeros((256, 10), "float32")
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)  # the first step benchmarks, then divides
    first_peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    tf.config.experimental.reset_memory_stats("GPU:0")
    loss = model.fit(x, y, batch_size=64, epochs=1, verbose=0).history["loss"][0]
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    reports = list(tf_ucudnn.division.division_reports().values())
    print("RESULT", json.dumps(dict(peak=peak, first_peak=first_peak, loss=loss, reports=[
        dict(n=len(r.kernels), used=r.workspace_bytes, total=r.total_workspace) for r in reports])))
"""


def train_with_env(test, **env):
    import json
    result = run_python(TRAIN_WITH_ENV, timeout=600, **env)
    line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")]
    test.assertTrue(line, result.stdout + result.stderr)
    return json.loads(line[0][len("RESULT "):])


@pytest.mark.gpu
class TotalWorkspaceEnvironmentGpuTest(tf.test.TestCase):

    def test_keras_model_trains_under_workspace_division_within_the_budget(self):
        budget = 20 * MiB
        divided = train_with_env(self, UCUDNN_TOTAL_WORKSPACE_SIZE=str(budget))
        self.assertLen(divided["reports"], 1, divided)
        report = divided["reports"][0]
        self.assertEqual(report["total"], budget)
        self.assertEqual(report["n"], 5)  # the first layer needs no backward-data
        self.assertLessEqual(report["used"], budget)
        # TF's memory statistics: the peak exceeds that of the same training
        # without any workspace by at most the budget, in the first epoch (whose
        # first step benchmarks and whose second divides) and after it.
        no_workspace = train_with_env(self, UCUDNN_DEFAULT_WORKSPACE_LIMIT="0")
        self.assertEqual(no_workspace["reports"], [])
        for peak in ("first_peak", "peak"):
            self.assertLessEqual(divided[peak] - no_workspace[peak], budget,
                                 (peak, divided, no_workspace))
        self.assertAllClose(divided["loss"], no_workspace["loss"], rtol=1e-3)
