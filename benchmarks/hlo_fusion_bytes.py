"""Bytes the XLA fusions of an optimized HLO module read and write, grouped
by the TensorFlow op they came from (CPU; reads XLA's dump, no GPU).

    python benchmarks/hlo_fusion_bytes.py MODULE.txt [MODULE.txt ...] [--top N] [--layer NAME]

MODULE.txt is XLA's text dump of a compiled step after its optimizations
(``XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text"``, the file
``*after_optimizations.txt``; gzipped: ``.gz``). For every fusion of the entry computation it
counts the bytes of its operands and of its result (each operand once per
fusion: a lower bound on the traffic where a fusion reads an operand twice,
an upper one where it reads a slice) and groups them by the fusion's kind
(``kLoop``: elementwise, ``kInput``: with a reduction or scatter) and by
the op type and direction of the TensorFlow op XLA names in its metadata
(``op_type="ReluGrad"``, ``op_name="gradient_tape/…"``: backward; TF's
sums of gradients, ``AddN_…`` at the graph's root, count as forward). The
fusions of a batch-normalized CNN are memory-bound, so their bytes stand for
their time where a profile (``xla_profile.py``) cannot name which fusion a
kernel is. Prints one table per module, GB (10^9 bytes). With ``--layer``,
also every fusion whose TF op name contains NAME (``conv2_block2_2_``), in
program order, with the shapes it reads and writes: one layer's passes over
its activations, counted.
"""

import argparse
import collections
import glob
import gzip
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DTYPE_BYTES = dict(pred=1, s8=1, u8=1, f16=2, bf16=2, s16=2, u16=2, f32=4, s32=4, u32=4,
                   f64=8, s64=8, u64=8)
