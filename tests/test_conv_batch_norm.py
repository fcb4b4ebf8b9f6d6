"""tf_ucudnn.layers.Conv2DBatchNorm against Keras' Conv2D → BatchNormalization
→ activation with the same weights: outputs, the gradients of the input and
every weight, the moving statistics after training steps, and inference with
the batch norm folded into the convolution; eagerly and in a jit_compile
function; saved to and loaded from a .keras file.

Tolerances (relative L2): float32 without TF32 1e-5 (summation order, and the
variance from the sums instead of two passes). The conv bias's gradient is
zero in exact arithmetic (a batch norm removes any per-channel shift), so
both sides are rounding noise: it is checked against the kernel gradient's
scale instead. mixed_float16: 5e-3 (seen: 2.9e-3 on the kernel's gradient):
the backward convolutions take the output gradient rounded to float16 (11
significant bits), and ours rounds dy plus the sums' terms where Keras
rounds the normalization's gradient, so the two round different sums; the
inference path scales the filter in float32 before rounding it to float16.
"""

import os
import tempfile
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from testing_utils import OnGpuWithoutTf32, assert_rel_l2


def _pair(rng, input_shape, data_format, use_bias, activation, micro_batch_size=None,
          dtype=None, filters=6, momentum=0.9):
    """The fused layer and Keras' two layers with the same weights, built.
    Keras' run channels_last whatever ``data_format`` (TF's CPU Conv2D
    takes NHWC only without oneDNN), the stock function transposing around
    them."""
    first = data_format == "channels_first"
    fused = tf_ucudnn.layers.Conv2DBatchNorm(
        filters, 3, padding="same", data_format=data_format, use_bias=use_bias,
        activation=activation, momentum=momentum, micro_batch_size=micro_batch_size,
        dtype=dtype)
    conv = keras.layers.Conv2D(filters, 3, padding="same", use_bias=use_bias, dtype=dtype)
    bn = keras.layers.BatchNormalization(momentum=momentum, dtype=dtype)
    fused.build(input_shape)
    last_shape = (input_shape[0], *input_shape[2:], input_shape[1]) if first else input_shape
    conv.build(last_shape)
    bn.build(conv.compute_output_shape(last_shape))
    weights = [rng.standard_normal(v.shape).astype("float32") * 0.3 for v in fused.conv.weights]
    fused.conv.set_weights(weights)
    conv.set_weights(weights)
    bn_weights = [rng.uniform(0.5, 1.5, v.shape).astype("float32")
                  for v in fused.batch_norm.weights]
    fused.batch_norm.set_weights(bn_weights)
    bn.set_weights(bn_weights)
    act = keras.activations.get(activation)

    def stock(x, training):
        if first:
            x = tf.transpose(x, [0, 2, 3, 1])
        y = act(bn(conv(x), training=training))
        return tf.transpose(y, [0, 3, 1, 2]) if first else y

    return fused, stock, conv, bn


def _input(rng, data_format, shape=(7, 9, 10, 5)):
    if data_format == "channels_first":
        shape = (shape[0], shape[3], shape[1], shape[2])
    # Off-centre and wide, so that the batch norm's mean and scale matter.
    return tf.constant(rng.standard_normal(shape) * 2.0 + 0.5, tf.float32)


