"""tf_ucudnn.plans(): what the CPU kernels record, and how it prints.

A kernel records its plan once per process (per pass, convolution and forced
micro-batch size), so each test runs a convolution of its own (a width no other
test uses) after clear_plans().
"""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tf_ucudnn
from tf_ucudnn import plan_registry

PASSES = ("forward", "backward-data", "backward-filter")


def run_all_passes(batch, width, dtype=tf.float32, data_format="NHWC", **knobs):
    """Forward and both gradients of a 3x3 SAME convolution on the CPU; returns its records."""
    tf_ucudnn.clear_plans()
    shape = (batch, 4, width, 2) if data_format == "NHWC" else (batch, 2, 4, width)
    x = tf.constant(np.ones(shape), dtype)
    w = tf.constant(np.ones((3, 3, 2, 2)), dtype)
    with tf.device("/CPU:0"), tf.GradientTape() as tape:
        tape.watch([x, w])
        y = tf_ucudnn.conv2d(x, w, 1, "SAME", data_format, **knobs)
    tape.gradient(y, [x, w])
    return [r for r in tf_ucudnn.plans() if f" W={width} " in r["shape"]]


class CpuPlanRecordsTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("n5_k2_leaves_a_remainder", 5, 2, [2, 2, 1], 101),
        ("n6_k3_divides", 6, 3, [3, 3], 102),
        ("n5_k1_one_sample_each", 5, 1, [1, 1, 1, 1, 1], 103),
        ("n3_k8_larger_than_the_batch", 3, 8, [3], 104),
    )
    def test_forced_micro_batch_size_is_the_recorded_split(self, batch, k, sizes, width):
        records = run_all_passes(batch, width, micro_batch_size=k)
        self.assertCountEqual([r["pass"] for r in records], PASSES)
        for r in records:
            got = [m["size"] for m in r["micro_batches"]]
            self.assertEqual(got, sizes, f"{r['pass']}: N={batch}, k={k} recorded {got}")
            self.assertEqual(r["policy"], f"forced {k}")
            self.assertEqual(r["batch"], batch)
            self.assertEqual(r["workspace_bytes"], 0, "the CPU needs no workspace")
            self.assertIsNone(r["time_ms"], "the CPU plan is not benchmarked")
            self.assertTrue(r["device"].endswith("CPU:0"), r["device"])

    def test_unforced_cpu_plan_is_the_whole_batch(self):
        records = run_all_passes(7, 105)
        self.assertLen(records, 3)
        for r in records:
            self.assertEqual([m["size"] for m in r["micro_batches"]], [7])
            self.assertEqual(r["policy"], "undivided (CPU)")
            self.assertIsNone(r["planning_ms"])  # measured on the GPU only

    @parameterized.parameters(("NHWC", tf.float32, "float32"), ("NCHW", tf.bfloat16, "bfloat16"),
                              ("NHWC", tf.float16, "float16"))
    def test_record_describes_the_convolution(self, data_format, dtype, dtype_name):
        width = {"float32": 106, "bfloat16": 107, "float16": 108}[dtype_name]
        records = run_all_passes(2, width, dtype, data_format, workspace_limit=4096)
        self.assertLen(records, 3)
        for r in records:
            self.assertEqual((r["layout"], r["dtype"], r["workspace_limit"]),
                             (data_format, dtype_name, 4096))
            self.assertIn(f"N=2 C=2 H=4 W={width} K=2 R=3 S=3 stride=1x1 pad=1,1,1,1", r["shape"])

    def test_plans_print_as_a_table_with_pass_names(self):
        run_all_passes(5, 109, micro_batch_size=2)
        table = tf_ucudnn.plans().to_string(max_width=None)  # one line per record
        lines = table.splitlines()
        self.assertEqual(lines[0].split()[:4], ["device", "pass", "convolution", "micro-batches"])
        self.assertTrue(set(lines[1]) <= {"-", " "}, f"rule line: {lines[1]!r}")
        self.assertLen(lines, 2 + 3, table)
        for name in PASSES:
            self.assertIn(name, table)
        self.assertIn("2x2 im2col-gemm + 1x1 im2col-gemm", table)  # runs of equal micro-batches
        self.assertIn("W=109", table)

    def test_printed_plans_fit_120_columns_and_keep_every_field(self):
        records = run_all_passes(5, 111, micro_batch_size=2)
        self.assertLen(records, 3)
        one_line = plan_registry.PlanTable(records).to_string(max_width=None)
        self.assertGreater(max(len(l) for l in one_line.splitlines()), 120, one_line)
        table = str(plan_registry.PlanTable(records))
        self.assertLessEqual(max(len(l) for l in table.splitlines()), 120, table)
        # Wrapping moves words to new lines and drops none (the rule line aside).
        without_rule = lambda text: sorted(  # noqa: E731
            " ".join(l for l in text.splitlines() if set(l) - {"-", " "}).split())
        self.assertEqual(without_rule(table), without_rule(one_line))

    def test_runs_of_equal_micro_batches_print_once_with_a_count(self):
        steps = [dict(size=32, algo="ALGO_1"), dict(size=32, algo="ALGO_1"),
                 dict(size=32, algo="ALGO_0"), dict(size=4, algo="ALGO_0")]
        self.assertEqual(plan_registry.describe_micro_batches(steps),
                         "2x32 ALGO_1 + 1x32 ALGO_0 + 1x4 ALGO_0")

    @parameterized.parameters((0, "0 B"), (512, "512 B"), (3 << 10, "3 KiB"),
                              (64 << 20, "64 MiB"), (3 << 19, "1.5 MiB"), (5 << 30, "5 GiB"),
                              (3 << 40, "3072 GiB"))
    def test_format_bytes(self, n, text):
        self.assertEqual(plan_registry.format_bytes(n), text)

    def test_clear_plans_forgets_the_records(self):
        run_all_passes(2, 110)
        self.assertNotEmpty(tf_ucudnn.plans())
        tf_ucudnn.clear_plans()
        self.assertEqual(tf_ucudnn.plans(), [])
        self.assertEqual(str(tf_ucudnn.plans()), "(no convolution has run through tf_ucudnn yet)")
