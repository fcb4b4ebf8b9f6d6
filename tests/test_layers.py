"""tf_ucudnn.layers.Conv2D is a drop-in for keras.layers.Conv2D."""

import os

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from testing_utils import assert_rel_l2

KNOBS = dict(workspace_limit=1 << 20, batch_size_policy="all", micro_batch_size=3)


class Conv2DLayerMatchesKerasTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("same", dict(filters=6, kernel_size=3, padding="same")),
        ("valid_stride2", dict(filters=6, kernel_size=3, strides=2)),
        ("same_stride_1x2_rect_kernel", dict(filters=4, kernel_size=(2, 3), strides=(1, 2),
                                             padding="same")),
        ("dilation2", dict(filters=6, kernel_size=3, dilation_rate=2, padding="same")),
        ("groups2", dict(filters=6, kernel_size=3, groups=2)),
        ("no_bias_relu", dict(filters=6, kernel_size=3, use_bias=False, activation="relu")),
        ("bias_relu_fused", dict(filters=6, kernel_size=3, padding="same", activation="relu")),
        ("bias_elu", dict(filters=6, kernel_size=3, activation="elu")),
        ("channels_first", dict(filters=6, kernel_size=3, padding="same", strides=2,
                                groups=2, data_format="channels_first")),
    )
    def test_output_equals_keras_conv2d_with_the_same_weights(self, config):
        rng = np.random.default_rng(5)
        x = tf.constant(rng.standard_normal((5, 9, 8, 4)), tf.float32)
        # TF's CPU Conv2D has no NCHW kernel: the Keras reference runs channels_last
        # on the transposed input (the kernel's layout does not depend on it).
        reference = keras.layers.Conv2D(**{**config, "data_format": "channels_last"},
                                        bias_initializer="random_normal")
        want = reference(x)
        if config.get("data_format") == "channels_first":
            x = tf.transpose(x, [0, 3, 1, 2])
            want = tf.transpose(want, [0, 3, 1, 2])
        layer = tf_ucudnn.layers.Conv2D(**config, **KNOBS)
        layer.build(x.shape)
        layer.set_weights(reference.get_weights())
        assert_rel_l2(self, layer(x), want, 1e-5, f"tf_ucudnn Conv2D({config})")

    @parameterized.named_parameters(("bias_relu", True, "relu", "Ucudnn>Conv2DWithBias", None),
                                    ("bias_elu", True, "elu", "Ucudnn>Conv2DWithBias", "Elu"),
                                    ("no_bias_relu", False, "relu", "Ucudnn>Conv2D", "Relu"))
    def test_bias_and_relu_are_applied_by_the_convolution_op(self, use_bias, activation, op_type,
                                                             activation_op):
        layer = tf_ucudnn.layers.Conv2D(4, 3, use_bias=use_bias, activation=activation)
        x = tf.ones((2, 6, 6, 3))
        graph = tf.function(layer).get_concrete_function(x).graph
        ops = [op for op in graph.get_operations() if op.type.startswith("Ucudnn>")]
        types = [op.type for op in graph.get_operations()]
        self.assertEqual([op.type for op in ops], [op_type])
        self.assertNotIn("BiasAdd", types)
        self.assertNotIn("AddV2", types)
        for other in ("Relu", "Elu"):
            (self.assertIn if other == activation_op else self.assertNotIn)(other, types)
        if use_bias:
            self.assertEqual(ops[0].get_attr("activation"),
                             b"relu" if activation == "relu" else b"linear")

    @staticmethod
    def _data():
        rng = np.random.default_rng(9)
        return (rng.standard_normal((16, 8, 8, 3)).astype(np.float32),
                rng.standard_normal((16, 1)).astype(np.float32))

    def _fit_both(self, model, epochs, **compile_args):
        """Keras' and tf_ucudnn's version of model, same initial weights: (losses, models)."""
        x, y = self._data()
        keras.utils.set_random_seed(1)
        reference = model(keras.layers.Conv2D)
        ours = model(tf_ucudnn.layers.Conv2D, **KNOBS)
        ours.set_weights(reference.get_weights())
        losses = []
        for m in (reference, ours):
            m.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", **compile_args)
            history = m.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0)
            losses.append(np.array(history.history["loss"]))
        return losses, (reference, ours)

    def test_training_matches_keras_loss_for_loss(self):
        def model(conv, **knobs):
            return keras.Sequential([
                keras.Input((8, 8, 3)),
                conv(4, 3, padding="same", activation="relu", **knobs),
                conv(6, 3, strides=2, **knobs),
                conv(4, (1, 2), dilation_rate=(1, 2), padding="same", activation="relu",
                     **knobs),
                keras.layers.Flatten(),
                keras.layers.Dense(1),
            ])

        tf_ucudnn.clear_plans()
        (want, got), (reference, ours) = self._fit_both(model, epochs=4, jit_compile=False)
        np.testing.assert_allclose(got, want, rtol=1e-4,
                                   err_msg=f"per-epoch loss: tf_ucudnn {got} vs keras {want}")
        self.assertLess(want[-1], want[0], "the loss went down (the test trains something)")
        ran = {(r["pass"], r["batch"]) for r in tf_ucudnn.plans() if r["policy"] == "forced 3"}
        self.assertContainsSubset({("forward", 8), ("backward-data", 8), ("backward-filter", 8)},
                                  ran, "fit ran tf_ucudnn's kernels and gradients")
        for a, b in zip(ours.get_weights(), reference.get_weights()):
            assert_rel_l2(self, a, b, 1e-4, "weights after training")


    @parameterized.parameters("mixed_float16", "mixed_bfloat16")
    def test_mixed_precision_training_tracks_keras(self, policy):
        # Both compute in float16 / bfloat16 and round differently (CPU kernels
        # round once per micro-batch), so losses agree to a few roundings only.
        keras.mixed_precision.set_dtype_policy(policy)
        self.addCleanup(keras.mixed_precision.set_dtype_policy, "float32")

        def model(conv, **knobs):
            return keras.Sequential([
                keras.Input((8, 8, 3)),
                conv(4, 3, padding="same", activation="relu", **knobs),
                conv(4, 3, strides=2, **knobs),
                keras.layers.Flatten(),
                keras.layers.Dense(1, dtype="float32"),
            ])

        (want, got), (_, ours) = self._fit_both(model, epochs=3, jit_compile=False)
        self.assertEqual(ours.layers[0].compute_dtype, policy.split("_")[1])
        np.testing.assert_allclose(got, want, rtol=3e-2,
                                   err_msg=f"{policy} losses: tf_ucudnn {got} vs keras {want}")

    def test_default_compile_keeps_the_model_out_of_xla(self):
        def model(conv, **knobs):
            return keras.Sequential([keras.Input((8, 8, 3)), conv(2, 3, **knobs),
                                     keras.layers.Flatten(), keras.layers.Dense(1)])

        (want, got), (_, ours) = self._fit_both(model, epochs=2)  # jit_compile="auto"
        self.assertFalse(ours.jit_compile)
        np.testing.assert_allclose(got, want, rtol=1e-4)