class Conv2DBatchNormTest(parameterized.TestCase, tf.test.TestCase):
    DEVICE = "/CPU:0"

    def _train_step_matches(self, data_format, use_bias, activation, micro_batch_size,
                            jit_compile=False, dtype=None, tol=1e-5, shape=(7, 9, 10, 5)):
        rng = np.random.default_rng(3)
        x = _input(rng, data_format, shape)
        fused, stock, conv, bn = _pair(rng, x.shape, data_format, use_bias, activation,
                                       micro_batch_size, dtype)

        def step(layer_fn, weights):
            def loss_and_grads():
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = layer_fn(x, True)
                    y32 = tf.cast(y, tf.float32)
                    loss = tf.reduce_sum(y32 * tf.sin(y32))
                return y, tape.gradient(loss, [x] + weights)
            return tf.function(loss_and_grads, jit_compile=True) if jit_compile else loss_and_grads

        with tf.device(self.DEVICE):
            y, grads = step(lambda t, training: fused(t, training=training),
                            fused.conv.trainable_weights + fused.batch_norm.trainable_weights)()
            y_ref, grads_ref = step(stock, conv.trainable_weights + bn.trainable_weights)()
        assert_rel_l2(self, y, y_ref, tol, "output")
        names = ["input"] + [w.path for w in conv.trainable_weights + bn.trainable_weights]
        kernel_scale = float(tf.norm(grads_ref[1]))
        for name, got, want in zip(names, grads, grads_ref):
            if name.endswith("bias") and "conv" in name:
                # Zero in exact arithmetic: noise on both sides.
                self.assertLess(float(tf.norm(got)), 1e-4 * kernel_scale, name)
                continue
            assert_rel_l2(self, got, want, tol, f"gradient of {name}")
        assert_rel_l2(self, fused.batch_norm.moving_mean, bn.moving_mean, tol, "moving_mean")
        assert_rel_l2(self, fused.batch_norm.moving_variance, bn.moving_variance, tol,
                      "moving_variance")
        with tf.device(self.DEVICE):
            assert_rel_l2(self, fused(x, training=False), stock(x, False), tol,
                          "inference (folded)")

    @parameterized.product(data_format=["channels_last", "channels_first"],
                           use_bias=[False, True], activation=[None, "relu"],
                           micro_batch_size=[None, 3])
    def test_train_step_matches_keras(self, data_format, use_bias, activation,
                                      micro_batch_size):
        self._train_step_matches(data_format, use_bias, activation, micro_batch_size)

    @parameterized.parameters(None, 2)
    def test_under_jit_compile(self, micro_batch_size):
        self._train_step_matches("channels_last", False, "relu", micro_batch_size,
                                 jit_compile=True)

    def test_mixed_float16(self):
        self._train_step_matches("channels_last", False, "relu", 4, dtype="mixed_float16",
                                 tol=5e-3)

    @parameterized.parameters(
        # (input channels, UCUDNN_STATISTICS_AFTER_CHANNELS, statistics after the convolution)
        (3, None, True), (4, None, True), (5, None, False), (3, "0", False), (8, "8", True))
    def test_few_input_channels_take_their_statistics_after_the_convolution(
            self, channels, variable, after):
        env = {} if variable is None else {"UCUDNN_STATISTICS_AFTER_CHANNELS": variable}
        with mock.patch.dict(os.environ, env):
            if variable is None:
                os.environ.pop("UCUDNN_STATISTICS_AFTER_CHANNELS", None)
            for jit_compile in (False, True):
                self._train_step_matches("channels_last", True, "relu", 2,
                                         jit_compile=jit_compile, shape=(6, 7, 8, channels))
            layer = tf_ucudnn.layers.Conv2DBatchNorm(4, 3, padding="same")
            x = tf.zeros((2, 5, 5, channels))
            step = tf.function(lambda x: layer(x, training=True))
            ops = {op.type for op in step.get_concrete_function(x).graph.get_operations()}
        self.assertEqual("Ucudnn>Conv2D" in ops, after, ops)
        self.assertEqual("Ucudnn>Conv2DWithStatistics" in ops, not after, ops)

    def test_bad_statistics_after_channels_is_a_value_error(self):
        layer = tf_ucudnn.layers.Conv2DBatchNorm(4, 3, padding="same")
        for bad in ("-1", "three", "70000"):
            with mock.patch.dict(os.environ, {"UCUDNN_STATISTICS_AFTER_CHANNELS": bad}), \
                    self.assertRaisesRegex(ValueError, "UCUDNN_STATISTICS_AFTER_CHANNELS must be "
                                                       "a whole number .* got '" + bad):
                layer(tf.zeros((2, 5, 5, 3)), training=True)

    def test_moving_statistics_after_fit_steps(self):
        rng = np.random.default_rng(5)
        x = _input(rng, "channels_last")
        labels = tf.constant(rng.standard_normal((7, 9, 10, 6)), tf.float32)
        fused, _, conv, bn = _pair(rng, x.shape, "channels_last", False, "relu")
        stock = keras.Sequential([keras.Input(x.shape[1:]), conv, bn, keras.layers.ReLU()])
        ours = keras.Sequential([keras.Input(x.shape[1:]), fused])
        for model in (ours, stock):
            model.compile(keras.optimizers.SGD(0.01), "mse", jit_compile=False)
            with tf.device(self.DEVICE):
                model.fit(x, labels, batch_size=7, epochs=3, verbose=0, shuffle=False)
        for got, want in zip(fused.conv.weights + fused.batch_norm.weights,
                             conv.weights + bn.weights):
            assert_rel_l2(self, got, want, 1e-5, f"{want.path} after 3 steps")

    def test_from_layers_shares_the_variables(self):
        conv = keras.layers.Conv2D(4, 3, use_bias=False)
        bn = keras.layers.BatchNormalization()
        fused = tf_ucudnn.layers.Conv2DBatchNorm.from_layers(conv, bn, "relu")
        fused.build((2, 6, 6, 3))
        self.assertIs(fused.conv, conv)
        self.assertIs(fused.batch_norm, bn)
        self.assertIs(fused.conv.kernel, conv.kernel)
        self.assertEqual(fused.activation, keras.activations.relu)

    def test_from_layers_refuses_what_it_cannot_fuse(self):
        with self.assertRaisesRegex(ValueError, "before the batch norm"):
            tf_ucudnn.layers.Conv2DBatchNorm.from_layers(
                keras.layers.Conv2D(4, 3, activation="relu"), keras.layers.BatchNormalization())
        with self.assertRaisesRegex(ValueError, "must normalize the channels"):
            tf_ucudnn.layers.Conv2DBatchNorm.from_layers(
                keras.layers.Conv2D(4, 3), keras.layers.BatchNormalization(axis=1))

    def test_bad_knob_is_a_value_error(self):
        with self.assertRaisesRegex(ValueError, "micro_batch_size"):
            tf_ucudnn.layers.Conv2DBatchNorm(4, 3, micro_batch_size=-1)

    def test_saves_and_loads(self):
        rng = np.random.default_rng(7)
        x = _input(rng, "channels_last")
        model = keras.Sequential([keras.Input(x.shape[1:]),
                                  tf_ucudnn.layers.Conv2DBatchNorm(
                                      6, 3, padding="same", activation="relu", momentum=0.8,
                                      workspace_limit="32MiB")])
        with tf.device(self.DEVICE):
            model(x, training=True)  # moving statistics away from their initial values
            want = model(x, training=False)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.keras")
            model.save(path)
            loaded = keras.saving.load_model(path)
        layer = loaded.layers[0]
        self.assertIsInstance(layer, tf_ucudnn.layers.Conv2DBatchNorm)
        self.assertEqual(layer.workspace_limit, "32MiB")
        self.assertAllClose(layer.batch_norm.momentum, 0.8)
        with tf.device(self.DEVICE):
            assert_rel_l2(self, loaded(x, training=False), want, 1e-6, "loaded model's output")


@pytest.mark.gpu
class Conv2DBatchNormGpuTest(OnGpuWithoutTf32, Conv2DBatchNormTest):
    """The same on /GPU:0 with TF32 off (float32's statistics then reduce after
    the convolution; float16's are cuDNN's genstats epilogue)."""

    DEVICE = "/GPU:0"


def _residual_model():
    """A small functional model with the chains the rewrite fuses (with and
    without a conv bias) and the ones it must leave: a convolution whose
    output has two uses, one with an activation before its batch norm, and
    one whose output is the model's."""
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
    y = keras.layers.Conv2D(8, 3, padding="same")(x)
    y = keras.layers.BatchNormalization()(y)
    x = keras.layers.Activation("relu")(keras.layers.Add()([x, y]))
    two_uses = keras.layers.Conv2D(4, 1)(x)
    activated = keras.layers.Conv2D(4, 1, activation="relu")(x)
    pooled = [keras.layers.GlobalAveragePooling2D()(t) for t in (
        keras.layers.BatchNormalization()(two_uses), two_uses,
        keras.layers.BatchNormalization()(activated))]
    last = keras.layers.Conv2D(2, 1)(x)
    return keras.Model(inputs, [keras.layers.Concatenate()(pooled), last])


def _reducing_block(dtype=None):
    """ResNet v1's reducing pattern: a 1x1 Conv2D -> BatchNormalization ->
    ReLU, then a 3x3 Conv2D -> BatchNormalization, on 8x8x5 inputs (more
    channels than UCUDNN_STATISTICS_AFTER_CHANNELS' default: the 1x1 then
    takes its statistics from its cuDNN graph, whose output the backward
    pass can compute again)."""
    inputs = keras.Input((8, 8, 5))
    x = keras.layers.Conv2D(4, 1, use_bias=False, dtype=dtype)(inputs)
    x = keras.layers.ReLU(dtype=dtype)(keras.layers.BatchNormalization(dtype=dtype)(x))
    x = keras.layers.Conv2D(4, 3, padding="same", use_bias=False, dtype=dtype)(x)
    return keras.Model(inputs, keras.layers.BatchNormalization(dtype=dtype)(x))


