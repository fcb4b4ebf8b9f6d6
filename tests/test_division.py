"""Workspace Division: tf_ucudnn.planner.divide_workspace against brute force."""

import itertools
import time

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from tf_ucudnn import planner

MiB = 1 << 20


def random_front(rng, points):
    """A Pareto front: workspace ascending, time strictly decreasing."""
    workspace = np.sort(rng.choice(np.arange(0, 512), size=points, replace=False)) * MiB
    times = np.sort(rng.uniform(0.1, 10.0, size=points))[::-1]
    return [(float(t), int(w)) for t, w in zip(times, workspace)]


def brute_force(fronts, budget):
    """The least total time over every choice of one point per kernel within the budget."""
    best = None
    for choice in itertools.product(*fronts):
        if sum(w for _, w in choice) <= budget:
            t = sum(t for t, _ in choice)
            best = t if best is None else min(best, t)
    return best


class DivideWorkspaceTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(range(25))
    def test_matches_brute_force_on_random_instances(self, seed):
        rng = np.random.default_rng(seed)
        fronts = [random_front(rng, int(rng.integers(1, 5))) for _ in range(int(rng.integers(1, 5)))]
        least = sum(min(w for _, w in f) for f in fronts)
        most = sum(max(w for _, w in f) for f in fronts)
        for budget in sorted({least, (least + most) // 2, least + (most - least) // 5, most}):
            chosen = planner.divide_workspace(fronts, budget)
            self.assertLen(chosen, len(fronts))
            for point, front in zip(chosen, fronts):
                self.assertIn(point, front)
            used = sum(w for _, w in chosen)
            self.assertLessEqual(used, budget, f"budget {budget}: chose {chosen}")
            want = brute_force(fronts, budget)
            got = sum(t for t, _ in chosen)
            self.assertAllClose(got, want, rtol=1e-9, msg=f"budget {budget}: {got} vs brute force {want}")

    def test_budget_zero_takes_the_zero_workspace_points(self):
        fronts = [[(5.0, 0), (1.0, 10 * MiB)], [(3.0, 0), (2.0, 1 * MiB)]]
        self.assertEqual(planner.divide_workspace(fronts, 0), [(5.0, 0), (3.0, 0)])

    def test_budget_zero_without_zero_workspace_points_names_the_smallest_budget(self):
        fronts = [[(5.0, 2 * MiB), (1.0, 10 * MiB)], [(3.0, 1 * MiB)]]
        with self.assertRaisesRegex(ValueError, f"smallest feasible budget, {3 * MiB} bytes"):
            planner.divide_workspace(fronts, 0)

    def test_large_budget_takes_every_fastest_point(self):
        rng = np.random.default_rng(7)
        fronts = [random_front(rng, 4) for _ in range(6)]
        budget = sum(max(w for _, w in f) for f in fronts) * 2
        chosen = planner.divide_workspace(fronts, budget)
        self.assertEqual(chosen, [min(f) for f in fronts])

    def test_one_kernel_takes_its_fastest_point_within_the_budget(self):
        front = [(9.0, 0), (4.0, 32 * MiB), (2.0, 128 * MiB)]
        self.assertEqual(planner.divide_workspace([front], 64 * MiB), [(4.0, 32 * MiB)])

    def test_fronts_of_one_point(self):
        fronts = [[(1.0, 1 * MiB)], [(2.0, 2 * MiB)]]
        self.assertEqual(planner.divide_workspace(fronts, 3 * MiB), [(1.0, 1 * MiB), (2.0, 2 * MiB)])

    def test_accepts_plans_from_pareto_front(self):
        table = {2: [("slow", 4.0, 0), ("fast", 1.0, 100)], 1: [("slow", 2.5, 0), ("fast", 0.6, 40)]}
        fronts = [planner.pareto_front(table, 2), planner.pareto_front(table, 2)]
        chosen = planner.divide_workspace(fronts, 100)
        self.assertIsInstance(chosen[0], planner.Plan)
        self.assertLessEqual(sum(p.workspace_bytes for p in chosen), 100)
        # (1.2 ms, 40 B) twice beats (1.0 ms, 100 B) + (4.0 ms, 0 B).
        self.assertAllClose(sum(p.time_ms for p in chosen), 1.2 + 1.2)

    def test_resnet50_sized_instance_solves_within_a_second(self):
        rng = np.random.default_rng(50)
        fronts = [random_front(rng, int(rng.integers(2, 12))) for _ in range(159)]
        least = sum(min(w for _, w in f) for f in fronts)
        most = sum(max(w for _, w in f) for f in fronts)
        start = time.perf_counter()
        chosen = planner.divide_workspace(fronts, least + (most - least) // 3)
        seconds = time.perf_counter() - start
        self.assertLen(chosen, 159)
        self.assertLessEqual(sum(w for _, w in chosen), least + (most - least) // 3)
        self.assertLess(seconds, 1.0, f"159 kernels took {seconds:.2f} s")

    @parameterized.parameters(
        ("not a list", 10, "fronts must be a list"),
        ([[]], 10, r"fronts\[0\] must be a non-empty list"),
        ([[(1.0, 0)]], -1, "total_workspace"),
        ([[(1.0, 0)]], 1.5, "total_workspace"),
        ([[(-1.0, 0)]], 10, "time_ms"),
        ([[(1.0, -5)]], 10, "workspace_bytes"),
        ([[("x",)]], 10, "time_ms and workspace_bytes"),
    )
    def test_bad_arguments_raise_value_error(self, fronts, budget, message):
        with self.assertRaisesRegex(ValueError, message):
            planner.divide_workspace(fronts, budget)
