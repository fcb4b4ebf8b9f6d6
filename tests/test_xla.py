"""tf_ucudnn under XLA (``jit_compile=True``): the three ops compile, and outputs
and gradients match ``tf.nn.conv2d``'s.

On the CPU the ops lower to XLA's own convolutions (TF's lowering of Conv2D);
on the GPU to typed-FFI custom calls that run the micro-batched engine. The
same cases run on both; the GPU cases also check the plans and the workspace
limit.
"""

import json
import os
import re
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from testing_utils import (TOLERANCE, assert_rel_l2, explicit_padding, random_tensor,
                           reference_conv2d, run_python)

# (name, batch, height, width, channels, filters, kernel, strides, padding, dilations, groups)
CASES = [
    ("same_3x3", 6, 9, 9, 4, 8, 3, 1, "SAME", 1, 1),
    ("valid_stride2", 5, 11, 10, 3, 6, 3, 2, "VALID", 1, 1),
    ("asymmetric_explicit", 7, 8, 9, 4, 5, (3, 2), 1, ((2, 0), (1, 3)), 1, 1),
    ("dilated", 4, 12, 12, 4, 4, 3, 1, "SAME", 2, 1),
    ("grouped", 6, 8, 8, 8, 6, 3, 1, "SAME", 1, 2),
    ("same_even_filter", 5, 9, 8, 3, 4, 2, 2, "SAME", 1, 1),
]


def _padding_arg(padding, data_format):
    return padding if isinstance(padding, str) else explicit_padding(padding, data_format)


def _shape(data_format, n, h, w, c):
    return (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)


def _device():
    return "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"


