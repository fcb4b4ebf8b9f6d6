"""A worker's plans, compact, for comparing one process's plans and timings
with another's."""


def kernel_plans(kernels=None):
    """The plan of each GPU kernel of this process (or of ``kernels``, records
    of :func:`tf_ucudnn.engine_info.kernels`), compact, for comparing processes: dicts of
    ``pass``, ``shape``, ``plan`` (its micro-batches as
    :func:`tf_ucudnn.plan_registry.describe_micro_batches` words them),
    ``micro_batches`` (``[size, candidate]`` pairs, :func:`candidate_name`),
    ``times`` (ms by ``"size candidate"``: the candidates within the
    kernel's limit at most 25 % slower than the fastest of their size, at
    most 6 a size: enough to price another process's plan with this
    process's timings) and ``gap``: how much slower
    the second-best candidate within the limit was than the best at its plan's
    first micro-batch size (0.05: 5 %; None with a single candidate there)."""
    from tf_ucudnn import engine_info
    from tf_ucudnn.plan_registry import describe_micro_batches

    out = []
    for k in engine_info.kernels() if kernels is None else kernels:
        plan = k["plan"]["micro_batches"]
        size = plan[0]["size"] if plan else None
        rows = [dict(r, name=candidate_name(k["algos"][r["algo"]])) for r in k["table"]
                if r["workspace_bytes"] <= k["planned_limit"]]
        by_size = {}
        for r in sorted(rows, key=lambda r: r["time_ms"]):
            by_size.setdefault(r["size"], []).append(r)
        times = {f"{s} {r['name']}": r["time_ms"] for s, rs in by_size.items()
                 for r in rs[:6] if r["time_ms"] <= 1.25 * rs[0]["time_ms"]}
        first = [r["time_ms"] for r in by_size.get(size, [])]
        gap = first[1] / first[0] - 1 if len(first) > 1 and first[0] > 0 else None
        out.append({"pass": k["pass"], "shape": k["shape"], "plan": describe_micro_batches(plan),
                    "micro_batches": [[m["size"], _row_name(m, by_size)] for m in plan],
                    "times": times, "gap": gap})
    return out


def candidate_name(algo):
    """A candidate of the ``algos`` of :func:`tf_ucudnn.engine_info.kernels` by a name that holds from one
    process to the next: a graph-API engine as the engine names it in plans
    (``"eng51{k2=0,k27=8}"``, ``/transposed`` appended), a legacy algorithm as
    ``"legacy 1/math 1"`` (algorithm and math type numbers)."""
    engine = algo.get("engine")
    if engine is None:
        return f"legacy {algo['algo']}/math {algo['math_type']}"
    knobs = ",".join(f"k{knob}={value}" for knob, value in engine["knobs"])
    return f"eng{engine['id']}{{{knobs}}}" + ("/transposed" if engine["transposed"] else "")


def _row_name(micro_batch, by_size):
    """The :func:`candidate_name` of a plan's micro-batch: its engine's name, or
    for a legacy algorithm (named by enum in plans) the legacy row of its size
    and workspace whose time is closest to the micro-batch's."""
    if micro_batch["algo"].startswith("eng"):
        return micro_batch["algo"]
    rows = [r for r in by_size.get(micro_batch["size"], [])
            if r["name"].startswith("legacy")
            and r["workspace_bytes"] == micro_batch.get("workspace_bytes", r["workspace_bytes"])]
    if not rows:
        return micro_batch["algo"]
    return min(rows, key=lambda r: abs(r["time_ms"] - micro_batch.get("time_ms", 0.0)))["name"]
