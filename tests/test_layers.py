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

    @parameterized.named_parameters(("bias", True, "Ucudnn>Conv2DWithBias"),
                                    ("no_bias", False, "Ucudnn>Conv2D"))
    def test_the_bias_is_added_by_the_convolution_op(self, use_bias, op_type):
        layer = tf_ucudnn.layers.Conv2D(4, 3, use_bias=use_bias, activation="relu")
        x = tf.ones((2, 6, 6, 3))
        graph = tf.function(layer).get_concrete_function(x).graph
        types = [op.type for op in graph.get_operations()]
        self.assertEqual([t for t in types if t.startswith("Ucudnn>")], [op_type])
        self.assertNotIn("BiasAdd", types)
        self.assertNotIn("AddV2", types)
        self.assertIn("Relu", types)

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