def _compare_under_xla(test, case, data_format, dtype, bias=False, relu=False, **knobs):
    """Forward and both gradients under jit_compile=True against the reference
    (with ``bias``: Ucudnn>Conv2DWithBias, and the bias gradient too; with
    ``relu``, its fused ReLU: the loss's gradient 2y is 0 where the ReLU cut,
    so rounding across 0 costs nothing)."""
    name, n, h, w, c, k, kernel, strides, padding, dilations, groups = case
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    rng = np.random.default_rng(0)
    x, x32 = random_tensor(rng, _shape(data_format, n, h, w, c), dtype)
    f, f32 = random_tensor(rng, (kh, kw, c // groups, k), dtype)
    b, b32 = random_tensor(rng, (k,), dtype)
    pad = _padding_arg(padding, data_format)

    @tf.function(jit_compile=True)
    def ours(x, f, b):
        with tf.GradientTape() as tape:
            tape.watch([x, f, b])
            y = tf_ucudnn.conv2d(x, f, strides, pad, data_format=data_format,
                                 dilations=dilations, bias=b if bias else None,
                                 activation="relu" if relu else None, **knobs)
            # d(loss)/dy = 2y: a non-uniform upstream gradient.
            loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
        dx, df, db = tape.gradient(loss, [x, f, b])
        return y, dx, df, (db if bias else tf.zeros_like(b))

    with tf.device(_device()):
        y, dx, df, db = ours(x, f, b)
    with tf.GradientTape() as tape:
        tape.watch([x32, f32, b32])
        want = reference_conv2d(x32, f32, strides, padding, data_format, dilations)
        if bias:
            want = tf.nn.bias_add(want, b32, data_format=data_format)
        if relu:
            want = tf.nn.relu(want)
        loss = tf.reduce_sum(want ** 2)
    want_dx, want_df, want_db = tape.gradient(loss, [x32, f32, b32])
    tol = TOLERANCE[dtype]
    what = f"{name} {data_format} {dtype.name} {knobs}"
    assert_rel_l2(test, y, want, tol, f"{what}: forward")
    assert_rel_l2(test, dx, want_dx, tol, f"{what}: backward-data")
    # The filter gradient sums over the batch (and the square doubles errors).
    assert_rel_l2(test, df, want_df, tol * (2 if dtype != tf.float32 else 1),
                  f"{what}: backward-filter")
    if bias and dtype == tf.float32:  # float16/bfloat16: tests/test_nn.py compares with stock's
        assert_rel_l2(test, db, want_db, tol, f"{what}: bias gradient")


def _child_result(test, code, **env):
    """Runs `code` in a child process and returns the JSON after its last "RESULT " line."""
    done = run_python(code, **env)
    test.assertEqual(done.returncode, 0, done.stderr[-3000:])
    lines = [s for s in done.stdout.splitlines() if s.startswith("RESULT ")]
    test.assertNotEmpty(lines, done.stdout[-2000:])
    return json.loads(lines[-1][len("RESULT "):])


def _hlo_of(fn, *args):
    return fn.experimental_get_compiler_ir(*args)(stage="hlo")


def _bytes_held_by_a_call(fn, *args):
    """Runs ``fn`` once to compile and plan, then again with TF's GPU memory
    statistics reset: peak minus current with the result still held, i.e. what
    the call held only while it ran. (Not peak - before - the result's size:
    the allocator may give the result a larger free block whole, 15 MiB larger
    once.)"""
    with tf.device("/GPU:0"):
        fn(*args)  # compiles, benchmarks and plans
        tf.test.experimental.sync_devices()
        tf.config.experimental.reset_memory_stats("GPU:0")
        result = fn(*args)
        tf.test.experimental.sync_devices()
        info = tf.config.experimental.get_memory_info("GPU:0")
    del result
    return info["peak"] - info["current"]


class XlaCompileTest(tf.test.TestCase, parameterized.TestCase):
    """Runs wherever TensorFlow runs: the CPU lowering in CI, the FFI path on a GPU."""

    @parameterized.named_parameters(*[(f"{c[0]}_{fmt}", c, fmt) for c in CASES
                                      for fmt in ("NHWC", "NCHW")
                                      if fmt == "NHWC" or tf.config.list_physical_devices("GPU")
                                      or c[0] in ("same_3x3", "grouped")])
    def test_outputs_and_gradients_match_tf_nn_conv2d(self, case, data_format):
        _compare_under_xla(self, case, data_format, tf.float32)

    @parameterized.named_parameters(*[(f"{dtype.name}_{c[0]}_{fmt}", c, fmt, dtype)
                                      for dtype in (tf.float16, tf.bfloat16)
                                      for c in CASES if c[0] in ("same_3x3", "valid_stride2",
                                                                 "same_even_filter", "grouped")
                                      for fmt in ("NHWC", "NCHW")
                                      if fmt == "NHWC" or tf.config.list_physical_devices("GPU")])
    def test_reduced_precision(self, case, data_format, dtype):
        # 3 and 4 input channels run padded to 8, or 4 (XlaPaddedInChannels); "grouped" is not
        # padded.
        _compare_under_xla(self, case, data_format, dtype)

    @parameterized.named_parameters(
        ("bfloat16_3", tf.bfloat16, 3, 1, 8),
        ("float16_4", tf.float16, 4, 1, 8),
        ("float32_3", tf.float32, 3, 1, None),  # cuDNN's float32 engines were no faster padded
        ("bfloat16_8", tf.bfloat16, 8, 1, None),
        ("bfloat16_grouped", tf.bfloat16, 4, 2, None),
        # float16 images into 32 or 64 filters: cuDNN's first-layer kernels take 4 channels.
        ("float16_image_32", tf.float16, 3, 1, 4, 32),
        ("float16_image_64", tf.float16, 3, 1, 4, 64),
        ("float16_3_into_16", tf.float16, 3, 1, 8, 16),
        ("bfloat16_image_64", tf.bfloat16, 3, 1, 8, 64),
    )
    def test_few_half_precision_input_channels_are_padded(self, dtype, channels, groups, padded,
                                                          filters=4):
        x = tf.ones((2, 9, 9, channels), dtype)
        f = tf.ones((3, 3, channels // groups, filters), dtype)

        @tf.function(jit_compile=True)
        def fn(x, f):
            with tf.GradientTape() as tape:
                tape.watch([x, f])
                y = tf_ucudnn.conv2d(x, f, 1, "SAME")
            return [y] + tape.gradient(y, [x, f])

        with tf.device(_device()):
            hlo = _hlo_of(fn, x, f)
            y, dx, df = fn(x, f)
        # Zeros padded onto the input and the filter, the gradients sliced back.
        pads = re.findall(r"= \w+\[([0-9,]+)\]\S* pad\(", hlo)
        if padded:
            self.assertIn(f"2,9,9,{padded}", pads, hlo)  # forward's, and backward-filter's input
            self.assertIn(f"3,3,{padded},{filters}", pads, hlo)  # forward's and backward-data's filter
            self.assertIn("opt-barrier(", hlo)  # backward-filter pads its input with dy
            self.assertRegex(hlo, r"\[2,9,9,%d\][^\n]* slice\(" % channels)
            self.assertRegex(hlo, r"\[3,3,%d,%d\][^\n]* slice\(" % (channels, filters))
        else:
            self.assertEmpty(pads, hlo)
        self.assertEqual(dx.shape, x.shape)
        self.assertEqual(df.shape, f.shape)
        if groups == 1:  # the padded channels add nothing: tf.nn.conv2d's values, in float32
            x32, f32 = tf.cast(x, tf.float32), tf.cast(f, tf.float32)
            with tf.GradientTape() as tape:
                tape.watch([x32, f32])
                want = tf.nn.conv2d(x32, f32, 1, "SAME")
            for got, ref in zip((y, dx, df), [want] + tape.gradient(want, [x32, f32])):
                self.assertAllEqual(tf.cast(got, tf.float32), ref)

    def test_pad_channels_off_keeps_the_channels(self):
        result = _child_result(self, """
            import json, tensorflow as tf, tf_ucudnn
            @tf.function(jit_compile=True)
            def fn(x, f):
                return tf_ucudnn.conv2d(x, f, 1, "SAME")
            x, f = tf.ones((2, 6, 6, 3), tf.bfloat16), tf.ones((3, 3, 3, 4), tf.bfloat16)
            dev = "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"
            with tf.device(dev):
                hlo = fn.experimental_get_compiler_ir(x, f)(stage="hlo")
            print("RESULT " + json.dumps(dict(pad=" pad(" in hlo)))
        """, UCUDNN_XLA_PAD_CHANNELS="off")
        self.assertFalse(result["pad"])

    @parameterized.named_parameters(*[(f"{c[0]}_{fmt}", c, fmt) for c in CASES
                                      for fmt in ("NHWC", "NCHW")
                                      if fmt == "NHWC" or tf.config.list_physical_devices("GPU")])
    def test_bias_outputs_and_gradients_match(self, case, data_format):
        _compare_under_xla(self, case, data_format, tf.float32, bias=True)

    @parameterized.named_parameters(*[(f"{c[0]}_{fmt}", c, fmt) for c in CASES
                                      for fmt in ("NHWC", "NCHW")
                                      if fmt == "NHWC" or tf.config.list_physical_devices("GPU")])
    def test_bias_relu_outputs_and_gradients_match(self, case, data_format):
        _compare_under_xla(self, case, data_format, tf.float32, bias=True, relu=True)

    def test_bias_stays_in_the_convolution(self):
        x, f, b = tf.ones((2, 5, 5, 3)), tf.ones((3, 3, 3, 4)), tf.ones((4,))

        @tf.function(jit_compile=True)
        def fn(x, f, b):
            return tf_ucudnn.conv2d(x, f, 1, "SAME", bias=b)

        with tf.device(_device()):
            hlo = _hlo_of(fn, x, f, b)
        if tf.config.list_physical_devices("GPU"):
            # The bias is the custom call's third operand, no add of XLA's own.
            self.assertRegex(hlo, r'custom-call\([^)]*, [^)]*, [^)]*\), '
                                  r'custom_call_target="ucudnn_conv2d_forward"')
            self.assertNotIn(" add(", hlo)
        else:
            self.assertIn("convolution(", hlo)
            self.assertIn(" add(", hlo)

    def test_relu_stays_in_the_convolution(self):
        x, f, b = tf.ones((2, 5, 5, 3)), -tf.ones((3, 3, 3, 4)), tf.ones((4,))

        @tf.function(jit_compile=True)
        def fn(x, f, b):
            return tf_ucudnn.conv2d(x, f, 1, "SAME", bias=b, activation="relu")

        with tf.device(_device()):
            hlo = _hlo_of(fn, x, f, b)
            y = fn(x, f, b)
        self.assertAllEqual(y, tf.zeros_like(y))  # every sum is negative: all cut
        if tf.config.list_physical_devices("GPU"):
            self.assertIn('custom_call_target="ucudnn_conv2d_forward"', hlo)
            self.assertNotIn(" maximum(", hlo)
        else:
            self.assertIn(" maximum(", hlo)

    def test_the_jit_function_holds_no_tf_ucudnn_op_after_compilation(self):
        x = tf.ones((2, 5, 5, 3))
        f = tf.ones((3, 3, 3, 4))

        @tf.function(jit_compile=True)
        def fn(x, f):
            return tf_ucudnn.conv2d(x, f, 1, "SAME")

        with tf.device(_device()):
            hlo = _hlo_of(fn, x, f)
        if tf.config.list_physical_devices("GPU"):
            self.assertIn('custom_call_target="ucudnn_conv2d_forward"', hlo)
        else:
            self.assertIn("convolution(", hlo)
            self.assertNotIn("custom-call", hlo)

    def test_bad_shapes_are_an_invalid_argument_when_compiled(self):
        # Unknown shapes get past the graph's shape function: the XLA kernel checks.
        spec = tf.TensorSpec([None] * 4, tf.float32)

        @tf.function(jit_compile=True, input_signature=[spec, spec])
        def fn(x, f):
            return tf_ucudnn.conv2d(x, f, 1, "SAME")

        # 5 input channels cannot be split into groups of 2 filter in-channels.
        with tf.device(_device()):
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                        "in_channels|input channels"):
                fn(tf.ones((2, 6, 6, 5)), tf.ones((3, 3, 2, 4)))

    @parameterized.named_parameters(
        ("batch_size_policy", "UCUDNN_BATCH_SIZE_POLICY", "halves"),
        ("xla_workspace", "UCUDNN_XLA_WORKSPACE", "arena"),
        ("xla_pad_channels", "UCUDNN_XLA_PAD_CHANNELS", "8"),
    )
    def test_bad_knob_from_the_environment_is_an_invalid_argument_when_compiled(self, name,
                                                                               value):
        done = run_python("""
            import tensorflow as tf, tf_ucudnn
            @tf.function(jit_compile=True)
            def fn(x, f):
                return tf_ucudnn.conv2d(x, f, 1, "SAME")
            try:
                fn(tf.ones((2, 6, 6, 3)), tf.ones((3, 3, 3, 4)))
                print("RESULT no error")
            except tf.errors.InvalidArgumentError as e:
                print("RESULT", str(e).splitlines()[0])
        """, **{name: value})
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
        self.assertLen(result, 1, done.stdout)
        self.assertIn(f"{name} must be one of", result[0])
        self.assertIn(f"got '{value}'", result[0])

    def test_keras_layer_model_trains_with_jit_compile_like_keras_conv2d(self):
        import keras

        def model(conv):
            keras.utils.set_random_seed(1)
            return keras.Sequential([
                keras.Input((8, 8, 3)),
                conv(4, 3, padding="same", activation="relu"),
                keras.layers.Flatten(),
                keras.layers.Dense(2),
            ])

        ours, stock = model(tf_ucudnn.layers.Conv2D), model(keras.layers.Conv2D)
        stock.set_weights(ours.get_weights())
        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 8, 8, 3)).astype("float32")
        y = rng.standard_normal((16, 2)).astype("float32")
        losses = []
        for m in (ours, stock):
            m.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=True)
            history = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
            # Keras falls back to jit_compile=False for layers without XLA support.
            self.assertTrue(m.jit_compile, f"{m.layers[0].__class__.__name__}: not compiled with XLA")
            losses.append(history.history["loss"])
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)

    def test_keras_layer_supports_jit(self):
        layer = tf_ucudnn.layers.Conv2D(4, 3)
        self.assertTrue(getattr(layer, "supports_jit", True))


