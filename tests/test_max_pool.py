"""tf_ucudnn.max_pool: a max-pool whose gradient is elementwise selects and
shifts, and enable_rewrite's route of XLA-compiled models' MaxPooling2D."""

import os
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_ucudnn
from tf_ucudnn import max_pool
from testing_utils import rel_l2

# (input shape, pool_size, strides, padding)
CASES = (([2, 9, 9, 3], (3, 3), (2, 2), "VALID"),  # ResNet's pool: windows overlap
         ([2, 8, 8, 3], (2, 2), (2, 2), "VALID"),  # VGG's: they tile
         ([1, 7, 6, 2], (3, 3), (1, 1), "VALID"),  # a position in up to nine windows
         ([2, 9, 8, 2], (2, 3), (2, 1), "VALID"),
         ([1, 5, 7, 1], (5, 2), (1, 3), "VALID"),  # one window row; columns skipped
         ([2, 7, 8, 2], (1, 2), (2, 3), "VALID"),  # rows and columns in no window
         ([2, 9, 9, 3], (3, 3), (2, 2), "SAME"),   # one padded row and column each side
         ([2, 8, 7, 2], (2, 2), (2, 2), "SAME"),   # tiles; W padded after only
         ([1, 7, 6, 2], (3, 3), (1, 1), "SAME"),
         ([1, 6, 5, 1], (3, 2), (2, 3), "SAME"),   # the odd padding after
         ([1, 2, 3, 1], (3, 3), (2, 2), "SAME"))   # the window larger than the input


