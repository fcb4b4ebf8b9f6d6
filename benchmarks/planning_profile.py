"""Sums the per-kernel planning cost lines that UCUDNN_DEBUG_OUTPUT=1 prints
("tf_ucudnn: benchmarked <pass> <conv> at N sizes: legacy ... s; graph: ...")
into one line per pass and a total, to see where cold planning time goes;
then, from the per-trial lines ("  eng0{} (workspace 0 bytes): first run 1.2 ms,
screened 1.1 ms, ..."; "loaded" where the engine had run before and needed no
warm-up), the GPU time spent timing each graph engine (first run, screening
run and the timed runs), the most expensive first.

    UCUDNN_DEBUG_OUTPUT=1 python -m tf_ucudnn.bench.models --worker vgg16 rewrite 67108864 64 \
        float32 2> debug.log      # as gpu_session.sh model_planning does
    python benchmarks/planning_profile.py debug.log
    python benchmarks/planning_profile.py debug.log --candidates-against other_debug.log

A log may be gzipped (``.gz``, as the committed ones under docs/results/ are).

On a log taken before the far-behind rule (cc/engine/screening.h:
a candidate 10x slower than the fastest kept at its size keeps its screening
time and is not timed at larger sizes), it also prints the GPU time of the
runs that rule would have skipped.

Where the log has them (" host: ..." after each kernel's cost line), the
host side of "heuristics and plans" summed by step: operation graphs,
heuristics mode A queries (and, in newer logs, the part of them spent fetching
and reading configs), fallback lists, and the plan builds' engine
configs and execution plans.

Then how much slower a screening run (timed from an idle GPU) is than the
timed runs after it (back to back), for runs under 0.2 ms: the host's launch
latency in single-run times.

Last, a replay of a rule that was built, measured and reverted: time the
whole mini-batch first, and the smaller micro-batch sizes only where the
workspace limit kept a proposed candidate out at the whole batch
(micro-batches exist to let such candidates fit; μ-cuDNN, arXiv:1804.04806,
§3). It prints the kernels that would stop at the whole batch, the timed
trials they would skip (their GPU time, and the heuristics-and-plans time pro
rata), and the divided plans that would change. The replay is optimistic: it
counts a candidate pruned at a smaller size as not kept out, which a search
that starts at the whole batch cannot know. Built, 12 of ResNet-50's 59
kernels stopped at the whole batch (the replay said 35), slow engines had
their screening runs at the whole batch, and the cold first step went from
12.49 to 16.72 s (docs/notebook.md, 2026-11-24).
"""
import collections
import gzip
import math
import re
import statistics
import sys

LINE = re.compile(r"tf_ucudnn: benchmarked (\S+) .* legacy ([\d.]+) s; graph: (\d+) candidates "
                  r"\(heuristics and plans ([\d.]+) s\), (\d+) runs ([\d.]+) s, (\d+) engines pruned")
FIELDS = ("kernels", "legacy_s", "candidates", "plans_s", "runs", "runs_s", "pruned")
# Logs since the timing gate (cuda_check.h's StreamGate) count the gates that opened by
# themselves: a launch waited at the gate for a kernel load, and the runs were timed again.
GATES = re.compile(r"engines pruned, (\d+) gates opened by themselves")
TRIAL = re.compile(r"^  (eng\d+)\S* \(workspace \d+ bytes\): (?:first run ([\d.]+) ms|loaded), "
                   r"screened ([\d.]+) ms(.*?)(?:, timed ([\d.]+) ms)?$")
