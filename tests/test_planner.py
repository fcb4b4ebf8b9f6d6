"""tf_ucudnn.planner: Workspace Reuse and the Pareto front against brute force.

The brute force enumerates every plan there is: every multiset of (micro-batch
size, algorithm) pieces whose sizes add up to N (the order of micro-batches
changes neither the time, a sum, nor the workspace, a max). Tables are random
but seeded: N from 1 to 10, each size present or not, 1-3 algorithms per size
with random times and workspace sizes, 0 among them.
"""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from tf_ucudnn import planner

POLICIES = ("undivided", "powerOfTwo", "all")
SEEDS = range(50)  # 5 tables for each N in 1..10
TABLE_KINDS = [dict(testcase_name=f"_{policy}_{'integer' if integer else 'continuous'}_times",
                    policy=policy, integer_times=integer)
               for policy in POLICIES for integer in (False, True)]


def allowed_sizes(policy, n):
    """The batch-size policies, as μ-cuDNN defines them."""
    return {"undivided": [n],
            "powerOfTwo": sorted({2 ** k for k in range(n.bit_length()) if 2 ** k < n} | {n}),
            "all": list(range(1, n + 1))}[policy]


def random_table(seed, integer_times):
    """A benchmark table for a batch of N = 1 + seed % 10, and N.

    integer_times: small integer times, so that many plans tie exactly (the
    sums are exact in floating point); else continuous times, no ties.
    """
    rng = np.random.default_rng(seed)
    n = 1 + seed % 10
    table = {}
    for size in range(1, n + 2):  # n + 1 is beyond the batch: the planner must ignore it
        if rng.random() < 0.2:
            continue
        entries = []
        for algo in range(rng.integers(1, 4)):
            time_ms = (float(rng.integers(1, 2 * size + 2)) if integer_times
                       else float(size * rng.uniform(0.2, 2.0)))
            workspace = 0 if rng.random() < 0.3 else int(rng.integers(1, 9)) * 256
            entries.append((f"algo{algo}@{size}", time_ms, workspace))
        table[size] = entries
    return table, n


def all_plans(table, n, policy):
    """Every plan as (time_ms, workspace_bytes, [(size, algo), ...])."""
    pieces = [(size, algo, t, w) for size in allowed_sizes(policy, n) if size in table
              for algo, t, w in table[size]]
    plans = []

    def extend(start, remaining, chosen):
        if remaining == 0:
            plans.append((math.fsum(p[2] for p in chosen), max(p[3] for p in chosen),
                          [(p[0], p[1]) for p in chosen]))
            return
        for i in range(start, len(pieces)):
            if pieces[i][0] <= remaining:
                extend(i, remaining - pieces[i][0], chosen + [pieces[i]])

    extend(0, n, [])
    return plans


def brute_force_front(plans):
    """Non-dominated (workspace, time) pairs, workspace ascending, time strictly decreasing."""
    front = []
    for t, w, _ in sorted(plans, key=lambda p: (p[1], p[0])):
        if not front or t < front[-1][1]:
            front.append((w, t))
    return front


def limits_to_try(table):
    """0, every workspace size in the table and one byte below it, and no limit at all."""
    sizes = {w for entries in table.values() for _, _, w in entries}
    return sorted({0, 1 << 40} | sizes | {w - 1 for w in sizes if w > 0})


class PlannerTestCase(parameterized.TestCase, tf.test.TestCase):

    def assertTimeEqual(self, got, want, what):
        self.assertLessEqual(abs(got - want), 1e-9 * max(abs(want), 1e-12),
                             f"{what}: time_ms {got!r} != {want!r}")

    def assertValidPlan(self, plan, table, n, policy, what):
        """Sizes add up to N and are allowed; every micro-batch is a table entry;
        totals are the sum of times and the max of workspaces."""
        sizes = plan.sizes
        self.assertEqual(sum(sizes), n, f"{what}: sizes {sizes} do not add up to N={n}")
        self.assertContainsSubset(set(sizes), allowed_sizes(policy, n),
                                  f"{what}: sizes {sizes} not allowed by {policy}")
        self.assertEqual(sizes, sorted(sizes, reverse=True), f"{what}: not larger first")
        times = []
        for mb in plan.micro_batches:
            matches = [t for algo, t, w in table.get(mb.size, ())
                       if algo == mb.algo and w == mb.workspace_bytes]
            self.assertLen(matches, 1, f"{what}: {mb} is not a table entry at size {mb.size}")
            times.append(matches[0])
        self.assertTimeEqual(plan.time_ms, math.fsum(times), f"{what}: sum over micro-batches")
        self.assertEqual(plan.workspace_bytes, max(mb.workspace_bytes for mb in plan.micro_batches),
                         f"{what}: workspace is the max over micro-batches")


