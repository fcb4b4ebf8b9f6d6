"""Hardening of the ops: inputs that used to kill the process, and
zero-size inputs.

- 0 input channels (0 groups) was a division by zero (SIGFPE) in all three
  ops, and under ``enable_rewrite()`` in a stock ``tf.nn.conv2d`` with
  dynamic shapes.
- Sizes whose element count overflows int64 (explicit padding of 2^40,
  ``input_sizes`` of [65536] * 4, ``filter_sizes`` of [2^31 - 1] * 4) reached
  a ``TensorShape`` unchecked and aborted on TF's CHECK, in eager mode and
  through the shape functions in graph mode; padding near 2^62 overflowed
  signed arithmetic (undefined behaviour).
- Zero-size inputs (batch 0, an empty spatial dimension, 0 output channels)
  were rejected where ``tf.nn.conv2d`` returns empty tensors.

Each input that used to crash runs in a child process, so that a regression
fails its own test instead of killing the test run.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from testing_utils import reference_conv2d, run_python
from tf_ucudnn import planner

_CHILD_PRELUDE = """
import re
import sys

import numpy as np
import tensorflow as tf

import tf_ucudnn
from tf_ucudnn._engine import ops as raw_ops

S1 = [1, 1, 1, 1]


def expect(error, pattern, fn):
    # The call must raise `error` whose message matches `pattern`.
    try:
        fn()
    except error as e:
        if not re.search(pattern, str(e)):
            sys.exit(f"{type(e).__name__} does not match {pattern!r}: {e}")
        print("raised as expected:", type(e).__name__, str(e).splitlines()[0][:300])
        return
    sys.exit(f"no {error.__name__} matching {pattern!r} was raised")
"""


def run_in_child(test, body, device="/CPU:0"):
    """Runs `body` (which calls ``expect``) under ``tf.device(device)`` in a
    fresh Python; fails `test` with the exit status and output unless it exits 0."""
    code = _CHILD_PRELUDE + f"\nwith tf.device({device!r}):\n" + "".join(
        "    " + line + "\n" for line in body.strip("\n").splitlines())
    done = run_python(code, TF_CPP_MIN_LOG_LEVEL="2", UCUDNN_DATABASE="off")
    signal = f" (killed by signal {-done.returncode})" if done.returncode < 0 else ""
    test.assertEqual(done.returncode, 0,
                     f"child exited with {done.returncode}{signal}\nstdout: {done.stdout[-1500:]}"
                     f"\nstderr: {done.stderr[-3000:]}")


_X0C = "tf.zeros((2, 5, 5, 0))"            # NHWC, 0 channels
_W = "tf.ones((3, 3, 2, 4))"              # filter in_channels 2
_GROUPS = "at least one group"


class ZeroInputChannelsTest(parameterized.TestCase, tf.test.TestCase):
    """0 input channels with a filter of in_channels 2 makes 0 groups."""

    @parameterized.named_parameters(
        ("forward", f"raw_ops.ucudnn_conv2d(input={_X0C}, filter={_W}, strides=S1, "
                    f"padding='SAME')"),
        ("backprop_input",
         f"raw_ops.ucudnn_conv2d_backprop_input(input_sizes=[2, 5, 5, 0], filter={_W}, "
         f"out_backprop=tf.ones((2, 5, 5, 4)), strides=S1, padding='SAME')"),
        ("backprop_filter",
         f"raw_ops.ucudnn_conv2d_backprop_filter(input={_X0C}, filter_sizes=[3, 3, 2, 4], "
         f"out_backprop=tf.ones((2, 5, 5, 4)), strides=S1, padding='SAME')"),
        ("forward_nchw", f"raw_ops.ucudnn_conv2d(input=tf.zeros((2, 0, 5, 5)), filter={_W}, "
                         f"strides=S1, padding='VALID', data_format='NCHW')"),
    )
    def test_is_invalid_argument_not_sigfpe(self, call):
        run_in_child(self, f"expect(tf.errors.InvalidArgumentError, {_GROUPS!r}, lambda: {call})")

    def test_stock_conv2d_with_dynamic_shapes_under_the_rewrite(self):
        # The shapes are unknown when the graph is built, so the rewritten op's
        # kernel is what sees the 0 groups (stock TF's oneDNN kernel says
        # "grouped convolution must have at least one group").
        run_in_child(self, f"""