TIMED_RUNS = 2  # runs after the screening run (graph_candidates.cc: kTimedRuns - 1)
FAR_BEHIND = 10  # screening.h: kFarBehindFactor
SIZE = re.compile(r"^ timed at (\d+):")
LISTED_SIZE = re.compile(r"^ size (\d+):")
LISTED = re.compile(r"^  (eng\S+) \[[^\]]*\] candidate$")
TRIAL_NAME = re.compile(r"^  (eng\S+) \(workspace (\d+) bytes\)")
RETIMED = re.compile(r"^  (eng\S+): re-timed [\d.]+ ms -> ([\d.]+) ms")
BATCH = re.compile(r" N=(\d+) ")
PLAN = re.compile(r"^tf_ucudnn: /\S+ (\S+ .*): (\d+x\d+.*)$")
KERNEL = re.compile(r"tf_ucudnn: benchmarked (.*) at \d+ sizes")
HOST = re.compile(r"^ host: (\d+) op graphs ([\d.]+) s, (\d+) heuristics queries ([\d.]+) s"
                  r"(?: \(configs fetched ([\d.]+) s\))?, fallback lists ([\d.]+) s, "
                  r"(\d+) plan builds: engine configs ([\d.]+) s, plans ([\d.]+) s")


def trial_ms(first, screen, rest):
    """GPU ms of one trial: its first run, screening run and timed runs."""
    return first + screen + TIMED_RUNS * rest


def read_log(path):
    """The log's events in order: ("kernel", cost-line match, N, convolution),
    ("host", the numbers of its " host:" line), ("listed_size", int) and
    ("listed", engine name) for the candidates proposed at a size, ("size",
    int) where that size's timed trials begin, ("trial", name, first_ms,
    screen_ms, rest_ms, what, engine name, workspace bytes) with rest_ms the
    mean of the timed runs after the screening run (0 if none) and `what` the
    rest of the line (", pruned from larger sizes, dominated", ...),
    ("retimed", engine name, ms) where re-timing near the best replaced a
    trial's time, and ("plan", text, convolution). A convolution is named as the log names it ("forward N=128
    C=64 ... NHWC float32")."""
    events = []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = LINE.search(line)
            if m:
                batch = BATCH.search(line)
                events.append(("kernel", m, int(batch.group(1)) if batch else 0,
                               KERNEL.search(line).group(1)))
            elif HOST.match(line):
                # Logs before the split of mode A's time have no "configs fetched":
                # NaN there, so that a sum over such lines is NaN too.
                events.append(("host", tuple(math.nan if v is None else float(v)
                                             for v in HOST.match(line).groups())))
            elif SIZE.match(line):
                events.append(("size", int(SIZE.match(line).group(1))))
            elif LISTED_SIZE.match(line):
                events.append(("listed_size", int(LISTED_SIZE.match(line).group(1))))
            elif LISTED.match(line):
                events.append(("listed", LISTED.match(line).group(1)))
            elif TRIAL.match(line):
                t = TRIAL.match(line)
                full, workspace = TRIAL_NAME.match(line).groups()
                events.append(("trial", t.group(1), float(t.group(2) or 0), float(t.group(3)),
                               float(t.group(5) or 0), t.group(4), full, int(workspace)))
            elif RETIMED.match(line):
                full, ms = RETIMED.match(line).groups()
                events.append(("retimed", full, float(ms)))
            elif PLAN.match(line):
                plan = PLAN.match(line)
                events.append(("plan", plan.group(2), plan.group(1)))
    return events


def far_behind_savings(events):
    """ms of runs the far-behind rule would have skipped in the log's trials."""
    saved, far, kept = 0.0, set(), []
    for event in events:
        if event[0] == "kernel":  # sizes ascend from here
            far = set()
        elif event[0] == "size":
            kept = []
        elif event[0] == "trial" and "far behind" not in event[5]:
            _, name, first, screen, rest, what, _, _ = event
            if name in far:  # pruned at a smaller size
                saved += trial_ms(first, screen, rest)
                continue
            if kept and screen > FAR_BEHIND * min(kept):
                far.add(name)
                saved += TIMED_RUNS * rest
            if "dominated" not in what:
                kept.append((screen + TIMED_RUNS * rest) / (1 + TIMED_RUNS) if rest else screen)
    return saved