class RewriteModelBatchNormTest(tf.test.TestCase):
    """``rewrite_model(..., fuse_batch_norm=True)`` on Sequential, functional and
    nested models: which chains it fuses, and the same outputs, training and
    moving statistics as the model it copies."""

    DEVICE = "/CPU:0"

    def test_fuses_the_chains_and_leaves_the_rest(self):
        model = _residual_model()
        new = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        kinds = [type(layer).__name__ for layer in new.layers]
        self.assertEqual(kinds.count("Conv2DBatchNorm"), 2)
        self.assertEqual(kinds.count("BatchNormInConv"), 2)
        self.assertEqual(kinds.count("BatchNormalization"), 2)  # after two_uses and activated
        self.assertEqual(kinds.count("Conv2D"), 3)  # two_uses, activated, last: tf_ucudnn's
        self.assertTrue(all(type(layer) is not keras.layers.Conv2D for layer in new.layers))
        # Without the flag nothing is fused.
        plain = tf_ucudnn.rewrite_model(model, verbose=0)
        self.assertNotIn("Conv2DBatchNorm", [type(layer).__name__ for layer in plain.layers])

    def test_same_outputs_and_training_as_the_original(self):
        rng = np.random.default_rng(11)
        x = tf.constant(rng.standard_normal((6, 8, 8, 3)) + 0.3, tf.float32)
        model = _residual_model()
        with tf.device(self.DEVICE):
            model(x, training=True)  # moving statistics away from their initial values
        new = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        with tf.device(self.DEVICE):
            for training in (False, True):
                for got, want in zip(new(x, training=training), model(x, training=training)):
                    assert_rel_l2(self, got, want, 1e-5, f"output, training={training}")
        targets = [tf.constant(rng.standard_normal((6, 12)), tf.float32),
                   tf.constant(rng.standard_normal((6, 8, 8, 2)), tf.float32)]
        for m in (model, new):
            m.compile(keras.optimizers.SGD(0.05), ["mse", "mse"], jit_compile=False)
            with tf.device(self.DEVICE):
                m.fit(x, targets, batch_size=6, epochs=2, verbose=0, shuffle=False)
        stock = {layer.name: layer for layer in model.layers}
        fused = [layer for layer in new.layers
                 if isinstance(layer, tf_ucudnn.layers.Conv2DBatchNorm)]
        self.assertLen(fused, 2)
        for layer in fused:
            conv = stock[layer.conv.name]
            _assert_weights_as_stock(
                self, zip(layer.conv.weights + layer.batch_norm.weights,
                          conv.weights + stock[layer.batch_norm.name].weights),
                {conv.bias.path} if conv.use_bias else set())

    def test_sequential_and_nested(self):
        rng = np.random.default_rng(13)
        x = tf.constant(rng.standard_normal((4, 8, 8, 3)), tf.float32)
        block = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3),
                                  keras.layers.BatchNormalization(), keras.layers.ReLU()])
        inputs = keras.Input((8, 8, 3))
        model = keras.Model(inputs, keras.layers.Conv2D(2, 3)(block(inputs)))
        with tf.device(self.DEVICE):
            model(x, training=True)
        new = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        inner = [layer for layer in new.layers if isinstance(layer, keras.Sequential)][0]
        self.assertEqual([type(layer).__name__ for layer in inner.layers],
                         ["Conv2DBatchNorm", "BatchNormInConv", "ReLU"])
        with tf.device(self.DEVICE):
            for training in (False, True):
                assert_rel_l2(self, new(x, training=training), model(x, training=training), 1e-5,
                              f"output, training={training}")

    def test_rewritten_model_saves_and_loads(self):
        rng = np.random.default_rng(17)
        x = tf.constant(rng.standard_normal((3, 8, 8, 3)), tf.float32)
        model = _residual_model()
        with tf.device(self.DEVICE):
            model(x, training=True)
        new = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "fused.keras")
            new.save(path)
            loaded = keras.saving.load_model(path)
        with tf.device(self.DEVICE):
            for got, want in zip(loaded(x, training=False), new(x, training=False)):
                assert_rel_l2(self, got, want, 1e-6, "loaded model's output")

    def test_recompute_sets_each_fused_layers_recompute_output(self):
        model = _reducing_block()

        def chosen(recompute):
            new = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0,
                                          recompute=recompute)
            return [layer.recompute_output for layer in new.layers
                    if isinstance(layer, tf_ucudnn.layers.Conv2DBatchNorm)]

        self.assertEqual(chosen("1x1"), [True, False])
        self.assertEqual(chosen("off"), [False, False])
        self.assertEqual(chosen(None), [None, None])
        with self.assertRaisesRegex(ValueError, "recompute must be one of off, 1x1, got 'all'"):
            chosen("all")


@pytest.mark.gpu
class RewriteModelBatchNormGpuTest(OnGpuWithoutTf32, RewriteModelBatchNormTest):
    DEVICE = "/GPU:0"


