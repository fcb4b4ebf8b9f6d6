"""Micro-batch planning without a GPU: Workspace Reuse and the Pareto front.

These functions call the same C++ planner that the GPU kernels use
(``cc/kernels/engine/planner.cc``), so a plan computed here from a benchmark
table is the plan the kernels would run.

A *benchmark table* maps a micro-batch size to the algorithms measured at that
size: ``{size: [(algo, time_ms, workspace_bytes), ...]}``. ``algo`` may be any
object (a cuDNN algorithm name, say); it is handed back in the plan.

Reference: Oyama et al., "Accelerating Deep Learning Frameworks with
Micro-batches", IEEE CLUSTER 2018 (arXiv:1804.04806), §III-B (Workspace
Reuse) and §III-C (the desirable set used by Workspace Division).
"""

import ctypes
import dataclasses
import math
import numbers
import warnings
from typing import Any, NamedTuple

from tf_ucudnn._ops import clib

POLICIES = ("undivided", "powerOfTwo", "all")
_POLICY_IDS = {name: i for i, name in enumerate(POLICIES)}
_MODE_BEST, _MODE_FRONT = 0, 1


class MicroBatch(NamedTuple):
    """One micro-batch of a plan: ``size`` samples run with ``algo``, which
    needs ``workspace_bytes`` bytes of workspace."""

    size: int
    algo: Any
    workspace_bytes: int


@dataclasses.dataclass(frozen=True)
class Plan:
    """A micro-batch plan for one convolution kernel.

    Attributes:
      micro_batches: list of :class:`MicroBatch` ``(size, algo,
        workspace_bytes)``, larger micro-batches first; sizes sum to the
        mini-batch size.
      time_ms: predicted time of the whole kernel in ms (sum over micro-batches).
      workspace_bytes: workspace the plan needs in bytes (max over micro-batches,
        since one buffer is reused by every micro-batch).
    """

    micro_batches: list
    time_ms: float
    workspace_bytes: int

    @property
    def sizes(self):
        """The micro-batch sizes, e.g. ``[128, 128]``."""
        return [mb.size for mb in self.micro_batches]


_INT64_MAX = (1 << 63) - 1
# ucudnn::kMaxDenseBatch: the largest batch the recurrence plans for a table
# whose sizes are not all powers of two (20 bytes per sample).
_MAX_DENSE_BATCH = 1 << 24