def kernels_of(events):
    """Per kernel: its batch, plans_s, the candidates listed and the trials
    timed at each size ({size: [(engine name, GPU ms, what)]}) and its plan."""
    kernels, listing = [], None
    for event in events:
        if event[0] == "kernel":
            kernels.append(dict(batch=event[2], plans_s=float(event[1].group(4)),
                                listed={}, timed={}, plan=""))
        elif not kernels:
            continue
        elif event[0] == "listed_size":
            listing = kernels[-1]["listed"].setdefault(event[1], set())
        elif event[0] == "listed":
            listing.add(event[1])
        elif event[0] == "size":
            timed = kernels[-1]["timed"].setdefault(event[1], [])
        elif event[0] == "trial":
            _, _, first, screen, rest, what, full, _ = event
            timed.append((full, trial_ms(first, screen, rest), what))
        elif event[0] == "plan" and not kernels[-1]["plan"]:
            kernels[-1]["plan"] = event[1]
    return kernels


def workspace_bound_replay(events):
    """(kernels that would stop at the whole batch, kernels, trials skipped,
    trials, GPU ms skipped, heuristics-and-plans s skipped pro rata, plans
    that would change): the rule "smaller sizes only where the workspace limit
    kept a proposed candidate out at the whole batch" replayed on the log.
    A candidate listed at the batch but not timed there, and not pruned at a
    smaller size, was kept out by the limit (or failed to build a plan)."""
    stops, skipped, trials, gpu_ms, plans_s, changed = 0, 0, 0, 0.0, 0.0, []
    kernels = kernels_of(events)
    for k in kernels:
        n = k["batch"]
        count = sum(len(t) for t in k["timed"].values())
        trials += count
        if n not in k["listed"]:
            continue
        pruned = {name for size, ts in k["timed"].items() if size < n
                  for name, _, what in ts if "pruned from larger sizes" in what}
        timed_at_n = {name for name, _, _ in k["timed"].get(n, [])}
        if k["listed"][n] - timed_at_n - pruned:
            continue
        stops += 1
        below = [t for size, ts in k["timed"].items() if size < n for t in ts]
        skipped += len(below)
        gpu_ms += sum(ms for _, ms, _ in below)
        plans_s += k["plans_s"] * len(below) / count if count else 0.0
        if not k["plan"].startswith("1x"):
            changed.append(k["plan"])
    return stops, len(kernels), skipped, trials, gpu_ms, plans_s, changed


def proposals(path):
    """The candidates proposed per (convolution, micro-batch size) of a debug
    log, as sets of engine names; and the plans' (convolution, size, engine)
    entries."""
    listed, plans, kernel, size = collections.defaultdict(set), [], None, None
    for event in read_log(path):
        if event[0] == "kernel":
            kernel, size = event[3], None
        elif event[0] == "listed_size":
            size = event[1]
        elif event[0] == "listed" and kernel is not None:
            listed[(kernel, size)].add(event[1])
        elif event[0] == "plan":
            for _, samples, engine in re.findall(r"(\d+)x(\d+) (eng\S+)", event[1]):
                plans.append((event[2], int(samples), engine))
    return listed, plans


def compare_candidates(path, other):
    """Prints how the candidates proposed in `path` differ from `other`'s (two
    runs of the same model with different proposal rules), and how many plan
    entries of each run use an engine the other run did not propose."""
    a, plans_a = proposals(path)
    b, plans_b = proposals(other)
    common = [k for k in a if k in b]
    print(f"(kernel, size) pairs: {len(a)} and {len(b)}, {len(common)} in both, "
          f"{sum(a[k] == b[k] for k in common)} with the same candidates; candidates only in "
          f"the first: {sum(len(a[k] - b[k]) for k in common)} of {sum(len(a[k]) for k in common)}, "
          f"only in the second: {sum(len(b[k] - a[k]) for k in common)}")
    for name, plans, own, theirs in (("first", plans_a, a, b), ("second", plans_b, b, a)):
        used = [e for e in plans if (e[0], e[1]) in theirs and e[2] not in theirs[(e[0], e[1])]]
        print(f"{name} run: {len(plans)} plan entries, {len(used)} with an engine the other "
              f"run did not propose at that size")
        for kernel, samples, engine in used[:10]:
            print(f"  {kernel[:80]} at {samples}: {engine}")


SHORT_MS = 0.2  # runs this short show the host's launch latency most