class PlannerMatchesBruteForceTest(PlannerTestCase):

    @parameterized.named_parameters(*TABLE_KINDS)
    def test_best_plan_is_the_fastest_plan_within_the_limit(self, policy, integer_times):
        for seed in SEEDS:
            table, n = random_table(seed, integer_times)
            plans = all_plans(table, n, policy)
            for limit in limits_to_try(table):
                what = f"seed {seed}, N={n}, {policy}, limit {limit}, table {table}"
                feasible = [t for t, w, _ in plans if w <= limit]
                if not feasible:
                    with self.assertRaisesRegex(ValueError, "no plan", msg=what):
                        planner.best_plan(table, n, limit, policy)
                    continue
                plan = planner.best_plan(table, n, limit, policy)
                self.assertTimeEqual(plan.time_ms, min(feasible), what)
                self.assertLessEqual(plan.workspace_bytes, limit, what)
                self.assertValidPlan(plan, table, n, policy, what)

    @parameterized.named_parameters(*TABLE_KINDS)
    def test_pareto_front_is_the_set_of_non_dominated_plans(self, policy, integer_times):
        for seed in SEEDS:
            table, n = random_table(seed, integer_times)
            what = f"seed {seed}, N={n}, {policy}, table {table}"
            want = brute_force_front(all_plans(table, n, policy))
            front = planner.pareto_front(table, n, policy)
            got = [(p.workspace_bytes, p.time_ms) for p in front]
            self.assertEqual([w for w, _ in got], [w for w, _ in want],
                             f"{what}: front workspaces {got} != brute force {want}")
            for (_, t), (_, t_want) in zip(got, want):
                self.assertTimeEqual(t, t_want, f"{what}: front {got} vs {want}")
            for a, b in zip(got, got[1:]):
                self.assertTrue(a[0] < b[0] and a[1] > b[1],
                                f"{what}: front {got} not sorted by workspace with "
                                f"strictly decreasing time")
            for i, plan in enumerate(front):
                self.assertValidPlan(plan, table, n, policy, f"{what}, front[{i}]")

    @parameterized.named_parameters(*TABLE_KINDS)
    def test_best_plan_is_the_front_point_for_its_limit(self, policy, integer_times):
        for seed in SEEDS:
            table, n = random_table(seed, integer_times)
            front = planner.pareto_front(table, n, policy)
            for limit in limits_to_try(table):
                what = f"seed {seed}, N={n}, {policy}, limit {limit}, front {front}"
                within = [p for p in front if p.workspace_bytes <= limit]
                if not within:
                    with self.assertRaisesRegex(ValueError, "no plan", msg=what):
                        planner.best_plan(table, n, limit, policy)
                    continue
                best = min(within, key=lambda p: p.time_ms)
                plan = planner.best_plan(table, n, limit, policy)
                self.assertTimeEqual(plan.time_ms, best.time_ms, what)
                # Of the plans that fast, WR keeps one that needs the least workspace.
                self.assertEqual(plan.workspace_bytes, best.workspace_bytes, what)


class MicroBatchSizesTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.parameters(*POLICIES)
    def test_sizes_follow_the_policy(self, policy):
        for n in range(1, 40):
            self.assertEqual(planner.micro_batch_sizes(policy, n), allowed_sizes(policy, n),
                             f"{policy}, N={n}")

    def test_examples(self):
        self.assertEqual(planner.micro_batch_sizes("powerOfTwo", 6), [1, 2, 4, 6])
        self.assertEqual(planner.micro_batch_sizes("powerOfTwo", 8), [1, 2, 4, 8])
        self.assertEqual(planner.micro_batch_sizes("undivided", 6), [6])
        self.assertEqual(planner.micro_batch_sizes("all", 3), [1, 2, 3])