tf_ucudnn.enable_rewrite()
w = {_W}
@tf.function(input_signature=[tf.TensorSpec([None, None, None, None], tf.float32)])
def f(x):
    return tf.nn.conv2d(x, w, 1, "SAME")
expect(tf.errors.InvalidArgumentError, {_GROUPS!r}, lambda: f({_X0C}))
assert tf_ucudnn.rewrite_stats()["rewritten"] > 0, tf_ucudnn.rewrite_stats()
""")


_ELEMENTS = r"would have more than 2\*\*63 - 1 elements"


class ShapeOverflowTest(parameterized.TestCase, tf.test.TestCase):
    """Sizes from attributes and size tensors are checked before any TensorShape."""

    @parameterized.named_parameters(
        ("explicit_padding_2_40",
         "tf_ucudnn.conv2d(tf.ones((2, 5, 5, 2)), tf.ones((3, 3, 2, 4)), 1, "
         "[[0, 0], [2**40, 2**40], [2**40, 2**40], [0, 0]])",
         r"output shape \[2, 2199023255555, 2199023255555, 4\] " + _ELEMENTS),
        ("explicit_padding_2_62",  # 5 + 2^62 + 2^62 overflows int64
         "tf_ucudnn.conv2d(tf.ones((2, 5, 5, 2)), tf.ones((3, 3, 2, 4)), 1, "
         "[[0, 0], [2**62, 2**62], [1, 1], [0, 0]])",
         r"padded input height \(5 \+ 4611686018427387904 \+ 4611686018427387904\) "
         r"exceeds 2\^63 - 1"),
        ("input_sizes_65536",
         "tf_ucudnn.conv2d_backprop_input([65536] * 4, tf.ones((3, 3, 2, 4)), "
         "tf.ones((2, 5, 5, 4)), 1, 'SAME')",
         r"input_sizes \[65536, 65536, 65536, 65536\] " + _ELEMENTS),
        ("filter_sizes_int32_max",
         "tf_ucudnn.conv2d_backprop_filter(tf.ones((2, 5, 5, 2)), [2**31 - 1] * 4, "
         "tf.ones((2, 5, 5, 4)), 1, 'SAME')",
         r"filter_sizes \[2147483647, 2147483647, 2147483647, 2147483647\] " + _ELEMENTS),
        ("huge_output_height_that_cudnn_cannot_describe",
         "tf_ucudnn.conv2d(tf.ones((1, 5, 5, 2)), tf.ones((3, 3, 2, 4)), 1, "
         "[[0, 0], [2**31, 2**31], [1, 1], [0, 0]])",
         r"output height \(4294967299\) exceeds 2\^31 - 1"),
    )
    def test_eager_is_invalid_argument_not_abort(self, call, pattern):
        run_in_child(self, f"expect(tf.errors.InvalidArgumentError, {pattern!r}, lambda: {call})")

    @parameterized.named_parameters(
        ("explicit_padding_2_40",
         "lambda x, w: tf_ucudnn.conv2d(x, w, 1, [[0, 0], [2**40, 2**40], [2**40, 2**40], "
         "[0, 0]])",
         "tf.ones((2, 5, 5, 2)), tf.ones((3, 3, 2, 4))", r"output shape .*" + _ELEMENTS),
        ("explicit_padding_2_62",
         "lambda x, w: tf_ucudnn.conv2d(x, w, 1, [[0, 0], [2**62, 2**62], [1, 1], [0, 0]])",
         "tf.ones((2, 5, 5, 2)), tf.ones((3, 3, 2, 4))",
         r"explicit_paddings 4611686018427387904 \+ 4611686018427387904 \(dimension 1\) "
         r"exceeds 2\^63 - 1"),
        ("input_sizes_65536",
         "lambda w, dy: tf_ucudnn.conv2d_backprop_input(tf.constant([65536] * 4), w, dy, 1, "
         "'SAME')",
         "tf.ones((3, 3, 2, 4)), tf.ones((2, 5, 5, 4))", r"input_sizes .*" + _ELEMENTS),
        ("filter_sizes_int32_max",
         "lambda x, dy: tf_ucudnn.conv2d_backprop_filter(x, tf.constant([2**31 - 1] * 4), dy, 1, "
         "'SAME')",
         "tf.ones((2, 5, 5, 2)), tf.ones((2, 5, 5, 4))", r"filter_sizes .*" + _ELEMENTS),
    )
    def test_graph_mode_shape_function_rejects(self, fn, args, pattern):
        # Traced with static shapes: the op's shape function sees the sizes
        # first and raises ValueError when the function is traced.
        run_in_child(self, f"expect(ValueError, {pattern!r}, lambda: tf.function({fn})({args}))")

    def test_graph_mode_sizes_known_only_when_running(self):
        # input_sizes computed at run time: the shape function lets it through
        # (unknown), the kernel must reject it.
        run_in_child(self, r"""
