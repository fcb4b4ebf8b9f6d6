"""The memory-cap benchmark's results: one row per sweep against stock
(:func:`summarize`, :func:`print_table`), one workspace limit against
another (:func:`compare_limits`), and the JSON report (:func:`report`,
:func:`merge_reports`)."""

import statistics

from tf_ucudnn import table
from tf_ucudnn.bench.memory_cap.settings import STOCK_MODES, limit_label, setting_label
from tf_ucudnn.units import format_bytes

KIND = "memory_cap"  # the JSON's "kind": figures.draw tells the reports apart by it


def _best(runs):
    """Per N that trained in all its runs: the medians; returns ``{N: dict}``."""
    by_batch = {}
    for r in runs:
        by_batch.setdefault(r["batch"], []).append(r)
    trained = {}
    for batch, group in by_batch.items():
        if any(r["status"] != "ok" for r in group):
            continue
        step_ms = statistics.median(r["step_ms"] for r in group)
        peaks = [r["peak_bytes"] for r in group if r.get("peak_bytes") is not None]
        trained[batch] = dict(step_ms=step_ms, images_per_s=1e3 * batch / step_ms,
                              first_step_s=statistics.median(r["first_step_s"] for r in group),
                              peak_bytes=max(peaks) if peaks else None, runs=len(group))
    return trained


def summarize(sweeps):
    """One row per sweep: the largest N, the best throughput and both
    against the stock modes at the same model and cap.

    Args:
      sweeps: results of :func:`run_sweep`.

    Returns:
      Dicts of ``model``, ``cap``, ``mode``, ``limit``, ``setting`` (its
      label), ``largest_batch`` (None if no N trained), ``failed_batch``
      (the smallest N above it that failed; None if none did) and its
      ``failure`` (status and ``failure_message``), ``best_images_per_s``
      and ``best_batch`` (where N / step time peaks; medians of the runs),
      ``step_ms``, ``first_step_s`` (at ``best_batch``), ``peak_bytes`` (at
      ``largest_batch``, the largest of its runs), and ``images_per_s_vs_stock``
      and ``batch_vs_stock``: the ratios to the better of ``stock`` and
      ``stock-xla`` (None where neither trained or it was not run), and
      ``unfinished`` (True for a sweep cut off while running: its largest N
      is a lower bound).
    """
    rows = []
    for sweep in sweeps:
        trained = _best(sweep["runs"])
        largest = max(trained, default=None)
        failures = [r for r in sweep["runs"]
                    if r["status"] != "ok" and (largest is None or r["batch"] > largest)]
        failed = min(failures, key=lambda r: r["batch"], default=None)
        best = max(trained, key=lambda n: trained[n]["images_per_s"], default=None)
        at_best = trained.get(best, {})
        rows.append(dict(
            model=sweep["model"], cap=sweep["cap"], mode=sweep["mode"], limit=sweep["limit"],
            setting=setting_label(sweep["mode"], sweep["limit"]), largest_batch=largest,
            failed_batch=failed and failed["batch"], failure=failed and failed["status"],
            failure_message=failed and failed.get("message"),
            best_images_per_s=at_best.get("images_per_s"), best_batch=best,
            step_ms=at_best.get("step_ms"), first_step_s=at_best.get("first_step_s"),
            peak_bytes=trained[largest]["peak_bytes"] if largest else None,
            unfinished=bool(sweep.get("unfinished"))))
    for row in rows:
        stock = [r for r in rows if r["mode"] in STOCK_MODES and r["model"] == row["model"]
                 and r["cap"] == row["cap"]]
        for key, ratio in (("best_images_per_s", "images_per_s_vs_stock"),
                           ("largest_batch", "batch_vs_stock")):
            reference = max((r[key] for r in stock if r[key]), default=None)
            row[ratio] = row[key] / reference if reference and row[key] else None
    return rows


