"""Figures of a benchmark's JSON (``tf-ucudnn bench MODE --json``), drawn with matplotlib.

:func:`draw` picks by the report's ``kind``. A layer benchmark's:

* ``PREFIX_speedup.png``: speedup of tf_ucudnn over stock TF per layer, one
  bar per workspace limit, as the DeepBench figure of Oyama et al. 2018
  (§IV-B); the dashed line is 1x.
* ``PREFIX_plans.png``: per layer and pass, the plan tf_ucudnn chose at the
  smallest limit: the mini-batch as a bar split into its micro-batches,
  coloured by cuDNN algorithm.

A memory-cap benchmark's (``kind`` ``"memory_cap"``, :func:`draw_memory_cap`):

* ``PREFIX_memory_cap.png``: per model and memory cap, images/s against the
  mini-batch size, one line per setting; an ``x`` where a size ran out of
  memory, a triangle where it failed otherwise or timed out.
"""

import math
import os

from tf_ucudnn.bench import harness, memory_cap


def _short(name):
    return name.split("/", 1)[-1]


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display).

    Raises:
      ImportError: matplotlib is not installed (``pip install 'tf_ucudnn[bench]'``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_paths(report, prefix):
    """The files :func:`draw` writes for ``report`` at ``prefix`` (nothing is drawn)."""
    if report.get("kind") == memory_cap.KIND:
        return [f"{prefix}_memory_cap.png"]
    return [f"{prefix}_speedup.png", f"{prefix}_plans.png"]


def draw(report, prefix):
    """Writes the PNG figures of a benchmark report.

    Args:
      report: the benchmark's JSON as a dict: a layer benchmark's
        (``results``, ``device``, ``settings``), or a memory-cap benchmark's
        (``kind`` ``"memory_cap"``: :func:`draw_memory_cap`).
      prefix: path prefix; ``_speedup.png`` and ``_plans.png`` are appended
        (``_memory_cap.png`` for a memory-cap benchmark).

    Returns:
      The paths written.

    Raises:
      ImportError: matplotlib is not installed.
    """
    if report.get("kind") == memory_cap.KIND:
        return draw_memory_cap(report, prefix)
    plt = pyplot()
    rows = report["results"]
    settings = report.get("settings", {})
    limits = sorted({r["limit"] for r in rows})
    layers = []
    for r in rows:
        if r["name"] not in layers:
            layers.append(r["name"])
    by_key = {(r["name"], r["limit"]): r for r in rows}
    subtitle = (f"{report.get('device', '?')}; N={settings.get('batch')}, "
                f"{settings.get('data_format', '')} {settings.get('dtype', '')}, "
                f"{' + '.join(settings.get('passes') or ['F', 'D', 'W'])}")
    paths = []

    # Speedup per layer and limit.
    fig, ax = plt.subplots(figsize=(max(8, 0.42 * len(layers) * len(limits) + 2), 5))
    width = 0.8 / len(limits)
    for i, limit in enumerate(limits):
        values = [(by_key.get((name, limit)) or {}).get("speedup") or 0.0 for name in layers]
        positions = [j + (i - (len(limits) - 1) / 2) * width for j in range(len(layers))]
        finite = [v for v in values if v > 0]
        geomean = math.exp(sum(map(math.log, finite)) / len(finite)) if finite else float("nan")
        ax.bar(positions, values, width, label=f"{limit >> 20} MiB (geomean {geomean:.2f}x)")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels([_short(n) for n in layers], rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("speedup over stock TF at the same limit")
    ax.set_title(f"tf_ucudnn vs stock TensorFlow per layer\n{subtitle}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(f"{prefix}_speedup.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    # Chosen micro-batches and algorithms at the smallest limit.
    limit = limits[0]
    passes = settings.get("passes") or ["forward", "backward-data", "backward-filter"]
    fig, axes = plt.subplots(1, len(passes), figsize=(4.2 * len(passes), 0.28 * len(layers) + 1.6),
                             sharey=True, squeeze=False)
    algos = sorted({mb["algo"] for r in rows if r["limit"] == limit and r.get("plans")
                    for rec in r["plans"].values() for mb in rec["micro_batches"]})
    cmap = plt.get_cmap("tab20")
    colour = {a: cmap(i % 20) for i, a in enumerate(algos)}
    for ax, pass_name in zip(axes[0], passes):
        for j, name in enumerate(layers):
            record = ((by_key.get((name, limit)) or {}).get("plans") or {}).get(pass_name)
            if not record:
                continue
            left = 0
            for mb in record["micro_batches"]:
                ax.barh(j, mb["size"], left=left, color=colour[mb["algo"]], edgecolor="white",
                        linewidth=0.5)
                left += mb["size"]
        ax.set_title(pass_name, fontsize=9)
        ax.set_xlabel("samples of the mini-batch")
    axes[0][0].set_yticks(range(len(layers)))
    axes[0][0].set_yticklabels([_short(n) for n in layers], fontsize=7)
    axes[0][0].invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[a]) for a in algos]
    fig.legend(handles, algos, loc="lower center", ncol=min(4, max(1, len(algos))), fontsize=7,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"tf_ucudnn plans at {limit >> 20} MiB: micro-batches and algorithms\n{subtitle}",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.04 + 0.02 * math.ceil(len(algos) / 4), 1, 1))
    paths.append(f"{prefix}_plans.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def _gib(n):
    return f"{n / 2**30:g} GiB" if n % (1 << 30) == 0 else f"{n / 2**20:g} MiB"


def draw_memory_cap(report, prefix):
    """Writes ``PREFIX_memory_cap.png``: images/s against N per (model, cap).

    One panel per model (rows) and cap (columns), in the order of
    ``report["sweeps"]``; one line per setting through the mini-batch sizes
    that trained (N / the median of their runs' step times), N on a log-2
    axis. Each size that failed is marked at the height of the setting's
    largest size below it that trained (0 if none did): ``x`` out of
    memory, a triangle another failure or a timeout.

    Args:
      report: a memory-cap benchmark's JSON as a dict (``sweeps``, each with
        ``model``, ``cap``, ``mode``, ``limit`` and ``runs``; ``environment``).
      prefix: path prefix; ``_memory_cap.png`` is appended.

    Returns:
      The path written, in a list.

    Raises:
      ImportError: matplotlib is not installed.
    """
    plt = pyplot()
    models, caps = [], []
    for sweep in report["sweeps"]:
        for seen, value in ((models, sweep["model"]), (caps, sweep["cap"])):
            if value not in seen:
                seen.append(value)
    settings = []
    for sweep in report["sweeps"]:
        label = memory_cap.setting_label(sweep["mode"], sweep["limit"])
        if label not in settings:
            settings.append(label)
    colour = {label: plt.get_cmap("tab10")(i % 10) for i, label in enumerate(settings)}
    # A row per model and a column per cap; at one cap, the models two a row.
    if len(caps) > 1:
        rows, columns = max(1, len(models)), len(caps)
        place = {(m, c): (i, j) for i, m in enumerate(models) for j, c in enumerate(caps)}
    else:
        columns = min(2, max(1, len(models)))
        rows = max(1, -(-len(models) // columns))
        place = {(m, c): divmod(i, columns) for i, m in enumerate(models) for c in caps}
    height = 3.6 * rows + 0.5  # inches; the top 0.4 for the title
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, height), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for sweep in report["sweeps"]:
        model, cap = sweep["model"], sweep["cap"]
        row, column = place[model, cap]
        ax = axes[row][column]
        if not ax.get_visible():
            ax.set_visible(True)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("mini-batch size N")
            ax.set_ylabel("images/s")
            ax.set_title(f"{model}, GPU memory capped at {_gib(cap)}", fontsize=9)
            ax.grid(True, alpha=0.3)
        label = memory_cap.setting_label(sweep["mode"], sweep["limit"])
        _plot_sweep(ax, sweep["runs"], label=label, colour=colour[label])
    for ax in axes.flat:
        if ax.get_visible():
            ax.legend(fontsize=7)
    # One name per GPU model ("NVIDIA H200, 580.159.04" per GPU in the environment).
    gpus = ", ".join(dict.fromkeys(g.split(",")[0] for g in
                                   report.get("environment", {}).get("gpus") or [])) or "?"
    fig.suptitle(f"Training throughput under a GPU memory cap, {gpus}\n"
                 "x: out of memory; triangle: another failure or a timeout", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / height))
    path = f"{prefix}_memory_cap.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]


def _plot_sweep(ax, runs, *, label, colour):
    """One sweep's line: images/s (N / the median step time) at each N that
    trained in all its runs; a marker at each N that failed, at the height of
    the largest N below it that trained (0 if none): ``x`` out of memory, a
    triangle another failure or a timeout."""
    import statistics

    sizes = sorted({r["batch"] for r in runs})
    ok = {n: 1e3 * n / statistics.median(r["step_ms"] for r in runs if r["batch"] == n)
          for n in sizes if all(r["status"] == "ok" for r in runs if r["batch"] == n)}
    xs = sorted(ok)
    ax.plot(xs, [ok[n] for n in xs], "o-", color=colour, label=label, markersize=4)
    for n in sizes:
        if n in ok:
            continue
        status = next(r["status"] for r in runs if r["batch"] == n and r["status"] != "ok")
        below = [m for m in xs if m < n]
        ax.plot([n], [ok[max(below)] if below else 0.0], "x" if status == "oom" else "v",
                color=colour, markersize=9, markeredgewidth=2)


def save_report(report, json_path=None, png_prefix=None):
    """Writes a benchmark's ``report`` as ``--json`` and ``--png`` ask: the
    JSON at ``json_path`` (if given) and the figures of :func:`draw` at
    ``png_prefix`` (default with a JSON: its path without ``.json``); without
    matplotlib the figures are skipped with a note."""
    if json_path:
        harness.write_json(json_path, report)
        png_prefix = png_prefix or os.path.splitext(json_path)[0]
    if not png_prefix:
        return
    try:
        for path in draw(report, png_prefix):
            print(f"wrote {path}")
    except ImportError as e:
        print(f"figures skipped: {e} (pip install 'tf_ucudnn[bench]'; or draw them elsewhere "
              f"with `tf-ucudnn bench plot` and the JSON)")
