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


def read_log(path):
    """The log's events in order: ("kernel", cost-line match), ("size", int) and
    ("trial", name, first_ms, screen_ms, rest_ms, what) with rest_ms the mean of
    the timed runs after the screening run (0 if none) and `what` the rest of
    the line (", pruned from larger sizes, dominated", ...)."""
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = LINE.search(line)
            if m:
                events.append(("kernel", m))
            elif SIZE.match(line):
                events.append(("size", int(SIZE.match(line).group(1))))
            elif TRIAL.match(line):
                t = TRIAL.match(line)
                events.append(("trial", t.group(1), float(t.group(2) or 0), float(t.group(3)),
                               float(t.group(5) or 0), t.group(4)))
    return events


def far_behind_savings(events):
    """ms of runs the far-behind rule would have skipped in the log's trials."""
    saved, far, kept = 0.0, set(), []
    for event in events:
        if event[0] == "kernel":  # sizes ascend from here
            far = set()
        elif event[0] == "size":
            kept = []
        elif "far behind" not in event[5]:
            _, name, first, screen, rest, what = event
            if name in far:  # pruned at a smaller size
                saved += first + screen + TIMED_RUNS * rest
                continue
            if kept and screen > FAR_BEHIND * min(kept):
                far.add(name)
                saved += TIMED_RUNS * rest
            if "dominated" not in what:
                kept.append((screen + TIMED_RUNS * rest) / (1 + TIMED_RUNS) if rest else screen)
    return saved


def main(path):
    events = read_log(path)
    totals = collections.defaultdict(lambda: [0.0] * len(FIELDS))
    engines = collections.defaultdict(lambda: [0, 0, 0.0])  # trials, dominated, ms
    for event in events:
        if event[0] == "kernel":
            m = event[1]
            row = totals[m.group(1)]
            for i, v in enumerate((1,) + tuple(float(g) for g in m.groups()[1:])):
                row[i] += v
        elif event[0] == "trial":
            _, name, first, screen, rest, what = event
            e = engines[name]
            e[0] += 1
            e[1] += "dominated" in what
            e[2] += first + screen + TIMED_RUNS * rest
    totals["all"] = [sum(r[i] for r in list(totals.values())) for i in range(len(FIELDS))]
    print(f"{'pass':<16}" + "".join(f"{h:>12}" for h in FIELDS))
    for name, row in totals.items():
        print(f"{name:<16}" + "".join(f"{v:>12.3f}" if "_s" in h else f"{int(v):>12d}"
                                      for h, v in zip(FIELDS, row)))
    if engines:
        print(f"\n{'engine':<10}{'trials':>8}{'dominated':>10}{'GPU s':>9}")
        for name, (n, dominated, ms) in sorted(engines.items(), key=lambda kv: -kv[1][2])[:15]:
            print(f"{name:<10}{n:>8}{dominated:>10}{ms / 1e3:>9.3f}")
        saved = far_behind_savings(events)
        if saved:
            print(f"\nthe far-behind rule would have skipped {saved / 1e3:.3f} s of these runs")


if __name__ == "__main__":
    main(sys.argv[1])
