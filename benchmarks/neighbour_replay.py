"""Which candidates should a new micro-batch size between two stored sizes
time? Replays rules on a UCUDNN_DEBUG_OUTPUT log of one process that planned
N = OLD cold and then N = NEW (the per-trial lines of both): for each rule,
how many candidates the N = NEW kernels would time at their new size (chosen
from the stored rows at the sizes below and above it, as the N = OLD kernels
kept them), and how much the sum over kernels of the fastest time at the new
size grows when only those candidates are timed.

    UCUDNN_DEBUG_OUTPUT=1 python benchmarks/new_batch_size.py resnet50 --batches 128,100 2> d.log
    python benchmarks/neighbour_replay.py d.log --old 128 --new 100

Upper bound on the loss: a candidate the rule keeps may have been dropped at
the new size as dominated by one the rule leaves out (its time is then not in
the log); such a kernel counts at twice its best time.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from planning_profile import read_log  # noqa: E402  (the one reader of these logs)

SLACK = 64 << 10  # screening.h: kWorkspaceSlack


def read_rows(events):
    """{(pass, shape without N, N): {size: {candidate: (ms, workspace bytes)}}}
    from the events of :func:`planning_profile.read_log`: the candidates each
    kernel kept at each size (not dominated), with their final times
    (re-timed where they were)."""
    rows, kernel, size = {}, None, None
    for event in events:
        if event[0] == "kernel":
            _, _, batch, convolution = event
            pass_, shape = convolution.split(" ", 1)
            kernel, size = (pass_, re.sub(r"N=\d+ ", "", shape, count=1), batch), None
            rows[kernel] = {}
        elif event[0] == "size" and kernel:
            size = event[1]
            rows[kernel][size] = {}
        elif event[0] == "trial" and kernel and size:
            _, _, _, screen, rest, what, name, workspace = event
            if "dominated" not in what:
                rows[kernel][size][name] = (rest or screen, workspace)
        elif event[0] == "retimed" and kernel and size and event[1] in rows[kernel][size]:
            _, name, ms = event
            rows[kernel][size][name] = (ms, rows[kernel][size][name][1])
    return rows


def front(row, slack_factor=1.0):
    """The row's candidates that no other beats by more than `slack_factor`
    in time with no more workspace (SLACK bytes allowed): the Pareto front."""
    return [n for n, (t, w) in row.items()
            if not any(t2 * slack_factor < t and w2 <= w + SLACK
                       for n2, (t2, w2) in row.items() if n2 != n)]


def window(row, fraction):
    """Within `fraction` of the row's fastest, and the least-workspace one."""
    if not row:
        return []
    fastest = min(t for t, _ in row.values())
    out = [n for n, (t, _) in row.items() if t <= fastest * (1 + fraction)]
    least = min(row.items(), key=lambda kv: (kv[1][1], kv[1][0]))[0]
    return out if least in out else out + [least]


RULES = [("whole rows", lambda row: list(row)),
         ("Pareto front per row", front),
         ("front with 3 % slack in time", lambda row: front(row, 1.03)),
         ("within 10 % of the fastest, plus least workspace", lambda row: window(row, 0.10)),
         ("within 20 %, plus least workspace", lambda row: window(row, 0.20))]


def replay(rows, old, new, below, above):
    """[(rule, candidates, loss, worst kernel's ratio)] over the N = `new`
    kernels of `rows`, each choosing from its N = `old` rows at `below` and
    `above`."""
    out = []
    for name, rule in RULES:
        count, best_sum, kept_sum, worst = 0, 0.0, 0.0, 1.0
        for (pass_, shape, batch), sizes in rows.items():
            stored = rows.get((pass_, shape, old), {})
            if batch != new or not sizes.get(new) or below not in stored or above not in stored:
                continue
            kept = set(rule(stored[below])) | set(rule(stored[above]))
            count += len(kept)
            at_new = sizes[new]
            best = min(t for t, _ in at_new.values())
            timed = [at_new[n][0] for n in kept if n in at_new]
            chosen = min(timed) if timed else 2 * best
            best_sum, kept_sum, worst = best_sum + best, kept_sum + chosen, max(worst, chosen / best)
        out.append((name, count, kept_sum / best_sum - 1 if best_sum else None, worst))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--old", type=int, default=128)
    parser.add_argument("--new", type=int, default=100)
    args = parser.parse_args()
    rows = read_rows(read_log(args.log))
    below = 1 << (args.new.bit_length() - 1)  # powerOfTwo's stored sizes around N = new
    above = below * 2
    print(f"{'rule':52s} {'candidates':>10s} {'loss':>8s} {'worst':>6s}")
    for name, count, loss, worst in replay(rows, args.old, args.new, below, above):
        print(f"{name:52s} {count:10d} {'-' if loss is None else f'{loss:+.2%}':>8s} "
              f"{worst:6.3f}")


if __name__ == "__main__":
    main()