@pytest.mark.gpu
class XlaGpuTest(tf.test.TestCase, parameterized.TestCase):
    """The FFI path: every plan kind, the plan records, the workspace limit."""

    @parameterized.named_parameters(
        ("undivided", dict(batch_size_policy="undivided")),
        ("power_of_two", dict(batch_size_policy="powerOfTwo")),
        ("all_sizes", dict(batch_size_policy="all")),
        ("forced_1", dict(micro_batch_size=1)),
        ("forced_4_remainder", dict(micro_batch_size=4)),
        ("small_limit", dict(workspace_limit=1 << 16)),
    )
    def test_every_plan_kind_matches(self, knobs):
        for case in CASES:
            for data_format in ("NHWC", "NCHW"):
                _compare_under_xla(self, case, data_format, tf.float32, **knobs)
        for case in (CASES[0], CASES[2]):  # with a bias: symmetric and asymmetric padding
            for data_format in ("NHWC", "NCHW"):
                _compare_under_xla(self, case, data_format, tf.float32, bias=True, **knobs)

    def test_plans_are_recorded_within_the_workspace_limit(self):
        tf_ucudnn.clear_plans()
        limit = 1 << 20
        rng = np.random.default_rng(1)
        x = tf.constant(rng.standard_normal((32, 28, 28, 32)), tf.float32)
        f = tf.constant(rng.standard_normal((5, 5, 32, 64)), tf.float32)

        @tf.function(jit_compile=True)
        def step(x, f):
            with tf.GradientTape() as tape:
                tape.watch([x, f])
                y = tf_ucudnn.conv2d(x, f, 1, "SAME", workspace_limit=limit)
                loss = tf.reduce_sum(y * y)
            return tape.gradient(loss, [x, f])

        with tf.device("/GPU:0"):
            step(x, f)
        records = [r for r in tf_ucudnn.plans() if r["device"].endswith("(XLA)")]
        self.assertCountEqual([r["pass"] for r in records],
                              ["forward", "backward-data", "backward-filter"],
                              json.dumps(list(tf_ucudnn.plans()), default=str)[:2000])
        for r in records:
            self.assertLessEqual(r["workspace_bytes"], limit, r)

    def test_custom_call_memory_by_tf_statistics_stays_within_the_limit(self):
        """TF's allocator statistics (which count XLA's scratch allocations)
        see each custom call's workspace: at most the limit at a small limit,
        at least the plan's workspace at a large one."""
        rng = np.random.default_rng(2)
        x = tf.constant(rng.standard_normal((64, 56, 56, 64)), tf.float32)
        f = tf.constant(rng.standard_normal((5, 5, 64, 64)), tf.float32)
        filter_bytes = 5 * 5 * 64 * 64 * 4
        for limit in (1 << 20, 256 << 20):
            tf_ucudnn.clear_plans()

            @tf.function(jit_compile=True)
            def forward(x, f):
                return tf_ucudnn.conv2d(x, f, 1, "SAME", workspace_limit=limit)

            extra = _bytes_held_by_a_call(forward, x, f)
            record = [r for r in tf_ucudnn.plans() if r["device"].endswith("(XLA)")][-1]
            # The call's workspace (XLA's scratch) and the filter in cuDNN's
            # layout (XLA's transpose of it, in its temp buffer): within the
            # limit. Not within the plan's workspace: TF's allocator counts
            # the block it gives, which may be a free block up to 128 MiB
            # larger than asked for (once 256.4 MiB in all on an H200 for a
            # 247.8 MiB plan and the 0.4 MiB filter).
            self.assertLessEqual(extra, limit + filter_bytes + (1 << 20),
                                 f"limit {limit}: {extra} bytes, {record}")
            if record["workspace_bytes"] > 0:
                self.assertGreaterEqual(extra, record["workspace_bytes"],
                                        f"limit {limit}: {extra} bytes, {record}")


    def test_workspace_result_buffer_matches_for_every_plan_kind(self):
        """UCUDNN_XLA_WORKSPACE=buffer: the workspace is the call's second
        result, XLA's buffer of the limit's size; the same results."""
        with mock.patch.dict(os.environ, {"UCUDNN_XLA_WORKSPACE": "buffer"}):
            for knobs in (dict(batch_size_policy="powerOfTwo"), dict(micro_batch_size=4),
                          dict(workspace_limit=1 << 16)):
                for case in (CASES[0], CASES[2], CASES[4]):
                    for data_format in ("NHWC", "NCHW"):
                        _compare_under_xla(self, case, data_format, tf.float32, **knobs)
                _compare_under_xla(self, CASES[2], "NHWC", tf.float32, bias=True, **knobs)

    def test_workspace_result_buffer_is_in_the_hlo_and_in_tf_statistics(self):
        """The custom call's result is (output, u8[limit]) in the HLO with
        UCUDNN_XLA_WORKSPACE=buffer (not with scratch), and TF's allocator
        statistics see the limit's bytes held by the step (XLA's temp
        allocation) although the plan needs less."""
        rng = np.random.default_rng(3)
        x = tf.constant(rng.standard_normal((64, 56, 56, 64)), tf.float32)
        f = tf.constant(rng.standard_normal((5, 5, 64, 64)), tf.float32)
        limit = (40 << 20) + 3 * 4096  # no plan's workspace is exactly this
        filter_bytes = 5 * 5 * 64 * 64 * 4
        held = {}
        tf_ucudnn.clear_plans()
        for where in ("scratch", "buffer"):
            with mock.patch.dict(os.environ, {"UCUDNN_XLA_WORKSPACE": where}):
                @tf.function(jit_compile=True)
                def forward(x, f):
                    return tf_ucudnn.conv2d(x, f, 1, "SAME", workspace_limit=limit)

                with tf.device("/GPU:0"):
                    hlo = _hlo_of(forward, x, f)
                held[where] = _bytes_held_by_a_call(forward, x, f)
            if where == "buffer":
                self.assertIn(f"u8[{limit}]", hlo)
            else:
                self.assertNotIn(f"u8[{limit}]", hlo)
        # One kernel: planned by the first call, run with either placement.
        records = [r for r in tf_ucudnn.plans()
                   if r["device"].endswith("(XLA)") and r["workspace_limit"] == limit]
        self.assertLen(records, 1, list(tf_ucudnn.plans()))
        plan_bytes = records[0]["workspace_bytes"]
        extra = held["buffer"]
        # The whole limit, whatever the plan needs; at most what TF's allocator
        # may hand for it (a free block below twice the request, given whole).
        self.assertLess(plan_bytes, limit, (held, records[0]))
        self.assertGreaterEqual(extra, limit, (held, records[0]))
        self.assertLess(extra, 2 * (limit + filter_bytes) + (1 << 20), (held, records[0]))

    def test_enable_rewrite_routes_a_keras_model_under_xla_to_the_custom_calls(self):
        import keras

        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((16, 16, 8)),
                                  keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
                                  keras.layers.Flatten(), keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss="mse", jit_compile=True)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((32, 16, 16, 8)).astype("float32")
        y = rng.standard_normal((32, 2)).astype("float32")
        tf_ucudnn.clear_plans()
        with tf_ucudnn.enable_rewrite(workspace_limit=1 << 20):
            model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        passes = sorted(r["pass"] for r in tf_ucudnn.plans() if r["device"].endswith("(XLA)"))
        self.assertEqual(passes, ["backward-filter", "forward"], list(tf_ucudnn.plans()))

    def test_enable_rewrite_routes_a_decoder_under_xla_and_trains_like_stock_xla(self):
        import keras

        tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        self.addCleanup(tf.config.experimental.enable_tensor_float_32_execution, tf32)

        def decoder():
            keras.utils.set_random_seed(0)
            return keras.Sequential([
                keras.Input((16, 16, 8)),
                keras.layers.Conv2DTranspose(16, 3, strides=2, padding="same",
                                             activation="relu"),
                keras.layers.Flatten(), keras.layers.Dense(2)])

        ours, stock = decoder(), decoder()
        stock.set_weights(ours.get_weights())
        rng = np.random.default_rng(0)
        x = rng.standard_normal((32, 16, 16, 8)).astype("float32")
        y = rng.standard_normal((32, 2)).astype("float32")
        tf_ucudnn.clear_plans()
        losses = []
        for model, limit in ((ours, "auto"), (stock, None)):
            model.compile(optimizer="sgd", loss="mse", jit_compile=True)
            if limit is None:
                history = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
            else:
                with tf_ucudnn.enable_rewrite(workspace_limit=limit):
                    history = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
            losses.append(history.history["loss"])
        records = [r for r in tf_ucudnn.plans() if r["device"].endswith("(XLA)")]
        # The transposed convolution is backward-data; its filter gradient
        # backward-filter (its input needs no gradient).
        self.assertEqual(sorted(r["pass"] for r in records), ["backward-data", "backward-filter"],
                         records)
        for r in records:
            self.assertIn("workspace_limit=auto", r["note"], r)
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)