class PrologueChainTest(parameterized.TestCase, tf.test.TestCase):
    """Two ``Conv2DBatchNorm`` layers in a row, the ReLU between them a layer
    of its own, an activation of the first, or absent: in a traced training
    step the second convolution reads the first's convolution output and
    applies its batch norm (and ReLU) as its prologue
    (``Ucudnn>NormalizedConv2DWithStatistics``); the loss, every gradient
    and the moving statistics match the same layers with the prologue off
    (which Conv2DBatchNormTest checks against Keras' own layers): relative
    L2 1e-5, float32 without TF32, with micro-batches and under
    jit_compile."""

    DEVICE = "/CPU:0"

    def _layers(self, between, input_prologue, micro_batch_size=None, **geometry):
        first = tf_ucudnn.layers.Conv2DBatchNorm(
            6, 3, padding="same", activation="relu" if between == "activation" else None,
            micro_batch_size=micro_batch_size, input_prologue=input_prologue,
            data_format=geometry.get("data_format"))
        second = tf_ucudnn.layers.Conv2DBatchNorm(
            4, 3, use_bias=True, micro_batch_size=micro_batch_size,
            input_prologue=input_prologue, **{"padding": "same", **geometry})

        def forward(x):
            t = first(x, training=True)
            if between in ("layer", "padded"):
                t = keras.layers.ReLU()(t)
            if between == "padded":  # as before ResNet v2's 3x3 convolutions
                t = keras.layers.ZeroPadding2D(((1, 2), (0, 1)),
                                               data_format=geometry.get("data_format"))(t)
            return second(t, training=True)
        return first, second, forward

    def _step(self, between, input_prologue, jit_compile=False, micro_batch_size=None,
              **geometry):
        rng = np.random.default_rng(29)
        shape = (5, 7, 8, 3) if geometry.get("data_format") != "channels_first" else (5, 3, 7, 8)
        x = tf.constant(rng.standard_normal(shape) * 2.0 + 0.5, tf.float32)
        keras.utils.set_random_seed(7)
        first, second, forward = self._layers(between, input_prologue, micro_batch_size,
                                              **geometry)
        with tf.device(self.DEVICE):
            forward(x)  # build; moving statistics move once
        weights = [first.conv.kernel, first.batch_norm.gamma, first.batch_norm.beta,
                   second.conv.kernel, second.batch_norm.gamma, second.batch_norm.beta]

        @tf.function(jit_compile=jit_compile)
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.cast(forward(x), tf.float32)
                loss = tf.reduce_sum(y * tf.sin(y))
            return loss, tape.gradient(loss, [x] + weights)

        before = tf_ucudnn.rewrite_stats()["bn_prologue"]
        with tf.device(self.DEVICE):
            loss, grads = step(x)
        ops = {op.type for op in step.get_concrete_function(x).graph.get_operations()}
        taken = tf_ucudnn.rewrite_stats()["bn_prologue"] - before
        moving = [second.batch_norm.moving_mean, second.batch_norm.moving_variance]
        return loss, grads, moving, ops, taken

    @parameterized.product(between=["layer", "activation", "none"], micro_batch_size=[None, 2])
    def test_same_step_with_and_without_the_prologue(self, between, micro_batch_size):
        loss, grads, moving, ops, taken = self._step(between, True,
                                                     micro_batch_size=micro_batch_size)
        self.assertIn("Ucudnn>NormalizedConv2DWithStatistics", ops)
        self.assertGreaterEqual(taken, 1)
        loss_off, grads_off, moving_off, ops_off, taken_off = self._step(
            between, False, micro_batch_size=micro_batch_size)
        self.assertNotIn("Ucudnn>NormalizedConv2DWithStatistics", ops_off)
        self.assertEqual(taken_off, 0)
        assert_rel_l2(self, loss, loss_off, 1e-5, "loss")
        names = ["input", "kernel 1", "gamma 1", "beta 1", "kernel 2", "gamma 2", "beta 2"]
        for name, got, want in zip(names, grads, grads_off):
            assert_rel_l2(self, got, want, 1e-5, f"gradient of {name}")
        for got, want in zip(moving, moving_off):
            assert_rel_l2(self, got, want, 1e-5, "second layer's moving statistics")

    @parameterized.parameters(
        dict(data_format="channels_first", strides=2, padding="valid"),
        dict(data_format="channels_last", strides=(2, 1), padding="same", dilation_rate=1),
        dict(data_format="channels_last", padding="valid", dilation_rate=2))
    def test_other_geometries(self, **geometry):
        loss, grads, moving, ops, _ = self._step("layer", True, micro_batch_size=2, **geometry)
        self.assertIn("Ucudnn>NormalizedConv2DWithStatistics", ops)
        loss_off, grads_off, moving_off, _, _ = self._step("layer", False, micro_batch_size=2,
                                                           **geometry)
        assert_rel_l2(self, loss, loss_off, 1e-5, "loss")
        for got, want in zip(grads + moving, grads_off + moving_off):
            assert_rel_l2(self, got, want, 1e-5, "gradient or moving statistic")

    @parameterized.parameters(
        dict(data_format="channels_last", padding="valid"),
        dict(data_format="channels_first", padding="valid", strides=2),
        dict(data_format="channels_last", padding="same"))
    def test_through_zero_padding(self, **geometry):
        # Zero padding after the prologue is the convolution's own padding: a
        # "valid" convolution takes the prologue with the padding made explicit;
        # a "same" one (its amounts depend on the padded size) reads the padded
        # tensor. Either way the same step.
        loss, grads, moving, ops, taken = self._step("padded", True, micro_batch_size=2,
                                                     **geometry)
        takes = geometry["padding"] == "valid"
        self.assertEqual("Ucudnn>NormalizedConv2DWithStatistics" in ops, takes)
        self.assertEqual(taken >= 1, takes)
        loss_off, grads_off, moving_off, _, _ = self._step("padded", False, micro_batch_size=2,
                                                           **geometry)
        assert_rel_l2(self, loss, loss_off, 1e-5, "loss")
        for got, want in zip(grads + moving, grads_off + moving_off):
            assert_rel_l2(self, got, want, 1e-5, "gradient or moving statistic")

    @parameterized.parameters(dict(between="layer"), dict(between="padded", padding="valid"))
    def test_under_jit_compile(self, between, **geometry):
        loss, grads, _, ops, _ = self._step(between, True, jit_compile=True, **geometry)
        self.assertIn("Ucudnn>NormalizedConv2DWithStatistics", ops)
        loss_off, grads_off, _, _, _ = self._step(between, False, jit_compile=False, **geometry)
        assert_rel_l2(self, loss, loss_off, 1e-5, "loss")
        for got, want in zip(grads, grads_off):
            assert_rel_l2(self, got, want, 1e-5, "gradient")

    def test_output_kept_for_the_backward_pass_only_where_its_sums_are_read(self):
        # The prologue convolution's output y enters its gradient only through the
        # sum of squares' (2 y): a plain Conv2D's sums are read by no one, so its
        # backward pass must not keep y (in a ResNet v2 block that is the widest
        # tensor); a Conv2DBatchNorm's are, so it must.
        def backward_reads_output(second):
            first = tf_ucudnn.layers.Conv2DBatchNorm(6, 3, padding="same", input_prologue=True)
            relu = keras.layers.ReLU()

            @tf.function
            def step(x):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(second(relu(first(x, training=True)), training=True))
                return tape.gradient(loss, tape.watched_variables())

            with tf.device(self.DEVICE):
                graph = step.get_concrete_function(tf.TensorSpec((2, 6, 6, 3))).graph
            convs = [op for op in graph.get_operations()
                     if op.type == "Ucudnn>NormalizedConv2DWithStatistics"]
            self.assertLen(convs, 1)
            return any(reader.name.startswith("gradient_tape/")
                       for reader in convs[0].outputs[0].consumers())

        self.assertFalse(backward_reads_output(
            tf_ucudnn.layers.Conv2D(4, 3, padding="same", input_prologue=True)))
        self.assertTrue(backward_reads_output(
            tf_ucudnn.layers.Conv2DBatchNorm(4, 3, padding="same", input_prologue=True)))

    def _chain_step(self, first_kernel, jit_compile, recompute="off", recompute_output=None):
        """A Conv2DBatchNorm (``first_kernel`` square, ``recompute_output``), a
        ReLU layer and a second Conv2DBatchNorm taking the prologue, in float32
        on DEVICE, under ``UCUDNN_RECOMPUTE=recompute``: the traced step's graph
        and what it returns (loss, gradients of the input and every weight, the
        second batch norm's moving statistics)."""
        keras.utils.set_random_seed(11)
        first = tf_ucudnn.layers.Conv2DBatchNorm(6, first_kernel, padding="same",
                                                 input_prologue=True,
                                                 recompute_output=recompute_output)
        second = tf_ucudnn.layers.Conv2DBatchNorm(4, 3, padding="same", input_prologue=True)
        relu = keras.layers.ReLU()

        @tf.function(jit_compile=jit_compile)
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(tf.sin(second(relu(first(x, training=True)),
                                                   training=True)))
            return loss, tape.gradient(loss, [x, *tape.watched_variables()])

        with mock.patch.dict(os.environ, {"UCUDNN_RECOMPUTE": recompute}), \
                tf.device(self.DEVICE):
            # Five channels: the first convolution's statistics from its
            # cuDNN graph (UCUDNN_STATISTICS_AFTER_CHANNELS' default is 4).
            x = tf.random.stateless_normal((3, 6, 6, 5), seed=(1, 2))
            graph = step.get_concrete_function(x).graph
            loss, grads = step(x)  # compiles and runs
        moving = [second.batch_norm.moving_mean, second.batch_norm.moving_variance]
        return graph, [loss, *grads, *moving]

    def test_recomputed_prologue_waits_for_the_gradient(self):
        # The backward pass computes the prologue's result again from the
        # convolution's input. That input first waits for the incoming gradient,
        # so that neither XLA's scheduler nor TF's executor computes it in the
        # forward pass and keeps it until the backward pass (which took back the
        # memory the prologue saves): under XLA through an optimization barrier
        # with the gradient, elsewhere an identity with a control dependency on it.
        for jit_compile in (True, False):
            graph, _ = self._chain_step(3, jit_compile)
            conv, = [op for op in graph.get_operations()
                     if op.type == "Ucudnn>NormalizedConv2DWithStatistics"]
            backward = [op for op in graph.get_operations()
                        if op.type in ("Ucudnn>Conv2DBackpropInput", "Ucudnn>Conv2DBackpropFilter")]
            # What the prologue convolution's backward passes read as dy.
            dy, = {op.inputs[2].ref() for op in backward
                   if op.name.startswith("gradient_tape/" + conv.name.rsplit("/", 2)[0])}
            barriers = [op for op in graph.get_operations() if op.type == "XlaOptimizationBarrier"]
            waits = [op for op in graph.get_operations() if op.type == "Identity"
                     and op.inputs[0] is conv.inputs[0]
                     and dy.deref().op in op.control_inputs]
            if jit_compile:
                self.assertLen(barriers, 1)
                self.assertIs(barriers[0].inputs[0], conv.inputs[0])
                self.assertIs(barriers[0].inputs[-1], dy.deref())
                self.assertEmpty(waits)
            else:
                self.assertEmpty(barriers)  # TF has no kernel for it outside XLA
                self.assertLen(waits, 1)

    @staticmethod
    def _backward_readers(graph):
        """The backward-pass readers of the forward Conv2DWithStatistics' output."""
        conv, = [op for op in graph.get_operations()
                 if op.type == "Ucudnn>Conv2DWithStatistics"
                 and not op.name.startswith("gradient_tape/")]
        return [r.name for r in conv.outputs[0].consumers()
                if r.name.startswith("gradient_tape/")]

    @staticmethod
    def _recomputations(graph):
        """The Conv2DWithStatistics ops of the backward pass."""
        return [op.name for op in graph.get_operations()
                if op.type == "Ucudnn>Conv2DWithStatistics"
                and op.name.startswith("gradient_tape/")]

    def _assert_recomputed(self, graph, values, want_values):
        self.assertEmpty(self._backward_readers(graph))
        self.assertLen(self._recomputations(graph), 1)
        for got, want in zip(values, want_values):
            assert_rel_l2(self, got, want, 1e-6, "loss, gradient or moving statistic")

    def _assert_kept(self, graph):
        self.assertNotEmpty(self._backward_readers(graph))
        self.assertEmpty(self._recomputations(graph))

    @parameterized.parameters(False, True)
    def test_recomputed_1x1_output_same_step_and_not_kept(self, jit_compile):
        # UCUDNN_RECOMPUTE=1x1: the first convolution's output, which the second
        # reads through its prologue, is computed again in the backward pass by
        # the same op, so the forward pass's output has no reader there; the step
        # is the same. Not for a 3x3 convolution.
        graph_off, off = self._chain_step(1, jit_compile)
        self._assert_kept(graph_off)
        graph_on, on = self._chain_step(1, jit_compile, recompute="1x1")
        self._assert_recomputed(graph_on, on, off)
        graph_3x3, _ = self._chain_step(3, jit_compile, recompute="1x1")
        self._assert_kept(graph_3x3)

    @parameterized.parameters(False, True)
    def test_layer_recompute_output_wins_over_the_variable(self, jit_compile):
        # recompute_output=True recomputes a 3x3 convolution's output that
        # UCUDNN_RECOMPUTE (off) would keep; False keeps a 1x1's that "1x1"
        # would recompute.
        graph_kept, kept = self._chain_step(3, jit_compile)
        self._assert_kept(graph_kept)
        graph_on, on = self._chain_step(3, jit_compile, recompute_output=True)
        self._assert_recomputed(graph_on, on, kept)
        graph_off, _ = self._chain_step(1, jit_compile, recompute="1x1", recompute_output=False)
        self._assert_kept(graph_off)

    def test_recompute_output_must_be_a_bool_and_is_in_the_config(self):
        with self.assertRaisesRegex(ValueError, "recompute_output must be True, False or None"):
            tf_ucudnn.layers.Conv2DBatchNorm(4, 1, recompute_output="1x1")
        config = tf_ucudnn.layers.Conv2DBatchNorm(4, 1, recompute_output=True).get_config()
        self.assertIs(config["recompute_output"], True)
        self.assertIs(tf_ucudnn.layers.Conv2DBatchNorm.from_config(config).recompute_output, True)

    def test_recompute_bad_value_is_a_value_error(self):
        with self.assertRaisesRegex(ValueError, "UCUDNN_RECOMPUTE must be one of off, 1x1"):
            self._chain_step(1, False, recompute="all")

    def test_knob_must_be_a_bool(self):
        with self.assertRaisesRegex(ValueError, "input_prologue must be True, False or None"):
            tf_ucudnn.layers.Conv2DBatchNorm(4, 3, input_prologue="yes")

    def test_by_default_in_float16_only(self):
        def taken(policy):
            first = tf_ucudnn.layers.Conv2DBatchNorm(4, 3, dtype=policy)
            second = tf_ucudnn.layers.Conv2DBatchNorm(4, 3, dtype=policy)
            relu = keras.layers.ReLU(dtype=policy)
            step = tf.function(lambda x: second(relu(first(x, training=True)),
                                                training=True))
            before = tf_ucudnn.rewrite_stats()["bn_prologue"]
            with tf.device(self.DEVICE):
                step(tf.zeros((2, 6, 6, 3)))
            return tf_ucudnn.rewrite_stats()["bn_prologue"] > before  # counted per trace

        self.assertEqual({p: taken(p) for p in ("float32", "mixed_float16", "mixed_bfloat16")},
                         {"float32": False, "mixed_float16": True, "mixed_bfloat16": False})


