"""tf_ucudnn.conv2d and its gradients equal TensorFlow's convolution.

Every case runs the forward pass and both gradients (through tf.GradientTape,
so the registered gradient of Ucudnn>Conv2D is what runs) and compares them
with the reference of testing_utils.reference_conv2d, computed in float32 on
the CPU from the same (rounded) inputs. With a bias (Ucudnn>Conv2DWithBias)
the reference adds it, and the bias gradient is checked too.
"""

import inspect

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from testing_utils import (TOLERANCE, assert_rel_l2, explicit_padding, pairwise, random_tensor,
                           reference_conv2d)

# (N, H, W, C, K, R, S). C and K are multiples of 4 so that every case may
# take groups 1, 2 or 4; VALID with dilation 2 still fits every filter.
SHAPES = {
    "n3_7x7_3x3": (3, 7, 7, 4, 8, 3, 3),   # odd input, odd filter
    "n5_8x6_2x2": (5, 8, 6, 8, 4, 2, 2),   # even filter: SAME pads 0 before, 1 after
    "n7_6x9_3x2": (7, 6, 9, 4, 4, 3, 2),   # rectangular filter, odd batch
    "n6_5x5_1x3": (6, 5, 5, 8, 8, 1, 3),   # 1-row filter, even batch
    "n4_8x8_3x3": (4, 8, 8, 4, 4, 3, 3),   # stride 2 on an even input: asymmetric SAME
    "n1_5x4_3x3": (1, 5, 4, 4, 4, 3, 3),   # a batch of one
    "n7_16x16_3x3": (7, 16, 16, 8, 8, 3, 3),  # enough work per sample for the CPU to shard
}
PADDINGS = {"valid": "VALID", "same": "SAME", "explicit": ((1, 0), (0, 2))}
DTYPES = {"float32": tf.float32, "float16": tf.float16, "bfloat16": tf.bfloat16}
# Forced micro-batch sizes: "auto" lets the planner decide (the whole batch on
# the CPU), "nondivisor" leaves a remainder (N=5 -> 2+2+1, N=6 -> 4+2).
MICRO_BATCHES = ("auto", "1", "nondivisor", "N")


def micro_batch_size(level, n):
    return {"auto": None, "1": 1, "N": n,
            "nondivisor": next(k for k in range(2, n + 2) if n % k or k > n)}[level]


def _case_name(c):
    strides = c["strides"] if isinstance(c["strides"], tuple) else (c["strides"],) * 2
    return (f"{c['shape']}_stride{strides[0]}x{strides[1]}_{c['padding']}_dil{c['dilations']}_"
            f"groups{c['groups']}_{c['data_format']}_{c['dtype']}_mb{c['micro_batch']}")


def _named(cases):
    return [dict(testcase_name=_case_name(c), **c) for c in cases]


# Every pair of levels of any two geometry / layout / plan knobs appears in
# some case, and every such case runs in each dtype: about 50 cases instead of
# the 5184 of the full product.
GRID = _named(dict(case, dtype=dtype) for dtype in DTYPES for case in pairwise({
    "shape": ["n3_7x7_3x3", "n5_8x6_2x2", "n7_6x9_3x2", "n6_5x5_1x3"],
    "strides": [1, 2, (1, 2)],
    "padding": ["same", "valid", "explicit"],
    "dilations": [1, 2],
    "groups": [1, 2, 4],
    "data_format": ["NHWC", "NCHW"],
    "micro_batch": list(MICRO_BATCHES),
}))

# Ucudnn>Conv2DWithBias: each dtype, layout and kind of micro-batch plan.
BIAS_GRID = _named(dict(case, dtype=dtype) for dtype in DTYPES for case in pairwise({
    "shape": ["n3_7x7_3x3", "n5_8x6_2x2", "n7_16x16_3x3"],
    "strides": [1, 2],
    "padding": ["same", "explicit"],
    "dilations": [1],
    "groups": [1, 2],
    "data_format": ["NHWC", "NCHW"],
    "micro_batch": list(MICRO_BATCHES),
}))

