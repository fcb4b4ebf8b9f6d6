"""The public API's docstrings say what the code does: every argument whose
bad value raises is in Raises, every field a record or report has is
described with its unit, and the knobs read the same everywhere."""

import dataclasses
import inspect

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from tf_ucudnn import division, layers

X = np.ones((2, 6, 6, 4), np.float32)  # NHWC
W = np.ones((3, 3, 4, 4), np.float32)


def section(obj, name):
    """The text of a Google-style docstring section (``Raises``, ``Args``, ...)."""
    lines = inspect.getdoc(obj).splitlines()
    start = lines.index(f"{name}:")
    body = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break
        body.append(line)
    return "\n".join(body)


def argument_text(obj, name):
    """What the Args section says about one argument (up to the next one)."""
    args = section(obj, "Args").splitlines()
    first = next(i for i, line in enumerate(args) if line.strip().startswith(f"{name}:"))
    indent = len(args[first]) - len(args[first].lstrip())
    text = [args[first]]
    for line in args[first + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        text.append(line)
    return " ".join(line.strip() for line in text)


class Conv2dRaisesTest(parameterized.TestCase, tf.test.TestCase):
    """Each argument that conv2d refuses with ValueError is named in its Raises."""

    @parameterized.parameters(
        ("input", dict(input=X.astype(np.float64))),
        ("filters", dict(filters=tf.constant(W, tf.float16))),
        ("bias", dict(bias=np.ones((4, 1), np.float32))),
        ("strides", dict(strides=[1, 2, 1])),
        ("dilations", dict(dilations=1.5)),
        ("padding", dict(padding="FULL")),
        ("data_format", dict(data_format="NWHC")),
        ("workspace_limit", dict(workspace_limit=-1)),
        ("batch_size_policy", dict(batch_size_policy="half")),
        ("micro_batch_size", dict(micro_batch_size=-1)),
        ("activation", dict(activation="gelu")),
    )
    def test_every_value_error_names_an_argument_that_raises_lists(self, argument, bad):
        kwargs = {**dict(input=X, filters=W, strides=1, padding="SAME"), **bad}
        with self.assertRaisesRegex(ValueError, argument):
            tf_ucudnn.conv2d(**kwargs)
        raises = section(tf_ucudnn.conv2d, "Raises")
        value_errors = raises.split("tf.errors.InvalidArgumentError:")[0]
        self.assertIn(f"``{argument}``", value_errors, raises)

    def test_run_time_errors_are_listed_as_invalid_argument(self):
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "strides must be positive"):
            tf_ucudnn.conv2d(X, W, 0, "SAME")
        raises = section(tf_ucudnn.conv2d, "Raises")
        run_time = " ".join(raises.split("tf.errors.InvalidArgumentError:")[1].split())
        for words in ("``strides``", "not positive", "batch and channel", "``bias`` whose length"):
            self.assertIn(words, run_time)


class MicroBatchSizeZeroTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("conv2d", tf_ucudnn.conv2d),
        ("layers_conv2d", layers.Conv2D),
        ("layers_conv2d_transpose", layers.Conv2DTranspose),
    )
    def test_the_docs_say_what_zero_means(self, obj):
        text = argument_text(obj, "micro_batch_size")
        self.assertIn("None or 0 (the same)", text)
        self.assertIn("the planner chooses", text)

    def test_zero_runs_as_none_does(self):
        for width in (31, 32):  # kernels of their own
            tf_ucudnn.clear_plans()
            x = np.ones((3, 4, width, 2), np.float32)
            with tf.device("/CPU:0"):
                tf_ucudnn.conv2d(x, np.ones((3, 3, 2, 2), np.float32), 1, "SAME",
                                 micro_batch_size=0 if width == 31 else None)
            (record,) = [r for r in tf_ucudnn.plans() if f" W={width} " in r["shape"]]
            self.assertEqual(record["policy"], "undivided (CPU)")
            self.assertEqual([m["size"] for m in record["micro_batches"]], [3])


class RecordFieldsTest(tf.test.TestCase):

    def test_plans_describes_every_field_of_a_record_and_of_a_micro_batch(self):
        tf_ucudnn.clear_plans()
        with tf.device("/CPU:0"):
            tf_ucudnn.conv2d(X, W, 1, "SAME", micro_batch_size=1)
        record = tf_ucudnn.plans()[0]
        returns = section(tf_ucudnn.plans, "Returns")
        for key in [*record, *record["micro_batches"][0]]:
            self.assertIn(f"``{key}``", returns)
        for key in ("workspace_limit", "workspace_bytes", "time_ms", "planning_ms"):
            line = next(line for line in returns.splitlines() if f"- ``{key}``" in line)
            self.assertRegex(line, r"\((int|float), (bytes|ms)\)")

    def test_division_report_and_kernel_share_describe_every_field_with_its_unit(self):
        for cls, properties in ((division.DivisionReport, ("workspace_bytes", "time_ms")),
                                (division.KernelShare, ())):
            attributes = section(cls, "Attributes")
            names = [f.name for f in dataclasses.fields(cls)] + list(properties)
            for name in names:
                with self.subTest(cls=cls.__name__, field=name):
                    self.assertIn(f"  {name}: ", attributes)
                    start = attributes.index(f"  {name}: ")
                    text = attributes[start:start + 200]
                    if name.endswith(("_bytes", "_workspace")):
                        self.assertRegex(text.split(":", 1)[1], r"bytes")
                    if name.endswith("_ms"):
                        self.assertRegex(text.split(":", 1)[1], r"\bms\b")

    def test_rewrite_stats_says_what_it_counts_over_and_how_to_reset(self):
        doc = inspect.getdoc(tf_ucudnn.rewrite_stats)
        for key in tf_ucudnn.rewrite_stats():
            self.assertIn(f"``{key}``", doc)
        for words in ("since the op library loaded", "in any thread", "instantiated",
                      "never reset", "difference of two calls"):
            self.assertIn(words, doc.replace("\n", " "))


class ArgumentErrorsDocumentedTest(tf.test.TestCase):

    def test_enable_rewrite_raises_lists_the_devices_errors(self):
        raises = " ".join(section(tf_ucudnn.enable_rewrite, "Raises").split())
        self.assertIn("``devices`` of another form", raises)
        self.assertIn("a device this process does not have", raises)

    def test_rewrite_model_raises_lists_a_non_model(self):
        raises = " ".join(section(tf_ucudnn.rewrite_model, "Raises").split())
        self.assertIn("``model`` is not a ``keras.Model``", raises)