@pytest.mark.gpu
class PrologueChainGpuTest(OnGpuWithoutTf32, PrologueChainTest):
    """The same on /GPU:0 (TF32 off: the prologue runs before the convolution,
    into scratch, and the statistics reduce after it)."""

    DEVICE = "/GPU:0"


def _assert_weights_as_stock(test, pairs, zero_gradient):
    """Each ``(ours, stock)`` weight pair of ``pairs`` after training: relative
    L2 1e-5; stock weights whose path is in ``zero_gradient`` (biases read
    only through batch norms: zero gradient in exact arithmetic, noise on
    both sides) within 1e-6."""
    for got, want in pairs:
        if want.path in zero_gradient:
            test.assertAllClose(got, want, rtol=0, atol=1e-6)
            continue
        assert_rel_l2(test, got, want, 1e-5, f"{want.path} after 2 steps")


def _assert_trained_as_stock(test, ours, stock, zero_gradient, refit):
    """``ours``' weights after training under ``enable_rewrite`` against the
    same model's trained stock (:func:`_assert_weights_as_stock`). Then
    ``refit()``, with the rewrite off, leaves no layer's ``call`` replaced."""
    _assert_weights_as_stock(test, zip(ours.weights, stock.weights), zero_gradient)
    with tf.device(test.DEVICE):
        refit()
    test.assertFalse([layer.name for layer in ours.layers if "call" in layer.__dict__])