# Cases the pairwise grid need not contain, named for what they pin down.
EDGE_CASES = _named([
    # SAME with an even filter pads (0, 1): the extra pixel goes after.
    dict(shape="n5_8x6_2x2", strides=1, padding="same", dilations=1, groups=2,
         data_format="NCHW", dtype="float32", micro_batch="nondivisor"),
    # SAME, stride 2, even input: ceil(8 / 2) = 4 outputs need 1 pixel of padding, after.
    dict(shape="n4_8x8_3x3", strides=2, padding="same", dilations=1, groups=1,
         data_format="NHWC", dtype="float32", micro_batch="nondivisor"),
    dict(shape="n4_8x8_3x3", strides=2, padding="same", dilations=2, groups=4,
         data_format="NCHW", dtype="float32", micro_batch="1"),
    # Asymmetric explicit padding with everything else switched on at once.
    dict(shape="n7_6x9_3x2", strides=(1, 2), padding="explicit", dilations=2, groups=4,
         data_format="NCHW", dtype="float32", micro_batch="nondivisor"),
    dict(shape="n1_5x4_3x3", strides=1, padding="same", dilations=1, groups=1,
         data_format="NHWC", dtype="float32", micro_batch="1"),
    # Samples of a micro-batch spread over CPU threads; filter-gradient shares summed.
    dict(shape="n7_16x16_3x3", strides=1, padding="same", dilations=1, groups=2,
         data_format="NHWC", dtype="float32", micro_batch="nondivisor"),
    dict(shape="n7_16x16_3x3", strides=1, padding="same", dilations=1, groups=1,
         data_format="NCHW", dtype="bfloat16", micro_batch="auto"),
])


