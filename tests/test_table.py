"""tf_ucudnn.table.render: the one table renderer, and the tables built on it."""

import math

import tensorflow as tf
from absl.testing import parameterized

from tf_ucudnn import table
from tf_ucudnn.division import DivisionReport, KernelShare

LONG_SHAPE = "N=256 C=64 H=56 W=56 K=64 R=3 S=3 stride=1x1 pad=1,1,1,1 dil=1x1 groups=1 NHWC float32"
LAYERS = ["stage1/block1/conv1", "stage1/block1/conv2", "stage1/block2/conv1",
          "stage1/block2/conv2"]


def widths(text):
    return [len(line) for line in text.splitlines()]


def words(text):
    """The words of a table, without its rule of dashes, in any order."""
    lines = text.splitlines()
    return sorted(" ".join(lines[:1] + lines[2:]).split())


class RenderTest(parameterized.TestCase):

    def test_header_rule_rows_and_alignment(self):
        text = table.render(("name", "ms"), [("forward", "1.5"), ("backward-data", "10.25")],
                            align="lr")
        self.assertEqual(text.splitlines(), [
            "name              ms",
            "-------------  -----",
            "forward          1.5",
            "backward-data  10.25",
        ])

    def test_without_max_width_a_list_cell_stays_on_one_line(self):
        text = table.render(("a", "b"), [("x", LONG_SHAPE.split())])
        self.assertLen(text.splitlines(), 3)
        self.assertIn(LONG_SHAPE, text)

    @parameterized.parameters(40, 60, 80)
    def test_list_cells_wrap_to_fit_max_width_and_keep_every_piece(self, max_width):
        rows = [("GPU:0", LONG_SHAPE.split(), "1.000"), ("CPU:0", ["short"], "-")]
        text = table.render(("device", "convolution", "ms"), rows, align="llr",
                            max_width=max_width)
        self.assertLessEqual(max(widths(text)), max_width, text)
        self.assertGreater(len(text.splitlines()), 4)
        words = text.split()[6:]  # after the header and the rule
        self.assertCountEqual(words, ["GPU:0", *LONG_SHAPE.split(), "1.000", "CPU:0", "short",
                                      "-"])

    def test_a_column_never_narrows_below_its_longest_piece(self):
        text = table.render(("a", "b"), [("x", ["abcdefghij", "k"])], max_width=5)
        self.assertIn("abcdefghij", text)
        self.assertEqual(max(widths(text)), len("x") + 2 + len("abcdefghij"))

    def test_string_cells_do_not_wrap(self):
        text = table.render(("a",), [(LONG_SHAPE,)], max_width=20)
        self.assertIn(LONG_SHAPE, text)

    def test_bad_rows_and_alignments_raise_value_error(self):
        with self.assertRaisesRegex(ValueError, "every row needs 2 cells"):
            table.render(("a", "b"), [("x",)])
        with self.assertRaisesRegex(ValueError, "align"):
            table.render(("a", "b"), [("x", "y")], align="lc")
        with self.assertRaisesRegex(ValueError, "align"):
            table.render(("a", "b"), [("x", "y")], align="l")


class DivisionReportTableTest(tf.test.TestCase):

    def report(self, time_ms):
        micro = [dict(size=128, algo="IMPLICIT_PRECOMP_GEMM/tensor-op",
                      workspace_bytes=1 << 20, time_ms=1.0)] * 2 + [
                     dict(size=64, algo="WINOGRAD_NONFUSED/default",
                          workspace_bytes=3 << 20, time_ms=0.5)]
        share = KernelShare(layers=LAYERS, pass_name="forward",
                            shape=LONG_SHAPE, micro_batches=micro, workspace_bytes=3 << 20,
                            time_ms=time_ms, fastest_ms=time_ms, fastest_workspace_bytes=8 << 20)
        return DivisionReport(total_workspace=64 << 20, batch_size=320, kernels=[share])

    def test_fits_120_columns_with_every_field(self):
        report = self.report(2.5)
        text = str(report)
        self.assertLessEqual(max(widths(text)), 120, text)
        one_line = report.to_string(max_width=None)
        self.assertGreater(max(widths(one_line)), 120)
        self.assertEqual(words(text), words(one_line))
        self.assertIn("total: 3 MiB of 64 MiB workspace, 2.500 ms predicted, batch 320", text)

    def test_no_time_prints_a_dash_not_nan(self):
        text = str(self.report(math.nan))
        self.assertNotIn("nan", text)
        self.assertIn("- (8 MiB)", text)
