"""The largest mini-batch that trains under a memory cap, several searches at once on one
GPU, then each cell timed alone at that N (GPU machine).

    python3 benchmarks/largest_batch.py CELL... [--concurrent 6] [--deadline 480]
        [--time [--rounds R]] [--limit 64MiB] [--json PATH]

CELL: MODEL:MODE:PRECISION:CAP:START:STEP searches (``memory_cap.step_batch``: from
START in steps of STEP, e.g. ``resnet50:stock-xla:mixed_float16:16GiB:400:16``);
MODEL:MODE:PRECISION:CAP:N is timed at N without a search. Each run is the memory-cap
benchmark's worker (``tf_ucudnn.bench.memory_cap``: TensorFlow's allocator capped,
``model.fit`` on a host-side ``tf.data`` batch) in its own process.

The searches run ``--concurrent`` cells at once on the same GPU, each process capped at
its CAP, so that their sum (plus about 0.6 GiB of CUDA context each) must fit in the
GPU's memory. A search's run trains two steps: whether N trains and its peak are all it
answers, since the runs share the GPU and their times mean nothing (XLA's and cuDNN's
autotuning then times under contention too, which can move a size at the edge); a run
killed by ``--deadline`` answers nothing about its N, and its search stops there (the
table's ">= N (deadline)", its N ratio then a bound: ">= 1.50x"). With ``--time``, every
cell then trains alone at its largest N for the sweep's 5 steps x 3 epochs, in the order
given: images/s, step ms and peak, and the ratio to the stock cell
(``stock``/``stock-xla``) of the same model, precision and cap. With ``--rounds R`` the
cells are timed R times, a process each, in rounds whose order alternates (as given, then
reversed), since a cell's images/s moves from process to process (ResNet-50 at 8 GiB on
an H100: stock XLA's 3309–3665 in four processes): each cell's median run, its range, and
the ratio of medians. No run starts within 120 s of ``--deadline`` (seconds from the
start), for a machine lent by the call.

Prints the table and writes every run as JSON (``--json``, default
$OUT/largest_batch.json; after the searches and after each timed run, so that a call cut
short keeps what it measured); a timed run keeps tf_ucudnn's lines of its worker's
stderr (``ucudnn_log``: with ``UCUDNN_DEBUG_OUTPUT=1``, every plan).
"""

import argparse
import concurrent.futures
import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_SEARCH_STEPS = dict(steps_per_epoch=2, epochs=1)  # enough to know whether N trains
_MARGIN_S = 120  # no run starts this close to the deadline
_RUN_TIMEOUT_S = 1800  # a run's own limit; a run given less ends at the deadline


def parse_cell(text):
    """``MODEL:MODE:PRECISION:CAP:START[:STEP]`` as a dict; CAP in bytes; ``step`` None: timed only."""
    from tf_ucudnn.bench import memory_cap
    from tf_ucudnn.units import parse_bytes

    parts = text.split(":")
    if len(parts) not in (5, 6) or parts[1] not in memory_cap.MODES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a cell is MODEL:MODE:PRECISION:CAP:START:STEP or MODEL:MODE:PRECISION:"
            f"CAP:N, MODE one of {', '.join(memory_cap.MODES)}")
    step = int(parts[5]) if len(parts) == 6 else None
    return dict(model=parts[0], mode=parts[1], precision=parts[2], cap=parse_bytes(parts[3]),
                start=int(parts[4]), step=step)


def _label(cell):
    from tf_ucudnn.units import format_bytes

    return f"{cell['model']} {cell['mode']} {cell['precision']} {format_bytes(cell['cap'])}"


def _stopped_by_deadline(cell):
    """Whether ``cell``'s search ended on a run the deadline skipped or killed."""
    return bool(cell["search"]) and cell["search"][-1]["status"] == "skipped"


def _largest_text(cell):
    """The table's "largest N (first failure)": ``N (FAILED)``, ``N``, ``>= N
    (deadline)`` where the deadline stopped the search, ``- (deadline)`` where it
    stopped it before any N trained, or ``-`` (``- (FAILED)``) where none did."""
    largest = cell["largest"] or "-"
    if _stopped_by_deadline(cell):
        return f">= {largest} (deadline)" if cell["largest"] else "- (deadline)"
    return f"{largest} ({cell['failed']})" if cell["failed"] else f"{largest}"


def _n_ratio_text(cell, stock):
    """The table's "N ratio": ``cell``'s largest N over ``stock``'s (its stock
    XLA cell, or None), ``>=`` where only ``cell``'s search was stopped by the
    deadline (its N a lower bound), ``<=`` where only stock's was, ``?`` where
    both were; "" where either has no N or ``cell`` was not searched."""
    if not (stock and stock["largest"] and cell["largest"] and cell["step"]):
        return ""
    bound = {(False, False): "", (True, False): ">= ", (False, True): "<= ",
             (True, True): "? "}[_stopped_by_deadline(cell), _stopped_by_deadline(stock)]
    return f"{bound}{cell['largest'] / stock['largest']:.2f}x"


def _trained(runs):
    """The runs of ``runs`` that trained (status ``ok``), in their order."""
    return [r for r in runs if r.get("status") == "ok"]


