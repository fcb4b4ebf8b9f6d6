"""tf_ucudnn.stock_model, rewrite_model's way back: a copy in Keras' own layers
with the same configuration and weights, whose files load without tf_ucudnn.

Tolerances (relative L2, float32 without TF32): the copy's inference output
1e-6 of the rewritten model's (the same weights; the fused layer folds its
batch norm into the convolution, Keras applies it after); training outputs
1e-5 (tf_ucudnn's batch norm takes the variance from sums)."""

import contextlib
import io
import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

import tf_ucudnn
from testing_utils import OnGpuWithoutTf32, assert_rel_l2, run_python

_OURS = "tf_ucudnn.layers"


def _chains_model():
    """Conv2D -> BatchNormalization -> ReLU chains (one frozen), a
    pre-activation batch norm, a max-pool and a transposed convolution: every
    layer rewrite_model(fuse_batch_norm=True) replaces."""
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(6, 3, padding="same", use_bias=False, name="stem")(inputs)
    x = keras.layers.ReLU()(keras.layers.BatchNormalization(name="stem_bn")(x))
    y = keras.layers.Conv2D(6, 3, padding="same", name="second")(x)
    y = keras.layers.BatchNormalization(name="frozen_bn", trainable=False)(y)
    x = keras.layers.Add()([x, y])
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Activation("relu")(keras.layers.BatchNormalization(name="pre_bn")(x))
    x = keras.layers.Conv2D(4, 1, name="after_pre")(x)
    x = keras.layers.Conv2DTranspose(3, 2, strides=2, name="up")(x)
    return keras.Model(inputs, x)


def _classes(model):
    return [f"{type(layer).__module__}.{type(layer).__name__}" for layer in model.layers]


