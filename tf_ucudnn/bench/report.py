"""The layer benchmark's report: its table, plan summaries and per-limit summary."""

from tf_ucudnn import table
from tf_ucudnn.bench import harness
from tf_ucudnn.bench.harness import PASSES
from tf_ucudnn.units import format_bytes

_PASS_LABELS = {"forward": "F", "backward-data": "D", "backward-filter": "W"}


def plan_summary(record):
    """A plan record of ``tf_ucudnn.plans()`` as ``2x128 FFT_TILING`` or ``128 FFT + 2x64 ALGO_1``.

    Args:
      record: one dict of :func:`tf_ucudnn.plans`.

    Returns:
      The micro-batch sizes (runs of equal ones grouped) with their
      algorithms (without the math type).
    """
    groups = []  # [count, size, algo]
    for mb in record["micro_batches"]:
        algo = str(mb["algo"]).split("/")[0]
        if groups and groups[-1][1:] == [mb["size"], algo]:
            groups[-1][0] += 1
        else:
            groups.append([1, mb["size"], algo])
    algos = {g[2] for g in groups}
    sizes = [f"{n}x{size}" if n > 1 else f"{size}" for n, size, _ in groups]
    if len(algos) == 1:
        return "+".join(sizes) + " " + algos.pop()
    return " + ".join(f"{s} {g[2]}" for s, g in zip(sizes, groups))

def _fmt_ms(value):
    if value is None:
        return "error"
    return f"{value:.3f}" if value < 10 else f"{value:.2f}"


def print_layer_table(rows):
    """Prints the layer table: one row per (layer, limit), as
    :func:`tf_ucudnn.bench.layers.collect_rows` makes them."""
    header = ("layer", "shape", "limit", "stock ms", "tf_ucudnn ms", "speedup", "8 GiB ms",
              "tf_ucudnn plan (F forward | D backward-data | W backward-filter)")
    cells = []
    for r in rows:
        plan = " | ".join(f"{_PASS_LABELS[p]}: {r['plan'][p]}" for p in PASSES
                          if p in (r["plan"] or {}))
        cells.append((r["name"], r["shape"], format_bytes(r["limit"]), _fmt_ms(r["stock_ms"]),
                      _fmt_ms(r["ucudnn_ms"]),
                      "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
                      _fmt_ms(r["reference_ms"]), plan or "-"))
    print(table.render(header, cells, align="lllrrrrl"))


def summarize(rows, limits):
    """Per limit: the geometric-mean speedup, the worst layer, and tf_ucudnn's gap
    to stock TF at 8 GiB; printed, and returned as ``{str(limit): dict}``."""
    summary = {}
    for limit in limits:
        done = [r for r in rows if r["limit"] == limit and r["speedup"] is not None]
        if not done:
            print(f"{format_bytes(limit)}: no layer measured in both modes")
            continue
        worst = min(done, key=lambda r: r["speedup"])
        gap = harness.geometric_mean(r["ucudnn_ms"] / r["reference_ms"] for r in done
                             if r["reference_ms"])
        s = dict(limit=limit, layers=len(done),
                 geomean_speedup=harness.geometric_mean(r["speedup"] for r in done),
                 worst_speedup=worst["speedup"], worst_layer=worst["layer"],
                 geomean_ucudnn_vs_8gib=gap)
        summary[str(limit)] = s
        print(f"{format_bytes(limit)}: geometric-mean speedup {s['geomean_speedup']:.2f}x over "
              f"{len(done)} layer shape{'s' if len(done) > 1 else ''}; worst "
              f"{s['worst_speedup']:.2f}x ({worst['name']})"
              + (f"; tf_ucudnn time / stock-8 GiB time, geometric mean {gap:.2f}" if gap else ""))
    return summary
