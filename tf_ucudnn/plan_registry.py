"""`plans()`: the micro-batch plans the kernels have chosen so far in this process."""

import re

from tf_ucudnn import _engine, table
from tf_ucudnn.units import format_bytes  # noqa: F401  (also tf_ucudnn.plan_registry.format_bytes)


class PlanTable(list):
    """A list of plan records (dicts) that prints as a table.

    Each record has: ``device``, ``pass`` (forward / backward-data /
    backward-filter), ``shape`` (the convolution), ``batch``, ``layout``,
    ``dtype``, ``workspace_limit`` (bytes; under ``workspace_limit="auto"``
    the bytes the kernel planned within on a GPU, -2 on the CPU, which has no
    workspace), ``policy`` (batch-size policy or
    ``forced k``), ``micro_batches`` (list of dicts ``size``, ``algo``,
    ``workspace_bytes``, ``time_ms``), ``workspace_bytes`` (max over
    micro-batches), ``time_ms`` (sum of the benchmarked times; None on CPU),
    ``planning_ms`` (wall-clock ms the kernel spent planning: benchmarking or
    reading the benchmark database, then Workspace Reuse; None on CPU and for
    Workspace Division's replans) and ``note`` (e.g. ``stored benchmark
    table: 6 of 7 sizes, 1 benchmarked`` (:func:`table_reuse`),
    ``benchmarked on GPUs 0, 1``, ``workspace_limit=auto: planned within N
    bytes``).
    """

    def to_string(self, max_width=120):
        """The table as text, its cells wrapped to fit ``max_width`` columns
        where they can (None: one line per record). ``str()`` uses 120."""
        if not self:
            return "(no convolution has run through tf_ucudnn yet)"
        rows = [(r["device"].split("device:")[-1], r["pass"], r["shape"].split(" "),
                 micro_batch_pieces(r["micro_batches"]), format_bytes(r["workspace_bytes"]),
                 format_ms(r["time_ms"])) for r in self]
        return table.render(("device", "pass", "convolution", "micro-batches", "workspace", "ms"),
                            rows, align="llllrr", max_width=max_width)

    def __str__(self):
        return self.to_string()


def format_ms(ms):
    """Milliseconds for a table: ``"1.234"``, or ``"-"`` where there is no time (the CPU)."""
    return "-" if ms is None or ms != ms else f"{ms:.3f}"


def _runs(micro_batches):
    """Runs of equal micro-batches: ``["8x32 ALGO_1/tensor-op", "1x4 ALGO_0/fma"]``."""
    runs = []
    for m in micro_batches:
        key = (m["size"], m["algo"])
        if runs and runs[-1][0] == key:
            runs[-1][1] += 1
        else:
            runs.append([key, 1])
    return [f"{count}x{size} {algo}" for (size, algo), count in runs]


def micro_batch_pieces(micro_batches):
    """:func:`describe_micro_batches` as table pieces that wrap between runs."""
    runs = _runs(micro_batches)
    return [run + " +" for run in runs[:-1]] + runs[-1:]


def describe_micro_batches(micro_batches):
    """Runs of equal micro-batches, e.g. ``"8x32 ALGO_1/tensor-op + 1x4 ALGO_0/fma"``
    (8 micro-batches of 32 samples, then one of 4)."""
    return " + ".join(_runs(micro_batches))


_STORED_TABLE = re.compile(r"stored benchmark table: (\d+) of (\d+) sizes(?:, (\d+) benchmarked)?")


def table_reuse(record):
    """How a plan record's kernel got its benchmark table.

    Args:
      record: a record of :func:`plans`.

    Returns:
      ``(reused, benchmarked)``: the micro-batch sizes its plan was made from
      that the stored table of its convolution held (from the benchmark
      database, or kernels of other mini-batch sizes) and those it
      benchmarked; None for a kernel that planned with no stored table (it
      benchmarked every size) and on the CPU.
    """
    match = _STORED_TABLE.search(record.get("note") or "")
    if not match:
        return None
    return int(match[1]), int(match[3] or 0)


def plans():
    """The plans chosen so far, one record per kernel (pass, shape, device, knobs).

    On the GPU a kernel is planned (benchmarked, then the Workspace Reuse
    recurrence solved) the first time it runs; on the CPU its plan is the
    forced ``micro_batch_size`` split or the whole batch. Set
    ``UCUDNN_DEBUG_OUTPUT=1`` to also print each plan to stderr when it is made.

    Returns:
      A :class:`PlanTable`: a list of dicts that prints as a table.
    """
    return PlanTable(_engine.plan_records())


def clear_plans():
    """Forgets the recorded plans (the kernels keep their cached plans)."""
    _engine.clear_plan_records()
