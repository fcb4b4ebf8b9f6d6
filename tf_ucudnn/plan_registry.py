"""`plans()`: the micro-batch plans the kernels have chosen so far in this process."""

import json

from tf_ucudnn._ops import clib, read_c_string


class PlanTable(list):
    """A list of plan records (dicts) that prints as a table.

    Each record has: ``device``, ``pass`` (forward / backward-data /
    backward-filter), ``shape`` (the convolution), ``batch``, ``layout``,
    ``dtype``, ``workspace_limit`` (bytes), ``policy`` (batch-size policy or
    ``forced k``), ``micro_batches`` (list of dicts ``size``, ``algo``,
    ``workspace_bytes``, ``time_ms``), ``workspace_bytes`` (max over
    micro-batches), ``time_ms`` (sum of the benchmarked times; None on CPU),
    ``planning_ms`` (wall-clock ms the kernel spent planning: benchmarking or
    reading the benchmark database, then Workspace Reuse; None on CPU and for
    Workspace Division's replans) and ``note`` (e.g. ``benchmarks from the
    database``, ``benchmarked on GPUs 0, 1``).
    """

    def __str__(self):
        if not self:
            return "(no convolution has run through tf_ucudnn yet)"
        header = ("device", "pass", "convolution", "micro-batches", "workspace", "ms")
        rows = [header]
        for r in self:
            steps = describe_micro_batches(r["micro_batches"])
            ms = "-" if r["time_ms"] is None else f"{r['time_ms']:.3f}"
            rows.append((r["device"].split("device:")[-1], r["pass"], r["shape"], steps,
                         format_bytes(r["workspace_bytes"]), ms))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def describe_micro_batches(micro_batches):
    """Runs of equal micro-batches, e.g. ``"8x32 ALGO_1/tensor-op + 1x4 ALGO_0/fma"``
    (8 micro-batches of 32 samples, then one of 4)."""
    runs = []
    for m in micro_batches:
        key = (m["size"], m["algo"])
        if runs and runs[-1][0] == key:
            runs[-1][1] += 1
        else:
            runs.append([key, 1])
    return " + ".join(f"{count}x{size} {algo}" for (size, algo), count in runs)


def format_bytes(n):
    """Bytes as ``64 MiB``, ``1.5 MiB``, ``3 KiB`` or ``100 B`` (binary units, up to GiB)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def plans():
    """The plans chosen so far, one record per kernel (pass, shape, device, knobs).

    On the GPU a kernel is planned (benchmarked, then the Workspace Reuse
    recurrence solved) the first time it runs; on the CPU its plan is the
    forced ``micro_batch_size`` split or the whole batch. Set
    ``UCUDNN_DEBUG_OUTPUT=1`` to also print each plan to stderr when it is made.

    Returns:
      A :class:`PlanTable`: a list of dicts that prints as a table.
    """
    return PlanTable(json.loads(read_c_string(clib.ucudnn_plans_json)))


def clear_plans():
    """Forgets the recorded plans (the kernels keep their cached plans)."""
    clib.ucudnn_clear_plans()