@pytest.mark.gpu
class XlaDeterminismTest(tf.test.TestCase):

    def test_op_determinism_under_xla_repeats_bitwise(self):
        result = _child_result(self, """
            import json, numpy as np, tensorflow as tf, tf_ucudnn
            tf.config.experimental.enable_op_determinism()
            rng = np.random.default_rng(0)
            x = tf.constant(rng.standard_normal((64, 28, 28, 64)), tf.float32)
            w = tf.constant(rng.standard_normal((3, 3, 64, 64)), tf.float32)

            @tf.function(jit_compile=True)
            def run(x, w):
                with tf.GradientTape() as tape:
                    tape.watch([x, w])
                    y = tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit=64 << 20)
                    loss = tf.reduce_sum(y * y)
                return [y, *tape.gradient(loss, [x, w])]

            with tf.device("/GPU:0"):
                first = [t.numpy() for t in run(x, w)]
                second = [t.numpy() for t in run(x, w)]
            print("RESULT", json.dumps(dict(
                identical=[bool(np.array_equal(a, b)) for a, b in zip(first, second)],
                devices=sorted({r["device"] for r in tf_ucudnn.plans()}))))
        """)
        self.assertEqual(result["identical"], [True, True, True], result)
        self.assertTrue(any(d.endswith("(XLA)") for d in result["devices"]), result)


