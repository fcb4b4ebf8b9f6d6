"""Do plans and step times hold from one process to the next? Trains MODEL at N in
K fresh processes per mode (no benchmark database: each plans from scratch),
stock TF (8 GiB) in the same run. Prints, per mode, the steady step of each process
(ms), their spread (max / min) and, for tf_ucudnn, how many kernels got a
different plan in some process, and how many of those had a best candidate
more than 5 % ahead of the second (where a stable plan is expected); writes
every process's result to --json.

    python benchmarks/plan_spread.py resnet50 128 --processes 5
    python benchmarks/plan_spread.py vgg16 64 --processes 5 --xla
    python benchmarks/plan_spread.py resnet50 128 --without-retime  # re-timing's effect
"""
import argparse
import json

from tf_ucudnn.bench import harness, models
from tf_ucudnn.units import parse_bytes

# A candidate this far ahead of the second should win in every process.
CLEAR_LEAD = 0.05


def plan_differences(runs):
    """Kernels (pass, shape) whose plan differs between the ``runs`` (results
    of models.run_worker with ``kernels``): ``[(pass, shape, {plan: count},
    smallest gap)]``."""
    plans, gaps = {}, {}
    for run in runs:
        for k in run.get("kernels", []):
            key = (k["pass"], k["shape"])
            plans.setdefault(key, []).append(k["plan"])
            if k["gap"] is not None:
                gaps[key] = min(gaps.get(key, k["gap"]), k["gap"])
    out = []
    for key, seen in plans.items():
        if len(set(seen)) > 1:
            counts = {plan: seen.count(plan) for plan in dict.fromkeys(seen)}
            out.append((*key, counts, gaps.get(key)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=sorted(models.MODEL_SPECS))
    parser.add_argument("batch", type=int)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--xla", action="store_true",
                        help="stock XLA and tf_ucudnn under XLA instead of without")
    parser.add_argument("--limit", default="64MiB", help="tf_ucudnn's workspace limit")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per process")
    parser.add_argument("--json", default=None)
    parser.add_argument("--without-retime", action="store_true",
                        help="also tf_ucudnn with UCUDNN_GRAPH_RETIME=off (3-run candidate "
                             "times), in the same alternation")
    args = parser.parse_args()
    limit = parse_bytes(args.limit)
    ours = "ucudnn-xla" if args.xla else "rewrite"
    # label -> (bench mode, extra environment)
    settings = {("stock-xla" if args.xla else "stock"): ("stock-xla" if args.xla else "stock", {}),
                ours: (ours, {})}
    if args.without_retime:
        settings[ours + ", retime off"] = (ours, {"UCUDNN_GRAPH_RETIME": "off"})
    results = {label: [] for label in settings}
    for i in range(args.processes):
        for label, (mode, env) in settings.items():  # alternating: a drift of the machine hits all
            # Stock TF as its model benchmark runs it: TF's limit at 8 GiB.
            r = models.launch(args.model, mode,
                              models.REFERENCE_LIMIT if mode.startswith("stock") else limit,
                              args.batch, args.timeout, extra_env=env)
            results[label].append(r)
            print(f"process {i + 1}, {label}: "
                  + (r["error"] if "error" in r else f"{r['step_ms']:.2f} ms"), flush=True)
    summary = {}
    for label, runs in results.items():
        steps = [r["step_ms"] for r in runs if "error" not in r]
        differing = plan_differences([r for r in runs if "error" not in r])
        summary[label] = dict(
            step_ms=steps, spread=max(steps) / min(steps) if steps else None,
            kernels=len(runs[0].get("kernels", [])) if runs and "error" not in runs[0] else None,
            differing_plans=len(differing),
            differing_with_clear_lead=sum(1 for *_, gap in differing
                                          if gap is not None and gap > CLEAR_LEAD),
            differing_detail=[dict(zip(("pass", "shape", "plans", "gap"), d)) for d in differing])
        s = summary[label]
        spread = "-" if s["spread"] is None else f"{s['spread']:.3f}"
        print(f"{label}: steps {', '.join(f'{t:.2f}' for t in steps)} ms; spread "
              f"{spread}" + ("" if label.startswith("stock") else
                                    f"; {s['differing_plans']} of {s['kernels']} kernels "
                                    f"planned differently, {s['differing_with_clear_lead']} "
                                    f"of them with a lead over {CLEAR_LEAD:.0%}"), flush=True)
    if args.json:
        harness.write_json(args.json, dict(model=args.model, batch=args.batch, xla=args.xla,
                                           limit=limit, summary=summary, runs=results))


if __name__ == "__main__":
    main()