def median_run(runs):
    """The run of ``runs`` with the median images/s among those that trained (the
    higher of the middle two for an even count), else the last run; None for none."""
    ok = sorted(_trained(runs), key=lambda r: r["images_per_s"])
    if ok:
        return ok[len(ok) // 2]
    return runs[-1] if runs else None


def _spread(runs):
    """`` (LOW–HIGH)``: the range of images/s of the runs that trained, where more than one."""
    ips = [r["images_per_s"] for r in _trained(runs)]
    return f" ({min(ips):.1f}–{max(ips):.1f})" if len(ips) > 1 else ""


def main(argv=None):
    from tf_ucudnn import table
    from tf_ucudnn.bench import memory_cap
    from tf_ucudnn.units import parse_bytes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", type=parse_cell, metavar="CELL")
    parser.add_argument("--concurrent", type=int, default=6,
                        help="searches at once on the GPU (default 6)")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds from the start after which no run starts (default none)")
    parser.add_argument("--time", action="store_true",
                        help="then time each cell alone at its largest N")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --time: rounds of timing, alternating the cells' order")
    parser.add_argument("--limit", default="64MiB", help="tf_ucudnn's workspace limit, or auto")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    limit = args.limit if args.limit == memory_cap.AUTO else parse_bytes(args.limit)
    deadline = time.time() + args.deadline if args.deadline else float("inf")
    lock = threading.Lock()

    def launch(cell, batch, steps):
        left = deadline - time.time()
        if left < _MARGIN_S:
            return dict(status="skipped", message="deadline")
        sweep = dict(model=cell["model"], mode=cell["mode"], cap=cell["cap"],
                     limit=None if cell["mode"] in memory_cap.STOCK_MODES else limit)
        timeout = min(_RUN_TIMEOUT_S, left)
        r = memory_cap.launch(sweep, batch, timeout=timeout, precision=cell["precision"], **steps)
        if r["status"] == "timeout" and timeout < _RUN_TIMEOUT_S:  # ended by the deadline
            r = dict(r, status="skipped", message=f"stopped by the deadline after {left:.0f} s")
        if steps:  # a search's run: whether N trains is all it answers
            r = {k: v for k, v in r.items() if k != "ucudnn_log"}
        with lock:
            print(f"  {_label(cell)} N={batch}: {r['status']}, peak "
                  f"{(r.get('peak_bytes') or 0) / 2**30:.2f} GiB"
                  + (f", {r['images_per_s']:.1f} img/s" if not steps and r["status"] == "ok"
                     else ""), flush=True)
        return dict(r, batch=batch)

    def search(cell):
        cell["search"] = []
        if cell["step"] is None:
            cell["largest"], cell["failed"] = cell["start"], None
            return cell

        def trains(batch):
            r = launch(cell, batch, _SEARCH_STEPS)
            cell["search"].append(r)
            return r["status"]

        cell["largest"], cell["failed"] = memory_cap.step_batch(trains, start=cell["start"],
                                                                step=cell["step"])
        if _stopped_by_deadline(cell):  # no answer about the N above
            cell["failed"] = None
        return cell

    out = args.json or os.path.join(os.environ.get("OUT", "."), "largest_batch.json")

    def dump(cells):
        """Every run so far to ``out``: a call cut short keeps what it measured."""
        for cell in cells:
            cell["timed"] = median_run(cell["timings"])
        with open(out, "w") as f:
            json.dump(dict(args={k: v for k, v in vars(args).items() if k != "cells"},
                           cells=cells), f, indent=1)

    with concurrent.futures.ThreadPoolExecutor(max(1, args.concurrent)) as pool:
        cells = list(pool.map(search, args.cells))
    for cell in cells:
        cell["timings"] = []
    dump(cells)
    for round_ in range(args.rounds if args.time else 0):
        for cell in cells if round_ % 2 == 0 else cells[::-1]:
            if cell["largest"]:
                cell["timings"].append(launch(cell, cell["largest"], {}))
                dump(cells)

    def stock_of(cell):
        return next((c for c in cells if c["mode"] in memory_cap.STOCK_MODES
                     and all(c[k] == cell[k] for k in ("model", "precision", "cap"))), None)

    rows = []
    for cell in cells:
        timed, stock = cell["timed"] or {}, stock_of(cell)
        ok = timed.get("status") == "ok"
        ratio_n = _n_ratio_text(cell, stock)
        stock_ips = ((stock or {}).get("timed") or {}).get("images_per_s")
        rows.append((_label(cell), _largest_text(cell),
                     ratio_n,
                     f"{timed['images_per_s']:.1f}" + _spread(cell["timings"]) if ok
                     else timed.get("status", ""),
                     f"{timed['step_ms']:.1f}" if ok else "",
                     f"{timed['peak_bytes'] / 2**30:.2f}" if ok and timed.get("peak_bytes")
                     else "",
                     f"{timed['images_per_s'] / stock_ips:.2f}x" if ok and stock_ips else ""))
    print(table.render(("cell", "largest N (first failure)", "N ratio", "img/s", "step ms",
                        "peak GiB", "img/s ratio"), rows, align="llrrrrr"))
    print("wrote", out)


if __name__ == "__main__":
    main()
