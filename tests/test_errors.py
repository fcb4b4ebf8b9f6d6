"""Bad inputs raise ValueError (found in Python) or InvalidArgumentError (found by
the kernel) with a message that names the problem."""

import os

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from tf_ucudnn._engine import ops as raw_ops
from tf_ucudnn.units import AUTO_WORKSPACE_LIMIT, parse_bytes

X = np.ones((2, 6, 6, 4), np.float32)      # NHWC
W = np.ones((3, 3, 2, 4), np.float32)      # groups = 4 / 2 = 2


def conv(x=X, w=W, strides=1, padding="SAME", **kwargs):
    with tf.device("/CPU:0"):
        return tf_ucudnn.conv2d(x, w, strides, padding, **kwargs)


def raw_conv(**attrs):
    with tf.device("/CPU:0"):
        return raw_ops.ucudnn_conv2d(input=X, filter=W, **{"strides": [1, 1, 1, 1],
                                                          "padding": "SAME", **attrs})


class BadInputsTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("channels_not_a_multiple_of_filter_in_channels",
         lambda: conv(x=np.ones((2, 6, 6, 5), np.float32)),
         r"input channels \(5\) must be a multiple of the filter's in_channels \(2\)"),
        ("out_channels_not_divisible_by_groups",
         lambda: conv(w=np.ones((3, 3, 2, 3), np.float32)),
         r"out_channels \(3\) must be a multiple of groups \(2\)"),
        ("batch_stride", lambda: conv(strides=[2, 1, 1, 1]),
         "strides in the batch and channel dimensions must be 1"),
        ("channel_dilation", lambda: conv(dilations=[1, 1, 1, 2]),
         "dilations in the batch and channel dimensions must be 1"),
        ("zero_stride", lambda: conv(strides=0), "strides must be positive"),
        ("filter_larger_than_input", lambda: conv(padding="VALID", dilations=3),
         r"the dilated filter \(7x7\) is larger than the padded input \(6x6\)"),
        ("backprop_input_out_backprop_shape",
         lambda: tf_ucudnn.conv2d_backprop_input([2, 6, 6, 4], W,
                                                 np.ones((2, 5, 6, 4), np.float32), 1, "SAME"),
         r"out_backprop has shape \[2,5,6,4\] but the convolution's output shape is \[2,6,6,4\]"),
        ("backprop_filter_out_backprop_shape",
         lambda: tf_ucudnn.conv2d_backprop_filter(X, [3, 3, 2, 4],
                                                  np.ones((2, 6, 6, 8), np.float32), 1, "SAME"),
         "out_backprop has shape"),
        ("raw_op_input_sizes_not_4",
         lambda: raw_ops.ucudnn_conv2d_backprop_input(
             input_sizes=[2, 6, 6], filter=W, out_backprop=np.ones((2, 6, 6, 4), np.float32),
             strides=[1, 1, 1, 1], padding="SAME"),
         "input_sizes must be a 1-D tensor of 4 sizes"),
        ("raw_op_unknown_policy", lambda: raw_conv(batch_size_policy="bogus"),
         "batch_size_policy must be one of undivided, powerOfTwo, all.*got 'bogus'"),
        ("raw_op_negative_workspace_limit", lambda: raw_conv(workspace_limit=-5),
         "workspace_limit must be a non-negative number of bytes.*got -5"),
        ("raw_op_negative_micro_batch_size", lambda: raw_conv(micro_batch_size=-2),
         "micro_batch_size must be 0 .* or positive, got -2"),
        ("raw_op_explicit_paddings_without_explicit", lambda: raw_conv(explicit_paddings=[0] * 8),
         "explicit_paddings must be empty unless padding is EXPLICIT"),
        ("raw_op_explicit_paddings_of_6",
         lambda: raw_conv(padding="EXPLICIT", explicit_paddings=[0] * 6),
         "explicit_paddings must have 8 elements"),
        ("raw_op_strides_of_3", lambda: raw_conv(strides=[1, 1, 1]),
         "strides must have 4 elements"),
    )
    def test_kernel_rejects_with_invalid_argument(self, call, message):
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            call()

    @parameterized.named_parameters(
        ("negative_workspace_limit", lambda: conv(workspace_limit=-1), "workspace_limit"),
        ("unknown_policy", lambda: conv(batch_size_policy="bogus"), "batch_size_policy"),
        ("negative_micro_batch_size", lambda: conv(micro_batch_size=-1), "micro_batch_size"),
        ("rank_3_input", lambda: conv(x=np.ones((6, 6, 4), np.float32)),
         "input must be 4-dimensional"),
        ("rank_5_filter", lambda: conv(w=np.ones((1, 3, 3, 2, 4), np.float32)),
         "filters must be 4-dimensional"),
        ("unknown_padding", lambda: conv(padding="FULL"), "padding must be 'SAME', 'VALID'"),
        ("explicit_padding_of_batch",
         lambda: conv(padding=[[1, 0], [0, 0], [0, 0], [0, 0]]),
         "explicit padding of the batch and channel dimensions must be"),
        ("explicit_padding_negative", lambda: conv(padding=[[0, 0], [-1, 0], [0, 0], [0, 0]]),
         "explicit padding must be non-negative"),
        ("explicit_padding_of_3_pairs", lambda: conv(padding=[[0, 0], [1, 1], [1, 1]]),
         "explicit padding must have 4"),
        ("unknown_data_format", lambda: conv(data_format="NCWH"), "data_format must be"),
        ("strides_of_3", lambda: conv(strides=[1, 2, 1]), "strides must be an int or a list"),
        ("float64_input", lambda: conv(x=X.astype(np.float64)),
         r"^input must be float32, float16 or bfloat16 \(the dtypes of tf_ucudnn's kernels\), "
         r"got float64"),
        ("int_input", lambda: conv(x=tf.ones((2, 6, 6, 4), tf.int32)),
         r"^input must be float32, float16 or bfloat16 .*got int32"),
        ("no_input", lambda: conv(x=None), r"^input must be a float32, float16 or bfloat16 "
                                            r"tensor, got NoneType"),
        ("filters_of_another_dtype", lambda: conv(w=tf.constant(W, tf.float16)),
         r"^filters must have the input's dtype float32, got float16"),
        ("bias_of_another_dtype", lambda: conv(bias=tf.ones((4,), tf.float64)),
         r"^bias must have the input's dtype float32, got float64"),
        ("backprop_input_sizes_not_4",
         lambda: tf_ucudnn.conv2d_backprop_input([2, 6, 6], W, np.ones((2, 6, 6, 4), np.float32),
                                                 1, "SAME"),
         r"^input_sizes must be 4 sizes \(a list or 1-D tensor, in data_format order\), "
         r"got \[2, 6, 6\]"),
        ("backprop_filter_sizes_of_2x2",
         lambda: tf_ucudnn.conv2d_backprop_filter(X, [[3, 3], [2, 4]],
                                                  np.ones((2, 6, 6, 4), np.float32), 1, "SAME"),
         r"^filter_sizes must be 4 sizes"),
        ("transpose_output_shape_not_4",
         lambda: tf_ucudnn.conv2d_transpose(X, W, [2, 6, 6], 1),
         r"^output_shape must be 4 sizes .*got \[2, 6, 6\]"),
        ("divide_workspace_budget_of_a_string",
         lambda: tf_ucudnn.divide_workspace_budget("x", "64MiB", 8),
         r"^divide_workspace_budget needs a keras.Model, got builtins.str: 'x'"),
        ("backprop_input_float64_out_backprop",
         lambda: tf_ucudnn.conv2d_backprop_input([2, 6, 6, 4], W.astype(np.float64),
                                                 np.ones((2, 6, 6, 4), np.float64), 1, "SAME"),
         r"^out_backprop must be float32, float16 or bfloat16 .*got float64"),
        ("backprop_input_filters_of_another_dtype",
         lambda: tf_ucudnn.conv2d_backprop_input([2, 6, 6, 4], tf.constant(W, tf.bfloat16),
                                                 np.ones((2, 6, 6, 4), np.float32), 1, "SAME"),
         r"^filters must have the out_backprop's dtype float32, got bfloat16"),
        ("backprop_filter_float64_input",
         lambda: tf_ucudnn.conv2d_backprop_filter(X.astype(np.float64), [3, 3, 2, 4],
                                                  np.ones((2, 6, 6, 4), np.float64), 1, "SAME"),
         r"^input must be float32, float16 or bfloat16 .*got float64"),
        ("backprop_filter_out_backprop_of_another_dtype",
         lambda: tf_ucudnn.conv2d_backprop_filter(X, [3, 3, 2, 4],
                                                  tf.ones((2, 6, 6, 4), tf.float16), 1, "SAME"),
         r"^out_backprop must have the input's dtype float32, got float16"),
        ("transpose_float64_input",
         lambda: tf_ucudnn.conv2d_transpose(X.astype(np.float64), W, [2, 6, 6, 2], 1),
         r"^input must be float32, float16 or bfloat16"),
    )
    def test_python_rejects_with_value_error(self, call, message):
        with self.assertRaisesRegex(ValueError, message):
            call()

    @parameterized.parameters(3, 5)
    def test_unknown_rank_input_reaching_the_kernel_must_be_4d(self, rank):
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
        def f(x):
            return tf_ucudnn.conv2d(x, W, 1, "SAME")

        with tf.device("/CPU:0"):
            self.assertEqual(f(X).shape, (2, 6, 6, 4))  # the function itself works
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                        r"input must be 4-dimensional \(NHWC\), got shape"):
                f(np.ones((2,) * (rank - 1) + (4,), np.float32))

    def test_channel_mismatch_found_while_tracing_names_depths(self):
        # In a graph, TF's shape function sees the mismatch before the kernel.
        @tf.function
        def f(x):
            return tf_ucudnn.conv2d(x, W, 1, "SAME")

        with self.assertRaisesRegex(ValueError, r"Depth of input \(5\) is not a multiple of "
                                                r"input depth of filter \(2\)"):
            f(np.ones((2, 6, 6, 5), np.float32))

    def test_float64_is_not_a_supported_dtype(self):
        with self.assertRaisesRegex(ValueError, "input must be float32, float16 or bfloat16"):
            conv(x=X.astype(np.float64), w=W.astype(np.float64))

    def test_numpy_filters_and_bias_take_the_inputs_dtype(self):
        # Python and NumPy values are converted, as tf.nn.conv2d's are.
        got = conv(w=W.astype(np.float64), bias=[0.0] * 4)
        self.assertAllClose(got, conv())

    def test_infinite_workspace_limit_raises_value_error(self):
        with self.assertRaisesRegex(ValueError, "workspace_limit"):
            conv(workspace_limit=float("inf"))


