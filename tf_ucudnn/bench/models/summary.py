"""The model mode's table: the runs of one setting joined (medians), each
against stock TF at 8 GiB, TF's default workspace limit."""

from tf_ucudnn import table
from tf_ucudnn.units import format_bytes

REFERENCE_LIMIT = 8 << 30


def _label(r):
    where = "8 GiB" if r["bytes"] == REFERENCE_LIMIT else format_bytes(r["bytes"])
    kind = {"stock": "stock TF", "rewrite": "tf_ucudnn WR (per kernel)",
            "rewrite-layout": "tf_ucudnn WR, layout optimizer on",
            "rewrite-wd": "tf_ucudnn WD (total)", "stock-xla": "stock TF, XLA",
            "ucudnn-xla": "tf_ucudnn WR under XLA",
            "ucudnn-xla-buffer": "tf_ucudnn WR under XLA, workspace buffer",
            "ucudnn-bn": "tf_ucudnn, batch norm on its statistics and as prologue",
            "ucudnn-bn-xla": "tf_ucudnn under XLA, batch norm on its statistics and as prologue",
            "ucudnn-bnstats": "tf_ucudnn, batch norm on its statistics",
            "ucudnn-bnstats-xla": "tf_ucudnn under XLA, batch norm on its statistics",
            "ucudnn-bnrecompute": "tf_ucudnn, batch norm on its statistics and as prologue, "
                                  "1x1 outputs recomputed",
            "ucudnn-bnrecompute-xla": "tf_ucudnn under XLA, batch norm on its statistics and "
                                      "as prologue, 1x1 outputs recomputed"}.get(r["mode"],
                                                                                  r["mode"])
    label = kind if r["mode"] == "stock-xla" else f"{kind} at {where}"  # XLA: no limit
    precision = r.get("precision", "float32")
    return label if precision == "float32" else f"{label}, {precision}"


def summarize(results):
    """One row per setting: the runs of the same model, mode, bytes, precision
    (and ``planning`` label) joined, in the order they first appear.

    Args:
      results: result dicts of :func:`launch` (``error`` set where a run failed).

    Returns:
      Dicts like a run's, with the median ``step_ms`` and ``first_step_s``
      and the largest ``peak_bytes`` and ``run_peak_bytes`` of the runs that
      succeeded, ``runs`` (their count) and ``first_step_runs_s`` (each run's
      first step, s); or, where every run failed, the first run's dict with
      ``runs`` = 0.
    """
    import statistics

    groups = {}
    for r in results:
        key = (r["model"], r["mode"], r["bytes"], r.get("precision", "float32"),
               r.get("planning"))
        groups.setdefault(key, []).append(r)
    rows = []
    for runs in groups.values():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            rows.append(dict(runs[0], runs=0))
            continue
        row = dict(ok[0], runs=len(ok),
                   step_ms=statistics.median(r["step_ms"] for r in ok),
                   first_step_s=statistics.median(r["first_step_s"] for r in ok),
                   first_step_runs_s=[r["first_step_s"] for r in ok],
                   peak_bytes=max(r["peak_bytes"] for r in ok),
                   run_peak_bytes=max(r["run_peak_bytes"] for r in ok))
        row.pop("run", None)
        rows.append(row)
    return rows


def print_table(results):
    """Prints one row per setting (runs of one setting joined by :func:`summarize`:
    medians, and ", median of K runs" in the label): model, setting, step ms,
    first step s, peak GiB."""
    header = ("model", "setting", "step ms", "vs stock 8 GiB", "first step s", "peak GiB",
              "run peak GiB")
    rows = []
    results = summarize(results)
    reference = {r["model"]: r.get("step_ms") for r in results
                 if r["mode"] == "stock" and r["bytes"] == REFERENCE_LIMIT and "error" not in r}
    for r in results:
        if "error" in r:
            rows.append((r["model"], _label(r), "error", "", "", "", ""))
            continue
        ref = reference.get(r["model"])
        label = _label(r) + (f", median of {r['runs']} runs" if r["runs"] > 1 else "")
        rows.append((r["model"], label, f"{r['step_ms']:.1f}",
                     f"{r['step_ms'] / ref:.2f}x" if ref else "", f"{r['first_step_s']:.2f}",
                     f"{r['peak_bytes'] / 2**30:.2f}", f"{r['run_peak_bytes'] / 2**30:.2f}"))
    print(table.render(header, rows, align="llrrrrr"))