def _gradient(x, pool, strides, ours, padding="VALID"):
    """Output and input gradient of a weighted sum of the pool's output."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = (max_pool.max_pool2d(x, pool, strides, padding) if ours else
             tf.nn.max_pool2d(x, pool, strides, padding))
        weight = tf.cast(tf.reshape(tf.range(tf.size(y)) % 7 + 1, tf.shape(y)),
                         x.dtype) * tf.constant(0.37, x.dtype)
        loss = tf.reduce_sum(y * weight)
    return y, tape.gradient(loss, x)


class MaxPool2dTest(tf.test.TestCase):

    def test_gradient_is_tensorflows_tensor_for_tensor_with_ties(self):
        rng = np.random.default_rng(5)
        for shape, pool, strides, padding in CASES:
            for dtype in (tf.float32, tf.float16, tf.bfloat16):
                # Three values: most windows hold their maximum more than once.
                x = tf.constant(rng.integers(0, 3, shape), dtype)
                label = f"{shape} {pool} {strides} {padding} {dtype.name}"
                want_y, want = _gradient(x, pool, strides, False, padding)  # TF's kernel
                xla_y, xla = tf.function(_gradient, jit_compile=True)(
                    x, pool, strides, False, padding)  # XLA's select-and-scatter
                self.assertAllEqual(xla_y, want_y, msg=label)
                if padding == "VALID":
                    # Padded, XLA's CPU select-and-scatter can take another
                    # of a window's tied maxima (the next test: without ties
                    # it agrees).
                    self.assertAllEqual(xla, want, msg=label)
                for compiled in (False, True):
                    run = tf.function(_gradient, jit_compile=True) if compiled else _gradient
                    y, got = run(x, pool, strides, True, padding)
                    self.assertAllEqual(y, want_y, msg=label)
                    self.assertAllEqual(got, want, msg=f"{label} jit={compiled}")

    def test_gradient_is_xlas_tensor_without_ties(self):
        rng = np.random.default_rng(8)
        for shape, pool, strides, padding in CASES:
            # Distinct values: every window has one maximum.
            x = tf.constant(rng.permutation(np.prod(shape)).reshape(shape), tf.float32)
            run = tf.function(_gradient, jit_compile=True)
            _, want = run(x, pool, strides, False, padding)
            _, got = run(x, pool, strides, True, padding)
            self.assertAllEqual(got, want, msg=f"{shape} {pool} {strides} {padding}")

    def test_xlas_cpu_select_and_scatter_breaks_padded_ties_its_own_way(self):
        # Why the test above holds XLA to TF's kernel unpadded only: a 2x2
        # window at W = 3 ("SAME" pads a column after), maxima at (0, 1) and
        # (1, 0); TF's kernel and ours send the gradient to the first in
        # row-major order, XLA's CPU select-and-scatter to the other. If
        # this starts failing, XLA agrees now, and the test above can ask it.
        x = np.zeros([1, 2, 3, 1], np.float32)
        x[0, 0, 1, 0] = x[0, 1, 0, 0] = 1.0
        x = tf.constant(x)
        _, want = _gradient(x, 2, 2, False, "SAME")
        _, ours = tf.function(_gradient, jit_compile=True)(x, 2, 2, True, "SAME")
        with tf.device("/CPU:0"):
            _, xla = tf.function(_gradient, jit_compile=True)(x, 2, 2, False, "SAME")
        self.assertAllEqual(ours, want)
        self.assertGreater(float(want[0, 0, 1, 0]), 0.0)
        self.assertEqual(float(want[0, 1, 0, 0]), 0.0)
        self.assertEqual(float(xla[0, 0, 1, 0]), 0.0)
        self.assertGreater(float(xla[0, 1, 0, 0]), 0.0)

    def test_without_xla_the_gradient_is_tensorflows_own_op(self):
        x = tf.constant(np.random.default_rng(2).standard_normal([2, 9, 9, 3]), tf.float32)
        before = max_pool.first_max_gradients[0]
        graph = tf.function(_gradient).get_concrete_function(x, (3, 3), (2, 2), True).graph
        self.assertIn("MaxPoolGrad", {op.type for op in graph.get_operations()})
        self.assertEqual(max_pool.first_max_gradients[0], before)
        tf.function(_gradient, jit_compile=True)(x, (3, 3), (2, 2), True)
        self.assertEqual(max_pool.first_max_gradients[0], before + 1)

    def test_same_padding_never_sends_a_gradient_to_the_padding(self):
        # All zeros: every window's maximum 0 is tied by all its elements,
        # and under "SAME" (one row and column padded before) a padded
        # position comes first in the border windows; TF has no candidates
        # there, so each window's gradient reaches an input.
        x = tf.zeros([1, 5, 5, 2])
        _, want = _gradient(x, (3, 3), (2, 2), False, "SAME")  # TF's kernel
        y, got = tf.function(_gradient, jit_compile=True)(x, (3, 3), (2, 2), True, "SAME")
        self.assertAllEqual(got, want)
        weights = tf.cast(tf.range(tf.size(y)) % 7 + 1, tf.float32) * 0.37
        self.assertAllClose(tf.reduce_sum(got), tf.reduce_sum(weights), rtol=1e-6)

    def test_an_unknown_batch_size_under_xla(self):
        # Keras may trace a step with the batch dimension unknown.
        rng = np.random.default_rng(4)
        for shape, pool, strides, padding in (CASES[0], CASES[4], CASES[5]):
            x = tf.constant(rng.integers(0, 3, shape), tf.float32)
            _, want = _gradient(x, pool, strides, False, padding)
            run = tf.function(lambda x: _gradient(x, pool, strides, True, padding),
                              jit_compile=True,
                              input_signature=[tf.TensorSpec([None] + shape[1:], tf.float32)])
            _, got = run(x)
            self.assertAllEqual(got, want, msg=f"{shape} {pool} {strides} {padding}")

    def test_the_residues_interleave_without_a_concatenate_or_transpose(self):
        # A stack of the residues lowers to a concatenate and a transpose,
        # through which XLA's GPU fusions read the gradient slowly; the
        # interleave is a masked select over a broadcast and a reshape.
        x = tf.constant(np.random.default_rng(5).integers(0, 3, [2, 9, 9, 3]), tf.float32)
        run = tf.function(lambda x: _gradient(x, (3, 3), (2, 2), True)[1], jit_compile=True)
        hlo = run.experimental_get_compiler_ir(x)(stage="hlo")
        counts = {op: hlo.count(f" {op}(") for op in ("select", "concatenate", "transpose")}
        self.assertGreater(counts["select"], 0, counts)
        self.assertEqual((counts["concatenate"], counts["transpose"]), (0, 0), counts)

    def test_under_xla_the_forward_is_the_views_maximum_with_infinities(self):
        # The forward under XLA: no reduce-window, the maximum of the
        # window's views. It gives XLA's own max-pool's values, -inf for a
        # window of -inf (TF's CPU kernel gives the lowest finite value
        # there); the gradient is TF's kernel's where some -inf are inputs.
        rng = np.random.default_rng(9)
        for shape, pool, strides, padding in CASES:
            x = rng.integers(0, 3, shape).astype(np.float32)
            x.flat[rng.integers(0, x.size, 3)] = -np.inf
            for dtype in (tf.float32, tf.float16):
                label = f"{shape} {pool} {strides} {padding} {dtype.name}"
                some_inf = tf.constant(x, dtype)
                want_y, want = _gradient(some_inf, pool, strides, False, padding)
                y, got = tf.function(_gradient, jit_compile=True)(some_inf, pool, strides, True,
                                                                  padding)
                if not np.isinf(want_y.numpy()).any():
                    self.assertAllEqual(y, want_y, msg=label)
                    self.assertAllEqual(got, want, msg=label)
                odd = x.copy()
                odd[0, :pool[0], :pool[1], 0] = -np.inf  # a window of -inf
                odd = tf.constant(odd, dtype)
                run = tf.function(lambda x, ours: _gradient(x, pool, strides, ours, padding)[0],
                                  jit_compile=True)
                self.assertAllEqual(run(odd, True), run(odd, False), msg=label)
        x = tf.constant(rng.integers(0, 3, [2, 9, 9, 3]), tf.float32)
        run = tf.function(lambda x: _gradient(x, (3, 3), (2, 2), True, "SAME")[0],
                          jit_compile=True)
        hlo = run.experimental_get_compiler_ir(x)(stage="hlo")
        self.assertNotIn("reduce-window(", hlo)
        self.assertIn("maximum(", hlo)

    def test_random_inputs_and_int_arguments(self):
        x = tf.constant(np.random.default_rng(1).standard_normal([3, 10, 10, 4]), tf.float32)
        y, got = _gradient(x, 2, None, True)
        want_y, want = _gradient(x, (2, 2), (2, 2), False)
        self.assertEqual(y.shape, [3, 5, 5, 4])
        self.assertAllEqual(y, want_y)
        self.assertAllEqual(got, want)

    def test_bad_arguments_are_refused_with_what_is_allowed(self):
        x = tf.zeros([1, 4, 4, 1])
        with self.assertRaisesRegex(ValueError, "pool_size must be a positive int or two"):
            max_pool.max_pool2d(x, 0)
        with self.assertRaisesRegex(ValueError, "strides must be a positive int or two"):
            max_pool.max_pool2d(x, 2, (1, 1, 1))
        with self.assertRaisesRegex(ValueError, r"\[N, H, W, C\] with static H, W and C"):
            max_pool.max_pool2d(tf.zeros([4, 4]), 2)
        with self.assertRaisesRegex(ValueError, r"larger than the input's H x W 4 x 4 \(padding 'valid'\)"):
            max_pool.max_pool2d(x, (5, 1))
        self.assertEqual(max_pool.max_pool2d(x, (5, 1), padding="same").shape, [1, 1, 4, 1])
        with self.assertRaisesRegex(ValueError, "padding must be 'valid' or 'same', got 'full'"):
            max_pool.max_pool2d(x, 2, padding="full")


def _pool_model():
    keras.utils.set_random_seed(3)
    return keras.Sequential([
        keras.Input((12, 30, 3)),
        keras.layers.Conv2D(4, 3, padding="same", activation="relu", name="conv"),
        keras.layers.MaxPooling2D(3, strides=2, name="pool_valid"),        # 12 x 30 -> 5 x 14
        keras.layers.MaxPooling2D(2, padding="same", name="pool_same"),    # -> 3 x 7
        keras.layers.MaxPooling2D((1, 2), 1, name="pool_small"),           # -> 3 x 6
        keras.layers.MaxPooling2D((2, 5), name="pool_wide"),  # -> 1 x 1; 10 elements: keeps Keras'
        keras.layers.Flatten(), keras.layers.Dense(2)])


class MaxPoolRouteTest(tf.test.TestCase):
    """enable_rewrite(max_pool_gradient=...) on XLA-compiled Keras models."""

    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.x = rng.integers(0, 3, (8, 12, 30, 3)).astype("float32")  # ties in the pools
        self.y = rng.standard_normal((8, 2)).astype("float32")

    def _fit(self, model, **rewrite):
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=True)
        with tf_ucudnn.enable_rewrite(**rewrite):
            return model.fit(self.x, self.y, batch_size=4, shuffle=False, epochs=2, verbose=0)

    def test_small_window_pools_take_the_first_max_index_gradient(self):
        model, twin = _pool_model(), _pool_model()
        before = tf_ucudnn.rewrite_stats()["max_pool"]
        with mock.patch.dict(os.environ):
            os.environ.pop("UCUDNN_MAX_POOL_GRADIENT", None)  # the default
            with self.assertLogs("tf_ucudnn", level="INFO") as logs:
                ours = self._fit(model)
        self.assertIn("its 3 keras.layers.MaxPooling2D layers take their gradient",
                      "\n".join(logs.output))
        self.assertGreaterEqual(tf_ucudnn.rewrite_stats()["max_pool"] - before, 1)
        # The same training as with XLA's own max-pool gradient, convolutions
        # through tf_ucudnn in both.
        stock = self._fit(twin, max_pool_gradient="select-and-scatter")
        self.assertNotIn("call", vars(twin.get_layer("pool_valid")))
        np.testing.assert_allclose(ours.history["loss"], stock.history["loss"], rtol=1e-6)
        for a, b in zip(model.get_weights(), twin.get_weights()):
            self.assertLessEqual(rel_l2(a, b), 1e-6)
        # Off again: Keras' call, traced anew.
        model.fit(self.x, self.y, batch_size=4, verbose=0)
        for layer in model.layers:
            self.assertNotIn("call", vars(layer))

    def test_the_environment_variable_chooses_where_the_argument_is_absent(self):
        model = _pool_model()
        before = tf_ucudnn.rewrite_stats()["max_pool"]
        with mock.patch.dict(os.environ, UCUDNN_MAX_POOL_GRADIENT="select-and-scatter"):
            self._fit(model)
        self.assertEqual(tf_ucudnn.rewrite_stats()["max_pool"], before)
        with mock.patch.dict(os.environ, UCUDNN_MAX_POOL_GRADIENT="argmax"):
            with self.assertRaisesRegex(
                    ValueError, "UCUDNN_MAX_POOL_GRADIENT must be one of first-max-index, "
                    "select-and-scatter"):
                self._fit(_pool_model())

    def test_without_xla_keras_pools_stay(self):
        model = _pool_model()
        model.compile(optimizer="sgd", loss="mse", jit_compile=False)
        before = tf_ucudnn.rewrite_stats()["max_pool"]
        with tf_ucudnn.enable_rewrite():
            model.fit(self.x, self.y, batch_size=4, verbose=0)
            self.assertNotIn("call", vars(model.get_layer("pool_valid")))
        self.assertEqual(tf_ucudnn.rewrite_stats()["max_pool"], before)

    def test_an_unknown_gradient_is_refused_naming_the_choices(self):
        with self.assertRaisesRegex(ValueError, "max_pool_gradient must be one of "
                                    "first-max-index, select-and-scatter, got 'argmax'"):
            tf_ucudnn.enable_rewrite(max_pool_gradient="argmax")
        self.assertIsNone(tf_ucudnn.rewrite_settings())


class MaxPoolingLayerTest(tf.test.TestCase):
    """tf_ucudnn.layers.MaxPooling2D and rewrite_model(max_pool_gradient=...)."""

    def test_rewrite_model_replaces_small_window_pools_and_training_matches(self):
        model = _pool_model()
        with mock.patch.dict(os.environ):
            os.environ.pop("UCUDNN_MAX_POOL_GRADIENT", None)
            ours = tf_ucudnn.rewrite_model(model, verbose=0)
        kept = tf_ucudnn.rewrite_model(model, verbose=0, max_pool_gradient="select-and-scatter")
        self.assertIs(type(ours.get_layer("pool_valid")), tf_ucudnn.layers.MaxPooling2D)
        self.assertIs(type(ours.get_layer("pool_same")), tf_ucudnn.layers.MaxPooling2D)
        self.assertIs(type(ours.get_layer("pool_small")), tf_ucudnn.layers.MaxPooling2D)
        self.assertIs(type(ours.get_layer("pool_wide")), keras.layers.MaxPooling2D)
        self.assertIs(type(kept.get_layer("pool_valid")), keras.layers.MaxPooling2D)
        rng = np.random.default_rng(4)
        x = rng.integers(0, 3, (8, 12, 30, 3)).astype("float32")
        y = rng.standard_normal((8, 2)).astype("float32")
        before = tf_ucudnn.rewrite_stats()["max_pool"]
        losses = []
        for m in (ours, kept):
            m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=True)
            losses.append(m.fit(x, y, batch_size=4, shuffle=False, epochs=2,
                                verbose=0).history["loss"])
        self.assertGreaterEqual(tf_ucudnn.rewrite_stats()["max_pool"] - before, 1)
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
        for a, b in zip(ours.get_weights(), kept.get_weights()):
            self.assertLessEqual(rel_l2(a, b), 1e-6)

    def test_saves_and_loads_as_a_keras_file(self):
        import tempfile
        model = tf_ucudnn.rewrite_model(_pool_model(), verbose=0,
                                        max_pool_gradient="first-max-index")
        path = os.path.join(tempfile.mkdtemp(), "pool.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        self.assertIs(type(loaded.get_layer("pool_valid")), tf_ucudnn.layers.MaxPooling2D)
        x = np.random.default_rng(6).standard_normal((2, 12, 30, 3)).astype("float32")
        self.assertAllEqual(loaded(x), model(x))

    def test_an_unknown_gradient_is_refused_by_rewrite_model(self):
        with self.assertRaisesRegex(ValueError, "max_pool_gradient must be one of"):
            tf_ucudnn.rewrite_model(_pool_model(), max_pool_gradient="scatter")


@pytest.mark.gpu
class MaxPoolGpuTest(tf.test.TestCase):
    """On the GPU under XLA: the tensor of TF's kernel, and where nothing is
    padded of XLA's select-and-scatter, whose GPU kernel may add overlapping
    windows' shares in another order."""

    def test_gradient_matches_tensorflows_kernel_and_select_and_scatter_on_the_gpu(self):
        rng = np.random.default_rng(7)
        for shape, pool, strides, padding in (([16, 112, 112, 64], (3, 3), (2, 2), "VALID"),
                                              ([8, 224, 224, 64], (2, 2), (2, 2), "VALID"),
                                              ([16, 112, 112, 64], (3, 3), (2, 2), "SAME"),
                                              ([8, 75, 75, 32], (2, 2), (2, 2), "SAME")):
            for dtype, bound in ((tf.float32, 1e-6), (tf.float16, 1e-3)):
                label = f"{shape} {pool} {strides} {padding} {dtype.name}"
                run = tf.function(_gradient, jit_compile=True)
                # Against TF's CPU kernel: ties (five values), the first of
                # tied maxima, and in float32 normal samples (no ties);
                # against XLA's select-and-scatter on the GPU where nothing
                # is padded.
                inputs = [tf.constant(rng.integers(0, 5, shape), dtype)]
                if dtype == tf.float32:
                    inputs.append(tf.constant(rng.standard_normal(shape), dtype))
                for x in inputs:
                    with tf.device("/CPU:0"):
                        want_y, want = _gradient(x, pool, strides, False, padding)
                    with tf.device("/GPU:0"):
                        y, got = run(x, pool, strides, True, padding)
                        if padding == "VALID":
                            _, xla = run(x, pool, strides, False, padding)
                    self.assertAllEqual(y, want_y, msg=label)
                    if pool == strides:  # tiles: nothing added, the same bits
                        self.assertAllEqual(got, want, msg=label)
                    self.assertLessEqual(rel_l2(got, want), bound, label)
                    if padding == "VALID":
                        self.assertLessEqual(rel_l2(got, xla), bound, label)
