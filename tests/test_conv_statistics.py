"""tf_ucudnn.conv2d_with_statistics: the convolution and its output's
per-channel sum and sum of squares (what a following batch normalization's
training step needs), from one op, Ucudnn>Conv2DWithStatistics.

The output must equal tf.nn.conv2d's (testing_utils.reference_conv2d from the
same rounded inputs, the tolerances of test_nn.py); the sums must be those of
the output the op returned, summed in float64 here, whatever the micro-batch
plan; the gradients of input and filter through all three results must equal
those of the reference composed from tf.nn.conv2d and tf.reduce_sum.

Tolerances of the sums against the returned output's: float32, 1e-5 (float32
accumulation over the micro-batches; the CPU sums in float64). float16 and
bfloat16, the type's TOLERANCE: a fused GPU epilogue may reduce the
convolution's float result before it is rounded to the output's type, so its
sums differ from the stored output's by that rounding.
"""

import json
import re

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from testing_utils import (TOLERANCE, OnGpuWithoutTf32, assert_rel_l2, random_tensor,
                           reference_conv2d, run_python)

# (N, H, W, C, K, R, S)
SHAPES = {
    "n6_8x8_3x3": (6, 8, 8, 8, 16, 3, 3),
    "n5_7x9_1x1": (5, 7, 9, 16, 8, 1, 1),
}


def _channel_axes(data_format):
    return [0, 1, 2] if data_format == "NHWC" else [0, 2, 3]


def _sums(y, data_format):
    y = tf.cast(y, tf.float64)
    axes = _channel_axes(data_format)
    return tf.reduce_sum(y, axes), tf.reduce_sum(y * y, axes)