def launch_latency_us(events, short_ms=SHORT_MS):
    """How much slower a screening run (one run timed from an idle GPU) is
    than the mean of the timed runs after it (enqueued back to back, so
    only the first of them starts from an idle GPU), in microseconds, for
    the trials whose timed runs took under `short_ms`: (count, 10th, 50th
    and 90th percentile), or None for fewer than 10 such trials."""
    gaps = [1e3 * (event[3] - event[4]) for event in events
            if event[0] == "trial" and 0 < event[4] < short_ms]
    if len(gaps) < 10:
        return None
    deciles = statistics.quantiles(gaps, n=10)
    return len(gaps), deciles[0], deciles[4], deciles[8]


def main(path):
    events = read_log(path)
    totals = collections.defaultdict(lambda: [0.0] * len(FIELDS))
    engines = collections.defaultdict(lambda: [0, 0, 0.0])  # trials, dominated, ms
    gates = None  # gates that opened by themselves, where the log counts them
    for event in events:
        if event[0] == "kernel":
            m = event[1]
            counted = GATES.search(m.string)
            if counted:
                gates = (gates or 0) + int(counted.group(1))
            row = totals[m.group(1)]
            for i, v in enumerate((1,) + tuple(float(g) for g in m.groups()[1:])):
                row[i] += v
        elif event[0] == "trial":
            _, name, first, screen, rest, what, _, _ = event
            e = engines[name]
            e[0] += 1
            e[1] += "dominated" in what
            e[2] += trial_ms(first, screen, rest)
    totals["all"] = [sum(r[i] for r in list(totals.values())) for i in range(len(FIELDS))]
    print(f"{'pass':<16}" + "".join(f"{h:>12}" for h in FIELDS))
    for name, row in totals.items():
        print(f"{name:<16}" + "".join(f"{v:>12.3f}" if "_s" in h else f"{int(v):>12d}"
                                      for h, v in zip(FIELDS, row)))
    if gates is not None:
        print(f"\ngates that opened by themselves (a launch waited for a kernel load; its runs "
              f"timed again): {gates}")
    host = [sum(column) for column in zip(*(e[1] for e in events if e[0] == "host"))]
    if host:
        fetched = "" if math.isnan(host[4]) else f" (configs fetched {host[4]:.3f} s)"
        print(f"\nhost side of heuristics and plans: {int(host[0])} op graphs {host[1]:.3f} s, "
              f"{int(host[2])} heuristics queries: mode A {host[3]:.3f} s{fetched}, fallback "
              f"lists {host[5]:.3f} s; {int(host[6])} plan builds: engine configs "
              f"{host[7]:.3f} s, execution plans {host[8]:.3f} s")
    latency = launch_latency_us(events)
    if latency:
        print(f"\nscreening run against the timed runs' mean, {latency[0]} trials under "
              f"{SHORT_MS} ms: +{latency[1]:.1f} / +{latency[2]:.1f} / +{latency[3]:.1f} us "
              f"(10th / 50th / 90th percentile; the host's launch latency)")
    if engines:
        print(f"\n{'engine':<10}{'trials':>8}{'dominated':>10}{'GPU s':>9}")
        for name, (n, dominated, ms) in sorted(engines.items(), key=lambda kv: -kv[1][2])[:15]:
            print(f"{name:<10}{n:>8}{dominated:>10}{ms / 1e3:>9.3f}")
        saved = far_behind_savings(events)
        if saved:
            print(f"\nthe far-behind rule would have skipped {saved / 1e3:.3f} s of these runs")
        stops, kernels, skipped, trials, gpu_ms, plans_s, changed = workspace_bound_replay(events)
        if kernels:
            print(f"\nreplay (optimistic; see this script's docstring), smaller sizes only where "
                  f"the limit kept a candidate out at the whole batch: "
                  f"{stops} of {kernels} kernels stop at the whole batch, skipping {skipped} of "
                  f"{trials} timed trials ({gpu_ms / 1e3:.3f} s of their GPU runs, about "
                  f"{plans_s:.3f} s of heuristics and plans); divided plans that would change: "
                  f"{len(changed)}")
            for plan in changed:
                print(f"  {plan[:100]}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--candidates-against":
        compare_candidates(sys.argv[1], sys.argv[3])
    else:
        main(sys.argv[1])