def random_cases(count, seed):
    """Seeded random geometries beyond the grid's levels: groups of 3, strides and
    dilations up to 3, explicit paddings wider than the filter, inputs of 1 pixel."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        n, groups, group_in, group_out = (int(v) for v in rng.integers(1, [7, 4, 4, 4]))
        r, s, sh, sw, dh, dw = (int(v) for v in rng.integers(1, [5, 5, 4, 4, 4, 4]))
        h, w = (int(v) for v in rng.integers(1, 12, 2))
        kind = int(rng.integers(3))
        padding = ["SAME", "VALID", None][kind] or tuple(
            tuple(int(v) for v in rng.integers(0, 5, 2)) for _ in range(2))
        (pt, pb), (pl, pr) = padding if kind == 2 else ((0, 0), (0, 0))
        if kind != 0 and (h + pt + pb < (r - 1) * dh + 1 or w + pl + pr < (s - 1) * dw + 1):
            continue  # the filter must fit
        mb = None if rng.random() < 0.3 else int(rng.integers(1, n + 2))
        data_format = ["NHWC", "NCHW"][int(rng.integers(2))]
        pad_name = padding.lower() if isinstance(padding, str) else (
            "pad" + "_".join(str(v) for pair in padding for v in pair))
        name = (f"{len(cases):02d}_n{n}_{h}x{w}_c{groups * group_in}_k{groups * group_out}_"
                f"{r}x{s}_stride{sh}x{sw}_{pad_name}_dil{dh}x{dw}_groups{groups}_"
                f"{data_format}_mb{mb}")
        cases.append(dict(
            testcase_name=name,
            shape=(n, h, w, groups * group_in, groups * group_out, r, s), strides=(sh, sw),
            padding=padding, dilations=(dh, dw), groups=groups, data_format=data_format,
            micro_batch_size=mb))
    return cases


class Conv2dEquivalenceMixin:
    """The checks, run on the device the concrete TestCase names."""

    DEVICE = "/CPU:0"
    TOLERANCE_FACTOR = 1.0

    def tolerance(self, dtype):
        return TOLERANCE[dtype] * (1.0 if dtype == tf.float32 else self.TOLERANCE_FACTOR)

    def _inputs(self, shape, groups, data_format, dtype):
        n, h, w, c, k, r, s = shape
        rng = np.random.default_rng(20180412)
        x_shape = (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)
        x, x32 = random_tensor(rng, x_shape, dtype)
        f, f32 = random_tensor(rng, (r, s, c // groups, k), dtype)
        return rng, (x, x32), (f, f32)

    def check_conv2d_and_gradients(self, shape, strides, padding, dilations, groups, data_format,
                                   dtype, micro_batch, **knobs):
        """The grid's named levels -> check_conv."""
        self.check_conv(SHAPES[shape], strides, PADDINGS[padding], dilations, groups, data_format,
                        DTYPES[dtype], micro_batch_size(micro_batch, SHAPES[shape][0]), **knobs)

    def check_conv(self, shape, strides, padding, dilations, groups, data_format, dtype,
                   micro_batch_size, bias=False, relu=False, **knobs):
        """Forward, backward-data and backward-filter against the reference
        (with ``bias``: the forward adds a random bias, whose gradient is
        checked too; with ``relu`` as well, the op's fused ReLU follows it:
        the reference's gradients take the output gradient where the op's
        output is positive, as TF's Relu gradient reads its own output, so
        that values rounded across 0 do not count as errors).

        Args:
          shape: (N, H, W, C, K, R, S).
          strides, dilations: int or (h, w).
          padding: "SAME", "VALID" or ((top, bottom), (left, right)).
        """
        tol = self.tolerance(dtype)
        rng, (x, x32), (f, f32) = self._inputs(shape, groups, data_format, dtype)
        b, b32 = random_tensor(rng, (shape[4],), dtype)
        op_padding = padding if isinstance(padding, str) else explicit_padding(padding, data_format)
        op_strides = list(strides) if isinstance(strides, tuple) else strides
        op_dilations = list(dilations) if isinstance(dilations, tuple) else dilations

        with tf.device(self.DEVICE):
            with tf.GradientTape() as tape:
                tape.watch([x, f, b])
                y = tf_ucudnn.conv2d(x, f, op_strides, op_padding, data_format, op_dilations,
                                     bias=b if bias else None, activation="relu" if relu else None,
                                     micro_batch_size=micro_batch_size, **knobs)
            dy, dy32 = random_tensor(rng, y.shape, dtype)
            dx, df, db = tape.gradient(y, [x, f, b], output_gradients=dy)
            if relu:  # the output gradient that reaches the convolution and the bias
                dy = dy * tf.cast(y > 0, dtype)
                dy32 = dy32 * tf.cast(y > 0, tf.float32)
        with tf.device("/CPU:0"):
            with tf.GradientTape() as tape:
                tape.watch([x32, f32, b32])
                y_ref = reference_conv2d(x32, f32, strides, padding, data_format, dilations)
                if bias:
                    y_ref = tf.nn.bias_add(y_ref, b32, data_format=data_format)
            dx_ref, df_ref, db_ref = tape.gradient(y_ref, [x32, f32, b32], output_gradients=dy32)
            if relu:
                y_ref = tf.nn.relu(y_ref)

        for name, got in (("output", y), ("input gradient", dx), ("filter gradient", df)):
            self.assertEqual(got.dtype, dtype, f"{name} dtype")
        assert_rel_l2(self, y, y_ref, tol, f"forward on {self.DEVICE}")
        assert_rel_l2(self, dx, dx_ref, tol, f"backward-data on {self.DEVICE}")
        assert_rel_l2(self, df, df_ref, tol, f"backward-filter on {self.DEVICE}")
        if bias:
            self.assertEqual(db.dtype, dtype, "bias gradient dtype")
            # The bias gradient is stock TF's BiasAddGrad (as after a stock
            # BiasAdd). In float16/bfloat16 it sums N * P * Q values in the
            # dtype, in an order that varies on the GPU: its error is that
            # of such a sum, about eps * sqrt(N * P * Q) (bfloat16, N * P * Q
            # = 1792: 8% off float32 on the CPU, 2.6% between two GPU runs).
            count = int(np.prod(y.shape)) // shape[4]
            db_tol = tol if dtype == tf.float32 else max(
                tol, {tf.float16: 2.0 ** -10, tf.bfloat16: 2.0 ** -7}[dtype] * np.sqrt(count))
            with tf.device(self.DEVICE), tf.GradientTape() as tape:
                tape.watch(b)
                z = tf.nn.bias_add(tf.zeros_like(dy), b, data_format=data_format)
            db_stock = tape.gradient(z, b, output_gradients=dy)
            assert_rel_l2(self, db, db_stock, db_tol, f"bias gradient on {self.DEVICE} vs stock")
            assert_rel_l2(self, db, db_ref, db_tol, f"bias gradient on {self.DEVICE}")
        else:
            self.assertIsNone(db)


