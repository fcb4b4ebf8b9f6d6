"""Byte counts: one parser for the command line and the Python API."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from tf_ucudnn import cli_args, nn, units

MiB = 1 << 20


class ParseBytesTest(parameterized.TestCase):

    @parameterized.parameters(("67108864", 64 * MiB), ("64MiB", 64 * MiB), ("64 MiB", 64 * MiB),
                              (" 64mib ", 64 * MiB), ("64M", 64 * MiB), ("1GiB", 1 << 30),
                              ("1.5KiB", 1536), ("0", 0), ("100B", 100))
    def test_accepts_binary_units(self, text, want):
        self.assertEqual(units.parse_bytes(text), want)

    @parameterized.parameters("64MB", "1GB", "lots", "-1", "1.5B", "", "64 MiB extra")
    def test_rejects_decimal_units_and_garbage(self, text):
        with self.assertRaises(ValueError):
            units.parse_bytes(text)


class ToBytesTest(parameterized.TestCase):

    @parameterized.parameters(("64MiB", 64 * MiB), (64 * MiB, 64 * MiB),
                              (np.int64(1 << 20), MiB), (np.uint32(7), 7), (6.4e7, 64_000_000),
                              (0, 0), ((1 << 63) - 1, (1 << 63) - 1))
    def test_accepts_strings_ints_numpy_ints_and_integral_floats(self, value, want):
        got = units.to_bytes(value, "workspace_limit")
        self.assertEqual(got, want)
        self.assertIs(type(got), int)

    @parameterized.parameters("64MB", "lots", -1, 0.5, float("inf"), float("nan"), True, None,
                              1 << 63, ([64],))  # a list: wrapped, not the arguments
    def test_rejects_with_a_value_error_naming_the_argument(self, value):
        with self.assertRaisesRegex(ValueError, "^total_workspace "):
            units.to_bytes(value, "total_workspace")


class CommandLineAndPythonAgreeTest(parameterized.TestCase, tf.test.TestCase):
    """What `--workspace-limit TEXT` accepts, `workspace_limit=TEXT` accepts, as the same bytes."""

    @parameterized.parameters("64MiB", "1GiB", "67108864", "512 KiB")
    def test_same_bytes_from_the_command_line_and_every_python_entry(self, text):
        want = cli_args.byte_count(text)
        self.assertEqual(nn.ucudnn_attrs(workspace_limit=text)["workspace_limit"], want)
        layer = tf_ucudnn.layers.Conv2D(2, 3, workspace_limit=text)
        self.assertEqual(layer.get_config()["workspace_limit"], text)  # kept as given
        with tf_ucudnn.enable_rewrite(workspace_limit=text):
            self.assertEqual(tf_ucudnn.rewrite_settings().workspace_limit, want)
        with tf_ucudnn.enable_rewrite(total_workspace=text):
            self.assertEqual(tf_ucudnn.rewrite_settings().total_workspace, want)

    def test_the_op_gets_the_parsed_bytes(self):
        @tf.function
        def conv(x, w):
            return tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit="3MiB")

        graph = conv.get_concrete_function(tf.TensorSpec([1, 4, 4, 1]),
                                           tf.TensorSpec([1, 1, 1, 1])).graph
        ops = [op for op in graph.get_operations() if op.type == "Ucudnn>Conv2D"]
        self.assertLen(ops, 1)
        self.assertEqual(ops[0].get_attr("workspace_limit"), 3 * MiB)

    def test_a_layer_with_a_string_limit_runs(self):
        layer = tf_ucudnn.layers.Conv2D(2, 3, padding="same", workspace_limit="1MiB")
        self.assertEqual(layer(tf.ones([1, 5, 5, 1])).shape, (1, 5, 5, 2))

    def test_errors_name_the_python_argument(self):
        with self.assertRaisesRegex(ValueError, "workspace_limit"):
            tf_ucudnn.conv2d(tf.ones([1, 4, 4, 1]), tf.ones([1, 1, 1, 1]), 1, "SAME",
                             workspace_limit="64MB")
        with self.assertRaisesRegex(ValueError, "total_workspace"):
            tf_ucudnn.enable_rewrite(total_workspace="a lot")
        self.assertIsNone(tf_ucudnn.rewrite_settings())
        model = keras.Sequential([keras.Input((4, 4, 1)), tf_ucudnn.layers.Conv2D(1, 1)])
        with self.assertRaisesRegex(ValueError, "total_workspace"):
            tf_ucudnn.divide_workspace_budget(model, "64MB", 8)


class AutoWorkspaceLimitTest(parameterized.TestCase, tf.test.TestCase):
    """workspace_limit="auto": one value for every Python entry and the op."""

    @parameterized.parameters("auto", "AUTO", " auto ")
    def test_auto_is_the_ops_auto_attribute(self, text):
        self.assertEqual(units.to_workspace_limit(text), units.AUTO_WORKSPACE_LIMIT)
        self.assertEqual(nn.ucudnn_attrs(workspace_limit=text)["workspace_limit"],
                         units.AUTO_WORKSPACE_LIMIT)

    def test_bytes_still_parse_and_the_limit_prints_as_auto(self):
        self.assertEqual(units.to_workspace_limit("64MiB"), 64 * MiB)
        self.assertEqual(units.format_workspace_limit(units.AUTO_WORKSPACE_LIMIT), "auto")
        self.assertEqual(units.format_workspace_limit(64 * MiB), "64 MiB")

    @parameterized.parameters("automatic", -2, "-2")
    def test_anything_else_is_a_value_error_naming_auto(self, value):
        with self.assertRaisesRegex(ValueError, "workspace_limit.*'auto'"):
            units.to_workspace_limit(value)

    def test_the_op_gets_auto_and_the_rewrite_keeps_it(self):
        graph = tf.function(lambda x, w: tf_ucudnn.conv2d(
            x, w, 1, "SAME", workspace_limit="auto")).get_concrete_function(
                tf.TensorSpec([1, 4, 4, 1]), tf.TensorSpec([1, 1, 1, 1])).graph
        ops = [op for op in graph.get_operations() if op.type == "Ucudnn>Conv2D"]
        self.assertEqual(ops[0].get_attr("workspace_limit"), units.AUTO_WORKSPACE_LIMIT)
        with tf_ucudnn.enable_rewrite(workspace_limit="auto"):
            self.assertEqual(tf_ucudnn.rewrite_settings().workspace_limit, "auto")
        with self.assertRaisesRegex(ValueError, "not both"):
            tf_ucudnn.enable_rewrite(workspace_limit="auto", total_workspace="1GiB")

    def test_the_raw_op_refuses_auto_with_a_total(self):
        from tf_ucudnn._engine import ops
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "auto bytes per kernel"):
            ops.ucudnn_conv2d(input=tf.ones([1, 4, 4, 1]), filter=tf.ones([1, 1, 1, 1]),
                              strides=[1, 1, 1, 1], padding="SAME",
                              workspace_limit=units.AUTO_WORKSPACE_LIMIT, total_workspace=MiB)