def _preactivation_model():
    """Pre-activation blocks as ResNet v2 and DenseNet write them: a batch norm
    of a tensor that a residual sum also reads, read through a ReLU by a
    convolution with a batch norm after it; a plain convolution after a fused
    chain's ReLU; a batch norm of a concatenation read by a convolution
    directly."""
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(6, 3, padding="same", name="stem")(inputs)
    p = keras.layers.Activation("relu")(keras.layers.BatchNormalization()(x))
    y = keras.layers.Conv2D(6, 3, padding="same", use_bias=False)(p)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.Conv2D(6, 3, padding="same", name="after_chain")(keras.layers.ReLU()(y))
    x = keras.layers.Add()([x, y])
    c = keras.layers.Concatenate()([x, inputs])
    c = keras.layers.Conv2D(4, 1, activation="relu")(keras.layers.BatchNormalization()(c))
    return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(c))


def _force_prologue(model):
    """Turns ``input_prologue`` on in ``model``'s layers that have it (float32,
    as in these tests, would not take the prologue by default)."""
    for layer in model.layers:
        if hasattr(layer, "input_prologue"):
            layer.input_prologue = True


def _prologues_taken_training(test, stock, ours, x, target):
    """Trains ``stock`` and then ``ours`` two epochs each on ``(x, target)``
    (one batch, SGD, mean square, without XLA) on ``test.DEVICE``; returns
    how many convolutions took a prologue while ``ours`` trained
    (``rewrite_stats()["bn_prologue"]``)."""
    for m in (stock, ours):
        m.compile(keras.optimizers.SGD(0.05), "mse", jit_compile=False)
    with tf.device(test.DEVICE):
        stock.fit(x, target, batch_size=len(x), epochs=2, verbose=0, shuffle=False)
        before = tf_ucudnn.rewrite_stats()["bn_prologue"]
        ours.fit(x, target, batch_size=len(x), epochs=2, verbose=0, shuffle=False)
    return tf_ucudnn.rewrite_stats()["bn_prologue"] - before