@tf.function(input_signature=[tf.TensorSpec([4], tf.int32)])
def f(sizes):
    return tf_ucudnn.conv2d_backprop_input(sizes, tf.ones((3, 3, 2, 4)), tf.ones((2, 5, 5, 4)),
                                           1, "SAME")
expect(tf.errors.InvalidArgumentError, r"input_sizes \[65536, 65536, 65536, 65536\] would have",
       lambda: f(tf.constant([65536] * 4)))
""")


class ZeroSizeTest(parameterized.TestCase, tf.test.TestCase):
    """Zero-size inputs give what tf.nn.conv2d gives: empty tensors of the
    right shape, a zero filter gradient, and no plan."""

    device = "/CPU:0"

    # (input NHWC, filter, padding, strides): each gives an empty output or
    # an empty input in stock TF (NHWC on the CPU).
    CASES = (
        ("batch_0_same", (0, 5, 5, 2), (3, 3, 2, 4), "SAME", 1),
        ("batch_0_valid", (0, 5, 5, 2), (3, 3, 2, 4), "VALID", 1),
        ("height_0_same", (2, 0, 5, 2), (3, 3, 2, 4), "SAME", 1),
        ("width_0_same_strided", (2, 5, 0, 2), (3, 3, 2, 4), "SAME", 2),
        ("out_channels_0", (2, 5, 5, 2), (3, 3, 2, 0), "SAME", 1),
        ("grouped_batch_0", (0, 5, 5, 4), (3, 3, 2, 6), "SAME", 1),
        # Only padding: the output has elements, and they are all zero.
        ("height_0_padded", (2, 0, 5, 2), (3, 3, 2, 4), [[0, 0], [2, 2], [1, 1], [0, 0]], 1),
    )

    def _stock(self, x, w, padding, strides):
        # Stock TF's result (reference_conv2d: from TF's shape functions for
        # empty tensors, whatever the CPU kernel does with them).
        self.assertEqual(x.shape.num_elements() * w.shape.num_elements(), 0)
        if not isinstance(padding, str):  # tf.nn.conv2d's NHWC pairs -> ((top, bottom), (left, right))
            padding = (tuple(padding[1]), tuple(padding[2]))
        return reference_conv2d(x, w, strides, padding)

    @parameterized.named_parameters(*CASES)
    def test_all_three_passes_match_tensorflow(self, x_shape, w_shape, padding, strides):
        rng = np.random.default_rng(0)
        x = tf.constant(rng.standard_normal(x_shape), tf.float32)
        w = tf.constant(rng.standard_normal(w_shape), tf.float32)
        want = self._stock(x, w, padding, strides)
        tf_ucudnn.clear_plans()
        with tf.device(self.device):
            with tf.GradientTape(persistent=True) as tape:
                tape.watch([x, w])
                y = tf_ucudnn.conv2d(x, w, strides, padding, micro_batch_size=1)
                loss = tf.reduce_sum(y)
            dx, dw = tape.gradient(loss, [x, w])
            dy = tf.ones_like(y)
            dx_direct = tf_ucudnn.conv2d_backprop_input(tf.shape(x), w, dy, strides, padding)
            dw_direct = tf_ucudnn.conv2d_backprop_filter(x, tf.shape(w), dy, strides, padding)
        self.assertEqual(tuple(y.shape), tuple(want.shape), f"output of {x_shape} * {w_shape}")
        self.assertAllEqual(y, tf.zeros_like(y))
        for name, got in (("dx", dx), ("dx direct", dx_direct)):
            self.assertEqual(tuple(got.shape), x_shape, name)
            self.assertAllEqual(got, tf.zeros_like(got), msg=name)
        for name, got in (("dw", dw), ("dw direct", dw_direct)):
            self.assertEqual(tuple(got.shape), w_shape, name)
            self.assertAllEqual(got, tf.zeros_like(got),
                                msg=f"{name} of an empty convolution must be zero")
        self.assertEqual(list(tf_ucudnn.plans()), [],
                         "a zero-size convolution must not be planned")

    @parameterized.named_parameters(("float16", tf.float16), ("bfloat16", tf.bfloat16))
    def test_reduced_precision_and_nchw(self, dtype):
        x = tf.zeros((0, 2, 5, 5), dtype)  # NCHW, batch 0
        w = tf.ones((3, 3, 2, 4), dtype)
        with tf.device(self.device):
            y = tf_ucudnn.conv2d(x, w, 1, "SAME", data_format="NCHW")
            dw = tf_ucudnn.conv2d_backprop_filter(x, [3, 3, 2, 4], tf.zeros((0, 4, 5, 5), dtype),
                                                  1, "SAME", data_format="NCHW")
        self.assertEqual(tuple(y.shape), (0, 4, 5, 5))
        self.assertEqual(y.dtype, dtype)
        self.assertAllEqual(tf.cast(dw, tf.float32), tf.zeros((3, 3, 2, 4)))

    def test_huge_dimension_of_an_empty_input(self):
        # A tensor with 0 elements may have a dimension near 2^62: the output
        # shape is computed without overflow and is empty, as stock TF's.
        with tf.device(self.device):
            y = tf_ucudnn.conv2d(tf.zeros((0, 2**62, 5, 2)), tf.ones((3, 3, 2, 4)), 1, "SAME")
        self.assertEqual(tuple(y.shape), (0, 2**62, 5, 4))

    def test_valid_padding_of_an_empty_height_is_still_an_error(self):
        # tf.nn.conv2d: "Computed output size would be negative".
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    r"the dilated filter \(3x3\) is larger than the padded "
                                    r"input \(0x5\)"):
            with tf.device(self.device):
                tf_ucudnn.conv2d(tf.zeros((2, 0, 5, 2)), tf.ones((3, 3, 2, 4)), 1, "VALID")


@pytest.mark.gpu
class ZeroSizeGpuTest(ZeroSizeTest):
    """The same on the GPU: the result is zeroed with cudaMemsetAsync on the
    op's stream and cuDNN is never called (it rejects zero-sized descriptors)."""

    device = "/GPU:0"