class PlannerEdgeCasesTest(PlannerTestCase):
    # Size 4 has a fast algorithm needing 100 bytes; size 8 is fast only with 400.
    TABLE = {8: [("slow", 10.0, 0), ("fast", 2.0, 400)],
             4: [("slow", 6.0, 0), ("fast", 1.5, 100)],
             3: [("fast", 0.1, 0)]}

    def test_workspace_limit_trades_time_for_micro_batches(self):
        self.assertEqual(planner.best_plan(self.TABLE, 8, 1000).sizes, [8])
        tight = planner.best_plan(self.TABLE, 8, 100)
        self.assertEqual(tight.sizes, [4, 4])
        self.assertEqual((tight.time_ms, tight.workspace_bytes), (3.0, 100))
        self.assertEqual(planner.best_plan(self.TABLE, 8, 0).time_ms, 10.0)

    def test_undivided_uses_the_whole_batch_only(self):
        plan = planner.best_plan(self.TABLE, 8, 100, policy="undivided")
        self.assertEqual((plan.sizes, plan.time_ms), ([8], 10.0))
        self.assertEqual([(p.workspace_bytes, p.time_ms)
                          for p in planner.pareto_front(self.TABLE, 8, "undivided")],
                         [(0, 10.0), (400, 2.0)])

    def test_all_may_use_sizes_that_are_not_powers_of_two(self):
        # Within 0 bytes, 3 + 3 + 1 + 1 is fastest; powerOfTwo may not use 3.
        table = {**self.TABLE, 1: [("fast", 0.1, 0)]}
        self.assertEqual(planner.best_plan(table, 8, 0, policy="all").sizes, [3, 3, 1, 1])
        self.assertNotIn(3, planner.best_plan(table, 8, 0, policy="powerOfTwo").sizes)

    def test_infeasible_limit_raises_value_error(self):
        table = {4: [("a", 1.0, 512)], 2: [("b", 1.0, 256)]}
        with self.assertRaisesRegex(ValueError, r"no plan for batch_size 4 within 100 bytes"):
            planner.best_plan(table, 4, 100)
        self.assertLen(planner.pareto_front(table, 4), 2)

    def test_sizes_that_cannot_add_up_give_no_plan(self):
        table = {2: [("a", 1.0, 0)]}
        with self.assertRaisesRegex(ValueError, "cannot add up to 3"):
            planner.best_plan(table, 3, 1 << 30, policy="all")
        self.assertEqual(planner.pareto_front(table, 3, "all"), [])

    def test_sizes_beyond_the_batch_are_ignored(self):
        table = {2: [("a", 1.0, 0)], 16: [("b", 0.0, 0)]}
        self.assertEqual(planner.best_plan(table, 4, 0, policy="all").sizes, [2, 2])

    def test_algo_objects_are_handed_back(self):
        algo = object()
        plan = planner.best_plan({1: [(algo, 1.0, 0)]}, 3, 0, policy="all")
        self.assertTrue(all(mb.algo is algo for mb in plan.micro_batches))

    def test_ties_go_to_the_larger_micro_batch(self):
        table = {1: [("a", 1.0, 0)], 2: [("b", 2.0, 0)]}
        self.assertEqual(planner.best_plan(table, 2, 0).sizes, [2])


GOOD_TABLE = {1: [("a", 1.0, 0)]}


class FloatAccumulatorTest(PlannerTestCase):
    """Float16/bfloat16 backward-filter plans of several micro-batches hold a
    float32 accumulator in their workspace; the planner counts it as the
    engine's kernels do (planner.h, BestPlanWithAccumulator)."""

    # Undivided: 5 ms, 200 bytes; 2 x 2: 4 ms, 100 bytes.
    TABLE = {4: [("whole", 5.0, 200)], 2: [("half", 2.0, 100)]}

    def test_accumulator_size_is_the_float32_filter_and_a_zero_block(self):
        self.assertEqual(planner.float_accumulator_bytes(64), 256 + 256)
        self.assertEqual(planner.float_accumulator_bytes(65), 512 + 256)

    def test_split_plans_hold_the_accumulator_within_the_limit(self):
        acc = planner.float_accumulator_bytes(64)
        self.assertEqual(planner.best_plan(self.TABLE, 4, 1000).workspace_bytes, 100)
        split = planner.best_plan(self.TABLE, 4, 1000, accumulator_bytes=acc)
        self.assertEqual((split.sizes, split.workspace_bytes, split.accumulator_bytes),
                         ([2, 2], 256 + acc, acc))
        whole = planner.best_plan(self.TABLE, 4, 700, accumulator_bytes=acc)
        self.assertEqual((whole.sizes, whole.workspace_bytes, whole.accumulator_bytes),
                         ([4], 200, 0))
        with self.assertRaisesRegex(ValueError, "no plan"):
            planner.best_plan(self.TABLE, 4, 150, accumulator_bytes=acc)

    def test_the_undivided_plan_joins_the_front(self):
        acc = planner.float_accumulator_bytes(64)
        self.assertEqual([p.sizes for p in planner.pareto_front(self.TABLE, 4)], [[2, 2]])
        front = planner.pareto_front(self.TABLE, 4, accumulator_bytes=acc)
        self.assertEqual([(p.sizes, p.workspace_bytes) for p in front],
                         [([4], 200), ([2, 2], 256 + acc)])


class PlannerBadArgumentsTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("unknown_policy_sizes", lambda: planner.micro_batch_sizes("bogus", 4),
         "batch_size_policy"),
        ("unknown_policy_best", lambda: planner.best_plan(GOOD_TABLE, 4, 0, "bogus"),
         "batch_size_policy"),
        ("policy_is_case_sensitive", lambda: planner.pareto_front(GOOD_TABLE, 4, "ALL"),
         "batch_size_policy"),
        ("negative_limit", lambda: planner.best_plan(GOOD_TABLE, 4, -1), "workspace_limit"),
        ("fractional_limit", lambda: planner.best_plan(GOOD_TABLE, 4, 1.5), "workspace_limit"),
        ("batch_size_0_sizes", lambda: planner.micro_batch_sizes("all", 0), "batch_size"),
        ("batch_size_0_best", lambda: planner.best_plan(GOOD_TABLE, 0, 0), "batch_size"),
        ("batch_size_negative_front", lambda: planner.pareto_front(GOOD_TABLE, -2), "batch_size"),
        ("batch_size_bool", lambda: planner.micro_batch_sizes("all", True), "batch_size"),
        ("batch_size_float", lambda: planner.pareto_front(GOOD_TABLE, 2.0), "batch_size"),
        ("table_not_a_dict", lambda: planner.best_plan([(1, "a", 1.0, 0)], 1, 0),
         "table must be a dict"),
        ("table_key_zero", lambda: planner.best_plan({0: [("a", 1.0, 0)]}, 1, 0), "table keys"),
        ("table_key_str", lambda: planner.pareto_front({"1": [("a", 1.0, 0)]}, 1), "table keys"),
        ("entry_of_two", lambda: planner.best_plan({1: [("a", 1.0)]}, 1, 0), "table entries"),
        ("entry_not_a_tuple", lambda: planner.best_plan({1: ["abc1"]}, 1, 0), "table entries"),
        ("negative_time", lambda: planner.best_plan({1: [("a", -1.0, 0)]}, 1, 0), "time_ms"),
        ("nan_time", lambda: planner.pareto_front({1: [("a", float("nan"), 0)]}, 1), "time_ms"),
        ("negative_workspace", lambda: planner.best_plan({1: [("a", 1.0, -8)]}, 1, 0),
         "workspace_bytes"),
        ("fractional_workspace", lambda: planner.pareto_front({1: [("a", 1.0, 0.5)]}, 1),
         "workspace_bytes"),
        ("negative_accumulator", lambda: planner.best_plan(GOOD_TABLE, 4, 0, accumulator_bytes=-1),
         "accumulator_bytes"),
        ("filter_elements_negative", lambda: planner.float_accumulator_bytes(-1),
         "filter_elements"),
    )
    def test_bad_argument_raises_value_error_naming_it(self, call, names):
        with self.assertRaisesRegex(ValueError, names):
            call()

  
    def test_non_numeric_table_entries_raise_value_error(self):
        for entry in (("a", None, 0), ("a", "1.0", 0), ("a", 1.0, None)):
            with self.assertRaisesRegex(ValueError, "time_ms|workspace_bytes", msg=str(entry)):
                planner.best_plan({1: [entry]}, 1, 0)

    def test_infinite_limit_raises_value_error(self):
        with self.assertRaisesRegex(ValueError, "workspace_limit"):
            planner.best_plan(GOOD_TABLE, 1, float("inf"))

    def test_limit_beyond_int64_is_not_silently_wrapped(self):
        table = {2: [("fast", 1.0, 10)], 1: [("slow", 5.0, 0)]}
        try:
            plan = planner.best_plan(table, 2, 1 << 64)
        except ValueError:
            return  # rejecting it is fine too
        self.assertEqual(plan.sizes, [2], f"limit 2**64 gave {plan}")

    def test_plan_never_exceeds_the_limit_for_huge_table_entries(self):
        try:
            plan = planner.best_plan({1: [("a", 1.0, 1 << 64)]}, 1, 10)
        except ValueError:
            return  # "no plan" is the right answer
        self.assertLessEqual(plan.workspace_bytes, 10, f"got {plan}")