class ConvStatisticsTest(parameterized.TestCase, tf.test.TestCase):
    """On the CPU (the engine's reference path)."""

    DEVICE = "/CPU:0"

    def _inputs(self, shape, data_format, dtype, seed=0):
        n, h, w, c, k, r, s = SHAPES[shape]
        rng = np.random.default_rng(seed)
        x_shape = (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)
        x, x32 = random_tensor(rng, x_shape, dtype)
        f, f32 = random_tensor(rng, (r, s, c, k), dtype)
        return x, x32, f, f32

    def check(self, shape, data_format, dtype, micro_batch_size, strides=1, padding="SAME",
              tol=None, input_relu=None):
        """The op against the reference composed from TF ops: the output, the
        sums (against the returned output's) and the gradients of input and
        filter. With ``input_relu`` (True or False) the op has the input
        prologue: the reference convolves relu(x * scale + offset) (without
        the ReLU where False; scale and offset rounded to the input's dtype,
        as the op uses them) and the gradients of scale and offset count."""
        x, x32, f, f32 = self._inputs(shape, data_format, dtype)
        k, c = f.shape[-1], f.shape[2]
        # Weights of the loss on each result, so that every gradient path counts.
        g_sum = tf.linspace(-1.0, 1.0, k)
        g_squares = tf.linspace(0.01, 0.02, k)
        prologue = input_relu is not None
        rng = np.random.default_rng(1)
        scale = tf.constant(rng.uniform(0.5, 1.5, c), tf.float32)
        offset = tf.constant(rng.uniform(-0.5, 0.5, c), tf.float32)
        kwargs = dict(input_scale=scale, input_offset=offset,
                      input_relu=input_relu) if prologue else {}
        watched = [x, f] + ([scale, offset] if prologue else [])
        with tf.device(self.DEVICE):
            with tf.GradientTape() as tape:
                tape.watch(watched)
                y, total, squares = tf_ucudnn.conv2d_with_statistics(
                    x, f, strides, padding, data_format=data_format,
                    micro_batch_size=micro_batch_size, **kwargs)
                loss = (0.5 * tf.reduce_sum(tf.cast(y, tf.float32)) +
                        tf.reduce_sum(total * g_sum) + tf.reduce_sum(squares * g_squares))
            got = tape.gradient(loss, watched)
        self.assertEqual(total.dtype, tf.float32)
        self.assertEqual(squares.dtype, tf.float32)
        watched_ref = [x32, f32] + ([scale, offset] if prologue else [])
        with tf.GradientTape() as tape:
            tape.watch(watched_ref)
            conv_input = x32
            if prologue:
                # Rounded to the input's dtype on the way forward only (a
                # cast's gradient would round, and overflow, the gradient too).
                channels = tf_ucudnn.batch_norm.channel_shape(data_format)
                s32, o32 = (tf.reshape(v + tf.stop_gradient(
                    tf.cast(tf.cast(v, dtype), tf.float32) - v), channels) for v in (scale, offset))
                conv_input = x32 * s32 + o32
                conv_input = tf.nn.relu(conv_input) if input_relu else conv_input
            y_ref = reference_conv2d(conv_input, f32, strides, padding, data_format)
            axes = _channel_axes(data_format)
            loss_ref = (0.5 * tf.reduce_sum(y_ref) + tf.reduce_sum(tf.reduce_sum(y_ref, axes) * g_sum)
                        + tf.reduce_sum(tf.reduce_sum(y_ref * y_ref, axes) * g_squares))
        want = tape.gradient(loss_ref, watched_ref)
        tol = tol or TOLERANCE[dtype]
        assert_rel_l2(self, y, y_ref, tol, "output")
        want_sum, want_squares = _sums(y, data_format)
        sum_tol = 1e-5 if dtype == tf.float32 else tol
        assert_rel_l2(self, total, want_sum, sum_tol, "sum (of the returned output)")
        assert_rel_l2(self, squares, want_squares, sum_tol, "sum of squares (of the returned output)")
        # The gradients run the half-precision convolutions on dy that holds
        # the sums' terms: the type's tolerance, as test_nn.py's gradients.
        for name, g, w in zip(("input", "filter", "scale", "offset"), got, want):
            assert_rel_l2(self, g, w, tol, f"{name} gradient")

    @parameterized.product(shape=list(SHAPES), data_format=["NHWC", "NCHW"],
                           micro_batch_size=[None, 1, 4])
    def test_matches_conv_and_reductions(self, shape, data_format, micro_batch_size):
        self.check(shape, data_format, tf.float32, micro_batch_size)

    @parameterized.parameters(tf.float16, tf.bfloat16)
    def test_half_types(self, dtype):
        self.check("n6_8x8_3x3", "NHWC", dtype, 4)

    @parameterized.parameters(tf.float32, tf.float16)
    def test_under_jit_compile_as_eagerly(self, dtype):
        # GPU: the statistics custom call; CPU: XLA's convolution and reductions.
        self.check_jit_compile_as_eagerly(dtype, prologue=False)

    def check_jit_compile_as_eagerly(self, dtype, prologue):
        """The op (with the input prologue and ReLU where ``prologue``) in a
        jit_compile function against the same eagerly: results and the
        gradients of input, filter (and scale and offset)."""
        x, _, f, _ = self._inputs("n6_8x8_3x3", "NHWC", dtype)
        watched = [x, f]
        if prologue:
            watched += [tf.linspace(0.5, 1.5, f.shape[2]), tf.linspace(-0.3, 0.3, f.shape[2])]

        def run(*watched):
            with tf.GradientTape() as tape:
                tape.watch(watched)
                kwargs = dict(input_scale=watched[2], input_offset=watched[3],
                              input_relu=True) if prologue else {}
                y, total, squares = tf_ucudnn.conv2d_with_statistics(
                    watched[0], watched[1], 1, "SAME", micro_batch_size=4, **kwargs)
                loss = tf.reduce_sum(total) + 0.01 * tf.reduce_sum(squares)
            return (y, total, squares), tape.gradient(loss, watched)

        with tf.device(self.DEVICE):
            results, grads = tf.function(run, jit_compile=True)(*watched)
            results0, grads0 = run(*watched)
        tol = TOLERANCE[dtype]
        for name, got, want in zip(("output", "sum", "sum of squares"), results, results0):
            assert_rel_l2(self, got, want, tol, name)
        for name, got, want in zip(("input", "filter", "scale", "offset"), grads, grads0):
            assert_rel_l2(self, got, want, tol, f"{name} gradient")

    @parameterized.product(data_format=["NHWC", "NCHW"], relu=[True, False],
                           micro_batch_size=[None, 4])
    def test_input_prologue(self, data_format, relu, micro_batch_size):
        self.check("n6_8x8_3x3", data_format, tf.float32, micro_batch_size, input_relu=relu)

    @parameterized.parameters(tf.float16, tf.bfloat16)
    def test_input_prologue_half_types(self, dtype):
        self.check("n6_8x8_3x3", "NHWC", dtype, 4, input_relu=True)

    @parameterized.parameters(tf.float32, tf.float16)
    def test_input_prologue_under_jit_compile_as_eagerly(self, dtype):
        # GPU: the normalized statistics custom call; CPU: XLA's elementwise
        # ops, convolution and reductions.
        self.check_jit_compile_as_eagerly(dtype, prologue=True)

    def test_input_prologue_with_asymmetric_padding(self):
        # Stride 2, SAME, 3x3 on 8x8: one row of padding below, none above.
        self.check("n6_8x8_3x3", "NHWC", tf.float32, None, strides=2, input_relu=True)

    def test_input_prologue_bad_input_is_a_clear_error(self):
        x, f = tf.zeros((2, 5, 5, 3)), tf.zeros((3, 3, 3, 4))
        with tf.device(self.DEVICE):
            with self.assertRaisesRegex(ValueError, "input_scale and input_offset come together"):
                tf_ucudnn.conv2d_with_statistics(x, f, 1, "SAME", input_scale=tf.ones(3))
            with self.assertRaisesRegex((ValueError, tf.errors.InvalidArgumentError),
                                        "in_channels|Dimensions must be equal"):
                tf_ucudnn.conv2d_with_statistics(x, f, 1, "SAME", input_scale=tf.ones(4),
                                                 input_offset=tf.ones(4))

    def test_stride_and_valid_padding(self):
        self.check("n6_8x8_3x3", "NHWC", tf.float32, 4, strides=2, padding="VALID")

    def test_empty_batch_gives_zero_sums(self):
        x = tf.zeros((0, 5, 5, 4))
        f = tf.ones((3, 3, 4, 6))
        with tf.device(self.DEVICE):
            y, total, squares = tf_ucudnn.conv2d_with_statistics(x, f, 1, "SAME")
        self.assertEqual(tuple(y.shape), (0, 5, 5, 6))
        self.assertAllEqual(total, np.zeros(6, np.float32))
        self.assertAllEqual(squares, np.zeros(6, np.float32))

    def test_shapes_in_a_function(self):
        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 4]), tf.TensorSpec([3, 3, 4, 6])])
        def run(x, f):
            return tf_ucudnn.conv2d_with_statistics(x, f, 1, "SAME")

        y, total, squares = run.get_concrete_function().structured_outputs
        self.assertEqual(y.shape.as_list(), [None, 8, 8, 6])
        self.assertEqual(total.shape.as_list(), [6])
        self.assertEqual(squares.shape.as_list(), [6])

    def test_bad_input_is_a_clear_error(self):
        with tf.device(self.DEVICE):
            with self.assertRaisesRegex(ValueError, "4-dimensional"):
                tf_ucudnn.conv2d_with_statistics(tf.zeros((2, 3, 4)), tf.zeros((1, 1, 4, 2)), 1,
                                                 "SAME")
            with self.assertRaisesRegex((ValueError, tf.errors.InvalidArgumentError), "channels"):
                tf_ucudnn.conv2d_with_statistics(tf.zeros((2, 5, 5, 3)), tf.zeros((1, 1, 2, 4)),
                                                 1, "SAME")

    def test_bad_statistics_mode_is_a_clear_error(self):
        done = run_python("""
            import tensorflow as tf, tf_ucudnn
            try:
                tf_ucudnn.conv2d_with_statistics(tf.ones((2, 5, 5, 3)), tf.ones((3, 3, 3, 4)),
                                                 1, "SAME")
            except tf.errors.InvalidArgumentError as e:
                print("REFUSED", e.message)
        """, UCUDNN_STATISTICS="after")
        self.assertIn("REFUSED", done.stdout, done.stderr[-2000:])
        self.assertIn("UCUDNN_STATISTICS must be one of fused, timed, unfused; got 'after'",
                      done.stdout)


