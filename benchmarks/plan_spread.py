"""Do plans and step times hold from one process to the next? Trains MODEL at N in
K fresh processes per mode (no benchmark database: each plans from scratch),
stock TF (8 GiB) in the same run. Prints, per mode, the steady step of each process
(ms), their spread (max / min) and, for tf_ucudnn, how many kernels got a
different plan in some process, how many of those had plans more than 5 %
apart (where a stable plan is expected; each process prices the plans the
others chose with its own timings) and how many had their best two candidates
more than 5 % apart in every process, with each process's prices for the
kernels of the first kind; writes every process's result to --json.

    python benchmarks/plan_spread.py resnet50 128 --processes 5
    python benchmarks/plan_spread.py vgg16 64 --processes 5 --xla
    python benchmarks/plan_spread.py resnet50 128 --without-retime  # re-timing's effect
    python benchmarks/plan_spread.py --summarize plan_spread.json  # again, from the JSON
    python benchmarks/plan_spread.py --summarize gpu0.json gpu1.json  # processes pooled
"""
import argparse
import gzip
import itertools
import json
import statistics
import time

from tf_ucudnn.bench import harness, models
from tf_ucudnn.units import parse_bytes

# A candidate this far ahead of the second should win in every process.
CLEAR_LEAD = 0.05


def plan_cost(times, micro_batches):
    """A plan's time (ms) priced with one process's ``times`` (``"size algo"`` ->
    ms, as models.kernel_plans records them); None where one of its
    micro-batches was not timed there."""
    parts = [times.get(f"{size} {algo}") for size, algo in micro_batches]
    return None if not parts or None in parts else sum(parts)


def plan_lead(runs_kernels):
    """How far apart the differing plans of one kernel are: for each pair of
    plans seen, each process prices both with its own timings; the pair's lead
    is the median of those relative differences (absolute value; 0.05: 5 %);
    the kernel's lead is the largest pair's. None where no process timed both
    plans of any pair (or the runs predate ``times``)."""
    plans = {k["plan"]: k.get("micro_batches") for k in runs_kernels}
    priced = [k["times"] for k in runs_kernels if "times" in k]
    leads = []
    for a, b in itertools.combinations(plans.values(), 2):
        if a is None or b is None:
            continue
        diffs = [cost_b / cost_a - 1 for cost_a, cost_b in
                 ((plan_cost(times, a), plan_cost(times, b)) for times in priced)
                 if cost_a and cost_b]
        if diffs:
            leads.append(abs(statistics.median(diffs)))
    return max(leads) if leads else None


def plan_prices(runs_kernels):
    """Each process's view of one kernel's differing plans: ``[(chosen plan,
    {plan: ms or None})]``, one per process, every plan seen priced with that
    process's own timings (:func:`plan_cost`). Where processes disagree about
    a lead, this shows whether the plans' times or the choice moved."""
    plans = {k["plan"]: k.get("micro_batches") for k in runs_kernels}
    return [(k["plan"], {plan: (plan_cost(k["times"], mbs) if mbs and "times" in k else None)
                         for plan, mbs in plans.items()})
            for k in runs_kernels]


def plan_differences(runs):
    """Kernels (pass, shape) whose plan differs between the ``runs`` (results
    of models.run_worker with ``kernels``): ``[(pass, shape, {plan: count},
    lead, candidate gap, prices)]``, lead as :func:`plan_lead` gives it,
    candidate gap the smallest of the processes' leads of the best candidate
    over the second at their plan's first micro-batch size, prices as
    :func:`plan_prices` gives them."""
    seen, gaps = {}, {}
    for run in runs:
        for k in run.get("kernels", []):
            key = (k["pass"], k["shape"])
            seen.setdefault(key, []).append(k)
            if k["gap"] is not None:
                gaps[key] = min(gaps.get(key, k["gap"]), k["gap"])
    out = []
    for key, kernels in seen.items():
        names = [k["plan"] for k in kernels]
        if len(set(names)) > 1:
            counts = {plan: names.count(plan) for plan in dict.fromkeys(names)}
            out.append((*key, counts, plan_lead(kernels), gaps.get(key), plan_prices(kernels)))
    return out