class Conv2DLayerConfigTest(parameterized.TestCase, tf.test.TestCase):

    def test_get_config_from_config_round_trip_keeps_knobs(self):
        layer = tf_ucudnn.layers.Conv2D(8, 3, padding="same", **KNOBS)
        config = layer.get_config()
        for knob, value in KNOBS.items():
            self.assertEqual(config[knob], value, knob)
        clone = tf_ucudnn.layers.Conv2D.from_config(config)
        for knob, value in KNOBS.items():
            self.assertEqual(getattr(clone, knob), value, knob)
        self.assertEqual(clone.get_config(), config)

    def test_default_knobs_are_none(self):
        config = tf_ucudnn.layers.Conv2D(8, 3).get_config()
        self.assertEqual([config[k] for k in KNOBS], [None, None, None])

    def test_keras_file_round_trip_gives_identical_outputs(self):
        model = keras.Sequential([
            keras.Input((7, 7, 2)),
            tf_ucudnn.layers.Conv2D(4, 3, padding="same", activation="relu", **KNOBS),
            tf_ucudnn.layers.Conv2D(3, 2, strides=2, groups=1, use_bias=False),
        ])
        x = np.random.default_rng(2).standard_normal((5, 7, 7, 2)).astype(np.float32)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        self.assertIsInstance(loaded.layers[0], tf_ucudnn.layers.Conv2D)
        for knob, value in KNOBS.items():
            self.assertEqual(getattr(loaded.layers[0], knob), value, knob)
        self.assertAllEqual(loaded(x), model(x))

    @parameterized.named_parameters(
        ("negative_workspace_limit", dict(workspace_limit=-1), "workspace_limit"),
        ("fractional_workspace_limit", dict(workspace_limit=0.5), "workspace_limit"),
        ("unknown_policy", dict(batch_size_policy="bogus"), "batch_size_policy"),
        ("negative_micro_batch_size", dict(micro_batch_size=-2), "micro_batch_size"),
        ("bool_micro_batch_size", dict(micro_batch_size=True), "micro_batch_size"),
    )
    def test_invalid_knob_raises_value_error_in_init(self, knobs, name):
        with self.assertRaisesRegex(ValueError, name):
            tf_ucudnn.layers.Conv2D(4, 3, **knobs)

    @parameterized.product(layer=("Conv2D", "Conv2DTranspose"), dtype=("float64", "int32"))
    def test_a_dtype_the_kernels_lack_raises_value_error_in_init(self, layer, dtype):
        with self.assertRaisesRegex(ValueError, rf"tf_ucudnn.layers.{layer} computes in float32, "
                                                rf"float16 or bfloat16 .*got the dtype policy "
                                                rf"'{dtype}'.*use keras.layers.{layer}"):
            getattr(tf_ucudnn.layers, layer)(4, 3, dtype=dtype)

    @parameterized.parameters("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")
    def test_the_kernels_dtypes_are_accepted(self, dtype):
        layer = tf_ucudnn.layers.Conv2D(4, 3, dtype=dtype)
        self.assertIn(layer.compute_dtype, ("float32", "float16", "bfloat16"))


