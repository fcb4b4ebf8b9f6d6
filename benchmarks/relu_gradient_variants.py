"""Whether XLA fuses the gradient of a ReLU after a batch norm into the two
passes that read it, and what each formulation of that gradient costs
(GPU machine for the runs; ``--hlo`` and ``--decisions-of`` read dumps on
any machine).

    python benchmarks/relu_gradient_variants.py [--model resnet50] [--batch 256]
        [--precision mixed_float16] [--variants autodiff,custom,...] [--decisions]
    python benchmarks/relu_gradient_variants.py --hlo MODULE.txt[.gz] ...
    python benchmarks/relu_gradient_variants.py --decisions-of DUMP.txt[.gz] [--producer ReluGrad]

For each variant of ``relu_gradient/sitecustomize.py`` one ``bench models``
worker (``ucudnn-bnstats-xla`` at 64 MiB: the batch norms on the
convolutions' statistics, their normalization in XLA's fusions) trains the
model with the variant's gradient for the ReLU after every such batch norm,
XLA's optimized module dumped. Prints and writes (``$OUT`` or the working
directory, ``relu_gradient_variants_MODEL_PRECISION.json``, with the
machine's description) per variant: the step's ms and peak GiB, the
fusions' GB (``hlo_fusion_bytes.py``), and how many fusions XLA kept apart
for the ReLU's gradient or its mask (op types ``ReluGrad``, ``SelectV2``,
``Greater``: a tensor written and read again).

``--decisions`` also dumps XLA's priority-fusion pass, and prints for each
producer whose instruction name starts with ``--producer`` (``ReluGrad``:
the select of TF's ReLU gradient) the last estimate XLA made before deciding:
the consumers, the time it modelled fused (the producer computed again in
each consumer) and unfused (written once, read by each), and whether it fused.
"""

import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hlo_fusion_bytes  # noqa: E402

VARIANT_DIR = os.path.join(HERE, "relu_gradient")
# The TF op types of fusions that write a ReLU's gradient or mask on their own.
APART = ("ReluGrad", "SelectV2", "Greater")