class StockModelTest(tf.test.TestCase):
    """The copy's layers, names, weights and outputs against the model that
    rewrite_model copied and the one it made."""

    DEVICE = "/CPU:0"

    def setUp(self):
        super().setUp()
        self.rng = np.random.default_rng(5)
        self.x = tf.constant(self.rng.standard_normal((4, 8, 8, 3)) + 0.3, tf.float32)

    def _trained_rewrite(self):
        """The stock model, and its rewrite trained two steps (moving statistics
        and weights away from the stock model's)."""
        model = _chains_model()
        with tf.device(self.DEVICE):
            model(self.x, training=True)
        fast = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, workspace_limit="16MiB",
                                       verbose=0)
        fast.compile(keras.optimizers.SGD(0.05), "mse", jit_compile=False)
        target = tf.constant(self.rng.standard_normal((4, 8, 8, 3)), tf.float32)
        with tf.device(self.DEVICE):
            fast.fit(self.x, target, batch_size=4, epochs=2, verbose=0, shuffle=False)
        return model, fast

    def test_the_copy_has_the_original_layers_names_and_trained_weights(self):
        model, fast = self._trained_rewrite()
        self.assertTrue(any(c.startswith(_OURS) for c in _classes(fast)))
        back = tf_ucudnn.stock_model(fast, verbose=0)
        self.assertEqual(_classes(back), _classes(model))
        self.assertEqual([layer.name for layer in back.layers[1:]],  # after the InputLayer
                         [layer.name for layer in model.layers[1:]])
        self.assertEqual([w.path for w in back.weights], [w.path for w in model.weights])
        self.assertFalse(back.get_layer("frozen_bn").trainable)
        self.assertTrue(back.get_layer("stem_bn").trainable)
        self.assertNotIn("workspace_limit", back.get_layer("after_pre").get_config())
        trained = {w.path: w.numpy() for w in fast.weights}
        for fused in fast.layers:  # a fused chain's weights by its Keras layers' names
            if isinstance(fused, tf_ucudnn.layers.Conv2DBatchNorm):
                trained.update({f"{inner.name}/{w.name}": w.numpy()
                                for inner in (fused.conv, fused.batch_norm) for w in inner.weights})
        moved = 0
        for got, stock in zip(back.weights, model.weights):
            self.assertIn(got.path, trained)
            self.assertAllEqual(got.numpy(), trained[got.path])
            moved += not np.array_equal(got.numpy(), stock.numpy())
        self.assertGreater(moved, len(model.weights) // 2)
        with tf.device(self.DEVICE):
            assert_rel_l2(self, back(self.x, training=False), fast(self.x, training=False),
                          1e-6, "inference output")
            assert_rel_l2(self, back(self.x, training=True), fast(self.x, training=True),
                          1e-5, "training output")

    def test_its_weights_file_loads_into_the_original_model(self):
        model, fast = self._trained_rewrite()
        back = tf_ucudnn.stock_model(fast, verbose=0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trained.weights.h5")
            back.save_weights(path)
            model.load_weights(path)
        with tf.device(self.DEVICE):
            assert_rel_l2(self, model(self.x, training=False), fast(self.x, training=False),
                          1e-6, "original model with the trained weights")

    def test_a_conv2d_batch_norm_layer_becomes_a_sequential_and_loads_without_tf_ucudnn(self):
        inputs = keras.Input((8, 8, 3))
        x = tf_ucudnn.layers.Conv2DBatchNorm(5, 3, padding="same", activation="relu",
                                             name="block1")(inputs)
        x = tf_ucudnn.layers.Conv2DBatchNorm(4, 3, name="block2")(x)
        model = keras.Model(inputs, x)
        with tf.device(self.DEVICE):
            model(self.x, training=True)
            for layer in model.layers[1:]:  # moving statistics away from 0 and 1
                layer.batch_norm.moving_mean.assign(self.rng.uniform(-1, 1, layer.conv.filters))
                layer.batch_norm.moving_variance.assign(self.rng.uniform(0.5, 2, layer.conv.filters))
        back = tf_ucudnn.stock_model(model, verbose=0)
        self.assertEqual([type(layer) for layer in back.layers[1:]], [keras.Sequential] * 2)
        self.assertEqual([type(layer).__name__ for layer in back.get_layer("block1").layers],
                         ["Conv2D", "BatchNormalization", "Activation"])
        self.assertEqual([type(layer).__name__ for layer in back.get_layer("block2").layers],
                         ["Conv2D", "BatchNormalization"])
        with tf.device(self.DEVICE):
            want = model(self.x, training=False).numpy()
            assert_rel_l2(self, back(self.x, training=False), want, 1e-6, "inference output")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "stock.keras")
            back.save(path)
            np.save(os.path.join(d, "x.npy"), self.x.numpy())
            np.save(os.path.join(d, "want.npy"), want)
            child = run_python("""
                import os, sys
                import keras, numpy as np
                d = sys.argv[1]
                model = keras.saving.load_model(os.path.join(d, "stock.keras"))
                got = model(np.load(os.path.join(d, "x.npy")), training=False)
                want = np.load(os.path.join(d, "want.npy"))
                print("tf_ucudnn" in sys.modules,
                      float(np.linalg.norm(np.asarray(got) - want) / np.linalg.norm(want)))
                """, argv=[d], CUDA_VISIBLE_DEVICES="")
        self.assertEqual(child.returncode, 0, child.stderr[-3000:])
        imported, error = child.stdout.split()[-2:]
        self.assertEqual(imported, "False")
        self.assertLess(float(error), 1e-6)

    def test_its_saved_model_holds_stock_ops(self):
        inputs = keras.Input((8, 8, 3))
        x = tf_ucudnn.layers.Conv2DBatchNorm(5, 3, padding="same", activation="relu")(inputs)
        model = keras.Model(inputs, tf_ucudnn.layers.Conv2D(4, 3)(x))
        model(self.x)

        def op_types(m):
            with tempfile.TemporaryDirectory() as d:
                m.export(d, verbose=False)
                graph = saved_model_pb2.SavedModel()
                with open(os.path.join(d, "saved_model.pb"), "rb") as f:
                    graph.ParseFromString(f.read())
            return {node.op for meta in graph.meta_graphs
                    for nodes in [meta.graph_def.node] + [f.node_def for f in
                                                          meta.graph_def.library.function]
                    for node in nodes}

        self.assertTrue(any(op.startswith("Ucudnn>") for op in op_types(model)))
        stock = op_types(tf_ucudnn.stock_model(model, verbose=0))
        self.assertIn("Conv2D", stock)
        self.assertFalse([op for op in stock if op.startswith("Ucudnn>")])

    def test_nested_and_sequential_models(self):
        block = keras.Sequential([keras.Input((8, 8, 3)),
                                  tf_ucudnn.layers.Conv2D(4, 3, workspace_limit=1 << 20),
                                  tf_ucudnn.layers.BatchNormalization(),
                                  tf_ucudnn.layers.MaxPooling2D()], name="block")
        inputs = keras.Input((8, 8, 3))
        model = keras.Model(inputs, tf_ucudnn.layers.Conv2D(2, 3)(block(inputs)))
        with tf.device(self.DEVICE):
            model(self.x, training=True)
        back = tf_ucudnn.stock_model(model, verbose=0)
        inner = back.get_layer("block")
        self.assertEqual([type(layer) for layer in inner.layers],
                         [keras.layers.Conv2D, keras.layers.BatchNormalization,
                          keras.layers.MaxPooling2D])
        self.assertIs(type(back.layers[-1]), keras.layers.Conv2D)
        with tf.device(self.DEVICE):
            assert_rel_l2(self, back(self.x, training=False), model(self.x, training=False),
                          1e-6, "inference output")
        top = tf_ucudnn.stock_model(block, verbose=0)
        self.assertIsInstance(top, keras.Sequential)
        self.assertFalse(any(c.startswith(_OURS) for c in _classes(top)))

    def test_a_fused_chain_in_a_nested_model(self):
        block = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3),
                                  keras.layers.BatchNormalization(), keras.layers.ReLU()],
                                 name="block")
        inputs = keras.Input((8, 8, 3))
        model = keras.Model(inputs, keras.layers.Conv2D(2, 3)(block(inputs)))
        with tf.device(self.DEVICE):
            model(self.x, training=True)
        fast = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        self.assertEqual([type(layer).__name__ for layer in fast.get_layer("block").layers],
                         ["Conv2DBatchNorm", "BatchNormInConv", "ReLU"])
        back = tf_ucudnn.stock_model(fast, verbose=0)
        self.assertEqual(_classes(back.get_layer("block")), _classes(block))
        self.assertEqual([w.path for w in back.weights], [w.path for w in model.weights])
        with tf.device(self.DEVICE):
            assert_rel_l2(self, back(self.x, training=False), model(self.x, training=False),
                          1e-6, "inference output")

    def test_says_how_many_layers_it_replaced(self):
        model = keras.Sequential([keras.Input((8, 8, 3)), tf_ucudnn.layers.Conv2D(4, 3),
                                  keras.layers.ReLU(), tf_ucudnn.layers.Conv2D(2, 3)])
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            tf_ucudnn.stock_model(model)
        self.assertEqual(printed.getvalue(),
                         "tf_ucudnn.stock_model: replaced 2 tf_ucudnn layer(s) with Keras' own\n")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            tf_ucudnn.stock_model(model, verbose=0)
        self.assertEqual(printed.getvalue(), "")

    def test_refuses_what_it_cannot_copy(self):
        with self.assertRaisesRegex(ValueError, r"stock_model needs a keras.Model .*got "
                                                r"builtins.str"):
            tf_ucudnn.stock_model("model")

        class Subclassed(keras.Model):
            def call(self, x):
                return x

        with self.assertRaisesRegex(ValueError, "stock_model copies Sequential and functional"):
            tf_ucudnn.stock_model(Subclassed())
        with self.assertRaisesRegex(ValueError, "stock_model needs a built model"):
            tf_ucudnn.stock_model(keras.Sequential([tf_ucudnn.layers.Conv2D(2, 3)]))


@pytest.mark.gpu
class StockModelGpuTest(OnGpuWithoutTf32, StockModelTest):
    DEVICE = "/GPU:0"
