"""`plans()`: the micro-batch plans the kernels have chosen so far in this process."""

import re

from tf_ucudnn import _engine, table
from tf_ucudnn.units import format_bytes  # noqa: F401  (also tf_ucudnn.plan_registry.format_bytes)


class PlanTable(list):
    """A list of plan records (dicts, fields as :func:`plans` lists them)
    that prints as a table: device, pass, convolution, micro-batches,
    workspace and predicted ms.
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
    """The plans chosen so far in this process, one record per kernel.

    A kernel is one pass (forward, backward-data or backward-filter) of one
    convolution (shapes, layout, dtype, knobs) on one device. On the GPU it
    is planned the first time it runs: its micro-batch sizes are
    benchmarked (or read from the benchmark database) and the Workspace
    Reuse recurrence picks the fastest split within its workspace limit
    (Oyama et al. 2018, §III-B); Workspace Division replans it within its
    share and adds a record (§III-C). On the CPU its plan is the forced
    ``micro_batch_size`` split or the whole batch, with no benchmark and no
    workspace. Set ``UCUDNN_DEBUG_OUTPUT=1`` to also print each plan to
    stderr when it is made; :func:`clear_plans` forgets the records.

    Returns:
      A :class:`PlanTable`: a list of dicts, in the order the kernels were
      planned, that prints as a table. Each dict has:

      - ``device`` (str): the TF device, e.g.
        ``"/job:localhost/replica:0/task:0/device:GPU:0"``.
      - ``pass`` (str): ``"forward"``, ``"backward-data"`` or
        ``"backward-filter"`` (a transposed convolution's forward pass is a
        backward-data pass).
      - ``shape`` (str): the convolution, ``"N=... C=... H=... W=... K=...
        R=... S=... stride=HxW pad=top,bottom,left,right dil=HxW groups=g
        LAYOUT DTYPE"``: batch N, input channels C, input height H and width
        W, output channels K, filter height R and width S.
      - ``batch`` (int): the mini-batch size N.
      - ``layout`` (str): ``"NHWC"`` or ``"NCHW"``.
      - ``dtype`` (str): ``"float32"``, ``"float16"`` or ``"bfloat16"``.
      - ``workspace_limit`` (int, bytes): the limit the kernel planned
        within (the op's, ``UCUDNN_DEFAULT_WORKSPACE_LIMIT``'s, or a
        Workspace Division share); under ``workspace_limit="auto"`` the
        bytes it planned within on a GPU, -2 on the CPU.
      - ``policy`` (str): the batch-size policy (``"undivided"``,
        ``"powerOfTwo"``, ``"all"``), ``"forced k"`` for
        ``micro_batch_size=k``, ``"undivided (CPU)"`` on the CPU otherwise.
      - ``micro_batches`` (list of dicts): the plan, in order; each has
        ``size`` (samples), ``algo`` (the cuDNN algorithm or engine on a
        GPU, ``"im2col-gemm"`` on the CPU), ``workspace_bytes`` (bytes)
        and ``time_ms`` (benchmarked ms; None on the CPU).
      - ``workspace_bytes`` (int, bytes): the plan's workspace, the largest
        of its micro-batches' (the micro-batches run one after another and
        share it).
      - ``time_ms`` (float, ms): the plan's predicted time, the sum of its
        micro-batches' benchmarked times; None on the CPU.
      - ``planning_ms`` (float, ms): wall-clock time the kernel spent
        planning (benchmarking or reading the database, then Workspace
        Reuse); None on the CPU and for Workspace Division's replans.
      - ``note`` (str): what else shaped the plan, ``""`` if nothing:
        e.g. ``"stored benchmark table: 6 of 7 sizes, 1 benchmarked"``
        (:func:`table_reuse` reads it), ``"benchmarked on GPUs 0, 1"``,
        ``"workspace_limit=auto: planned within N bytes (F of L free)"``,
        ``"Workspace Division group of N bytes: ..."``.
    """
    return PlanTable(_engine.plan_records())


def clear_plans():
    """Forgets the recorded plans (the kernels keep their cached plans)."""
    _engine.clear_plan_records()
