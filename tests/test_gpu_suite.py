"""tests/gpu_suite.py (make test-gpu): how the GPU suite is split over GPUs."""

import unittest

import gpu_suite


class GpuSuitePlanTest(unittest.TestCase):

    FILES = ["test_a.py", "test_b.py", "test_graph_engines.py", "test_xla.py",
             "test_multi_gpu.py", "test_benchmark_devices.py", "test_rewrite.py"]

    def test_one_gpu_or_none_runs_everything_as_one_part(self):
        self.assertEqual(gpu_suite.plan(self.FILES, []), [("all", None, sorted(self.FILES))])
        self.assertEqual(gpu_suite.plan(self.FILES, ["3"]), [("all", "3", sorted(self.FILES))])

    def test_several_gpus_get_a_part_each_then_the_two_gpu_tests_run_on_the_first_two(self):
        parts = gpu_suite.plan(self.FILES, ["4", "5", "6"])
        self.assertEqual([(name, gpu) for name, gpu, _ in parts],
                         [("part0", "4"), ("part1", "5"), ("part2", "6"), ("two_gpus", "4,5")])
        self.assertEqual(parts[-1][2], ["test_benchmark_devices.py", "test_multi_gpu.py"])
        single = [f for _, _, names in parts[:-1] for f in names]
        self.assertCountEqual(single, [f for f in self.FILES if f not in gpu_suite.TWO_GPUS])
        # The two heaviest files are in parts of their own.
        self.assertIn(["test_graph_engines.py"], [names for _, _, names in parts])
        self.assertIn(["test_xla.py"], [names for _, _, names in parts])

    def test_the_split_balances_the_weights(self):
        files = [f"test_{i:02d}.py" for i in range(20)] + ["test_graph_engines.py"]
        parts = gpu_suite.split(files, 4)
        weights = [sum(gpu_suite.WEIGHTS.get(f, 0.5) for f in part) for part in parts]
        self.assertEqual(sum(len(p) for p in parts), len(files))
        self.assertLessEqual(max(weights[1:]) - min(weights[1:]), 0.5, weights)


if __name__ == "__main__":
    unittest.main()
