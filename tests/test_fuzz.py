"""Property-based fuzzing on the CPU: every input either matches TF's convolution
or raises InvalidArgumentError / ValueError; nothing crashes or hangs."""

import numpy as np
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tf_ucudnn
from testing_utils import reference_conv2d, rel_l2


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