class Conv2dMatchesTensorFlowTest(Conv2dEquivalenceMixin, parameterized.TestCase,
                                  tf.test.TestCase):
    """CPU kernels: forward and gradients equal TensorFlow's on a covering grid."""

    @parameterized.named_parameters(*GRID, *EDGE_CASES)
    def test_forward_and_gradients_match_reference(self, **case):
        self.check_conv2d_and_gradients(**case)

    @parameterized.named_parameters(*BIAS_GRID)
    def test_bias_and_gradients_match_reference(self, **case):
        self.check_conv2d_and_gradients(bias=True, **case)

    @parameterized.named_parameters(*BIAS_GRID)
    def test_bias_relu_and_gradients_match_reference(self, **case):
        self.check_conv2d_and_gradients(bias=True, relu=True, **case)

    @parameterized.named_parameters(*random_cases(40, seed=1804))
    def test_random_geometry_matches_reference(self, **case):
        self.check_conv(dtype=tf.float32, **case)

    @parameterized.named_parameters(
        dict(testcase_name="nchw_groups2_stride2_mb2", shape="n5_8x6_2x2", strides=2,
             padding="same", dilations=1, groups=2, data_format="NCHW", micro_batch_size=2),
        dict(testcase_name="nhwc_explicit_dil2_mb1", shape="n3_7x7_3x3", strides=1,
             padding="explicit", dilations=2, groups=4, data_format="NHWC", micro_batch_size=1),
    )
    def test_backprop_functions_match_reference_gradients(self, shape, strides, padding,
                                                          dilations, groups, data_format,
                                                          micro_batch_size):
        rng, (x, _), (f, _) = self._inputs(SHAPES[shape], groups, data_format, tf.float32)
        pad = PADDINGS[padding]
        op_padding = pad if isinstance(pad, str) else explicit_padding(pad, data_format)
        with tf.GradientTape() as tape:
            tape.watch([x, f])
            y_ref = reference_conv2d(x, f, strides, pad, data_format, dilations)
        dy = tf.constant(rng.standard_normal(y_ref.shape), tf.float32)
        dx_ref, df_ref = tape.gradient(y_ref, [x, f], output_gradients=dy)
        with tf.device(self.DEVICE):
            dx = tf_ucudnn.conv2d_backprop_input(
                tf.shape(x), f, dy, strides, op_padding, data_format, dilations,
                micro_batch_size=micro_batch_size)
            df = tf_ucudnn.conv2d_backprop_filter(
                x, tf.shape(f), dy, strides, op_padding, data_format, dilations,
                micro_batch_size=micro_batch_size)
        assert_rel_l2(self, dx, dx_ref, TOLERANCE[tf.float32], "conv2d_backprop_input")
        assert_rel_l2(self, df, df_ref, TOLERANCE[tf.float32], "conv2d_backprop_filter")

    def test_gradient_inside_tf_function_matches_eager(self):
        rng = np.random.default_rng(7)
        x = tf.constant(rng.standard_normal((5, 6, 6, 4)), tf.float32)
        f = tf.constant(rng.standard_normal((3, 3, 2, 4)), tf.float32)

        def loss_and_grads(x, f):
            with tf.GradientTape() as tape:
                tape.watch([x, f])
                y = tf_ucudnn.conv2d(x, f, 1, "SAME", micro_batch_size=2)
                loss = tf.reduce_sum(y * y)
            return [loss, *tape.gradient(loss, [x, f])]

        with tf.device(self.DEVICE):
            eager = loss_and_grads(x, f)
            graph = tf.function(loss_and_grads)(x, f)
        for name, a, b in zip(("loss", "dx", "dw"), graph, eager):
            assert_rel_l2(self, a, b, 1e-6, f"tf.function vs eager {name}")

    def test_second_order_gradient_matches_reference(self):
        rng = np.random.default_rng(13)
        x = tf.constant(rng.standard_normal((3, 6, 6, 2)), tf.float32)
        f = tf.constant(rng.standard_normal((3, 3, 2, 4)), tf.float32)

        def gradient_penalty_grads(conv):
            with tf.GradientTape() as outer:
                outer.watch([x, f])
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    y = tf.reduce_sum(tf.square(conv(x, f)))
                penalty = tf.reduce_sum(tf.square(inner.gradient(y, x)))
            return outer.gradient(penalty, [x, f])

        with tf.device(self.DEVICE):
            got = gradient_penalty_grads(lambda x, f: tf_ucudnn.conv2d(x, f, 1, "SAME"))
        want = gradient_penalty_grads(lambda x, f: tf.nn.conv2d(x, f, 1, "SAME"))
        for name, a, b in zip(("d/dx", "d/dw"), got, want):
            assert_rel_l2(self, a, b, 1e-5, f"second-order {name}")

    @parameterized.named_parameters(
        dict(testcase_name="groups4_dil2_stride2", groups=4, dilations=2, strides=2,
             padding=((1, 0), (0, 2))),
        dict(testcase_name="groups1_same_stride1x2", groups=1, dilations=1, strides=(1, 2),
             padding="SAME"),
    )
    def test_reference_matches_tf_nn_conv2d_forward(self, groups, dilations, strides, padding):
        # TF's CPU forward does take groups, dilations and explicit padding (its
        # gradients do not): there the composed reference must agree with it.
        rng = np.random.default_rng(3)
        x = tf.constant(rng.standard_normal((2, 9, 8, 8)), tf.float32)
        f = tf.constant(rng.standard_normal((3, 2, 8 // groups, 8)), tf.float32)
        tf_padding = padding if isinstance(padding, str) else explicit_padding(padding, "NHWC")
        want = tf.nn.conv2d(x, f, list(np.broadcast_to(strides, 2)), tf_padding,
                            dilations=dilations)
        got = reference_conv2d(x, f, strides, padding, "NHWC", dilations)
        assert_rel_l2(self, got, want, 1e-6, "composed reference vs tf.nn.conv2d")


# GPU: cuDNN's algorithms (Winograd and FFT transforms, split-K reductions)
# may keep intermediates in the storage type, so float16 / bfloat16 get twice
# the CPU bound; float32 keeps 1e-5 with TF32 off.
GPU_GRID = GRID + EDGE_CASES


@pytest.mark.gpu
class Conv2dGpuTest(Conv2dEquivalenceMixin, parameterized.TestCase, tf.test.TestCase):
    """cuDNN kernels: the same checks on /GPU:0, plus the planner's promises."""

    DEVICE = "/GPU:0"
    TOLERANCE_FACTOR = 2.0

    def setUp(self):
        super().setUp()
        tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        self.addCleanup(tf.config.experimental.enable_tensor_float_32_execution, tf32)

    def _gpu_records(self, workspace_limit, batch):
        return [r for r in tf_ucudnn.plans()
                if "GPU" in r["device"] and r["workspace_limit"] == workspace_limit
                and r["batch"] == batch]

    def _run_forward_and_backward(self, x_shape, f_shape, **knobs):
        rng = np.random.default_rng(11)
        x = tf.constant(rng.standard_normal(x_shape), tf.float32)
        f = tf.constant(rng.standard_normal(f_shape), tf.float32)
        with tf.device(self.DEVICE), tf.GradientTape() as tape:
            tape.watch([x, f])
            y = tf_ucudnn.conv2d(x, f, 1, "SAME", **knobs)
        tape.gradient(y, [x, f], output_gradients=tf.ones_like(y))

    @parameterized.named_parameters(*GPU_GRID)
    def test_forward_and_gradients_match_reference(self, **case):
        self.check_conv2d_and_gradients(**case)

    @parameterized.named_parameters(*random_cases(40, seed=1804))
    def test_random_geometry_matches_reference(self, **case):
        self.check_conv(dtype=tf.float32, **case)

    @parameterized.named_parameters(*BIAS_GRID)
    def test_bias_and_gradients_match_reference(self, **case):
        self.check_conv2d_and_gradients(bias=True, **case)

    @parameterized.named_parameters(*BIAS_GRID)
    def test_bias_relu_and_gradients_match_reference(self, **case):
        self.check_conv2d_and_gradients(bias=True, relu=True, **case)

    @parameterized.named_parameters(("0_bytes", 0), ("1_KiB", 1024), ("1_MiB", 1 << 20),
                                    ("64_MiB", 64 << 20))
    def test_recorded_plans_fit_the_workspace_limit(self, workspace_limit):
        tf_ucudnn.clear_plans()
        # A batch size of its own per limit, so that every pass is planned here.
        batch = 8 + workspace_limit.bit_length()
        self._run_forward_and_backward((batch, 14, 14, 16), (3, 3, 16, 32),
                                       workspace_limit=workspace_limit)
        records = self._gpu_records(workspace_limit, batch)
        self.assertCountEqual([r["pass"] for r in records],
                              ["forward", "backward-data", "backward-filter"])
        for r in records:
            self.assertLessEqual(r["workspace_bytes"], workspace_limit,
                                 f"{r['pass']} plan {r['micro_batches']} over the limit")
            self.assertEqual(r["workspace_bytes"],
                             max(m["workspace_bytes"] for m in r["micro_batches"]),
                             f"{r['pass']}: plan workspace is the max over its micro-batches")

    @parameterized.named_parameters(("0_bytes", 0), ("1_KiB", 1024))
    def test_tiny_workspace_limit_gives_reference_results(self, workspace_limit):
        self.check_conv2d_and_gradients(
            shape="n7_6x9_3x2", strides=1, padding="same", dilations=1, groups=1,
            data_format="NHWC", dtype="float32", micro_batch="auto",
            workspace_limit=workspace_limit)
        self.check_conv2d_and_gradients(
            shape="n5_8x6_2x2", strides=2, padding="explicit", dilations=1, groups=2,
            data_format="NCHW", dtype="float16", micro_batch="auto",
            workspace_limit=workspace_limit)

    @parameterized.named_parameters(("0_bytes", 0), ("256_KiB", 256 << 10), ("64_MiB", 64 << 20))
    def test_power_of_two_plans_split_the_whole_batch(self, workspace_limit):
        tf_ucudnn.clear_plans()
        batch = 32
        self._run_forward_and_backward((batch, 12, 12, 32), (3, 3, 32, 32),
                                       workspace_limit=workspace_limit,
                                       batch_size_policy="powerOfTwo")
        records = self._gpu_records(workspace_limit, batch)
        self.assertLen(records, 3)
        allowed = tf_ucudnn.planner.micro_batch_sizes("powerOfTwo", batch)
        for r in records:
            sizes = [m["size"] for m in r["micro_batches"]]
            self.assertEqual(sum(sizes), batch, f"{r['pass']} plan sizes {sizes}")
            self.assertContainsSubset(sizes, allowed, f"{r['pass']} plan sizes {sizes}")


class Conv2dSignatureTest(tf.test.TestCase):
    """The arguments of tf.nn.conv2d, in its order; μ-cuDNN's knobs keyword-only."""

    KNOBS = ["workspace_limit", "batch_size_policy", "micro_batch_size"]

    def positional_and_keyword_only(self, fn):
        params = inspect.signature(fn).parameters.values()
        return ([p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD],
                [p.name for p in params if p.kind == p.KEYWORD_ONLY])

    def test_conv2d_takes_tf_nn_conv2d_arguments_in_its_order(self):
        tf_params = inspect.signature(tf.nn.conv2d).parameters
        params = inspect.signature(tf_ucudnn.conv2d).parameters
        positional, keyword_only = self.positional_and_keyword_only(tf_ucudnn.conv2d)
        self.assertEqual(positional, list(tf_params))
        self.assertEqual(keyword_only, ["bias", "activation"] + self.KNOBS)
        for name in tf_params:
            self.assertEqual(params[name].default, tf_params[name].default, name)

    def test_backprop_functions_take_tf_v1s_arguments_without_use_cudnn_on_gpu(self):
        # TensorFlow 2 has no tf.nn.conv2d_backprop_*: compare with tf.compat.v1.nn's,
        # whose `filter` is our (and tf.nn.conv2d's) `filters`.
        for ours, theirs in ((tf_ucudnn.conv2d_backprop_input, tf.compat.v1.nn.conv2d_backprop_input),
                             (tf_ucudnn.conv2d_backprop_filter,
                              tf.compat.v1.nn.conv2d_backprop_filter)):
            with self.subTest(ours.__name__):
                want = [{"filter": "filters"}.get(n, n) for n in inspect.signature(theirs).parameters
                        if n not in ("use_cudnn_on_gpu", "filters")]
                positional, keyword_only = self.positional_and_keyword_only(ours)
                self.assertEqual(positional, want)
                self.assertEqual(keyword_only, self.KNOBS)

    def test_name_is_the_seventh_positional_argument(self):
        @tf.function
        def f(x, w, dy):
            return (tf_ucudnn.conv2d(x, w, 1, "SAME", "NHWC", None, "fwd"),
                    tf_ucudnn.conv2d_backprop_input(tf.shape(x), w, dy, 1, "SAME", "NHWC", None,
                                                    "bwd_data"),
                    tf_ucudnn.conv2d_backprop_filter(x, tf.shape(w), dy, 1, "SAME", "NHWC", None,
                                                     "bwd_filter"))

        graph = f.get_concrete_function(tf.TensorSpec([2, 5, 5, 3]), tf.TensorSpec([3, 3, 3, 4]),
                                        tf.TensorSpec([2, 5, 5, 4])).graph
        names = {op.type: op.name for op in graph.get_operations() if op.type.startswith("Ucudnn")}
        self.assertStartsWith(names["Ucudnn>Conv2D"], "fwd/")
        self.assertStartsWith(names["Ucudnn>Conv2DBackpropInput"], "bwd_data/")
        self.assertStartsWith(names["Ucudnn>Conv2DBackpropFilter"], "bwd_filter/")


class NumpyIntegerArgumentsTest(tf.test.TestCase):
    """numpy integers are ints, as tf.nn.conv2d takes them."""

    def test_numpy_integers_give_the_same_result_as_python_ints(self):
        x = tf.constant(np.random.default_rng(0).standard_normal((2, 9, 9, 3)), tf.float32)
        w = tf.constant(np.random.default_rng(1).standard_normal((3, 3, 3, 4)), tf.float32)
        want = tf_ucudnn.conv2d(x, w, 2, [[0, 0], [1, 0], [0, 1], [0, 0]], dilations=[1, 2])
        cases = {
            "scalar strides": dict(strides=np.int64(2), dilations=[1, 2]),
            "array strides": dict(strides=np.array([2, 2]), dilations=np.array([1, 2])),
            "numpy list": dict(strides=[np.int32(2), np.int32(2)],
                               dilations=(np.int64(1), np.int64(2))),
            "4 numpy ints": dict(strides=np.array([1, 2, 2, 1]), dilations=[1, np.int8(2)]),
        }
        for label, kwargs in cases.items():
            with self.subTest(label):
                padding = np.array([[0, 0], [1, 0], [0, 1], [0, 0]])
                got = tf_ucudnn.conv2d(x, w, padding=padding, micro_batch_size=np.int64(1),
                                       **kwargs)
                self.assertAllEqual(got, want)
        self.assertAllClose(want, tf.nn.conv2d(x, w, np.int64(2), [[0, 0], [1, 0], [0, 1], [0, 0]],
                                               dilations=[1, 2]), rtol=1e-5, atol=1e-5)

    def test_bools_and_fractions_are_not_integers(self):
        x, w = tf.ones([1, 4, 4, 1]), tf.ones([1, 1, 1, 1])
        for strides in (True, np.bool_(True), 1.5, np.float32(1.0), "1"):
            with self.subTest(strides=repr(strides)):
                with self.assertRaisesRegex(ValueError, "strides must be an int"):
                    tf_ucudnn.conv2d(x, w, strides, "SAME")

    def test_activation_is_relu_after_a_bias_or_none(self):
        x, w, b = tf.ones([1, 4, 4, 1]), tf.ones([1, 1, 1, 1]), tf.ones([1])
        with self.assertRaisesRegex(ValueError, "activation must be None, 'linear' or 'relu', "
                                                "got 'elu'"):
            tf_ucudnn.conv2d(x, w, 1, "SAME", bias=b, activation="elu")
        with self.assertRaisesRegex(ValueError, "needs a bias"):
            tf_ucudnn.conv2d(x, w, 1, "SAME", activation="relu")
        self.assertAllEqual(tf_ucudnn.conv2d(x, w, 1, "SAME", bias=-2 * b, activation="relu"),
                            tf.zeros([1, 4, 4, 1]))
        self.assertAllEqual(tf_ucudnn.conv2d(x, w, 1, "SAME", bias=-2 * b, activation="linear"),
                            -tf.ones([1, 4, 4, 1]))


class Conv2dTransposeTest(parameterized.TestCase, tf.test.TestCase):
    """tf_ucudnn.conv2d_transpose equals tf.nn.conv2d_transpose, forward and
    gradients, for every micro-batch plan (CPU: forced sizes)."""

    DEVICE = "/CPU:0"
    KNOBS = {}

    @parameterized.named_parameters(
        ("same_stride2_mb1", (5, 4, 4, 6), (3, 3, 3, 6), (5, 8, 8, 3), 2, "SAME", 1),
        ("valid_stride1_mb2", (4, 5, 6, 4), (2, 3, 5, 4), (4, 6, 8, 5), 1, "VALID", 2),
        ("valid_stride2_whole", (3, 4, 4, 8), (2, 2, 4, 8), (3, 8, 8, 4), 2, "VALID", None),
        ("explicit_mb3", (7, 5, 5, 4), (3, 3, 2, 4), (7, 5, 5, 2), 1,
         [[0, 0], [1, 1], [1, 1], [0, 0]], 3),
    )
    def test_matches_tf_nn_conv2d_transpose(self, x_shape, w_shape, out_shape, strides, padding,
                                            micro_batch):
        rng = np.random.default_rng(12)
        x = tf.constant(rng.standard_normal(x_shape), tf.float32)
        w = tf.constant(rng.standard_normal(w_shape), tf.float32)
        dy = tf.constant(rng.standard_normal(out_shape), tf.float32)
        results = []
        for fn, knobs, device in (
                (tf.nn.conv2d_transpose, {}, "/CPU:0"),
                (tf_ucudnn.conv2d_transpose, dict(micro_batch_size=micro_batch, **self.KNOBS),
                 self.DEVICE)):
            with tf.device(device), tf.GradientTape() as tape:
                tape.watch([x, w])
                y = fn(x, w, out_shape, strides, padding, **knobs)
            results.append([y, *tape.gradient(y, [x, w], output_gradients=dy)])
        for name, got, want in zip(("output", "input gradient", "filter gradient"), *results[::-1]):
            assert_rel_l2(self, got, want, 1e-5, f"conv2d_transpose {name}")

    def test_takes_tf_nn_conv2d_transposes_arguments_in_its_order(self):
        want = list(inspect.signature(tf.nn.conv2d_transpose).parameters)
        got = list(inspect.signature(tf_ucudnn.conv2d_transpose).parameters)
        self.assertEqual(got[:len(want)], want)

    def test_an_output_shape_the_convolution_does_not_fit_is_an_invalid_argument(self):
        with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
            tf_ucudnn.conv2d_transpose(tf.ones([1, 4, 4, 2]), tf.ones([3, 3, 1, 2]),
                                       [1, 5, 5, 1], 2, "SAME")


@pytest.mark.gpu
class Conv2dTransposeGpuTest(Conv2dTransposeTest):
    """The same on /GPU:0 (TF32 off), with workspace_limit="auto" (the whole
    batch where the planner decides)."""

    DEVICE = "/GPU:0"
    KNOBS = dict(workspace_limit="auto")

    def setUp(self):
        super().setUp()
        tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        self.addCleanup(tf.config.experimental.enable_tensor_float_32_execution, tf32)
