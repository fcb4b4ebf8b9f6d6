"""What the engine of this process holds: its planned GPU kernels, each with
its benchmark table, Pareto front and plan.

A *kernel* is one pass (forward, backward-data or backward-filter) of one
convolution at one mini-batch size N on one GPU, planned once on its first
run: the engine benchmarks the cuDNN candidates at every micro-batch size the
batch-size policy allows (the benchmark table), keeps the Pareto front of
(time, workspace) plans, and picks the fastest plan within the workspace limit
(Workspace Reuse, Oyama et al. 2018, §III-B; the front serves Workspace
Division, §III-C). :func:`tf_ucudnn.plans` lists the plans as records; this
module gives the tables behind them, for benchmarks and analysis
(``tf_ucudnn.bench`` reads them here).
"""

from tf_ucudnn import _engine


def kernels():
    """Every planned GPU kernel of this process, in the order they were planned.

    Returns:
      A list of dicts, one per kernel (empty on a CPU-only machine or before
      the first GPU convolution):

      * ``id`` (int): the kernel's number in this process
        (:func:`tf_ucudnn.division.set_kernel_limit` takes it).
      * ``device`` (int): the GPU ordinal.
      * ``pass`` (str): ``"forward"``, ``"backward-data"`` or
        ``"backward-filter"``.
      * ``shape`` (str): the convolution as text, e.g. ``"N=256 C=64 H=56
        W=56 K=64 R=3 S=3 ..."``.
      * ``key`` (dict): what the benchmark table holds for: ``pass``;
        ``conv``, the convolution (``batch``, ``in_channels``,
        ``in_height``, ``in_width``, ``out_channels``, ``filter_height``,
        ``filter_width``, ``groups``, ``stride_h``, ``stride_w``,
        ``dilation_h``, ``dilation_w``, ``pad_top``, ``pad_bottom``,
        ``pad_left``, ``pad_right``, ``out_height``, ``out_width``: ints;
        ``layout`` ``"NHWC"``/``"NCHW"``; ``dtype`` ``"float32"``,
        ``"float16"`` or ``"bfloat16"``; ``bias``, ``relu``: the fused
        epilogue, bools); ``allow_tf32`` and ``deterministic`` (bools);
        ``workspace_limit`` (the op's, bytes); ``policy`` (batch-size
        policy); ``forced_micro_batch`` (samples, 0 for none); ``engines``
        (candidate set: ``"all"``, ``"legacy"``, ``"graph"``, ``"auto"``);
        ``graph`` (``search``, ``layouts``, ``prune_factor``: the
        ``UCUDNN_GRAPH_*`` knobs it was searched with).
      * ``total_workspace`` (int): bytes of its Workspace Division group, 0
        for none.
      * ``seeded`` (bool): it planned from the stored table of its
        convolution (the benchmark database's, or one a kernel of another N
        measured) instead of benchmarking every size.
      * ``algos`` (list of dicts): the candidates: ``algo`` (cuDNN algorithm
        number), ``math_type`` (cuDNN math type), ``deterministic`` and, for
        a graph-API engine, ``engine``: ``id``, ``transposed`` (runs on
        transposed tensors), ``knobs`` as ``[knob, value]`` pairs.
      * ``table`` (list of dicts): the benchmark table, one row per
        (micro-batch size, candidate) measured: ``size`` (samples),
        ``algo`` (index into ``algos``), ``time_ms`` (ms per call),
        ``workspace_bytes`` (bytes).
      * ``planned_limit`` (int): the workspace limit its plan uses now, bytes.
      * ``plan`` and ``front`` (a dict and a list of dicts): the plan it runs
        and its Pareto front, each a plan of ``time_ms`` (predicted, ms),
        ``workspace_bytes`` (bytes) and ``micro_batches``: ``size``
        (samples), ``algo`` (the candidate's name), ``workspace_bytes``,
        ``time_ms``.
    """
    return _engine.kernels()


def time_overhead(kernel_id, iters):
    """Times one planned kernel's plan through the engine against one direct
    cuDNN call with the same algorithm, descriptors and workspace.

    The measurement is benchmark-only code in a library of its own,
    ``tf_ucudnn/_ucudnn_overhead.so`` (``make build-bench`` in a checkout;
    it is not in the wheel). Both sides are timed in the engine, wall-clock
    from a synced stream to a synced stream over ``iters`` calls, the median
    of 5 alternating repeats (``tf-ucudnn bench overhead``).

    Args:
      kernel_id: the ``id`` of a kernel of :func:`kernels` whose plan is one
        micro-batch.
      iters: calls per timed repeat (> 0).

    Returns:
      A dict of ms per call: ``plan_ms`` (through the engine: allocations,
      the filter's layout transform, the plan lookup), ``direct_ms`` (the
      direct cuDNN call, the filter already in cuDNN's layout),
      ``transform_ms`` (the filter's transform alone), ``plan_host_ms`` and
      ``direct_host_ms`` (the host's time to enqueue each).

    Raises:
      ValueError: the overhead library is missing (the message says how to
        build it), an unknown id, a plan of several micro-batches, or no
        cuDNN; the message is the engine's.
    """
    return _engine.time_overhead(kernel_id, iters)