@pytest.mark.gpu
class ZeroInputChannelsGpuTest(tf.test.TestCase):
    """0 groups on the GPU kernels (the validation is shared; the device is not)."""

    def test_is_invalid_argument_on_the_gpu(self):
        run_in_child(self, f"""
expect(tf.errors.InvalidArgumentError, {_GROUPS!r},
       lambda: raw_ops.ucudnn_conv2d(input={_X0C}, filter={_W}, strides=S1, padding="SAME"))
expect(tf.errors.InvalidArgumentError, {_GROUPS!r},
       lambda: raw_ops.ucudnn_conv2d_backprop_filter(
           input={_X0C}, filter_sizes=[3, 3, 2, 4], out_backprop=tf.ones((2, 5, 5, 4)),
           strides=S1, padding="SAME"))
""", device="/GPU:0")


class PlannerMemoryTest(tf.test.TestCase):
    """Planning allocates by the answer and the allowed sizes, never per sample
    of N (N = 10**7 once took 11 GB and 70 s; powerOfTwo sizes of 2**40
    raised MemoryError)."""

    def test_power_of_two_sizes_of_2_40(self):
        self.assertEqual(planner.micro_batch_sizes("powerOfTwo", 2**40), [2**k for k in range(41)])
        self.assertEqual(planner.micro_batch_sizes("undivided", 2**62), [2**62])
        self.assertLen(planner.micro_batch_sizes("powerOfTwo", 2**63 - 1), 64)

    def test_large_batches_plan_in_little_time_and_memory(self):
        # In a child: a regression would allocate gigabytes.
        done = run_python("""
            import resource, time
            from tf_ucudnn import planner
    
            def peak_mib():
                return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

            base, start = peak_mib(), time.perf_counter()
            n = 10**7
            table = {b: [("zero", 2.0 * b, 0), ("fast", 0.5 * b, 1 << 20)]
                     for b in planner.micro_batch_sizes("powerOfTwo", n)}
            best = planner.best_plan(table, n, 1 << 19)
            front = planner.pareto_front(table, n)
            assert best.sizes == [n] and best.time_ms == 2.0 * n, best
            assert [(p.workspace_bytes, p.time_ms) for p in front] == [(0, 2.0 * n),
                                                                      (1 << 20, 0.5 * n)], front
            # N = 2**40: the whole batch is slow, 2**39 is fast.
            big = {2**k: [("a", 3.0 * 2**k, 0)] for k in range(39)}
            big[2**39] = [("fast", 1.0, 4096)]
            big[2**40] = [("whole", 5.0, 0)]
            plan = planner.best_plan(big, 2**40, 1 << 20)
            assert plan.sizes == [2**39, 2**39] and plan.workspace_bytes == 4096, plan
            assert planner.pareto_front(big, 2**40)[0].sizes == [2**40]
            odd = planner.best_plan(big, 10**12 + 7, 1 << 20)
            assert sum(odd.sizes) == 10**12 + 7 and odd.sizes[0] == 2**39, odd.sizes
            print(f"{time.perf_counter() - start:.3f} s {peak_mib() - base:.1f} MiB")
            """, timeout=120)
        self.assertEqual(done.returncode, 0,
                         f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}")
        seconds, _, mib, _ = done.stdout.split()
        self.assertLess(float(seconds), 10.0, f"planning took {done.stdout}")
        self.assertLess(float(mib), 200.0, f"planning grew the peak RSS by {done.stdout}")

    def test_too_large_for_a_table_of_other_sizes_names_batch_size(self):
        with self.assertRaisesRegex(ValueError, r"batch_size 3221225472 is too large to plan"):
            planner.best_plan({3: [("a", 1.0, 0)]}, 3 * 2**30, 0, policy="all")
        with self.assertRaisesRegex(ValueError, r"batch_size 3221225472 is too large to plan"):
            planner.pareto_front({3: [("a", 1.0, 0)]}, 3 * 2**30, policy="all")