# A child process that runs conv2d_with_statistics on /GPU:0 (TF32 on) for
# each (dtype, (N, H, W, C, K, R, S), stride) of CASES and prints, per case,
# the relative L2 distance of the op's sums from the float64 sums of the
# output it returned, and its output (float32) for comparison across modes.
_MODES_CHILD = """
    import json, sys, numpy as np, tensorflow as tf, tf_ucudnn
    CASES = [("float16", (8, 28, 28, 64, 128, 1, 1), 2), ("float16", (8, 14, 14, 64, 64, 3, 3), 1),
             ("bfloat16", (8, 28, 28, 64, 128, 1, 1), 2), ("bfloat16", (8, 14, 14, 64, 64, 3, 3), 1),
             ("float32", (8, 28, 28, 64, 128, 1, 1), 2), ("float32", (8, 14, 14, 64, 64, 3, 3), 1)]
    def rel(a, b):
        return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    out = []
    rng = np.random.default_rng(0)
    for dtype, (n, h, w, c, k, r, s), stride in CASES:
        x = tf.constant(rng.standard_normal((n, h, w, c)), dtype)
        f = tf.constant(rng.standard_normal((r, s, c, k)) / (r * s * c) ** 0.5, dtype)
        with tf.device("/GPU:0"):
            for _ in range(2):  # the first run chooses (timed), the second runs the choice
                y, total, squares = tf_ucudnn.conv2d_with_statistics(x, f, stride, "SAME")
        y64 = tf.cast(y, tf.float64).numpy()
        out.append(dict(dtype=dtype, sum=rel(total.numpy(), y64.sum((0, 1, 2))),
                        squares=rel(squares.numpy(), (y64 * y64).sum((0, 1, 2))),
                        y=tf.cast(y, tf.float32).numpy().ravel()[::97].tolist()))
    print("RESULT " + json.dumps(out))
"""


