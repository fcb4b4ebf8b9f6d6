"""Where an XLA-compiled training step's GPU memory goes (GPU machine).

    python benchmarks/xla_memory.py [MODEL] [BATCH] [--modes stock-xla,ucudnn-xla]
        [--precision float32] [--top 15] [--keep-hlo]     (default vgg16 64)

Runs the model mode's worker (tf_ucudnn.bench.models) for each of ``--modes``
(any of the model mode's XLA modes, e.g. ``stock-xla,ucudnn-bn-xla``) at
64 MiB, each with ``XLA_FLAGS=--xla_dump_to`` (text and proto), and reads the
dumps of the largest compiled module (the training step):

* XLA's buffer assignment: the bytes of every allocation, the preallocated
  temp buffer among them (activations, gradients and, for stock XLA, every
  cuDNN convolution's workspace, placed by XLA at compile time);
* stock XLA's cuDNN convolutions (``__cudnn$conv*`` custom calls): the
  workspace each was given (the ``u8[bytes]`` of its result), summed and the largest;
* the ops around the convolutions: custom calls, copies and transposes, fusions;
* what is live at the temp allocation's peak (:func:`peak_live`: XLA's heap
  simulator trace replayed from the module's ``HloProto``): the bytes, the
  largest buffers with the instruction and Keras layer that define them,
  and the sums by kind of instruction and by pass (forward, or the
  gradient's ``gradient_tape/`` ops).

Prints one table and writes xla_memory_MODEL[_PRECISION].json into $OUT (or the working
directory); with ``--keep-hlo`` also each run's optimized HLO module there
(xla_hlo_MODEL_MODE.txt), to compare the fusions around the convolutions.
"""

import json
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hlo_fusion_bytes import largest_dump  # noqa: E402  (after the path)


def _instructions(module):
    """``HloInstructionProto`` by name and by id, over every computation of ``module``."""
    every = [i for c in module.computations for i in c.instructions]
    return {**{i.name: i for i in every}, **{i.id: i for i in every}}


def _subshape(shape, index):
    for i in index:
        shape = shape.tuple_shapes[i]
    return shape


def _shape_text(shape):
    from tensorflow.compiler.xla import xla_data_pb2

    kind = xla_data_pb2.PrimitiveType.Name(shape.element_type).lower()
    return f"{kind}[{','.join(map(str, shape.dimensions))}]"


def _kind(instruction):
    if instruction.opcode == "custom-call":
        return f"custom-call {instruction.custom_call_target}"
    return instruction.opcode


def _layer(op_name):
    """The Keras layer of an op's name (``model/layer/.../op``), with
    ``gradient_tape/`` kept in front for the backward pass's ops."""
    backward = op_name.startswith("gradient_tape/")
    parts = op_name[len("gradient_tape/"):].split("/") if backward else op_name.split("/")
    layer = "/".join(parts[1:-1]) if len(parts) > 2 else "/".join(parts[:-1]) or op_name
    return ("gradient_tape/" if backward else "") + layer


def _replay(trace, sizes, stop=None):
    """XLA's heap simulator trace replayed as XLA's own peak computation does:
    a buffer shared with a canonical one (``SHARE_WITH``) adds no bytes while
    the canonical one is live, and a group is freed when its last member is.

    Returns (peak bytes, index of the event that reached it, live set: canonical
    buffer id -> bytes after event ``stop``, or after the last event)."""
    from tensorflow.compiler.xla.service import hlo_pb2

    kinds = hlo_pb2.HeapSimulatorTrace.Event
    canonical, members, live = {}, {}, {}
    live_bytes, peak_bytes, peak_index = 0, 0, -1
    for index, event in enumerate(trace.events):
        buffer = event.buffer_id
        if event.kind == kinds.ALLOC:
            members[buffer] = 1
            live[buffer] = sizes[buffer]
            live_bytes += sizes[buffer]
        elif event.kind == kinds.SHARE_WITH:
            group = canonical[buffer] = event.share_with_canonical_id
            members[group] = members.get(group, 0) + 1
            if members[group] == 1:  # shares a buffer whose group was freed
                live[group] = sizes[buffer]
                live_bytes += sizes[buffer]
        elif event.kind == kinds.FREE:
            group = canonical.get(buffer, buffer)
            members[group] -= 1
            if members[group] == 0:
                live_bytes -= live.pop(group)
        if live_bytes > peak_bytes:
            peak_bytes, peak_index = live_bytes, index
        if index == stop:
            break
    return peak_bytes, peak_index, live


