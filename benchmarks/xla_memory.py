"""Where an XLA-compiled training step's GPU memory goes (GPU machine).

    python benchmarks/xla_memory.py [MODEL] [BATCH]     (default vgg16 64)

Runs the model mode's worker (tf_ucudnn.bench.models) for ``stock-xla`` and
``ucudnn-xla`` at 64 MiB, each with ``XLA_FLAGS=--xla_dump_to``, and reads the
dumps of the largest compiled module (the training step):

* XLA's buffer assignment: the bytes of every allocation, the preallocated
  temp buffer among them (activations, gradients and, for stock XLA, every
  cuDNN convolution's workspace, placed by XLA at compile time);
* stock XLA's cuDNN convolutions (``__cudnn$conv*`` custom calls): the
  workspace each was given (the ``u8[bytes]`` of its result), summed and the largest;
* the ops around the convolutions: custom calls, copies and transposes, fusions.

Prints one table and writes xla_memory_MODEL.json into $OUT (or the working
directory); with ``--keep-hlo`` also each run's optimized HLO module there
(xla_hlo_MODEL_MODE.txt), to compare the fusions around the convolutions.
"""

import glob
import json
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _largest(paths):
    return max(paths, key=os.path.getsize) if paths else None


def read_dump(directory):
    """Totals from one dump folder (see the module docstring)."""
    hlo = _largest(glob.glob(os.path.join(directory, "*after_optimizations.txt")))
    assignment = _largest(glob.glob(os.path.join(directory, "*buffer-assignment.txt")))
    out = dict(hlo=os.path.basename(hlo or ""), assignment=os.path.basename(assignment or ""))
    if assignment:
        text = open(assignment).read()
        sizes = [(int(m.group(1)), m.group(2)) for m in
                 re.finditer(r"^allocation \d+: size (\d+)(.*)$", text, re.M)]
        out["allocations_bytes"] = sum(s for s, _ in sizes)
        out["temp_bytes"] = sum(s for s, rest in sizes if "preallocated-temp" in rest)
        out["parameter_bytes"] = sum(s for s, rest in sizes if "parameter" in rest)
    if hlo:
        text = open(hlo).read()
        scratch = [int(m.group(1)) for m in re.finditer(
            r"u8\[(\d+)\]\{0\}\) custom-call\([^\n]*custom_call_target=\"__cudnn\$conv", text)]
        out["cudnn_convs"] = len(scratch)
        out["cudnn_workspace_sum_bytes"] = sum(scratch)
        out["cudnn_workspace_max_bytes"] = max(scratch, default=0)
        out["ucudnn_custom_calls"] = len(re.findall(r'custom_call_target="ucudnn_conv2d', text))
        out["copies"] = len(re.findall(r"= [^\n]* copy\(", text))
        out["transposes"] = len(re.findall(r"= [^\n]* transpose\(", text))
        out["fusions"] = len(re.findall(r"= [^\n]* fusion\(", text))
    return out


def run(model, batch, keep_hlo=False):
    from tf_ucudnn.bench import models

    results = {}
    for mode in ("stock-xla", "ucudnn-xla"):
        with tempfile.TemporaryDirectory(prefix="xla_dump_") as dump:
            step = models.launch(model, mode, 64 << 20, batch, 400,
                                 extra_env=dict(XLA_FLAGS=f"--xla_dump_to={dump}"))
            results[mode] = dict(step=step, dump=read_dump(dump))
            hlo = _largest(glob.glob(os.path.join(dump, "*after_optimizations.txt")))
            if keep_hlo and hlo:
                shutil.copy(hlo, os.path.join(os.environ.get("OUT", "."),
                                              f"xla_hlo_{model}_{mode}.txt"))
    return results


def main(argv):
    keep_hlo = "--keep-hlo" in argv
    argv = [a for a in argv if a != "--keep-hlo"]
    model = argv[0] if argv else "vgg16"
    batch = int(argv[1]) if len(argv) > 1 else 64
    results = run(model, batch, keep_hlo)
    gib = 2.0 ** 30
    print(f"{model} N={batch}, one training step under XLA (float32, TF32)")
    rows = [("", "stock XLA", "tf_ucudnn under XLA (64 MiB)")]

    def row(label, fn):
        rows.append((label, *[fn(results[m]) for m in ("stock-xla", "ucudnn-xla")]))

    def get(path, scale=None, fmt="{}"):
        def fn(r):
            value = r
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                return "-"
            return fmt.format(value / scale if scale else value)
        return fn

    row("step ms", get(("step", "step_ms"), fmt="{:.1f}"))
    row("peak GiB (TF allocator)", get(("step", "peak_bytes"), gib, "{:.2f}"))
    row("XLA allocations GiB", get(("dump", "allocations_bytes"), gib, "{:.2f}"))
    row("  of which temp GiB", get(("dump", "temp_bytes"), gib, "{:.2f}"))
    row("cuDNN convs (XLA's)", get(("dump", "cudnn_convs")))
    row("  their workspace, sum GiB", get(("dump", "cudnn_workspace_sum_bytes"), gib, "{:.3f}"))
    row("  their workspace, max MiB", get(("dump", "cudnn_workspace_max_bytes"), 2.0 ** 20,
                                          "{:.1f}"))
    row("tf_ucudnn custom calls", get(("dump", "ucudnn_custom_calls")))
    row("copies / transposes / fusions", lambda r: "{} / {} / {}".format(
        *[r.get("dump", {}).get(k, "-") for k in ("copies", "transposes", "fusions")]))
    widths = [max(len(str(r[i])) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    path = os.path.join(os.environ.get("OUT", "."), f"xla_memory_{model}.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
