"""The probe's report: Markdown tables (one per shape and layout, graph × data
type) and the distinct errors, from a run's rows or from written result files."""

import gzip
import json

from cudnn_fusion.patterns import BASELINES, PATTERN_BY_NAME, PATTERNS
from cudnn_fusion.settings import DTYPES, SHAPES


def cell_text(row):
    if row is None:
        return "—"
    if row.get("skipped"):
        return "skipped"
    if not row.get("builds"):
        stage = row.get("stage")
        return {"api": "not in API", "graph": "error", "validate": "invalid", "timeout": "timeout",
                "build_operation_graph": "invalid"}.get(stage, "no engine")
    if row.get("time_ms") is None:
        return "builds; failed to run"
    text = f"{row['time_ms']:.3f}"
    base = row.get("conv_alone_ms")
    if row["pattern"] in BASELINES.values():
        if row.get("torch_ms") is not None:
            text += f" (torch {row['torch_ms']:.3f})"
    elif base:
        text += f" ({row['time_ms'] / base:.2f}×)"
    if row.get("ok") is False:
        text += f" **wrong: rel err {row['rel_err']:.1e}**"
    return text


def tables(result):
    """Markdown: one table per shape and layout, graph × data type."""
    rows = result["results"]
    index = {(r["pattern"], r["dtype"], r["layout"], r["shape"]): r for r in rows}
    order = [p.name for p in PATTERNS]
    patterns = [p for p in order if any(r["pattern"] == p for r in rows)]
    dtypes = [d for d in DTYPES if any(r["dtype"] == d for r in rows)]
    lines = [f"cuDNN fused graphs on {result.get('gpu')}, cuDNN {result.get('cudnn_version')}, "
             f"cudnn-frontend {result.get('frontend_version')}, torch {result.get('torch_version')}, "
             f"{result.get('date')}, N = {result.get('batch')}. Median ms; (r×): over the convolution "
             "alone of the same direction, type and layout; \"no engine\": no plan builds.", ""]
    seen = []
    for r in rows:
        if (r["shape"], r["layout"]) not in seen:
            seen.append((r["shape"], r["layout"]))
    for shape, layout in seen:
        title = SHAPES[shape].describe() if shape in SHAPES else shape
        lines += [f"#### {title}, {layout}", "", "| graph | " + " | ".join(dtypes) + " |",
                  "| --- |" + " --- |" * len(dtypes)]
        for p in patterns:
            if not any((p, d, layout, shape) in index for d in dtypes):
                continue
            cells = [cell_text(index.get((p, d, layout, shape))) for d in dtypes]
            lines.append(f"| {PATTERN_BY_NAME[p].title} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def errors_text(result):
    """The distinct errors, one line each, with the cells they came from."""
    by_error = {}
    for r in result["results"]:
        if r.get("error"):
            key = (r["pattern"], r.get("stage"), r["error"].splitlines()[0][:300])
            by_error.setdefault(key, []).append(f"{r['dtype']}/{r['layout']}/{r['shape']}")
    return "\n".join(f"- {p} [{stage}] {err} ({len(cells)} cells, e.g. {cells[0]})"
                     for (p, stage, err), cells in by_error.items())


def summarize(paths):
    merged = None
    for path in paths:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            result = json.load(f)
        if merged is None:
            merged = result
        else:
            merged["results"] = merged["results"] + result["results"]
    print(tables(merged))
    errors = errors_text(merged)
    if errors:
        print("Errors:\n" + errors)