class EnvironmentDefaultsTest(tf.test.TestCase):
    """UCUDNN_DEFAULT_WORKSPACE_LIMIT / UCUDNN_BATCH_SIZE_POLICY are read when a
    kernel is constructed, i.e. the first time an op with these attrs runs: each
    test uses explicit paddings no other test uses, so that its kernel is new."""

    def setEnv(self, name, value):
        old = os.environ.get(name)
        os.environ[name] = value
        self.addCleanup(lambda: os.environ.pop(name) if old is None
                        else os.environ.__setitem__(name, old))

    def test_default_workspace_limit_comes_from_the_environment(self):
        self.setEnv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "12345")
        tf_ucudnn.clear_plans()
        conv(x=np.ones((3, 6, 6, 4), np.float32), padding=[[0, 0], [5, 1], [1, 5], [0, 0]])
        limits = {r["workspace_limit"] for r in tf_ucudnn.plans()}
        self.assertEqual(limits, {12345})

    def test_bad_workspace_limit_in_the_environment_is_invalid_argument(self):
        self.setEnv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "lots")
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    "UCUDNN_DEFAULT_WORKSPACE_LIMIT must be a byte count such "
                                    r"as 67108864, 64MiB or 1GiB \(binary units B, KiB, MiB, "
                                    r"GiB\) or auto; got 'lots'"):
            conv(padding=[[0, 0], [5, 2], [2, 5], [0, 0]])

    def test_workspace_limit_in_the_environment_takes_the_arguments_units(self):
        # The forms of workspace_limit="12KiB" (tf_ucudnn.units.parse_bytes).
        self.setEnv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", " 12 KiB ")
        tf_ucudnn.clear_plans()
        conv(x=np.ones((3, 6, 6, 4), np.float32), padding=[[0, 0], [5, 9], [9, 5], [0, 0]])
        limits = {r["workspace_limit"] for r in tf_ucudnn.plans()}
        self.assertEqual(limits, {parse_bytes(" 12 KiB ")})
        self.assertEqual(limits, {12 << 10})

    def test_auto_in_the_environment_is_the_ops_auto_limit(self):
        self.setEnv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "auto")
        tf_ucudnn.clear_plans()
        conv(x=np.ones((3, 6, 6, 4), np.float32), padding=[[0, 0], [5, 3], [3, 5], [0, 0]])
        limits = {r["workspace_limit"] for r in tf_ucudnn.plans()}
        self.assertEqual(limits, {AUTO_WORKSPACE_LIMIT})

    def test_bad_policy_in_the_environment_is_invalid_argument(self):
        self.setEnv("UCUDNN_BATCH_SIZE_POLICY", "bogus")
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    "UCUDNN_BATCH_SIZE_POLICY must be one of .* got 'bogus'"):
            conv(padding=[[0, 0], [5, 3], [3, 5], [0, 0]])

    def test_bad_graph_search_knobs_in_the_environment_are_invalid_argument(self):
        # Each with its own padding: a new kernel, created with the bad value set.
        cases = [
            ("UCUDNN_GRAPH_PRUNE_FACTOR", "0.5",
             "UCUDNN_GRAPH_PRUNE_FACTOR must be 0 .* or a number >= 1; got '0.5'", 6),
            ("UCUDNN_GRAPH_SEARCH", "full",
             "UCUDNN_GRAPH_SEARCH must be one of default, wide, exhaustive; got 'full'", 7),
            ("UCUDNN_GRAPH_LAYOUTS", "NCHW",
             "UCUDNN_GRAPH_LAYOUTS must be one of both, native, transposed; got 'NCHW'", 8),
        ]
        for name, value, message, pad in cases:
            with self.subTest(name):
                self.setEnv(name, value)
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                    conv(padding=[[0, 0], [5, pad], [pad, 5], [0, 0]])
                self.setEnv(name, "")

    def test_explicit_knobs_ignore_the_environment(self):
        self.setEnv("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "lots")
        self.setEnv("UCUDNN_BATCH_SIZE_POLICY", "bogus")
        y = conv(padding=[[0, 0], [5, 4], [4, 5], [0, 0]], workspace_limit=0,
                 batch_size_policy="all")
        self.assertEqual(y.shape, (2, 13, 13, 4))


@pytest.mark.gpu
class CudnnErrorTest(tf.test.TestCase):
    """A convolution that cuDNN itself refuses becomes a TF error carrying cuDNN's
    status string; the process goes on and later convolutions work (GPU)."""

    def test_cudnn_refusal_is_a_tf_error_with_the_status_string(self):
        # One undivided micro-batch of 2050 x 64 x 64 x 256 half values: over
        # the 2^31 elements cuDNN's tensor descriptors allow, while every
        # dimension is within the kernel's own int32 checks.
        with tf.device("/GPU:0"):
            x = tf.zeros([2050, 64, 64, 256], tf.float16)
            w = tf.zeros([1, 1, 256, 8], tf.float16)
            with self.assertRaisesRegex(tf.errors.InternalError, r"cuDNN error .*CUDNN_STATUS_"):
                tf_ucudnn.conv2d(x, w, 1, "VALID", batch_size_policy="undivided")
            del x
            small = tf_ucudnn.conv2d(tf.ones([2, 6, 6, 4]), tf.ones([3, 3, 4, 4]), 1, "SAME")
        self.assertAllClose(small[0, 2, 2], [36.0] * 4)
