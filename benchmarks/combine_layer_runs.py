"""One summary of several layer-mode runs of one set (e.g. its halves, run apart).

    python benchmarks/combine_layer_runs.py OUT.json IN1.json IN2.json ...

Concatenates the runs' results (each layer shape once: the first run that
has it wins), prints the per-limit summary of ``tf-ucudnn bench`` (geometric
mean speedup, worst layer, tf_ucudnn against stock TF at 8 GiB) and writes
the combined report, with the inputs' environments, to OUT.json.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(out, inputs):
    from tf_ucudnn.bench import harness, report

    runs = [json.load(open(p)) for p in inputs]
    seen, rows = set(), []
    for run in runs:
        for r in run["results"]:
            if (r["layer"], r["limit"]) not in seen:
                seen.add((r["layer"], r["limit"]))
                rows.append(r)
    limits = sorted({r["limit"] for r in rows})
    summary = report.summarize(rows, limits)
    harness.write_json(out, dict(inputs=[os.path.basename(p) for p in inputs],
                                 environment=runs[0]["environment"], results=rows,
                                 summary=summary))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