_ARRAY = re.compile(r"\b(" + "|".join(DTYPE_BYTES) + r")\[([0-9,]*)\]")
# "  %name = SHAPE opcode(operands), attributes" (ROOT optional).
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%(\S+) = (.+?) ([\w-]+)\((.*)$")


def shape_bytes(shape):
    """Bytes of an HLO shape string: an array (``f16[256,56,56,64]{3,2,1,0}``)
    or a tuple of them; 0 for a token or an empty tuple."""
    total = 0
    for dtype, dims in _ARRAY.findall(shape):
        elements = 1
        for d in filter(None, dims.split(",")):
            elements *= int(d)
        total += elements * DTYPE_BYTES[dtype]
    return total


def _operand_names(rest):
    """The %names of an instruction's operands: up to the call's closing
    parenthesis (attributes such as ``calls=%fused_x`` follow it)."""
    depth, end = 1, len(rest)
    for i, ch in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            end = i
            break
    return re.findall(r"%([\w.\-]+)", rest[:end])


def entry_fusions(text):
    """The fusions of a module's entry computation, in program order: dicts
    of ``name``, ``kind`` (kLoop, kInput, …), ``op_type`` and ``op_name``
    (TF's, from the metadata; empty where XLA gave none),
    ``deduplicated_name`` (the name XLA gives a group of identical fusions
    that share one kernel; the fusion's own name where it gives none),
    ``reads`` (the operands' shape strings), ``writes`` (the result's),
    ``bytes_in``, ``bytes_out``."""
    shapes, fusions, in_entry = {}, [], False
    for line in text.splitlines():
        if not line.startswith((" ", "\t")):
            in_entry = line.startswith("ENTRY")
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        name, shape, opcode, rest = m.groups()
        shapes[name] = shape
        if not in_entry or opcode != "fusion":
            continue
        meta = dict(re.findall(r'\b(kind|op_type|op_name|deduplicated_name)="?([^",}\s]+)"?',
                               rest))
        fusions.append(dict(name=name, kind=meta.get("kind", ""), op_type=meta.get("op_type", ""),
                            op_name=meta.get("op_name", ""),
                            deduplicated_name=meta.get("deduplicated_name", name),
                            operands=_operand_names(rest), writes=shape,
                            bytes_out=shape_bytes(shape)))
    for f in fusions:
        f["reads"] = [shapes.get(o, "") for o in f.pop("operands")]
        f["bytes_in"] = sum(shape_bytes(r) for r in f["reads"])
    return fusions


def _short(shape):
    """An HLO shape without its layouts: ``f16[256,56,56,64]``."""
    return ", ".join(f"{dtype}[{dims}]" for dtype, dims in _ARRAY.findall(shape))


def layer_rows(fusions, name, min_bytes=1 << 20):
    """Rows (fusion, kind, pass, TF op, reads, writes, MB) of the fusions whose
    TF op name contains ``name``, in program order; reads and writes as
    shapes without layouts, operands of fewer than ``min_bytes`` bytes
    (per-channel vectors, scalars) counted, not listed."""
    rows = []
    for f in fusions:
        if name not in f["op_name"]:
            continue
        large = [_short(r) for r in f["reads"] if shape_bytes(r) >= min_bytes]
        small = len(f["reads"]) - len(large)
        reads = "; ".join(large + ([f"+{small} small"] if small else []))
        rows.append((f["name"], f["kind"], _direction(f), f["op_type"] or "?", reads,
                     _short(f["writes"]), f"{(f['bytes_in'] + f['bytes_out']) / 1e6:.0f}"))
    return rows


def _direction(fusion):
    """The pass of a fusion: backward where TF's op name lies under
    ``gradient_tape/``, else forward."""
    return "backward" if fusion["op_name"].startswith("gradient_tape/") else "forward"


def by_origin(fusions):
    """{(kind, "forward" | "backward", op_type): [fusions, bytes]}; backward
    where TF's op name lies under ``gradient_tape/``."""
    groups = collections.defaultdict(lambda: [0, 0])
    for f in fusions:
        g = groups[(f["kind"], _direction(f), f["op_type"] or "?")]
        g[0] += 1
        g[1] += f["bytes_in"] + f["bytes_out"]
    return dict(groups)


def largest_dump(directory, suffix="after_optimizations.txt"):
    """The largest file of XLA's dump in ``directory`` whose name ends in
    ``suffix`` (a step's module is the largest of its compilations), or None."""
    paths = glob.glob(os.path.join(directory, "*" + suffix))
    return max(paths, key=os.path.getsize) if paths else None


def read_module(path):
    """The text of a dumped module, ``.gz`` or plain."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return f.read()


def bytes_by_kind(fusions):
    """``Counter({kind: bytes read and written})`` of :func:`entry_fusions`'s
    fusions (kLoop, kInput, …)."""
    kinds = collections.Counter()
    for f in fusions:
        kinds[f["kind"]] += f["bytes_in"] + f["bytes_out"]
    return kinds


def main(argv):
    sys.path.insert(0, ROOT)
    from tf_ucudnn import table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--top", type=int, default=25, help="rows per module (default 25)")
    parser.add_argument("--layer", help="also list the fusions whose TF op name contains this")
    args = parser.parse_args(argv)
    for path in args.modules:
        fusions = entry_fusions(read_module(path))
        kinds = bytes_by_kind(fusions)
        groups = sorted(by_origin(fusions).items(), key=lambda kv: -kv[1][1])
        print(f"\n{path}: {len(fusions)} fusions, "
              + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in kinds.most_common()))
        rows = [(kind, direction, op_type, str(n), f"{b / 1e9:.2f}")
                for (kind, direction, op_type), (n, b) in groups[:args.top]]
        print(table.render(("kind", "pass", "TF op", "fusions", "GB"), rows, align="lllrr"))
        if args.layer:
            print(f"\nfusions of {args.layer!r}, in program order:")
            print(table.render(("fusion", "kind", "pass", "TF op", "reads", "writes", "MB"),
                               layer_rows(fusions, args.layer), align="llllllr"))


if __name__ == "__main__":
    main(sys.argv[1:])
