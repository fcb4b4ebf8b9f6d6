"""Sums the per-kernel planning cost lines that UCUDNN_DEBUG_OUTPUT=1 prints
("tf_ucudnn: benchmarked <pass> <conv> at N sizes: legacy ... s; graph: ...")
into one line per pass and a total, to see where cold planning time goes.

    UCUDNN_DEBUG_OUTPUT=1 python benchmarks/planning_cold_warm.py 2> debug.log
    python benchmarks/planning_profile.py debug.log
"""
import collections, re, sys

LINE = re.compile(r"tf_ucudnn: benchmarked (\S+) .* legacy ([\d.]+) s; graph: (\d+) candidates "
                  r"\(heuristics and plans ([\d.]+) s\), (\d+) runs ([\d.]+) s, (\d+) engines pruned")
FIELDS = ("kernels", "legacy_s", "candidates", "plans_s", "runs", "runs_s", "pruned")


def main(path):
    totals = collections.defaultdict(lambda: [0.0] * len(FIELDS))
    with open(path, errors="replace") as f:
        for m in map(LINE.search, f):
            if not m:
                continue
            row = totals[m.group(1)]
            for i, v in enumerate((1,) + tuple(float(g) for g in m.groups()[1:])):
                row[i] += v
    totals["all"] = [sum(r[i] for r in list(totals.values())) for i in range(len(FIELDS))]
    print(f"{'pass':<16}" + "".join(f"{h:>12}" for h in FIELDS))
    for name, row in totals.items():
        print(f"{name:<16}" + "".join(f"{v:>12.3f}" if "_s" in h else f"{int(v):>12d}"
                                      for h, v in zip(FIELDS, row)))


if __name__ == "__main__":
    main(sys.argv[1])
