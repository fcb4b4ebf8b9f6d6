"""Micro-batch planning without a GPU: Workspace Reuse and the Pareto front.

These functions call the same C++ planner that the GPU kernels use
(``cc/engine/planner.cc``), so a plan computed here from a benchmark
table is the plan the kernels would run.

A *benchmark table* maps a micro-batch size to the algorithms measured at that
size: ``{size: [(algo, time_ms, workspace_bytes), ...]}``. ``algo`` may be any
object (a cuDNN algorithm name, say); it is handed back in the plan.

The Workspace Division solver, which chooses one point of each kernel's
Pareto front within a shared budget, is :mod:`tf_ucudnn.division_solver`.

Reference: Oyama et al., "Accelerating Deep Learning Frameworks with
Micro-batches", IEEE CLUSTER 2018 (arXiv:1804.04806), §III-B (Workspace
Reuse) and §III-C (the desirable set used by Workspace Division).
"""

import dataclasses
import math
import numbers
from typing import Any, NamedTuple

from tf_ucudnn import _engine

POLICIES = ("undivided", "powerOfTwo", "all")
_POLICY_IDS = {name: i for i, name in enumerate(POLICIES)}


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
        since one buffer is reused by every micro-batch; plus
        ``accumulator_bytes``, after the workspace rounded up to 256 bytes).
      accumulator_bytes: bytes of the float32 sum that a float16/bfloat16
        backward-filter plan of several micro-batches adds its gradients
        into; 0 otherwise (see :func:`float_accumulator_bytes`).
    """

    micro_batches: list
    time_ms: float
    workspace_bytes: int
    accumulator_bytes: int = 0

    @property
    def sizes(self):
        """The micro-batch sizes, e.g. ``[128, 128]``."""
        return [mb.size for mb in self.micro_batches]


_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)


def _bound_text(value):
    """-2**63, 2**31 - 1, 0 ...: a bound as a reader would write it."""
    for power in (63, 31):
        if value == (1 << power) - 1:
            return f"2**{power} - 1"
        if value == -(1 << power):
            return f"-2**{power}"
    return str(value)


def check_int(value, name, low=_INT64_MIN, high=_INT64_MAX):
    """Validates an integer argument: an int, a NumPy integer, or a float with
    an integral value (3.0, not 3.5: nothing is truncated), in [low, high]
    (by default int64's range, so that nothing wraps or overflows later).

    Returns:
      The value as int.

    Raises:
      ValueError: naming ``name`` and the allowed range.
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and not isinstance(value, numbers.Integral):
        ok = math.isfinite(value) and float(value).is_integer()
    if not ok or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number in [{_bound_text(low)}, "
                         f"{_bound_text(high)}], got {value!r}")
    return int(value)


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
    return POLICIES[_POLICY_IDS[policy]]


def _check_batch_size(batch_size):
    if (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
            or not 0 < batch_size <= _INT64_MAX):
        raise ValueError(f"batch_size must be a positive int (at most 2**63 - 1), got {batch_size!r}")
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
    return _engine.micro_batch_sizes(_check_policy(policy), _check_batch_size(batch_size))


def _flatten(table):
    """Rows (size, row_id, time_ms, workspace_bytes) of a benchmark table."""
    if not isinstance(table, dict):
        raise ValueError(f"table must be a dict {{size: [(algo, time_ms, workspace_bytes)]}}, "
                         f"got {type(table).__name__}")
    rows = []
    for size, entries in table.items():
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or not 0 < size <= _INT64_MAX:
            raise ValueError(f"table keys must be positive micro-batch sizes (at most 2**63 - 1), "
                             f"got {size!r}")
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


def float_accumulator_bytes(filter_elements):
    """Bytes of the float32 accumulator that the engine keeps in the workspace
    of a float16/bfloat16 backward-filter plan of several micro-batches.

    Such a plan adds its micro-batches' filter gradients in float32, so that
    splitting does not round every partial sum to the element type; the sum
    (4 bytes per filter element, rounded up to 256 bytes) and a 256-byte zero
    block count against the workspace limit. Pass the result as
    ``accumulator_bytes`` to :func:`best_plan` and :func:`pareto_front` to
    predict such a kernel's plans.

    Args:
      filter_elements: elements of the filter, e.g. 3 * 3 * 64 * 128.

    Returns:
      Bytes (int).

    Raises:
      ValueError: a count that is not an int in [0, 2**60].
    """
    if (isinstance(filter_elements, bool) or not isinstance(filter_elements, numbers.Integral)
            or not 0 <= filter_elements <= 1 << 60):
        raise ValueError(f"filter_elements must be an int in [0, 2**60], got {filter_elements!r}")
    return _engine.float_accumulator_bytes(int(filter_elements))


def _solve(table, batch_size, policy, mode, workspace_limit=0, accumulator_bytes=0):
    policy = _check_policy(policy)
    batch_size = _check_batch_size(batch_size)
    accumulator_bytes = check_bytes(accumulator_bytes, "accumulator_bytes")
    rows = _flatten(table)
    # The engine sees each row's index as its algo and hands it back.
    plans = _engine.plan([dict(size=size, algo=i, time_ms=time_ms, workspace_bytes=workspace)
                          for i, (size, _, time_ms, workspace) in enumerate(rows)],
                         batch_size, policy=policy, mode=mode, workspace_limit=workspace_limit,
                         accumulator_bytes=accumulator_bytes)
    if plans is None:
        raise ValueError(
            f"batch_size {batch_size} is too large to plan for a table whose sizes are not "
            f"all powers of two (at most {_MAX_DENSE_BATCH} samples; powerOfTwo tables "
            f"have no limit)")
    result = []
    for plan in plans:
        micro_batches = [MicroBatch(mb["size"], rows[mb["algo"]][1], rows[mb["algo"]][3])
                         for mb in plan["micro_batches"]]
        times_ms = [rows[mb["algo"]][2] for mb in plan["micro_batches"]]
        result.append(Plan(micro_batches, float(sum(times_ms)), plan["workspace_bytes"],
                           plan["accumulator_bytes"]))
    return result


def best_plan(table, batch_size, workspace_limit, policy="powerOfTwo", *, accumulator_bytes=0):
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
      accumulator_bytes: bytes a plan of several micro-batches also holds
        within the limit (float16/bfloat16 backward-filter:
        :func:`float_accumulator_bytes`); 0 (default) for every other kernel.
        The undivided plan needs none and wins when it is at least as fast.

    Returns:
      The :class:`Plan`.

    Raises:
      ValueError: bad arguments, or no plan: no combination of the table's
        allowed sizes with algorithms within the limit adds up to batch_size,
        or batch_size above 2**24 for a table whose sizes are not all powers
        of two (powerOfTwo tables are planned over bits, for any batch_size).
    """
    workspace_limit = check_bytes(workspace_limit, "workspace_limit")
    plans = _solve(table, batch_size, policy, "best", workspace_limit, accumulator_bytes)
    if not plans:
        raise ValueError(f"no plan for batch_size {batch_size} within {workspace_limit} bytes under "
                         f"policy {policy!r}: the table's sizes {sorted(table)} with algorithms "
                         f"within the limit cannot add up to {batch_size}")
    return plans[0]


def pareto_front(table, batch_size, policy="powerOfTwo", *, accumulator_bytes=0):
    """The desirable set of Workspace Division: all non-dominated plans.

    A plan is kept unless another is at least as fast with at most as much
    workspace and better in one of the two (Oyama et al. 2018, §III-C). Built by
    the WR recurrence keeping every non-dominated (time, workspace) pair.

    Args:
      table: benchmark table ``{size: [(algo, time_ms, workspace_bytes), ...]}``.
      batch_size: N, the mini-batch size (samples).
      policy: batch-size policy, ``"undivided"``, ``"powerOfTwo"`` or ``"all"``.
      accumulator_bytes: as for :func:`best_plan`, counted in every plan of
        several micro-batches.

    Returns:
      A list of :class:`Plan`, sorted by ``workspace_bytes`` ascending with
      strictly decreasing ``time_ms``; empty if no plan exists.

    Raises:
      ValueError: bad arguments, or batch_size above 2**24 for a table whose
        sizes are not all powers of two.
    """
    return _solve(table, batch_size, policy, "front", accumulator_bytes=accumulator_bytes)