class PreactivationTest(parameterized.TestCase, tf.test.TestCase):
    """``rewrite_model(fuse_batch_norm=True)`` on pre-activation blocks
    (BatchNormalization → ReLU → Conv2D): the batch norms become
    ``tf_ucudnn.layers.BatchNormalization``, and with ``input_prologue`` on,
    the convolutions after them (plain ``Conv2D`` and ``Conv2DBatchNorm``)
    apply their normalization and ReLU as the prologue in ``model.fit``; the
    weights and moving statistics after training match the stock model's
    (relative L2 1e-5, float32 without TF32), and inference is Keras'."""

    DEVICE = "/CPU:0"

    def test_rewrite_and_train_as_the_stock_model(self):
        rng = np.random.default_rng(31)
        x = tf.constant(rng.standard_normal((6, 8, 8, 3)) + 0.3, tf.float32)
        target = tf.constant(rng.standard_normal((6, 4)), tf.float32)
        model = _preactivation_model()
        new = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        kinds = [type(layer) for layer in new.layers]
        self.assertEqual(kinds.count(tf_ucudnn.layers.BatchNormalization), 2)
        self.assertEqual(kinds.count(tf_ucudnn.layers.Conv2DBatchNorm), 1)
        _force_prologue(new)
        with tf.device(self.DEVICE):
            for training in (False, True):
                assert_rel_l2(self, new(x, training=training), model(x, training=training),
                              1e-5, f"eager output, training={training}")
        # Two convolutions after a recorded batch norm (one of them Conv2DBatchNorm's)
        # and one after a chain's, in each trace.
        taken = _prologues_taken_training(self, model, new, x, target)
        self.assertTrue(taken >= 3 and taken % 3 == 0, taken)
        stock = {w.path.split("/")[0] + "/" + w.name: w for w in model.weights}
        for layer in new.layers:
            if isinstance(layer, tf_ucudnn.layers.Conv2DBatchNorm):
                pairs = zip(layer.conv.weights + layer.batch_norm.weights,
                            [stock[f"{layer.conv.name}/{w.name}"] for w in layer.conv.weights] +
                            [stock[f"{layer.batch_norm.name}/{w.name}"]
                             for w in layer.batch_norm.weights])
            else:
                pairs = zip(layer.weights, [stock[f"{layer.name}/{w.name}"] for w in layer.weights])
            _assert_weights_as_stock(self, pairs, {"stem/bias", "after_chain/bias"})

    def test_saves_and_loads(self):
        model = tf_ucudnn.rewrite_model(_preactivation_model(), fuse_batch_norm=True, verbose=0)
        x = tf.constant(np.random.default_rng(37).standard_normal((2, 8, 8, 3)), tf.float32)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "preactivation.keras")
            model.save(path)
            loaded = keras.saving.load_model(path)
        self.assertEqual([type(layer) for layer in loaded.layers],
                         [type(layer) for layer in model.layers])
        with tf.device(self.DEVICE):
            assert_rel_l2(self, loaded(x, training=False), model(x, training=False), 1e-6,
                          "loaded model's output")

    def test_through_a_zero_padding_layer(self):
        """BatchNormalization -> ReLU -> ZeroPadding2D -> Conv2D("valid"), as
        before ResNet v2's 3x3 convolutions: the batch norm is recorded and the
        convolution takes the prologue with the padding as its own; a "same"
        convolution after the padding would keep reading the padded tensor, so
        a batch norm read only that way stays Keras'."""
        rng = np.random.default_rng(43)
        x = tf.constant(rng.standard_normal((6, 8, 8, 3)) + 0.3, tf.float32)
        target = tf.constant(rng.standard_normal((6, 8)), tf.float32)
        L = keras.layers
        inputs = keras.Input((8, 8, 3))
        stem = L.Conv2D(6, 3, padding="same", name="stem")(inputs)
        a = L.ZeroPadding2D(1)(L.ReLU()(L.BatchNormalization(name="read_valid")(stem)))
        a = L.Conv2D(4, 3, name="valid")(a)
        b = L.ZeroPadding2D(1)(L.BatchNormalization(name="read_same")(stem))
        b = L.Conv2D(4, 3, padding="same", name="same")(b)
        model = keras.Model(inputs, L.Concatenate()([L.GlobalAveragePooling2D()(a),
                                                     L.GlobalAveragePooling2D()(b)]))
        new = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        recorded = [layer.name for layer in new.layers
                    if isinstance(layer, tf_ucudnn.layers.BatchNormalization)]
        self.assertEqual(recorded, ["read_valid"])
        _force_prologue(new)
        taken = _prologues_taken_training(self, model, new, x, target)
        self.assertGreaterEqual(taken, 1)  # the "valid" convolution, once per trace
        stock = {w.path: w for w in model.weights}
        _assert_weights_as_stock(self, [(got, stock[got.path]) for got in new.weights],
                                 {"stem/bias"})

    @parameterized.parameters(False, True)
    def test_enable_rewrite_trains_as_the_stock_model(self, jit_compile):
        """The route takes the prologue by dtype; forced on here (float32)."""
        rng = np.random.default_rng(41)
        x = tf.constant(rng.standard_normal((6, 8, 8, 3)) + 0.3, tf.float32)
        target = tf.constant(rng.standard_normal((6, 4)), tf.float32)
        ours = _preactivation_model()
        stock = keras.models.clone_model(ours)
        stock.set_weights(ours.get_weights())
        for m in (ours, stock):
            m.compile(keras.optimizers.SGD(0.05), "mse", jit_compile=jit_compile)
        before = tf_ucudnn.rewrite_stats()["bn_prologue"]
        with tf.device(self.DEVICE):
            stock.fit(x, target, batch_size=6, epochs=2, verbose=0, shuffle=False)
            with mock.patch.object(tf_ucudnn.batch_norm_chain, "prologue_by_default",
                                   lambda dtype: True):
                with tf_ucudnn.enable_rewrite(fuse_batch_norm=True):
                    ours.fit(x, target, batch_size=6, epochs=2, verbose=0, shuffle=False)
        taken = tf_ucudnn.rewrite_stats()["bn_prologue"] - before
        # With XLA every convolution after a recorded batch norm; without, the chain's only
        # (Grappler's rewrite of the plain ones cannot take a prologue).
        self.assertTrue(taken > 0 and taken % (3 if jit_compile else 1) == 0, taken)
        _assert_trained_as_stock(self, ours, stock, {"stem/bias", "after_chain/bias"},
                                 lambda: ours.fit(x, target, batch_size=6, epochs=1, verbose=0,
                                                  shuffle=False))


@pytest.mark.gpu
class PreactivationGpuTest(OnGpuWithoutTf32, PreactivationTest):
    DEVICE = "/GPU:0"