# A child process that runs a 1x1 expanding convolution with statistics
# (N = 8, 28x28, 64 -> 128, NHWC) three times in float16, bfloat16 and float32
# (TF32 on), each run after a float32 tensor of 1e30s the size of one sum was
# freed (whose memory the sums then likely reuse), with the debug log on. It
# prints per run the relative L2 distance of the sums from the float64 sums
# of the returned output.
_REPEATED_RUNS_CHILD = """
    import json, numpy as np, tensorflow as tf, tf_ucudnn
    def rel(a, b):
        return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    rng = np.random.default_rng(0)
    out = []
    for dtype in ("float16", "bfloat16", "float32"):
        x = tf.constant(rng.standard_normal((8, 28, 28, 64)), dtype)
        f = tf.constant(rng.standard_normal((1, 1, 64, 128)) / 8.0, dtype)
        with tf.device("/GPU:0"):
            for _ in range(3):
                junk = tf.fill([128], 1e30)
                del junk
                y, total, squares = tf_ucudnn.conv2d_with_statistics(x, f, 1, "SAME")
                y64 = tf.cast(y, tf.float64).numpy()
                out.append(dict(dtype=dtype, sum=rel(total.numpy(), y64.sum((0, 1, 2))),
                                squares=rel(squares.numpy(), (y64 * y64).sum((0, 1, 2)))))
    print("RESULT " + json.dumps(out))
"""


# A child process that plans a bfloat16 1x1 expanding convolution with
# statistics (N = 32, 56x56, 64 -> 256, NHWC: ResNet-50's costliest fused
# graph) within 64 MiB, then within no workspace at all. It prints "LIMIT 0"
# on stderr before the second plan, and per plan the limit, micro-batches
# (size, workspace) and the relative L2 distance of the sums from the float64
# sums of the returned output and of the output from tf.nn.conv2d's.
_TIGHT_LIMIT_CHILD = """
    import json, sys, numpy as np, tensorflow as tf, tf_ucudnn
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((32, 56, 56, 64)), tf.bfloat16)
    f = tf.constant(rng.standard_normal((1, 1, 64, 256)) / 8.0, tf.bfloat16)
    def rel(a, b):
        return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    def run(limit):
        with tf.device("/GPU:0"):
            y, total, squares = tf_ucudnn.conv2d_with_statistics(x, f, 1, "SAME",
                                                                 workspace_limit=limit)
            want = tf.nn.conv2d(x, f, 1, "SAME")
        record = [r for r in tf_ucudnn.plans() if r["workspace_limit"] == limit][-1]
        y64 = tf.cast(y, tf.float64).numpy()
        return dict(limit=limit, micro_batches=[(m["size"], m["workspace_bytes"])
                                                for m in record["micro_batches"]],
                    sum=rel(total.numpy(), y64.sum((0, 1, 2))),
                    squares=rel(squares.numpy(), (y64 * y64).sum((0, 1, 2))),
                    y=rel(tf.cast(y, tf.float64).numpy(), tf.cast(want, tf.float64).numpy()))
    roomy = run(64 << 20)
    sys.stderr.write("LIMIT 0\\n")
    sys.stderr.flush()
    tight = run(0)
    print("RESULT " + json.dumps([roomy, tight]))
"""