def summarize(results):
    """Per mode label of ``results`` (label -> the processes' results, as
    --json writes them under ``runs``): step times, spread and the differing
    plans (:func:`plan_differences`); prints them, and each process's prices
    for the kernels whose plans differ with a lead over CLEAR_LEAD."""
    summary = {}
    for label, runs in results.items():
        steps = [r["step_ms"] for r in runs if "error" not in r]
        differing = plan_differences([r for r in runs if "error" not in r])
        summary[label] = dict(
            step_ms=steps, spread=max(steps) / min(steps) if steps else None,
            kernels=len(runs[0].get("kernels", [])) if runs and "error" not in runs[0] else None,
            differing_plans=len(differing),
            differing_with_clear_lead=sum(1 for *_, lead, _gap, _prices in differing
                                          if lead is not None and lead > CLEAR_LEAD),
            differing_with_clear_gap=sum(1 for *_, gap, _prices in differing
                                         if gap is not None and gap > CLEAR_LEAD),
            differing_unpriced=sum(1 for *_, lead, _gap, _prices in differing if lead is None),
            differing_detail=[dict(zip(("pass", "shape", "plans", "lead", "candidate_gap",
                                        "prices"), d))
                              for d in differing])
        s = summary[label]
        spread = "-" if s["spread"] is None else f"{s['spread']:.3f}"
        print(f"{label}: steps {', '.join(f'{t:.2f}' for t in steps)} ms; spread "
              f"{spread}" + ("" if label.startswith("stock") else
                                    f"; {s['differing_plans']} of {s['kernels']} kernels "
                                    f"planned differently, {s['differing_with_clear_lead']} "
                                    f"of them with a lead over {CLEAR_LEAD:.0%}, "
                                    f"{s['differing_with_clear_gap']} with the best two "
                                    f"candidates over {CLEAR_LEAD:.0%} apart in every process"
                                    + (f", {s['differing_unpriced']} not priced by any "
                                       "process" if s["differing_unpriced"] else "")), flush=True)
        for d in s["differing_detail"]:
            if d["lead"] is not None and d["lead"] > CLEAR_LEAD:
                gap = "-" if d["candidate_gap"] is None else f"{d['candidate_gap']:.1%}"
                print(f"  {d['pass']} {d['shape']}: lead {d['lead']:.1%}, candidate gap {gap}; "
                      "each process's choice and prices (ms):")
                for chosen, prices in d["prices"]:
                    print(f"    {chosen}: " + ", ".join(
                        f"{plan} {'-' if ms is None else f'{ms:.4f}'}"
                        for plan, ms in prices.items()))
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", choices=sorted(models.MODEL_SPECS))
    parser.add_argument("batch", nargs="?", type=int)
    parser.add_argument("--summarize", metavar="JSON", nargs="+", default=None,
                        help="no processes: summarize the runs of JSONs this script wrote "
                        "(gzipped if they end in .gz); of several (other GPUs or runs of "
                        "the same model and N), each, then their processes pooled: plans "
                        "compared across all, the spread over all steps")
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--xla", action="store_true",
                        help="stock XLA and tf_ucudnn under XLA instead of without")
    parser.add_argument("--limit", default="64MiB", help="tf_ucudnn's workspace limit")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per process")
    parser.add_argument("--json", default=None)
    parser.add_argument("--seconds", type=float, default=None,
                        help="start no round of processes that would end past this many "
                             "seconds (as long as the rounds so far took on average); at least "
                             "two rounds run")
    parser.add_argument("--without-retime", action="store_true",
                        help="also tf_ucudnn with UCUDNN_GRAPH_RETIME=off (3-run candidate "
                             "times), in the same alternation")
    args = parser.parse_args()
    if args.summarize:
        files = []
        for path in args.summarize:
            with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
                files.append(json.load(f)["runs"])
        if len(files) == 1:
            summarize(files[0])
            return
        for path, runs in zip(args.summarize, files):
            print(f"{path}:")
            summarize(runs)
        pooled = {}
        for runs in files:
            for label, results in runs.items():
                pooled.setdefault(label, []).extend(results)
        print(f"pooled, {len(files)} files:")
        summarize(pooled)
        return
    if args.model is None or args.batch is None:
        parser.error("MODEL and BATCH are needed (or --summarize JSON)")
    limit = parse_bytes(args.limit)
    ours = "ucudnn-xla" if args.xla else "rewrite"
    # label -> (bench mode, extra environment)
    settings = {("stock-xla" if args.xla else "stock"): ("stock-xla" if args.xla else "stock", {}),
                ours: (ours, {})}
    if args.without_retime:
        settings[ours + ", retime off"] = (ours, {"UCUDNN_GRAPH_RETIME": "off"})
    results = {label: [] for label in settings}
    start = time.monotonic()
    for i in range(args.processes):
        elapsed = time.monotonic() - start
        if args.seconds and i >= 2 and elapsed * (i + 1) / i > args.seconds:
            print(f"stopping after {i} rounds: another would end past {args.seconds:.0f} s",
                  flush=True)
            break
        for label, (mode, env) in settings.items():  # alternating: a drift of the machine hits all
            # Stock TF as its model benchmark runs it: TF's limit at 8 GiB.
            r = models.launch(args.model, mode,
                              models.REFERENCE_LIMIT if mode.startswith("stock") else limit,
                              args.batch, args.timeout, extra_env=env)
            results[label].append(r)
            print(f"process {i + 1}, {label}: "
                  + (r["error"] if "error" in r else f"{r['step_ms']:.2f} ms"), flush=True)
    summary = summarize(results)
    if args.json:
        harness.write_json(args.json, dict(model=args.model, batch=args.batch, xla=args.xla,
                                           limit=limit, summary=summary, runs=results))


if __name__ == "__main__":
    main()
