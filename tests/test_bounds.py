"""Integer arguments beyond int64 (or int32 for the size
tensors) and non-integers are ValueErrors that name the argument, never an
OverflowError, a silent truncation (3.5 -> 3) or a wrap (2**64 + 8 -> 8)."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from tf_ucudnn import division, planner

X = np.ones((2, 6, 6, 4), np.float32)      # NHWC
W = np.ones((3, 3, 4, 4), np.float32)
DY = np.ones((2, 6, 6, 4), np.float32)     # SAME, stride 1
TABLE = {1: [("a", 1.0, 0)], 2: [("b", 1.5, 0)]}


def conv(**kwargs):
    args = dict(strides=1, padding="SAME")
    args.update(kwargs)
    with tf.device("/CPU:0"):
        return tf_ucudnn.conv2d(X, W, **args)


def backprop_filter(filter_sizes):
    with tf.device("/CPU:0"):
        return tf_ucudnn.conv2d_backprop_filter(X, filter_sizes, DY, 1, "SAME")


def backprop_input(input_sizes):
    with tf.device("/CPU:0"):
        return tf_ucudnn.conv2d_backprop_input(input_sizes, W, DY, 1, "SAME")


class BoundsTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("strides_2_64", lambda: conv(strides=2 ** 64), r"^strides must be a whole number"),
        ("strides_element_2_64", lambda: conv(strides=[1, 2 ** 64]), r"^strides\[1\] must be"),
        ("dilations_2_63", lambda: conv(dilations=2 ** 63), r"^dilations must be a whole number"),
        ("dilations_fraction", lambda: conv(dilations=[1, 1.5]), r"^dilations must be an int or a list"),
        ("padding_2_64", lambda: conv(padding=[[0, 0], [2 ** 64, 0], [0, 0], [0, 0]]),
         r"^explicit padding\[1\]\[0\] must be a whole number"),
        ("padding_fraction", lambda: conv(padding=[[0, 0], [1, 1.5], [0, 0], [0, 0]]),
         r"^explicit padding\[1\]\[1\] must be an int, got 1.5"),
        ("micro_batch_size_2_64", lambda: conv(micro_batch_size=2 ** 64), r"^micro_batch_size"),
        ("layer_micro_batch_size_2_64",
         lambda: tf_ucudnn.layers.Conv2D(4, 3, micro_batch_size=2 ** 64), r"^micro_batch_size"),
        ("filter_sizes_fraction", lambda: backprop_filter([3.5, 3, 4, 4]),
         r"^filter_sizes\[0\] must be an int, got 3.5"),
        ("filter_sizes_float_array", lambda: backprop_filter(np.array([3, 3, 4.25, 4])),
         r"^filter_sizes\[0\] must be an int, got .*3\.0"),
        ("filter_sizes_whole_float", lambda: backprop_filter([3.0, 3, 4, 4]),
         r"^filter_sizes\[0\] must be an int, got 3.0"),
        ("filter_sizes_beyond_int32", lambda: backprop_filter([2 ** 32 + 3, 3, 4, 4]),
         r"^filter_sizes\[0\] must be a whole number in \[-2\*\*31, 2\*\*31 - 1\], got 4294967299"),
        ("filter_sizes_beyond_int64", lambda: backprop_filter([3, 3, 4, 2 ** 64]),
         r"^filter_sizes\[3\] must be"),
        ("input_sizes_beyond_int32", lambda: backprop_input([2 ** 32 + 2, 6, 6, 4]),
         r"^input_sizes\[0\] must be a whole number"),
        ("input_sizes_float_constant", lambda: backprop_input(tf.constant([2.0, 6, 6, 4])),
         r"^input_sizes\[0\] must be an int"),
        ("table_key_2_64_plus_8", lambda: planner.best_plan({2 ** 64 + 8: [("a", 1.0, 0)]}, 8, 0),
         r"^table keys must be positive micro-batch sizes \(at most 2\*\*63 - 1\)"),
        ("front_table_key_2_64", lambda: planner.pareto_front({2 ** 64: [("a", 1.0, 0)]}, 1),
         r"^table keys"),
        ("batch_size_2_64", lambda: planner.micro_batch_sizes("all", 2 ** 64), r"^batch_size"),
        ("best_plan_batch_size_2_64", lambda: planner.best_plan(TABLE, 2 ** 64, 0), r"^batch_size"),
        ("kernel_id_2_64", lambda: division.set_kernel_limit(2 ** 64, 0), r"^kernel_id must be"),
    )
    def test_value_error_names_the_argument(self, call, message):
        with self.assertRaisesRegex(ValueError, message):
            call()

    def test_float_sizes_tensor_known_only_at_run_time_is_rejected_when_traced(self):
        fn = tf.function(backprop_filter, input_signature=[tf.TensorSpec([4], tf.float32)])
        with self.assertRaisesRegex(ValueError, "filter_sizes must be an integer tensor, got float32"):
            fn.get_concrete_function()

    def test_numpy_and_tensor_integers_are_accepted(self):
        want = conv()
        self.assertAllEqual(conv(strides=[np.int64(1)], dilations=[np.int32(1), 1]), want)
        self.assertAllEqual(conv(padding=[[0, 0], [np.int32(1), 1], [1, np.int64(1)], [0, 0]]), want)
        dw = backprop_filter([3, 3, 4, 4])
        self.assertAllEqual(backprop_filter(np.array([3, 3, 4, 4], np.int64)), dw)
        self.assertAllEqual(backprop_filter(tf.constant([3, 3, 4, 4], tf.int64)), dw)
        # An int64 tensor known only when the op runs is cast (saturating) to int32.
        fn = tf.function(backprop_filter, input_signature=[tf.TensorSpec([4], tf.int64)])
        self.assertAllEqual(fn(tf.constant([3, 3, 4, 4], tf.int64)), dw)
        self.assertEqual(planner.best_plan({np.int64(2): [("b", 1.5, 0)]}, np.int64(2), 0).sizes, [2])
