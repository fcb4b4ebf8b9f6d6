"""Property-based fuzzing on the CPU: every input either matches TF's convolution
or raises InvalidArgumentError / ValueError; nothing crashes or hangs."""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tf_ucudnn
from testing_utils import ROOT, reference_conv2d, rel_l2


@st.composite
def convolutions(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    channels = groups * draw(st.integers(1, 3))
    # Sometimes a channel count the filter does not divide: must be rejected.
    if draw(st.integers(0, 9)) == 0:
        channels += 1
    out_channels = groups * draw(st.integers(1, 3)) + (1 if draw(st.integers(0, 9)) == 0 else 0)
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    padding = draw(st.one_of(
        st.sampled_from(["SAME", "VALID"]),
        st.tuples(st.tuples(st.integers(0, 3), st.integers(0, 3)),
                  st.tuples(st.integers(0, 3), st.integers(0, 3)))))
    return dict(
        batch=draw(st.integers(0, 4)), height=draw(st.integers(1, 9)), width=draw(st.integers(1, 9)),
        channels=channels, groups=groups, out_channels=out_channels, r=r, s=s,
        filter_in=max(channels // groups, 1),
        strides=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        dilations=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        padding=padding, data_format=draw(st.sampled_from(["NHWC", "NCHW"])),
        micro_batch_size=draw(st.sampled_from([None, 1, 2, 3])),
        seed=draw(st.integers(0, 2**31 - 1)))


class FuzzTest(tf.test.TestCase):

    @settings(max_examples=80, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(convolutions())
    def test_matches_tensorflow_or_raises_a_clear_error(self, c):
        rng = np.random.default_rng(c["seed"])
        shape = ((c["batch"], c["height"], c["width"], c["channels"]) if c["data_format"] == "NHWC"
                 else (c["batch"], c["channels"], c["height"], c["width"]))
        x = tf.constant(rng.standard_normal(shape), tf.float32)
        w = tf.constant(rng.standard_normal((c["r"], c["s"], c["filter_in"], c["out_channels"])),
                        tf.float32)
        if isinstance(c["padding"], str):
            padding = c["padding"]
        else:
            pairs = [[0, 0], list(c["padding"][0]), list(c["padding"][1]), [0, 0]]
            padding = pairs if c["data_format"] == "NHWC" else [pairs[0], pairs[3], pairs[1], pairs[2]]
        try:
            got = tf_ucudnn.conv2d(x, w, c["strides"], padding, c["data_format"], c["dilations"],
                                   micro_batch_size=c["micro_batch_size"])
        except (tf.errors.InvalidArgumentError, ValueError) as e:
            self.assertTrue(str(e), "an error must say what was wrong")
            return
        want = reference_conv2d(x, w, c["strides"], c["padding"], c["data_format"], c["dilations"])
        self.assertEqual(tuple(got.shape), tuple(want.shape), str(c))
        self.assertLessEqual(rel_l2(got, want), 1e-5, str(c))


# Shape arithmetic near the int32 and int64 limits: sizes from
# size tensors and attributes, and zero-element tensors whose other
# dimensions are huge. Every call must return (with TF's output shape) or
# raise InvalidArgumentError / ValueError: never abort (TensorShape's CHECK),
# divide by zero or overflow signed arithmetic. The examples run in a child
# process that prints each one first, so that a crash fails this test only
# and names the input that caused it.
_LIMITS_CHILD = r'''
import sys

import numpy as np
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tf_ucudnn

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
EDGES = [0, 1, 2, 3, 5, 2**15, 2**16, 2**31 - 2, 2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**61,
         2**62, 2**63 - 2, 2**63 - 1]


def near(limit):
    """Sizes that stress arithmetic up to `limit`: small, edges, near the limit."""
    return st.one_of(st.integers(0, 6), st.sampled_from([e for e in EDGES if e <= limit]),
                     st.integers(limit - 4, limit), st.integers(0, limit))


def expected_output(in_hw, filter_hw, strides, dilations, padding, pads):
    """TF's output height and width (Python ints: no overflow), or None."""
    out = []
    for i in range(2):
        eff = (filter_hw[i] - 1) * dilations + 1
        if padding == "SAME":
            out.append(-(-in_hw[i] // strides))
            continue
        padded = in_hw[i] + (sum(pads[i]) if padding == "EXPLICIT" else 0)
        if padded < eff:
            return None
        out.append((padded - eff) // strides + 1)
    return out


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(["input_sizes", "filter_sizes", "paddings", "empty"]))
    c = dict(kind=kind, graph=draw(st.integers(0, 3)) == 0,
             strides=draw(st.sampled_from([1, 2, 3, INT32_MAX])),
             dilations=draw(st.sampled_from([1, 2, INT32_MAX])))
    if kind in ("input_sizes", "filter_sizes"):
        sizes = [draw(near(INT32_MAX)) for _ in range(4)]
        # A valid shape of more than a million elements would be allocated
        # (and filled) for real: keep those small; overflowing ones stay.
        if 10**6 < np.prod(sizes, dtype=object) <= INT64_MAX:
            sizes[0], sizes[1] = sizes[0] % 7 + 1, sizes[1] % 7 + 1
        c["sizes"] = sizes
    if kind == "paddings":
        c["pads"] = [[draw(near(INT64_MAX)), draw(near(INT64_MAX))] for _ in range(2)]
        hw = expected_output((5, 5), (3, 3), c["strides"], c["dilations"], "EXPLICIT", c["pads"])
        # Batch 2 only where the output is small or beyond what runs (int
        # dimensions), else it would be computed for real.
        runs = hw is not None and max(hw) <= INT32_MAX and 8 * hw[0] * hw[1] > 10**6
        c["batch"] = 0 if runs else draw(st.sampled_from([0, 2]))
    if kind == "empty":
        # A zero-element input whose other dimensions may be huge, and a
        # filter that may be huge too where it has no elements.
        c["input"] = [0, draw(near(INT64_MAX)), draw(near(INT64_MAX)), 2]
        k = draw(st.sampled_from([0, 4]))
        big = near(INT64_MAX) if k == 0 else st.integers(1, 3)
        c["filter"] = [max(1, draw(big)), max(1, draw(big)), 2, k]
        c["padding"] = draw(st.sampled_from(["SAME", "VALID"]))
    return c


def run(c):
    s, d = c["strides"], c["dilations"]
    if c["kind"] == "input_sizes":
        return c["sizes"], lambda: tf_ucudnn.conv2d_backprop_input(
            tf.constant(c["sizes"], tf.int32), tf.ones((3, 3, 2, 4)), tf.ones((2, 5, 5, 4)), s,
            "SAME", dilations=d)
    if c["kind"] == "filter_sizes":
        return c["sizes"], lambda: tf_ucudnn.conv2d_backprop_filter(
            tf.ones((2, 5, 5, 2)), tf.constant(c["sizes"], tf.int32), tf.ones((2, 5, 5, 4)), s,
            "SAME", dilations=d)
    if c["kind"] == "paddings":
        x = tf.ones((c["batch"], 5, 5, 2))
        hw = expected_output((5, 5), (3, 3), s, d, "EXPLICIT", c["pads"])
        want = None if hw is None else [c["batch"], hw[0], hw[1], 4]
        return want, lambda: tf_ucudnn.conv2d(x, tf.ones((3, 3, 2, 4)), s,
                                              [[0, 0]] + c["pads"] + [[0, 0]], dilations=d)
    try:
        x, w = tf.zeros(c["input"]), tf.zeros(c["filter"])
    except tf.errors.InvalidArgumentError:
        return None, None  # TensorFlow cannot make such a tensor: nothing to check
    hw = expected_output(c["input"][1:3], c["filter"][:2], s, d, c["padding"], None)
    want = None if hw is None else [0, hw[0], hw[1], c["filter"][3]]
    return want, lambda: tf_ucudnn.conv2d(x, w, s, c["padding"], dilations=d)


@settings(max_examples=int(sys.argv[1]), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def check(c):
    print("CASE", c, flush=True)
    want, call = run(c)
    if call is None:
        return
    try:
        with tf.device("/CPU:0"):
            got = tf.function(call)() if c["graph"] else call()
    except (tf.errors.InvalidArgumentError, ValueError) as e:
        assert str(e), c
        return
    elements = 1
    for v in got.shape:
        elements *= v
    assert elements <= INT64_MAX, (c, got.shape)
    if want is not None:
        assert list(got.shape) == want, (c, got.shape, want)


check()
print("ALL PASSED")
'''


class ShapeLimitsFuzzTest(tf.test.TestCase):

    def test_sizes_near_the_int32_and_int64_limits_never_crash(self):
        done = subprocess.run([sys.executable, "-c", _LIMITS_CHILD, "300"], cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3",
                                       UCUDNN_DATABASE="off"),
                              capture_output=True, text=True, timeout=900)
        cases = [line for line in done.stdout.splitlines() if line.startswith("CASE")]
        signal = f" (killed by signal {-done.returncode})" if done.returncode < 0 else ""
        self.assertEqual(done.returncode, 0,
                         f"exit {done.returncode}{signal} after {len(cases)} cases, the last "
                         f"{cases[-1:]}\nstderr: {done.stderr[-3000:]}")
        self.assertIn("ALL PASSED", done.stdout)
        self.assertGreaterEqual(len(cases), 300)