# Unit roundoff of the element types: 2^-8 (bfloat16), 2^-11 (float16).
_UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11}

# Measured on the CPU when partial sums were rounded, bfloat16, N = 128:
# relative error 2.9e-3 undivided, 1.2e-2 with micro-batches of 1 (float16:
# 3.6e-4 -> 1.5e-3), because every micro-batch's partial sum was rounded to
# the element type.
_ACCUMULATION_CHILD = """
import json
import numpy as np
import tensorflow as tf
import tf_ucudnn

rng = np.random.default_rng(13)
n, results = 128, {}
x64 = rng.standard_normal((n, 8, 8, 4))
dy64 = rng.standard_normal((n, 8, 8, 8))
for dtype in (tf.bfloat16, tf.float16):
    x, dy = tf.constant(x64, dtype), tf.constant(dy64, dtype)
    with tf.device("/CPU:0"):  # float64 reference on the same (rounded) inputs
        want = tf.raw_ops.Conv2DBackpropFilter(
            input=tf.cast(x, tf.float64), filter_sizes=[3, 3, 4, 8],
            out_backprop=tf.cast(dy, tf.float64), strides=[1, 1, 1, 1], padding="SAME")
    errors = {}
    for name, knobs in KNOBS.items():
        with tf.device(DEVICE):
            got = tf_ucudnn.conv2d_backprop_filter(x, [3, 3, 4, 8], dy, 1, "SAME", **knobs)
        errors[name] = float(np.linalg.norm(tf.cast(got, tf.float64) - want) /
                             np.linalg.norm(want))
    results[dtype.name] = errors
records = [dict(r) for r in tf_ucudnn.plans() if r["pass"] == "backward-filter"]
print(json.dumps({"errors": results, "records": records}))
"""