class EnableRewriteBatchNormTest(parameterized.TestCase, tf.test.TestCase):
    """``enable_rewrite(fuse_batch_norm=True)``: a Keras model's Conv2D ->
    BatchNormalization chains train on the convolution's statistics, with
    and without XLA, to the same weights and moving statistics as the same
    model trained stock; ``rewrite_stats()["bn_fused"]`` counts them; the
    layers go back when the rewrite is off."""

    DEVICE = "/CPU:0"

    @parameterized.parameters(False, True)
    def test_trains_as_the_stock_model(self, jit_compile):
        rng = np.random.default_rng(19)
        x = tf.constant(rng.standard_normal((6, 8, 8, 3)) + 0.3, tf.float32)
        targets = [tf.constant(rng.standard_normal((6, 12)), tf.float32),
                   tf.constant(rng.standard_normal((6, 8, 8, 2)), tf.float32)]
        ours = _residual_model()
        stock = keras.models.clone_model(ours)
        stock.set_weights(ours.get_weights())
        for m in (ours, stock):
            m.compile(keras.optimizers.SGD(0.05), ["mse", "mse"], jit_compile=jit_compile)
        before = tf_ucudnn.rewrite_stats()["bn_fused"]
        with tf.device(self.DEVICE):
            stock.fit(x, targets, batch_size=6, epochs=2, verbose=0, shuffle=False)
            with tf_ucudnn.enable_rewrite(fuse_batch_norm=True):
                ours.fit(x, targets, batch_size=6, epochs=2, verbose=0, shuffle=False)
        # The model's two chains, in each trace of the training function.
        fused = tf_ucudnn.rewrite_stats()["bn_fused"] - before
        self.assertTrue(fused >= 2 and fused % 2 == 0, fused)
        before_norm = {layer.bias.path for layer in stock.layers
                       if isinstance(layer, keras.layers.Conv2D) and layer.use_bias
                       and layer._outbound_nodes and isinstance(layer._outbound_nodes[0].operation,
                                      keras.layers.BatchNormalization)}
        _assert_trained_as_stock(self, ours, stock, before_norm,
                                 lambda: ours.fit(x, targets, batch_size=6, epochs=1, verbose=0,
                                                  shuffle=False))

    def test_flag_must_be_a_bool(self):
        with self.assertRaisesRegex(ValueError, "fuse_batch_norm must be True or False"):
            tf_ucudnn.enable_rewrite(fuse_batch_norm=1)

    def test_recompute_1x1_recomputes_the_reducing_convolution(self):
        # In float16 the 3x3 chain takes the 1x1 chain's batch norm and ReLU as
        # its prologue; recompute="1x1" then computes the 1x1 output again in
        # the backward pass (one Conv2DWithStatistics there), "off" keeps it.
        model = _reducing_block("mixed_float16")
        model.compile(keras.optimizers.SGD(0.05), "mse", jit_compile=False)
        x = tf.random.stateless_normal((2, 8, 8, 5), seed=(3, 4))

        def backward_statistics_convs(recompute):
            @tf.function
            def step(x):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.cast(model(x, training=True), tf.float32))
                return tape.gradient(loss, model.trainable_variables)

            with tf_ucudnn.enable_rewrite(fuse_batch_norm=True, recompute=recompute), \
                    tf.device(self.DEVICE):
                model.make_train_function(force=True)  # where the rewrite routes the layers
                graph = step.get_concrete_function(x).graph
            return [op.name for op in graph.get_operations()
                    if op.type == "Ucudnn>Conv2DWithStatistics"
                    and op.name.startswith("gradient_tape/")]

        before = tf_ucudnn.rewrite_stats()["bn_recomputed"]
        self.assertLen(backward_statistics_convs("1x1"), 1)
        self.assertEqual(tf_ucudnn.rewrite_stats()["bn_recomputed"] - before, 1)
        self.assertEmpty(backward_statistics_convs("off"))
        self.assertEqual(tf_ucudnn.rewrite_stats()["bn_recomputed"] - before, 1)
        with self.assertRaisesRegex(ValueError, "recompute must be one of off, 1x1"):
            tf_ucudnn.enable_rewrite(fuse_batch_norm=True, recompute="3x3")


@pytest.mark.gpu
class EnableRewriteBatchNormGpuTest(OnGpuWithoutTf32, EnableRewriteBatchNormTest):
    """The same on /GPU:0 (TF32 off)."""

    DEVICE = "/GPU:0"


def _small_resnet(seed, size=16):
    """A ResNet of two residual stages (Conv2D → BatchNormalization → ReLU,
    a projection shortcut at the stride-2 stage) on ``size``² digits, its
    weights drawn from ``seed``."""
    keras.utils.set_random_seed(seed)

    def conv_bn(x, filters, kernel=3, strides=1, relu=True):
        x = keras.layers.Conv2D(filters, kernel, strides, padding="same", use_bias=False)(x)
        x = keras.layers.BatchNormalization(momentum=0.9)(x)
        return keras.layers.ReLU()(x) if relu else x

    inputs = keras.Input((size, size, 1))
    x = conv_bn(inputs, 16)
    for filters, strides in ((16, 1), (32, 2)):
        shortcut = x if strides == 1 else conv_bn(x, filters, 1, strides, relu=False)
        y = conv_bn(conv_bn(x, filters, strides=strides), filters, relu=False)
        x = keras.layers.ReLU()(keras.layers.Add()([y, shortcut]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x))


class ShortTrainingTest(parameterized.TestCase, tf.test.TestCase):
    """A short training run of a small ResNet on the shipped digits: the loss
    curve of ``rewrite_model(fuse_batch_norm=True)`` must stay within the
    noise of two stock seeds (its largest per-epoch distance from the stock
    run of the same weights and data order is at most the largest distance
    between the stock runs of two seeds), and the loss must fall."""

    DEVICE = "/CPU:0"
    EPOCHS = 3
    _stock = {}  # seed -> per-epoch losses of the stock model, per device

    @staticmethod
    def _data():
        from tf_ucudnn import demo

        x, y, _, _ = demo.load_digits_images(16, "channels_last", seed=0)
        return x, y

    def _train(self, model, seed, jit_compile):
        x, y = self._data()
        model.compile(keras.optimizers.SGD(0.02, momentum=0.9),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=jit_compile)
        order = np.random.default_rng(seed)
        losses = []
        with tf.device(self.DEVICE):
            for _ in range(self.EPOCHS):
                perm = order.permutation(len(x))
                history = model.fit(x[perm], y[perm], batch_size=64, epochs=1, shuffle=False,
                                    verbose=0)
                losses.append(history.history["loss"][0])
        return np.array(losses)

    def _stock_losses(self, seed):
        key = (self.DEVICE, seed)
        if key not in self._stock:
            self._stock[key] = self._train(_small_resnet(seed), seed, jit_compile=False)
        return self._stock[key]

    @parameterized.parameters(False, True)
    def test_loss_curve_within_the_noise_of_two_stock_seeds(self, jit_compile):
        fused = tf_ucudnn.rewrite_model(_small_resnet(0), fuse_batch_norm=True, verbose=0)
        self.assertLen([layer for layer in fused.layers
                        if isinstance(layer, tf_ucudnn.layers.Conv2DBatchNorm)], 6)
        got = self._train(fused, 0, jit_compile)
        stock, other = self._stock_losses(0), self._stock_losses(1)
        noise = np.max(np.abs(stock - other))
        self.assertGreater(noise, 0.0)
        self.assertLessEqual(np.max(np.abs(got - stock)), noise,
                             f"fused {got}, stock {stock}, another seed {other}")
        self.assertLess(got[-1], got[0], f"the loss did not fall: {got}")


@pytest.mark.gpu
class ShortTrainingGpuTest(OnGpuWithoutTf32, ShortTrainingTest):
    """The same on /GPU:0 (TF32 off)."""

    DEVICE = "/GPU:0"
