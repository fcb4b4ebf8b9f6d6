"""Sums the per-kernel planning cost lines that UCUDNN_DEBUG_OUTPUT=1 prints
("tf_ucudnn: benchmarked <pass> <conv> at N sizes: legacy ... s; graph: ...")
into one line per pass and a total, to see where cold planning time goes;
then, from the per-trial lines ("  eng0{} (workspace 0 bytes): first run 1.2 ms,
screened 1.1 ms, ..."; "loaded" where the engine had run before and needed no
warm-up), the GPU time spent timing each graph engine (first run, screening
run and the timed runs), the most expensive first.

    UCUDNN_DEBUG_OUTPUT=1 python benchmarks/planning_cold_warm.py 2> debug.log
    python benchmarks/planning_profile.py debug.log

On a log taken before the far-behind rule (cc/kernels/engine/screening.h:
a candidate 10x slower than the fastest kept at its size keeps its screening
time and is not timed at larger sizes), it also prints the GPU time of the
runs that rule would have skipped.
"""
import collections, re, sys

LINE = re.compile(r"tf_ucudnn: benchmarked (\S+) .* legacy ([\d.]+) s; graph: (\d+) candidates "
                  r"\(heuristics and plans ([\d.]+) s\), (\d+) runs ([\d.]+) s, (\d+) engines pruned")
FIELDS = ("kernels", "legacy_s", "candidates", "plans_s", "runs", "runs_s", "pruned")
TRIAL = re.compile(r"^  (eng\d+)\S* \(workspace \d+ bytes\): (?:first run ([\d.]+) ms|loaded), "
                   r"screened ([\d.]+) ms(.*?)(?:, timed ([\d.]+) ms)?$")
TIMED_RUNS = 2  # runs after the screening run (graph_candidates.cc: kTimedRuns - 1)
FAR_BEHIND = 10  # screening.h: kFarBehindFactor
SIZE = re.compile(r"^ timed at (\d+):")


def far_behind_savings(path):
    """ms of runs the far-behind rule would have skipped in `path`'s trials."""
    saved, far, kept = 0.0, set(), []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("tf_ucudnn: benchmarked"):  # a kernel: sizes ascend from here
                far = set()
                continue
            if SIZE.match(line):
                kept = []
                continue
            t = TRIAL.match(line)
            if not t or "far behind" in t.group(4):
                continue
            first, screen = float(t.group(2) or 0), float(t.group(3))
            rest = float(t.group(5) or 0)
            if t.group(1) in far:  # pruned at a smaller size
                saved += first + screen + TIMED_RUNS * rest
                continue
            if kept and screen > FAR_BEHIND * min(kept):
                far.add(t.group(1))
                saved += TIMED_RUNS * rest
            if "dominated" not in t.group(4):
                kept.append((screen + TIMED_RUNS * rest) / (1 + TIMED_RUNS) if rest else screen)
    return saved


def main(path):
    totals = collections.defaultdict(lambda: [0.0] * len(FIELDS))
    engines = collections.defaultdict(lambda: [0, 0, 0.0])  # trials, dominated, ms
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                row = totals[m.group(1)]
                for i, v in enumerate((1,) + tuple(float(g) for g in m.groups()[1:])):
                    row[i] += v
                continue
            t = TRIAL.match(line.rstrip("\n"))
            if t:
                e = engines[t.group(1)]
                e[0] += 1
                e[1] += "dominated" in t.group(4)
                e[2] += (float(t.group(2) or 0) + float(t.group(3))
                         + TIMED_RUNS * float(t.group(5) or 0))
    totals["all"] = [sum(r[i] for r in list(totals.values())) for i in range(len(FIELDS))]
    print(f"{'pass':<16}" + "".join(f"{h:>12}" for h in FIELDS))
    for name, row in totals.items():
        print(f"{name:<16}" + "".join(f"{v:>12.3f}" if "_s" in h else f"{int(v):>12d}"
                                      for h, v in zip(FIELDS, row)))
    if engines:
        print(f"\n{'engine':<10}{'trials':>8}{'dominated':>10}{'GPU s':>9}")
        for name, (n, dominated, ms) in sorted(engines.items(), key=lambda kv: -kv[1][2])[:15]:
            print(f"{name:<10}{n:>8}{dominated:>10}{ms / 1e3:>9.3f}")
        saved = far_behind_savings(path)
        if saved:
            print(f"\nthe far-behind rule would have skipped {saved / 1e3:.3f} s of these runs")


if __name__ == "__main__":
    main(sys.argv[1])
