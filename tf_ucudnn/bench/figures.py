"""Figures of a layer benchmark (``tf-ucudnn bench --json``), drawn with matplotlib.

* ``PREFIX_speedup.png``: speedup of tf_ucudnn over stock TF per layer, one
  bar per workspace limit, as the DeepBench figure of Oyama et al. 2018
  (§IV-B); the dashed line is 1x.
* ``PREFIX_plans.png``: per layer and pass, the plan tf_ucudnn chose at the
  smallest limit: the mini-batch as a bar split into its micro-batches,
  coloured by cuDNN algorithm.
"""

import math


def _short(name):
    return name.split("/", 1)[-1]


def draw(report, prefix):
    """Writes the two PNG figures of a benchmark report.

    Args:
      report: the benchmark's JSON as a dict (``results``, ``device``,
        ``settings``).
      prefix: path prefix; ``_speedup.png`` and ``_plans.png`` are appended.

    Returns:
      The paths written.

    Raises:
      ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