class FloatAccumulationTest(tf.test.TestCase):
    """float16/bfloat16 backward-filter adds its micro-batches in float32, so
    splitting the mini-batch does not grow the error."""

    device = "/CPU:0"
    knobs = {"undivided": {"batch_size_policy": "undivided"},
             "micro-batches of 1": {"micro_batch_size": 1},
             "micro-batches of 8": {"micro_batch_size": 8}}

    def _run(self, **env):
        code = (f"DEVICE = {self.device!r}\nKNOBS = {self.knobs!r}\n" + _ACCUMULATION_CHILD)
        done = run_python(code, TF_CPP_MIN_LOG_LEVEL="2", UCUDNN_DATABASE="off", **env)
        self.assertEqual(done.returncode, 0, f"exit {done.returncode}\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr

    def check_errors(self, errors):
        for dtype, by_plan in errors.items():
            whole = by_plan["undivided"]
            # Both round the float32 sum to the element type once; only the
            # summation order differs.
            bound = 1.5 * whole + 0.25 * _UNIT_ROUNDOFF[dtype]
            for name, err in by_plan.items():
                self.assertLessEqual(err, bound,
                                     f"{dtype} {name}: relative error {err:.3e} > {bound:.3e} "
                                     f"(undivided {whole:.3e}; all: {by_plan})")

    def test_micro_batches_do_not_grow_the_error(self):
        result, _ = self._run()
        self.check_errors(result["errors"])


@pytest.mark.gpu
class FloatAccumulationGpuTest(FloatAccumulationTest):
    """On the GPU: cudnnOpTensor adds each micro-batch's gradient (T) into a
    float32 sum in the plan's workspace; the sum counts against the limit."""

    device = "/GPU:0"
    knobs = {"undivided": {"batch_size_policy": "undivided"},
             "micro-batches of 1": {"micro_batch_size": 1},
             "micro-batches of 8": {"micro_batch_size": 8},
             "powerOfTwo within 64 MiB": {"batch_size_policy": "powerOfTwo"}}

    def test_micro_batches_do_not_grow_the_error(self):
        result, stderr = self._run()
        self.assertNotIn("does not add", stderr,
                         "cuDNN refused float32 accumulation; the errors were "
                         f"{result['errors']}")
        self.check_errors(result["errors"])
        # The forced plans of several micro-batches hold the float32 filter
        # (3*3*4*8 floats, rounded up to 256 bytes, and a 256-byte zero).
        for r in result["records"]:
            if len(r["micro_batches"]) > 1:
                self.assertGreaterEqual(r["workspace_bytes"], 1280 + 256, f"record {r}")
                self.assertLessEqual(r["workspace_bytes"], r["workspace_limit"], f"record {r}")

    def test_the_accumulator_counts_against_the_workspace_limit(self):
        # Within 1 KiB there is no room for a 1.5 KiB accumulator: every
        # plan must fit the limit, so none divides.
        self.knobs = {"undivided": {"batch_size_policy": "undivided", "workspace_limit": 1024},
                      "powerOfTwo within 1 KiB": {"batch_size_policy": "powerOfTwo",
                                                  "workspace_limit": 1024}}
        result, _ = self._run()
        self.check_errors(result["errors"])
        for r in result["records"]:
            self.assertLessEqual(r["workspace_bytes"], 1024, f"record {r}")
            if r["dtype"] != "float32":
                self.assertLen(r["micro_batches"], 1, f"no room for the accumulator: {r}")