def check_bytes(value, name):
    """Validates a byte count (workspace limit or size): an integral number in
    [0, 2**63 - 1]. Returns it as int; raises ValueError naming `name` otherwise."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and not isinstance(value, numbers.Integral):
        ok = math.isfinite(value) and float(value).is_integer()
    if not ok or not 0 <= value <= _INT64_MAX:
        raise ValueError(f"{name} must be a whole number of bytes in [0, 2**63 - 1], got {value!r}")
    return int(value)


def _check_time(value, what):
    if (not isinstance(value, numbers.Real) or isinstance(value, bool)
            or not math.isfinite(value) or value < 0):
        raise ValueError(f"time_ms must be a finite number >= 0, got {value!r} for {what}")
    return float(value)


def _check_policy(policy):
    if policy not in _POLICY_IDS:
        raise ValueError(f"batch_size_policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    return _POLICY_IDS[policy]


def _check_batch_size(batch_size):
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    return int(batch_size)


def micro_batch_sizes(policy, batch_size):
    """The micro-batch sizes a batch-size policy allows, ascending.

    Args:
      policy: ``"undivided"`` ({N}), ``"powerOfTwo"`` ({1, 2, 4, ...} ∪ {N}) or
        ``"all"`` ({1, ..., N}).
      batch_size: N, the mini-batch size (samples).

    Returns:
      A list of ints. Memory is by the answer, not by N: ``"powerOfTwo"``
      with N = 2**40 is 41 sizes.

    Raises:
      ValueError: unknown policy or batch_size not a positive int.
    """
    policy_id = _check_policy(policy)
    batch_size = _check_batch_size(batch_size)
    # Ask how many first: a buffer of N would be 8 TB for N = 2**40.
    count = clib.ucudnn_micro_batch_sizes(policy_id, batch_size, None, 0)
    out = (ctypes.c_int64 * count)()
    clib.ucudnn_micro_batch_sizes(policy_id, batch_size, out, count)
    return list(out)


def _flatten(table):
    """Rows (size, row_id, time_ms, workspace_bytes) of a benchmark table."""
    if not isinstance(table, dict):
        raise ValueError(f"table must be a dict {{size: [(algo, time_ms, workspace_bytes)]}}, "
                         f"got {type(table).__name__}")
    rows = []
    for size, entries in table.items():
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size <= 0:
            raise ValueError(f"table keys must be positive micro-batch sizes, got {size!r}")
        if not isinstance(entries, (list, tuple)):
            raise ValueError(f"table[{size}] must be a list of (algo, time_ms, workspace_bytes), "
                             f"got {entries!r}")
        for entry in entries:
            try:
                algo, time_ms, workspace_bytes = entry
            except (TypeError, ValueError):
                raise ValueError(f"table entries must be (algo, time_ms, workspace_bytes), "
                                 f"got {entry!r} at size {size}") from None
            what = f"{algo!r} at size {size}"
            rows.append((int(size), algo, _check_time(time_ms, what),
                         check_bytes(workspace_bytes, f"workspace_bytes of {what}")))
    return rows


def _solve(table, batch_size, policy, mode, workspace_limit=0):
    policy_id = _check_policy(policy)
    batch_size = _check_batch_size(batch_size)
    rows = _flatten(table)
    n = len(rows)
    sizes = (ctypes.c_int64 * max(n, 1))(*[r[0] for r in rows])
    ids = (ctypes.c_int32 * max(n, 1))(*range(n))
    times = (ctypes.c_double * max(n, 1))(*[r[2] for r in rows])
    workspace = (ctypes.c_int64 * max(n, 1))(*[r[3] for r in rows])
    # The answer's size is unknown until it is computed: start small and grow
    # to what the planner says it needs (a buffer per sample of N was 1 KiB a
    # sample: 10 GB for N = 10**7).
    capacity = 1 + 64 * (1 + 2 * max(n, 1))
    while True:
        out = (ctypes.c_int64 * capacity)()
        needed = clib.ucudnn_plan(n, sizes, ids, times, workspace, batch_size, policy_id, mode,
                                  workspace_limit, 0, out, capacity)
        if needed < 0:
            raise ValueError(
                f"batch_size {batch_size} is too large to plan for a table whose sizes are not "
                f"all powers of two (at most {_MAX_DENSE_BATCH} samples; powerOfTwo tables "
                f"have no limit)")
        if needed <= capacity:
            break
        capacity = needed
    plans, pos = [], 1
    for _ in range(out[0]):
        length = out[pos]
        pos += 1
        micro_batches = []
        for i in range(length):
            size, row = out[pos + 2 * i], out[pos + 2 * i + 1]
            micro_batches.append(MicroBatch(size, rows[row][1], rows[row][3]))
        times_ms = [rows[out[pos + 2 * i + 1]][2] for i in range(length)]
        pos += 2 * length
        plans.append(Plan(micro_batches, float(sum(times_ms)),
                          max(mb.workspace_bytes for mb in micro_batches)))
    return plans


def best_plan(table, batch_size, workspace_limit, policy="powerOfTwo"):
    """Workspace Reuse (WR): the fastest plan within a per-kernel workspace limit.

    Solves T(0) = 0, T(n) = min over allowed b <= n of t*(b) + T(n - b), where
    t*(b) is the fastest algorithm at micro-batch size b that needs at most
    ``workspace_limit`` bytes (Oyama et al. 2018, §III-B). Among equally
    fast plans the one with less workspace wins, then the larger micro-batch.

    Args:
      table: benchmark table ``{size: [(algo, time_ms, workspace_bytes), ...]}``.
        Sizes the policy does not allow are ignored.
      batch_size: N, the mini-batch size (samples).
      workspace_limit: bytes of workspace each micro-batch may use (>= 0).
      policy: batch-size policy, ``"undivided"``, ``"powerOfTwo"`` or ``"all"``.

    Returns:
      The :class:`Plan`.

    Raises:
      ValueError: bad arguments, or no plan: no combination of the table's
        allowed sizes with algorithms within the limit adds up to batch_size,
        or batch_size above 2**24 for a table whose sizes are not all powers
        of two (powerOfTwo tables are planned over bits, for any batch_size).
    """
    workspace_limit = check_bytes(workspace_limit, "workspace_limit")
    plans = _solve(table, batch_size, policy, _MODE_BEST, workspace_limit)
    if not plans:
        raise ValueError(f"no plan for batch_size {batch_size} within {workspace_limit} bytes under "
                         f"policy {policy!r}: the table's sizes {sorted(table)} with algorithms "
                         f"within the limit cannot add up to {batch_size}")
    return plans[0]


def pareto_front(table, batch_size, policy="powerOfTwo"):
    """The desirable set of Workspace Division: all non-dominated plans.

    A plan is kept unless another is at least as fast with at most as much
    workspace and better in one of the two (Oyama et al. 2018, §III-C). Built by
    the WR recurrence keeping every non-dominated (time, workspace) pair.

    Args:
      table: benchmark table ``{size: [(algo, time_ms, workspace_bytes), ...]}``.
      batch_size: N, the mini-batch size (samples).
      policy: batch-size policy, ``"undivided"``, ``"powerOfTwo"`` or ``"all"``.

    Returns:
      A list of :class:`Plan`, sorted by ``workspace_bytes`` ascending with
      strictly decreasing ``time_ms``; empty if no plan exists.

    Raises:
      ValueError: bad arguments, or batch_size above 2**24 for a table whose
        sizes are not all powers of two.
    """
    return _solve(table, batch_size, policy, _MODE_FRONT)


def _point(p):
    """(time_ms, workspace_bytes) of a front point: a Plan, a dict or a pair."""
    if isinstance(p, dict):
        return p["time_ms"], p["workspace_bytes"]
    if hasattr(p, "time_ms") and hasattr(p, "workspace_bytes"):
        return p.time_ms, p.workspace_bytes
    time_ms, workspace_bytes = p
    return time_ms, workspace_bytes


def divide_workspace(fronts, total_workspace):
    """Workspace Division (WD): one shared budget, one plan per kernel.

    Chooses one point of each kernel's Pareto front so that the sum of their
    times is smallest while the sum of their workspaces fits the budget: a
    multiple-choice knapsack, solved exactly as an integer linear program with
    PuLP's bundled CBC (Oyama et al. 2018, §III-C):

        minimise  Σ_k Σ_i t_ki x_ki
        s.t.      Σ_i x_ki = 1 for every kernel k,
                  Σ_k Σ_i w_ki x_ki <= total_workspace,   x_ki ∈ {0, 1}.

    Args:
      fronts: one list per kernel (forward, backward-data and backward-filter
        of every layer) of candidate points, e.g. the :class:`Plan` list of
        :func:`pareto_front`; a point may also be a dict or a pair with
        ``time_ms`` (ms) and ``workspace_bytes`` (bytes).
      total_workspace: the budget in bytes for all kernels together.

    Returns:
      A list with the chosen point (the caller's object) for each kernel, in
      the order of ``fronts``.

    Raises:
      ValueError: bad arguments, an empty front, or a budget smaller than the
        sum of every kernel's least-workspace point (the message names that
        smallest feasible budget).
    """
    import pulp

    total_workspace = check_bytes(total_workspace, "total_workspace")
    if not isinstance(fronts, (list, tuple)):
        raise ValueError(f"fronts must be a list of Pareto fronts, got {type(fronts).__name__}")
    points = []
    for k, front in enumerate(fronts):
        if not isinstance(front, (list, tuple)) or not front:
            raise ValueError(f"fronts[{k}] must be a non-empty list of points, got {front!r}")
        try:
            pairs = [_point(p) for p in front]
        except (TypeError, ValueError, KeyError):
            raise ValueError(f"fronts[{k}] has a point without time_ms and workspace_bytes") from None
        points.append([(_check_time(t, f"fronts[{k}]"), check_bytes(w, f"workspace_bytes of fronts[{k}]"))
                       for t, w in pairs])
    if not points:
        return []
    least = [min(range(len(p)), key=lambda i: (p[i][1], p[i][0])) for p in points]
    smallest_budget = sum(points[k][i][1] for k, i in enumerate(least))
    if smallest_budget > total_workspace:
        raise ValueError(f"total_workspace {total_workspace} bytes is below the smallest feasible "
                         f"budget, {smallest_budget} bytes (every kernel at its least-workspace plan)")
    fastest = [min(range(len(p)), key=lambda i: (p[i][0], p[i][1])) for p in points]
    if sum(points[k][i][1] for k, i in enumerate(fastest)) <= total_workspace:
        chosen = fastest  # the budget holds every kernel's fastest plan: nothing to divide
    else:
        problem = pulp.LpProblem("workspace_division", pulp.LpMinimize)
        x = [[problem.add_variable(f"x_{k}_{i}", cat=pulp.LpBinary) for i in range(len(p))]
             for k, p in enumerate(points)]
        problem += pulp.lpSum(t * x[k][i] for k, p in enumerate(points) for i, (t, _) in enumerate(p))
        for k in range(len(points)):
            problem += pulp.lpSum(x[k]) == 1
        problem += pulp.lpSum(w * x[k][i] for k, p in enumerate(points)
                              for i, (_, w) in enumerate(p)) <= total_workspace
        with warnings.catch_warnings():
            # PuLP 3.3 deprecates the CBC binary it bundles in favour of an extra
            # package; the bundled one is what every install has.
            warnings.simplefilter("ignore", DeprecationWarning)
            status = problem.solve(pulp.PULP_CBC_CMD(msg=False, gapRel=0))
        if pulp.LpStatus[status] != "Optimal":
            raise RuntimeError(f"the workspace division ILP ended {pulp.LpStatus[status]}")
        chosen = [max(range(len(p)), key=lambda i: x[k][i].value() or 0) for k, p in enumerate(points)]
        if sum(points[k][i][1] for k, i in enumerate(chosen)) > total_workspace:
            raise RuntimeError("the ILP solution exceeds the budget (solver tolerance)")
    return [fronts[k][i] for k, i in enumerate(chosen)]