def peak_live(proto, top=15):
    """What is live at the peak of a module's largest heap-simulated allocation.

    Replays each of XLA's heap simulator traces (``HloProto.buffer_assignment``;
    :func:`_replay`) and takes the one with the highest peak (the temp
    allocation's: the proto does not always say which allocation a trace is
    of), then replays it again up to that peak for what is live there.

    Args:
      proto: an ``HloProto`` with its buffer assignment (``--xla_dump_hlo_as_proto``).
      top: how many of the largest live buffers to list.

    Returns:
      None where the proto has no trace; else a dict: ``allocation_bytes``
      (the size of the trace's allocation, fragmentation included; None where
      the trace names no allocation that large), ``peak_bytes`` (the live
      bytes at the peak), ``buffers`` (live at the peak), ``largest`` (the
      ``top`` largest: ``bytes``, ``instruction``, ``kind`` (opcode, or
      ``custom-call TARGET``), ``layer`` (:func:`_layer` of its op name),
      ``shape``), ``by_kind`` and ``by_pass`` (``forward``, ``backward``, or
      ``unnamed`` where the instruction has no op name) bytes.
    """
    assignment = proto.buffer_assignment
    if not assignment.heap_simulator_traces:
        return None
    sizes = {b.id: b.size for b in assignment.logical_buffers}
    defined = {b.id: b.defined_at for b in assignment.logical_buffers}
    allocations = {a.index: a.size for a in assignment.buffer_allocations}
    peaks = [(_replay(t, sizes)[:2], t) for t in assignment.heap_simulator_traces]
    (peak_bytes, peak_index), trace = max(peaks, key=lambda p: p[0][0])
    at_peak = _replay(trace, sizes, stop=peak_index)[2]
    allocation_bytes = allocations.get(trace.buffer_allocation_index)
    if allocation_bytes is not None and allocation_bytes < peak_bytes:
        allocation_bytes = None

    instructions = _instructions(proto.hlo_module)
    rows = []
    for group, size in at_peak.items():
        where = defined[group]
        instruction = (instructions.get(where.instruction_name)
                       or instructions.get(where.instruction_id))
        if instruction is None:
            rows.append(dict(bytes=size, instruction=where.instruction_name or "?", kind="?",
                             layer="?", shape="?"))
            continue
        rows.append(dict(bytes=size, instruction=instruction.name, kind=_kind(instruction),
                         layer=_layer(instruction.metadata.op_name),
                         shape=_shape_text(_subshape(instruction.shape, where.shape_index))))
    rows.sort(key=lambda r: -r["bytes"])
    by_kind, by_pass = {}, {}
    for r in rows:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + r["bytes"]
        direction = ("backward" if r["layer"].startswith("gradient_tape/") else
                     "forward" if r["layer"] not in ("", "?") else "unnamed")
        by_pass[direction] = by_pass.get(direction, 0) + r["bytes"]
    return dict(allocation_bytes=allocation_bytes, peak_bytes=peak_bytes, buffers=len(rows),
                largest=rows[:top], by_pass=by_pass,
                by_kind=dict(sorted(by_kind.items(), key=lambda kv: -kv[1])))


def read_proto(directory, top=15):
    """:func:`peak_live` of the largest optimized module's proto in a dump folder."""
    from tensorflow.compiler.xla.service import hlo_pb2

    path = largest_dump(directory, "after_optimizations.hlo.pb")
    if path is None:
        return None
    proto = hlo_pb2.HloProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return peak_live(proto, top)


def read_dump(directory):
    """Totals from one dump folder (see the module docstring)."""
    hlo = largest_dump(directory)
    assignment = largest_dump(directory, "buffer-assignment.txt")
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


def run(model, batch, modes, precision="float32", keep_hlo=False, top=15):
    from tf_ucudnn.bench import models

    results = {}
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="xla_dump_") as dump:
            flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
            step = models.launch(model, mode, 64 << 20, batch, 400, precision=precision,
                                 extra_env=dict(XLA_FLAGS=flags))
            results[mode] = dict(step=step, dump=read_dump(dump), peak=read_proto(dump, top))
            hlo = results[mode]["dump"]["hlo"]  # the largest module's file name, or ""
            if keep_hlo and hlo:
                shutil.copy(os.path.join(dump, hlo), os.path.join(os.environ.get("OUT", "."),
                                              f"xla_hlo_{model}_{mode}.txt"))
    return results


def main(argv):
    import argparse

    from tf_ucudnn import table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="vgg16")
    parser.add_argument("batch", nargs="?", type=int, default=64)
    parser.add_argument("--modes", default="stock-xla,ucudnn-xla")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--top", type=int, default=15, help="live buffers listed per mode")
    parser.add_argument("--keep-hlo", action="store_true")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    results = run(args.model, args.batch, modes, args.precision, args.keep_hlo, args.top)
    gib = 2.0 ** 30
    print(f"{args.model} N={args.batch}, one training step under XLA ({args.precision})")
    rows = [("",) + tuple(modes)]

    def row(label, fn):
        rows.append((label, *[fn(results[m]) for m in modes]))

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
    row("  live at its peak GiB", get(("peak", "peak_bytes"), gib, "{:.2f}"))
    row("    forward / backward GiB", lambda r: "{:.2f} / {:.2f}".format(
        *[(r.get("peak") or {}).get("by_pass", {}).get(k, 0) / gib
          for k in ("forward", "backward")]))
    row("cuDNN convs (XLA's)", get(("dump", "cudnn_convs")))
    row("  their workspace, sum GiB", get(("dump", "cudnn_workspace_sum_bytes"), gib, "{:.3f}"))
    row("  their workspace, max MiB", get(("dump", "cudnn_workspace_max_bytes"), 2.0 ** 20,
                                          "{:.1f}"))
    row("tf_ucudnn custom calls", get(("dump", "ucudnn_custom_calls")))
    row("copies / transposes / fusions", lambda r: "{} / {} / {}".format(
        *[r.get("dump", {}).get(k, "-") for k in ("copies", "transposes", "fusions")]))
    print(table.render(rows[0], rows[1:]))
    for mode in modes:
        peak = results[mode].get("peak")
        if not peak:
            continue
        print(f"\n{mode}: live at the temp allocation's peak, by kind (GiB): " + ", ".join(
            f"{k} {v / gib:.2f}" for k, v in list(peak["by_kind"].items())[:6]))
        for b in peak["largest"]:
            print(f"  {b['bytes'] / 2**20:9.1f} MiB  {b['shape']:<24} {b['kind']:<28} "
                  f"{b['layer']}")
    suffix = "" if args.precision == "float32" else f"_{args.precision}"
    path = os.path.join(os.environ.get("OUT", "."), f"xla_memory_{args.model}{suffix}.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