TRANSPOSE_CONFIGS = (
    ("same_stride2", dict(filters=6, kernel_size=3, strides=2, padding="same")),
    ("valid_stride1", dict(filters=5, kernel_size=3)),
    ("valid_2x2_stride2", dict(filters=4, kernel_size=2, strides=2)),
    ("output_padding", dict(filters=4, kernel_size=3, strides=2, output_padding=1)),
    ("rect_kernel_strides", dict(filters=4, kernel_size=(2, 3), strides=(1, 2), padding="same")),
    ("dilation2", dict(filters=6, kernel_size=3, dilation_rate=2)),
    ("no_bias_relu", dict(filters=6, kernel_size=3, strides=2, use_bias=False,
                          activation="relu")),
    ("channels_first", dict(filters=6, kernel_size=3, strides=2, padding="same",
                            data_format="channels_first")),
)


class Conv2DTransposeLayerMatchesKerasTest(parameterized.TestCase, tf.test.TestCase):
    """tf_ucudnn.layers.Conv2DTranspose is a drop-in for keras.layers.Conv2DTranspose."""

    @parameterized.named_parameters(*TRANSPOSE_CONFIGS)
    def test_output_and_gradients_equal_keras_with_the_same_weights(self, config):
        rng = np.random.default_rng(7)
        x = tf.constant(rng.standard_normal((5, 6, 7, 4)), tf.float32)
        # TF's CPU kernels have no NCHW and no dilated transposed convolution:
        # the Keras reference runs channels_last on the transposed input, and
        # a dilation as its filter with zeros between the taps.
        rate = config.get("dilation_rate", 1)
        ref_config = dict(config, data_format="channels_last", dilation_rate=1)
        if rate > 1:
            ref_config["kernel_size"] = (config["kernel_size"] - 1) * rate + 1
        reference = keras.layers.Conv2DTranspose(**ref_config, bias_initializer="random_normal")
        reference.build(x.shape)
        ours_x = x
        if config.get("data_format") == "channels_first":
            ours_x = tf.transpose(x, [0, 3, 1, 2])
        layer = tf_ucudnn.layers.Conv2DTranspose(**config, **KNOBS)
        layer.build(ours_x.shape)
        kernel, *bias = reference.get_weights()
        if rate > 1:  # only every rate-th tap of the reference's filter is not zero
            taps = kernel[::rate, ::rate].copy()
            kernel[:] = 0
            kernel[::rate, ::rate] = taps
            reference.set_weights([kernel, *bias])
        layer.set_weights([kernel[::rate, ::rate], *bias])
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, ours_x])
            want = reference(x)
            got = layer(ours_x)
            if config.get("data_format") == "channels_first":
                got = tf.transpose(got, [0, 2, 3, 1])
            weights = tf.constant(rng.standard_normal(want.shape), tf.float32)
            loss_want = tf.reduce_sum(want * weights)
            loss_got = tf.reduce_sum(got * weights)
        self.assertEqual(got.shape, want.shape)
        assert_rel_l2(self, got, want, 1e-5, f"Conv2DTranspose({config}) output")
        grads_want = tape.gradient(loss_want, [x, *reference.trainable_variables])
        grads_want[1] = grads_want[1][::rate, ::rate]  # the taps the dilated filter has
        grads_got = tape.gradient(loss_got, [ours_x, *layer.trainable_variables])
        if config.get("data_format") == "channels_first":
            grads_got[0] = tf.transpose(grads_got[0], [0, 2, 3, 1])
        for name, g, w in zip(("input", "kernel", "bias"), grads_got, grads_want):
            assert_rel_l2(self, g, w, 1e-5, f"Conv2DTranspose({config}) {name} gradient")

    def test_the_transposed_convolution_is_a_tf_ucudnn_backward_data_op(self):
        layer = tf_ucudnn.layers.Conv2DTranspose(4, 3, strides=2, activation="relu")
        graph = tf.function(layer).get_concrete_function(tf.ones((2, 5, 5, 3))).graph
        types = [op.type for op in graph.get_operations()]
        self.assertEqual([t for t in types if t.startswith("Ucudnn>")],
                         ["Ucudnn>Conv2DBackpropInput"])
        self.assertNotIn("Conv2DBackpropInput", types)

    def test_an_unknown_batch_size_is_taken_from_the_input(self):
        layer = tf_ucudnn.layers.Conv2DTranspose(4, 3, strides=2, padding="same")
        fn = tf.function(layer, input_signature=[tf.TensorSpec([None, 5, 5, 3])])
        self.assertEqual(fn(tf.ones((3, 5, 5, 3))).shape, (3, 10, 10, 4))

    def test_a_decoder_trains_like_keras_loss_for_loss(self):
        def model(conv_t, **knobs):
            return keras.Sequential([
                keras.Input((6, 6, 3)),
                keras.layers.Conv2D(4, 3, strides=2, padding="same", activation="relu"),
                conv_t(4, 3, strides=2, padding="same", activation="relu", **knobs),
                conv_t(2, 2, **knobs),
                keras.layers.Flatten(),
                keras.layers.Dense(1),
            ])

        rng = np.random.default_rng(3)
        x = rng.standard_normal((16, 6, 6, 3)).astype(np.float32)
        y = rng.standard_normal((16, 1)).astype(np.float32)
        keras.utils.set_random_seed(1)
        reference = model(keras.layers.Conv2DTranspose)
        ours = model(tf_ucudnn.layers.Conv2DTranspose, **KNOBS)
        ours.set_weights(reference.get_weights())
        losses = []
        tf_ucudnn.clear_plans()
        for m in (reference, ours):
            m.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=False)
            history = m.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
            losses.append(np.array(history.history["loss"]))
        np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4,
                                   err_msg=f"losses: tf_ucudnn {losses[1]} vs keras {losses[0]}")
        self.assertLess(losses[0][-1], losses[0][0], "the loss went down")
        ran = {r["pass"] for r in tf_ucudnn.plans() if r["policy"] == "forced 3"}
        # The transposed convolution's forward pass is backward-data; its
        # gradients are the forward and backward-filter passes.
        self.assertEqual(ran, {"forward", "backward-data", "backward-filter"}, ran)

    def test_config_and_keras_file_round_trip(self):
        model = keras.Sequential([
            keras.Input((5, 5, 2)),
            tf_ucudnn.layers.Conv2DTranspose(3, 3, strides=2, output_padding=1, **KNOBS),
        ])
        config = model.layers[0].get_config()
        for knob, value in KNOBS.items():
            self.assertEqual(config[knob], value, knob)
        self.assertEqual(config["output_padding"], (1, 1))
        x = np.random.default_rng(2).standard_normal((4, 5, 5, 2)).astype(np.float32)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        self.assertIsInstance(loaded.layers[0], tf_ucudnn.layers.Conv2DTranspose)
        self.assertEqual(loaded.layers[0].get_config(), config)
        self.assertAllEqual(loaded(x), model(x))

    @parameterized.named_parameters(
        ("negative_workspace_limit", dict(workspace_limit=-1), "workspace_limit"),
        ("unknown_policy", dict(batch_size_policy="bogus"), "batch_size_policy"),
    )
    def test_invalid_knob_raises_value_error_in_init(self, knobs, name):
        with self.assertRaisesRegex(ValueError, name):
            tf_ucudnn.layers.Conv2DTranspose(4, 3, **knobs)


class AutoWorkspaceLimitLayerTest(tf.test.TestCase):
    """workspace_limit="auto" is a knob value of the layers (the CPU kernel
    has no workspace: the results are the same)."""

    def test_auto_is_accepted_and_kept_in_the_config(self):
        x = tf.constant(np.random.default_rng(4).standard_normal((3, 6, 6, 2)), tf.float32)
        for cls, stock in ((tf_ucudnn.layers.Conv2D, keras.layers.Conv2D),
                           (tf_ucudnn.layers.Conv2DTranspose, keras.layers.Conv2DTranspose)):
            layer = cls(4, 3, workspace_limit="auto")
            reference = stock(4, 3)
            reference.build(x.shape)
            layer.build(x.shape)
            layer.set_weights(reference.get_weights())
            self.assertEqual(layer.get_config()["workspace_limit"], "auto")
            assert_rel_l2(self, layer(x), reference(x), 1e-5, cls.__name__)

    def test_a_misspelt_auto_names_what_is_allowed(self):
        with self.assertRaisesRegex(ValueError, "workspace_limit.*'auto'"):
            tf_ucudnn.layers.Conv2D(4, 3, workspace_limit="automatic")