def print_table(rows):
    """Prints :func:`summarize`'s rows: per model and cap, each setting's
    largest N, where it failed, its best images/s and their ratios to stock."""
    header = ("model", "cap", "setting", "largest N", "failed at", "best img/s", "at N",
              "vs stock", "N vs stock", "first step s", "peak GiB")

    def ratio(value):
        return "" if value is None else f"{value:.2f}x"

    cells = []
    for r in rows:
        failed = "" if r["failed_batch"] is None else f"{r['failed_batch']} {r['failure']}"
        setting = r["setting"] + (" (cut off)" if r.get("unfinished") else "")
        if r["largest_batch"] is None:
            cells.append((r["model"], format_bytes(r["cap"]), setting, "none", failed,
                          "", "", "", "", "", ""))
            continue
        cells.append((r["model"], format_bytes(r["cap"]), setting, str(r["largest_batch"]),
                      failed, f"{r['best_images_per_s']:.1f}", str(r["best_batch"]),
                      ratio(r["images_per_s_vs_stock"]), ratio(r["batch_vs_stock"]),
                      f"{r['first_step_s']:.2f}",
                      "" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**30:.2f}"))
    print(table.render(header, cells, align="lllrlrrrrrr"))


def compare_limits(sweeps, candidate, reference, *, tolerance=0.03):
    """Whether tf_ucudnn's workspace limit ``candidate`` can stand in for
    ``reference`` (e.g. ``auto`` for the default 64 MiB): per model, cap
    and mode swept at both limits, ``candidate``'s images/s over
    ``reference``'s at each N both trained, and the N that ``reference``
    trained and ``candidate`` did not. The rule for a new default: never
    more than ``tolerance`` slower, never out of memory where the old one
    trains; it holds where every row's ``holds`` is True.

    Args:
      sweeps: :func:`run_sweep` results (a report's ``sweeps``); per N the
        medians of its runs, as in :func:`summarize`.
      candidate, reference: workspace limits as the sweeps hold them: bytes,
        or :data:`AUTO`.
      tolerance: the slowdown allowed, a fraction in [0, 1) (0.03: 3 %).

    Returns:
      One dict per (model, cap, mode) swept at both limits, in the sweeps'
      order: ``model``, ``cap``, ``mode``, ``ratios`` ({N: ratio} over the N
      both trained), ``worst_batch`` and ``worst_ratio`` (the smallest
      ratio; None without a common N), ``lost_batches`` (sorted N that
      ``reference`` trained and ``candidate`` failed or lay above its
      largest), ``largest_batches`` (``candidate``'s, ``reference``'s; None
      where nothing trained) and ``holds`` (a common N, no ratio below
      1 - ``tolerance``, no lost N).

    Raises:
      ValueError: ``tolerance`` outside [0, 1).
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a fraction in [0, 1), got {tolerance}")
    by_key = {}
    for sweep in sweeps:
        by_key.setdefault((sweep["model"], sweep["cap"], sweep["mode"]), {})[sweep["limit"]] = sweep
    rows = []
    for (model, cap, mode), limits in by_key.items():
        if candidate not in limits or reference not in limits:
            continue
        cand_runs = limits[candidate]["runs"]
        cand, ref = _best(cand_runs), _best(limits[reference]["runs"])
        cand_largest, ref_largest = max(cand, default=None), max(ref, default=None)
        failed = {r["batch"] for r in cand_runs if r["status"] != "ok"}
        ratios = {n: cand[n]["images_per_s"] / ref[n]["images_per_s"]
                  for n in sorted(set(cand) & set(ref))}
        lost = sorted(n for n in ref if n not in cand
                      and (n in failed or cand_largest is None or n > cand_largest))
        worst = min(ratios, key=ratios.get, default=None)
        rows.append(dict(model=model, cap=cap, mode=mode, ratios=ratios, worst_batch=worst,
                         worst_ratio=ratios.get(worst), lost_batches=lost,
                         largest_batches=(cand_largest, ref_largest),
                         holds=bool(ratios) and ratios[worst] >= 1 - tolerance and not lost))
    return rows


def print_limit_comparison(rows, candidate, reference, *, tolerance=0.03):
    """Prints :func:`compare_limits`' rows and the verdict over all of them."""
    header = ("model", "cap", "mode", "N both trained", "worst ratio", "at N", "lost N",
              "largest N", "holds")
    cells = [(r["model"], format_bytes(r["cap"]), r["mode"],
              ",".join(str(n) for n in r["ratios"]) or "none",
              "" if r["worst_ratio"] is None else f"{r['worst_ratio']:.3f}",
              "" if r["worst_batch"] is None else str(r["worst_batch"]),
              ",".join(str(n) for n in r["lost_batches"]) or "-",
              " / ".join("none" if n is None else str(n) for n in r["largest_batches"]),
              "yes" if r["holds"] else "no") for r in rows]
    names = f"{limit_label(candidate)} against {limit_label(reference)}"
    print(f"workspace limit {names}: ratio of images/s at each N, largest N "
          f"{limit_label(candidate)} / {limit_label(reference)}")
    print(table.render(header, cells, align="lllllrlll"))
    if not rows:
        print(f"verdict: no model, cap and mode was swept at both limits ({names})")
    else:
        held = sum(r["holds"] for r in rows)
        verdict = "holds" if held == len(rows) else "does not hold"
        print(f"verdict: never more than {tolerance:.0%} slower and never out of memory where "
              f"{limit_label(reference)} trains: {verdict} ({held} of {len(rows)} model, cap and "
              f"mode pairs hold)")


def report(sweeps, *, environment, args, complete=True):
    """The JSON report of a run: ``kind`` (:data:`KIND`), ``complete``
    (False while sweeps are still running), ``environment``
    (:func:`tf_ucudnn.bench.harness.describe_environment`), ``args`` (the
    settings), ``sweeps`` (:func:`run_sweep`'s results, every run in each)
    and ``summary`` (:func:`summarize`)."""
    return dict(kind=KIND, complete=complete, environment=environment, args=args, sweeps=sweeps,
                summary=summarize(sweeps))


def merge_reports(reports):
    """One report of several memory-cap reports, e.g. the modes of one model
    run in separate processes or on separate GPUs of one machine.

    Args:
      reports: :func:`report` dicts (``kind`` :data:`KIND`).

    Returns:
      A :func:`report` whose ``sweeps`` are all of theirs in order, whose
      ``summary`` is recomputed over them (so ratios to stock span the
      reports), ``environment`` is the first's with the GPUs of all, and
      ``args`` is ``{"merged": [each report's args]}``; ``complete`` only if
      every report was.

    Raises:
      ValueError: a report is not a memory-cap report, or two hold the same
        sweep (model, cap, mode and limit).
    """
    sweeps, seen, gpus = [], set(), []
    for i, r in enumerate(reports):
        if r.get("kind") != KIND:
            raise ValueError(f"report {i} is not a memory-cap report (kind {r.get('kind')!r}, "
                             f"expected {KIND!r})")
        for sweep in r["sweeps"]:
            key = (sweep["model"], sweep["cap"], sweep["mode"], sweep["limit"])
            if key in seen:
                raise ValueError(f"report {i} repeats the sweep {key}; merge each sweep once")
            seen.add(key)
            sweeps.append(sweep)
        gpus += [g for g in r.get("environment", {}).get("gpus", []) if g not in gpus]
    environment = dict(reports[0].get("environment", {}), gpus=gpus) if reports else {}
    return report(sweeps, environment=environment,
                  args=dict(merged=[r.get("args") for r in reports]),
                  complete=all(r.get("complete", True) for r in reports))