@pytest.mark.gpu
class XlaWorkspaceDivisionTest(tf.test.TestCase):

    def test_xla_kernels_join_a_workspace_division_group(self):
        # UCUDNN_TOTAL_WORKSPACE_SIZE puts ops without their own workspace_limit
        # into the GPU's group; XLA's custom calls carry it as an attribute.
        total = 48 << 20
        result = _child_result(self, f"""
            import json, numpy as np, tensorflow as tf, tf_ucudnn
            rng = np.random.default_rng(0)
            x = tf.constant(rng.standard_normal((64, 28, 28, 32)), tf.float32)
            w1 = tf.constant(rng.standard_normal((3, 3, 32, 64)), tf.float32)
            w2 = tf.constant(rng.standard_normal((5, 5, 64, 64)), tf.float32)

            @tf.function(jit_compile=True)
            def step(x, w1, w2):
                with tf.GradientTape() as tape:
                    tape.watch([x, w1, w2])
                    y = tf_ucudnn.conv2d(tf.nn.relu(tf_ucudnn.conv2d(x, w1, 1, "SAME")), w2, 1,
                                         "SAME")
                    loss = tf.reduce_sum(y * y)
                return tape.gradient(loss, [x, w1, w2])

            with tf.device("/GPU:0"):
                for _ in range(3):  # the group is divided after one whole step
                    grads = step(x, w1, w2)
                grads[0].numpy()
            reports = tf_ucudnn.division.division_reports()
            print("RESULT", json.dumps(dict(
                groups=[[k[1], r.workspace_bytes, len(r.kernels)] for k, r in reports.items()],
                devices=sorted({{r["device"] for r in tf_ucudnn.plans()}}))))
        """, UCUDNN_TOTAL_WORKSPACE_SIZE=str(total))
        # Planned by the custom calls (replans after the division are recorded
        # as "/device:GPU:0 ... Workspace Division").
        self.assertTrue(any(d.endswith("(XLA)") for d in result["devices"]), result)
        self.assertLen(result["groups"], 1, result)
        group_total, used, kernels = result["groups"][0]
        self.assertEqual(group_total, total)
        self.assertEqual(kernels, 6, "two layers x three passes")
        self.assertLessEqual(used, total, result)