def variants_module():
    """``relu_gradient/sitecustomize.py`` as a module of its own name (a
    plain import would find the ``sitecustomize`` Python may have loaded)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "relu_gradient_sitecustomize", os.path.join(VARIANT_DIR, "sitecustomize.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module_summary(text):
    """Of an optimized module's text: ``fusions`` (count), ``gb`` ({kind:
    GB read and written}) and ``apart`` ({op type in :data:`APART`: fusions})."""
    fusions = hlo_fusion_bytes.entry_fusions(text)
    gb = {k: b / 1e9 for k, b in hlo_fusion_bytes.bytes_by_kind(fusions).items()}
    apart = collections.Counter(f["op_type"] for f in fusions if f["op_type"] in APART)
    return dict(fusions=len(fusions), gb=gb, apart=dict(apart))


_STEP = re.compile(r"fusion_steps \{\n(.*?)\n\}\n", re.S)


def fusion_decisions(dump, producer_prefix):
    """XLA's priority-fusion decisions (its ``*priority_fusion_dump.txt``) for
    each instruction whose name starts with ``producer_prefix``.

    Returns:
      ``{name: dict(shape=, opcode=, consumers=, us_fused=, us_unfused=,
      fused=)}``: the instruction's shape and opcode in the module before
      the pass, the last priority estimate of the fusion holding it
      (``consumers``: how many; None where none was made) and whether that
      fusion was then fused into its consumers.
    """
    dump, _, module = dump.partition("hlo_module_before_fusion")
    module = module.replace("\\n", "\n")
    instructions = dict((m[0], m[1:]) for m in re.findall(
        r"^\s+(?:ROOT )?(" + re.escape(producer_prefix) + r"\S*) = (\S+) ([\w-]+)\(",
        module, re.M))
    holder, result = {}, {}  # fusion name -> the original instructions it holds
    for step in _STEP.findall(dump):
        kind = step.split()[0]
        producer = re.search(r'producer_name: "([^"]+)"', step)
        producer = producer.group(1) if producer else None
        consumers = re.findall(r'consumer_names?: "([^"]+)"', step)
        held = holder.get(producer, {producer} if producer else set())
        targets = [n for n in held if n and n.startswith(producer_prefix)]
        if kind == "fusion":
            fusion = re.search(r'fusion_name: "([^"]+)"', step).group(1)
            into = holder.get(consumers[0], {consumers[0]})
            holder[fusion] = held | into | holder.get(fusion, {fusion})
            for name in targets:
                result.setdefault(name, dict(consumers=None, us_fused=None, us_unfused=None))
                result[name]["fused"] = True
            # A producer fused into its consumer now lives in the consumer's fusion.
            for name in [n for n in into if n and n.startswith(producer_prefix)]:
                result.setdefault(name, dict(consumers=None, us_fused=None, us_unfused=None,
                                             fused=False))
        elif kind == "update_priority" and targets:
            fused = float(re.search(r"us_fused: ([-\d.e]+)", step).group(1))
            unfused = float(re.search(r"us_unfused: ([-\d.e]+)", step).group(1))
            for name in targets:
                entry = result.setdefault(name, dict(fused=False))
                if not entry.get("fused"):
                    entry.update(consumers=len(consumers), us_fused=fused, us_unfused=unfused)
    for name in result:
        result[name].setdefault("fused", False)
        result[name]["shape"], result[name]["opcode"] = instructions.get(name, ("", ""))
    return result


def _print_decisions(decisions):
    from tf_ucudnn import table

    rows = [(name, d["opcode"], re.sub(r"\{.*", "", d["shape"]),
             "-" if d["consumers"] is None else str(d["consumers"]),
             "-" if d["us_fused"] is None else f"{d['us_fused']:.1f}",
             "-" if d["us_unfused"] is None else f"{d['us_unfused']:.1f}",
             "yes" if d["fused"] else "no")
            for name, d in sorted(decisions.items())]
    print(table.render(("producer", "opcode", "shape", "consumers", "us fused", "us unfused",
                        "fused"), rows, align="lllrrrl"))


def run(args):
    from tf_ucudnn import table
    from tf_ucudnn.bench import harness, models

    results = {}
    for variant in args.variants:
        dump = tempfile.mkdtemp(prefix=f"relu_gradient_{variant}_")
        flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*step.*"
        if args.decisions:
            flags += " --xla_dump_hlo_pass_re=priority-fusion"
        env = dict(RELU_GRADIENT_VARIANT=variant, XLA_FLAGS=flags,
                   PYTHONPATH=os.pathsep.join(p for p in (VARIANT_DIR, os.environ.get("PYTHONPATH"))
                                              if p))
        r = models.launch(args.model, "ucudnn-bnstats-xla", 64 << 20, args.batch, 900,
                          extra_env=env, precision=args.precision)
        r = {k: r[k] for k in ("step_ms", "peak_bytes", "error") if k in r}
        module = hlo_fusion_bytes.largest_dump(dump)
        if module:
            r.update(module_summary(hlo_fusion_bytes.read_module(module)))
        decisions = hlo_fusion_bytes.largest_dump(dump, "priority_fusion_dump.txt")
        if args.decisions and decisions:
            r["decisions"] = fusion_decisions(hlo_fusion_bytes.read_module(decisions),
                                              args.producer)
        shutil.rmtree(dump, ignore_errors=True)
        results[variant] = r
        print(f"  {variant}: " + (r["error"] if "error" in r else f"{r['step_ms']:.1f} ms"),
              flush=True)
    rows = []
    for variant, r in results.items():
        if "error" in r:
            rows.append((variant, "error", "", "", "", "", ""))
            continue
        rows.append((variant, f"{r['step_ms']:.1f}", f"{r.get('peak_bytes', 0) / 2**30:.2f}",
                     str(r.get("fusions", "")), f"{r.get('gb', {}).get('kLoop', 0):.2f}",
                     f"{r.get('gb', {}).get('kInput', 0):.2f}",
                     ", ".join(f"{k} {v}" for k, v in sorted(r.get("apart", {}).items()))))
    print(f"\n{args.model} N={args.batch}, {args.precision}, ucudnn-bnstats-xla at 64 MiB")
    print(table.render(("variant", "step ms", "peak GiB", "fusions", "kLoop GB", "kInput GB",
                        "ReLU gradient or mask apart"), rows, align="lrrrrrl"))
    for variant, r in results.items():
        if r.get("decisions"):
            print(f"\n{variant}: XLA's last estimate per {args.producer} producer")
            _print_decisions(r["decisions"])
    out = os.path.join(os.environ.get("OUT", "."),
                       f"relu_gradient_variants_{args.model}_{args.precision}.json")
    with open(out, "w") as f:
        json.dump(dict(environment=harness.describe_environment(True), variants=results), f,
                  indent=1)
    print("wrote", out)


def main(argv):
    sys.path.insert(0, ROOT)
    VARIANTS = variants_module().VARIANTS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--precision", default="mixed_float16")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--decisions", action="store_true",
                        help="also dump and print XLA's priority-fusion decisions")
    parser.add_argument("--producer", default="ReluGrad",
                        help="instruction-name prefix of the producers --decisions follows")
    parser.add_argument("--hlo", nargs="+", help="summarize these optimized modules; run nothing")
    parser.add_argument("--decisions-of", nargs="+",
                        help="print the decisions in these priority-fusion dumps; run nothing")
    args = parser.parse_args(argv)
    if args.hlo or args.decisions_of:
        for path in args.hlo or []:
            summary = module_summary(hlo_fusion_bytes.read_module(path))
            summary["gb"] = {k: round(v, 2) for k, v in summary["gb"].items()}
            print(path, json.dumps(summary))
        for path in args.decisions_of or []:
            print(f"\n{path}: XLA's last estimate per {args.producer} producer")
            _print_decisions(fusion_decisions(hlo_fusion_bytes.read_module(path), args.producer))
        return
    args.variants = args.variants.split(",")
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; "
                     f"the variants: {', '.join(VARIANTS)}")
    run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