@pytest.mark.gpu
class ConvStatisticsGpuTest(OnGpuWithoutTf32, ConvStatisticsTest):
    """The same on /GPU:0 (TF32 off): float16 and bfloat16 through cuDNN graph
    engines with the statistics epilogue (float16: genstats; bfloat16:
    reductions), NHWC, the layout cuDNN fuses; float32 without TF32 through
    the plain convolution and cudnnReduceTensor after it (every fused
    reduction engine computes with TF32), in both layouts."""

    DEVICE = "/GPU:0"

    @parameterized.parameters(None, 1, 4)
    def test_float32_with_tf32_fuses(self, micro_batch_size):
        # TF32 rounds the convolution's inputs to 10 mantissa bits: 5e-3 on
        # the output and the gradients; the sums stay those of the output.
        tf.config.experimental.enable_tensor_float_32_execution(True)
        self.check("n6_8x8_3x3", "NHWC", tf.float32, micro_batch_size, tol=5e-3)

    @parameterized.parameters(None, 1, 4)
    def test_float16_genstats(self, micro_batch_size):
        self.check("n6_8x8_3x3", "NHWC", tf.float16, micro_batch_size)

    def test_resnet_like_layer(self):
        self.check_resnet_like(tf.float16)

    @parameterized.parameters(tf.float16, tf.bfloat16)
    def test_three_input_channels(self, dtype):
        # ResNet's first layer: in float16 no statistics engine plans for 3
        # input channels, and the plain convolution with cudnnReduceTensor
        # after it runs instead; the sums are the same.
        SHAPES["n4_12x12_c3_7x7"] = (4, 12, 12, 3, 8, 7, 7)
        self.addCleanup(SHAPES.pop, "n4_12x12_c3_7x7")
        self.check("n4_12x12_c3_7x7", "NHWC", dtype, None, strides=2)

    def test_input_prologue_fused_in_float16(self):
        # ResNet-like: cuDNN's scale-bias-ReLU -> convolution -> genstats graph.
        SHAPES["n16_28x28_64"] = (16, 28, 28, 64, 64, 3, 3)
        self.addCleanup(SHAPES.pop, "n16_28x28_64")
        tf_ucudnn.clear_plans()
        self.check("n16_28x28_64", "NHWC", tf.float16, None, input_relu=True)
        fused = [r for r in tf_ucudnn.plans()
                 if r["pass"] == "forward" and "+input-scale-bias-relu+stats" in r["shape"]]
        self.assertTrue(fused, "no fused prologue plan: " + str(tf_ucudnn.plans()))

    def check_resnet_like(self, dtype):
        SHAPES["n16_28x28_64"] = (16, 28, 28, 64, 64, 3, 3)
        self.addCleanup(SHAPES.pop, "n16_28x28_64")
        self.check("n16_28x28_64", "NHWC", dtype, None)

    def run_child(self, code, **env):
        """`code` (one of the child scripts above) under `env`: the finished
        process and what it printed after "RESULT "."""
        done = run_python(code, **env)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        line = [s for s in done.stdout.splitlines() if s.startswith("RESULT ")][-1]
        return done, json.loads(line[len("RESULT "):])

    def check_modes_case(self, case, reference, what):
        """A case of _MODES_CHILD: its sums are its output's (float32: 1e-5,
        else the type's bound), its output within TF32's 5e-3 (float32) or the
        type's rounding of `reference`'s."""
        tol = {"float32": 1e-5}.get(case["dtype"], TOLERANCE[getattr(tf, case["dtype"])])
        self.assertLessEqual(case["sum"], tol, what + ": sum")
        self.assertLessEqual(case["squares"], tol, what + ": sum of squares")
        # TF32 (5e-3, test_float32_with_tf32_fuses) or the type's rounding.
        y_tol = 5e-3 if case["dtype"] == "float32" else TOLERANCE[getattr(tf, case["dtype"])]
        assert_rel_l2(self, np.array(case["y"]), np.array(reference["y"]), y_tol,
                      what + ": output")

    def test_sums_hold_over_repeated_runs(self):
        # A plan of one micro-batch hands its engine the op's own sums. Its
        # first run fills them with NaN: an engine that stores its sums
        # (finite after it) runs uncleared from then on; one that adds into
        # them runs again on cleared sums, and is cleared before every run.
        # Either way every run's sums are its output's, whatever the memory
        # they reuse held, and the debug log says which the engine does.
        done, runs = self.run_child(_REPEATED_RUNS_CHILD, UCUDNN_DEBUG_OUTPUT="1")
        self.assertLen(runs, 9)
        for i, run in enumerate(runs):
            tol = {"float32": 1e-5}.get(run["dtype"], TOLERANCE[getattr(tf, run["dtype"])])
            self.assertLessEqual(run["sum"], tol, f"{run['dtype']} run {i % 3}: sum")
            self.assertLessEqual(run["squares"], tol, f"{run['dtype']} run {i % 3}: squares")
        probed = re.findall(r"NHWC float16 .*: statistics engine \S+ (stores|adds into) its sums",
                            done.stderr)
        self.assertNotEmpty(probed, done.stderr[-3000:])

    def test_plans_built_on_threads_are_those_built_one_by_one(self):
        # UCUDNN_PLAN_BUILD_THREADS: a statistics kernel's run-time compiled
        # candidates finalize on threads with handles of their own and run
        # with the kernel's; one thread builds them one after the other. The
        # same candidates plan either way (the debug log's timed engines),
        # and the sums and outputs are the same within the types' bounds.
        engines, results = {}, {}
        for threads in ("1", "8"):
            done, results[threads] = self.run_child(
                _MODES_CHILD, UCUDNN_PLAN_BUILD_THREADS=threads, UCUDNN_DEBUG_OUTPUT="1",
                UCUDNN_GRAPH_PRUNE_FACTOR="0")
            engines[threads] = set(re.findall(r"^  (\S+) \(workspace \d+ bytes\)", done.stderr,
                                              re.MULTILINE))
        self.assertNotEmpty(engines["1"])
        self.assertEqual(engines["8"], engines["1"])
        for i, case in enumerate(results["8"]):
            self.check_modes_case(case, results["1"][i],
                                  f"{case['dtype']} case {i} on threads against one by one")

    def test_smaller_micro_batches_are_timed_only_where_the_limit_binds_at_the_batch(self):
        # A fused kernel times its whole mini-batch first, and smaller sizes
        # only where the limit keeps a candidate out there (the debug log's
        # "candidates over the workspace limit"). Within 64 MiB and within
        # no workspace: the plan fits, covers the batch, and its sums and
        # output are as right either way.
        done, plans = self.run_child(_TIGHT_LIMIT_CHILD, UCUDNN_DEBUG_OUTPUT="1")
        for log, plan in zip(done.stderr.split("LIMIT 0"), plans):
            timed = [int(n) for n in re.findall(r"timed at (\d+):", log)]
            over = re.findall(r"size 32: (\d+) candidates over the workspace limit", log)
            self.assertIn(32, timed, log[-3000:])
            self.assertEqual(any(n < 32 for n in timed), bool(over),
                             f"timed {timed}, over the limit at 32: {over}")
            self.assertLessEqual(max(w for _, w in plan["micro_batches"]), plan["limit"], plan)
            self.assertEqual(sum(n for n, _ in plan["micro_batches"]), 32, plan)
            # bfloat16 rounds the output (8 mantissa bits); the sums are the
            # returned output's, accumulated in float32.
            self.assertLessEqual(plan["sum"], 1e-2, plan)
            self.assertLessEqual(plan["squares"], 1e-2, plan)
            self.assertLessEqual(plan["y"], 1e-2, plan)

    def test_statistics_modes_give_the_same_sums(self):
        # UCUDNN_STATISTICS: the fused graph, the plain convolution with the
        # reduction after it (cudnnReduceTensor on the output in its own type),
        # and the timed choice between them, on a 1x1 stride-2 and a 3x3 layer
        # in each type: the sums are the returned output's, the outputs agree.
        results = {}
        for mode in ("fused", "unfused", "timed"):
            done, results[mode] = self.run_child(_MODES_CHILD, UCUDNN_STATISTICS=mode)
            if mode == "unfused":
                self.assertNotIn("measured faster", done.stderr)
        for mode, cases in results.items():
            for i, case in enumerate(cases):
                self.check_modes_case(case, results["fused"][i],
                                      f"{mode} {case['dtype']} case {i} against the fused mode's")