class XlaZeroSizeTest(tf.test.TestCase, parameterized.TestCase):
    """Zero-size inputs under XLA give stock TF's empty results and zero filter gradients."""

    @parameterized.named_parameters(("batch_0", (0, 6, 6, 3)), ("height_0", (2, 0, 6, 3)))
    def test_zero_size_matches_tf_nn_conv2d(self, shape):
        x = tf.zeros(shape)
        f = tf.ones((3, 3, 3, 4))

        @tf.function(jit_compile=True)
        def ours(x, f):
            with tf.GradientTape() as tape:
                tape.watch([x, f])
                y = tf_ucudnn.conv2d(x, f, 1, "SAME")
                loss = tf.reduce_sum(y)
            return (y, *tape.gradient(loss, [x, f]))

        with tf.device(_device()):
            y, dx, df = ours(x, f)
        self.assertEqual(y.shape, reference_conv2d(x, f, 1, "SAME").shape)
        self.assertEqual(dx.shape, x.shape)
        self.assertAllEqual(df, tf.zeros_like(f))


class BiasOnAnEmptyInputTest(tf.test.TestCase, parameterized.TestCase):
    """An input with no rows whose explicit padding still gives output rows:
    each output element is a sum over nothing plus its channel's bias (and its
    ReLU), as tf.nn.bias_add(tf.nn.conv2d(...)) gives, with and without XLA
    (on the GPU the engine broadcasts the bias; no convolution is planned)."""

    @parameterized.named_parameters(("eager", False, None), ("xla", True, None),
                                    ("eager_relu", False, "relu"), ("xla_relu", True, "relu"))
    def test_the_output_is_the_bias(self, jit_compile, activation):
        x, f, b = tf.zeros((2, 0, 3, 2)), tf.ones((1, 1, 2, 3)), tf.constant([1.0, -2.0, 3.0])
        padding = [[0, 0], [1, 1], [0, 0], [0, 0]]
        fn = tf.function(lambda x, f, b: tf_ucudnn.conv2d(x, f, 1, padding, bias=b,
                                                          activation=activation),
                         jit_compile=jit_compile)
        with tf.device(_device()):
            got = fn(x, f, b)
        want = tf.nn.bias_add(tf.nn.conv2d(x, f, 1, padding), b)
        if activation == "relu":
            want = tf.nn.relu(want)
        self.assertEqual(got.shape, (2, 2, 3, 3))
        self.assertAllEqual(got, want)
