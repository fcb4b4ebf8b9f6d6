"""Which fused convolution + batch-norm training graphs does this GPU's cuDNN build,
per data type and layout, and what do they cost against the convolution alone?

Asks the machine's own cuDNN, through the cudnn-frontend Python API and PyTorch
(no TensorFlow), for every graph of a Conv–BatchNorm–ReLU training step that the
fused engine would use, at ResNet-50's layer shapes and N = 256:

- the convolution alone (forward, backward-data, backward-filter): the baselines;
- forward: a scale-bias-ReLU prologue on the input (the previous layer's batch
  norm and ReLU applied inside this convolution) and a statistics epilogue
  (per-channel sum and sum of squares of the output) as `genstats` or as sum
  reductions (the sum of squares as square → sum), apart and together;
- batch-norm finalize (sums → scale and bias, moving mean and variance);
- backward: backward-data with the ReLU's backward fused, with the batch norm's
  apply recomputed for the ReLU's mask, and with the batch norm's weight
  gradients (`dbn_weight`, or as two sum reductions); backward-filter with the
  prologue recomputed;
- a block's end: batch norm + residual add + ReLU and its backward
  (ReLU backward + batch-norm backward).

A graph "builds" when validate, build_operation_graph, create_execution_plans
(heuristics A, then FALLBACK), check_support and build_plans all succeed; its
error text is kept when one does not. A graph that builds is executed on random
tensors, timed with CUDA events (warm-up, then the median of --iters runs, the
GPU kept busy so that host time does not count) and one of its outputs is
compared with a PyTorch float32 reference (relative error, Frobenius norm), so
that "builds" also means "computes the right thing". Layouts are given to cuDNN
as strides only: NHWC is PyTorch's channels_last, NCHW its contiguous layout.

On the GPU machine (PyTorch with CUDA and cuDNN 9; the frontend is one wheel,
fetched where PyPI can be reached into the checkout's `.whl/`, which git ignores):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --implementation cp --platform manylinux_2_28_x86_64 -d .whl nvidia-cudnn-frontend
    python3 -m pip install -q --no-deps .whl/nvidia_cudnn_frontend-*.whl   # on the GPU machine
    python3 benchmarks/cudnn_fusion_probe.py --json OUT/x.json
    python3 benchmarks/cudnn_fusion_probe.py --summarize OUT/x.json   # the tables again

Rows go to --json as they come; the tables print at the end, one per shape and
layout, graph × data type, in Markdown. Batch-norm results are compared on
their first 32 channels (channels are independent), the others whole. Each
graph runs under a watchdog: one still building or running after
--graph-seconds (some NCHW fallbacks run for minutes) ends its process with
its row marked "timeout", and the run goes on in a new process (--resume
keeps the rows a file has). --seconds bounds the whole run; cells past it are
recorded as skipped and probed by a later --resume. On an H200 the NHWC half
of the default run takes about 3 minutes; NCHW adds --graph-seconds for each
graph that hangs. Split a long run with --shapes or --layouts (one JSON each,
joined by --summarize A.json B.json). --list prints the graphs and shapes.
"""
import argparse
import datetime
import faulthandler
import gc
import json
import os
import subprocess
import sys
import time

# The probe's modules, in benchmarks/cudnn_fusion/ beside this script.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cudnn_fusion import cell, graphs, measure  # noqa: E402
from cudnn_fusion.cell import Cell  # noqa: E402
from cudnn_fusion.measure import probe, torch_conv_ms  # noqa: E402
from cudnn_fusion.patterns import BASELINES, PATTERN_BY_NAME, PATTERNS  # noqa: E402
from cudnn_fusion.settings import (DEFAULT_SHAPES, DTYPES, LAYOUTS, SHAPES,  # noqa: E402
                                   TOLERANCE)
from cudnn_fusion.tables import errors_text, summarize, tables  # noqa: E402

# Imported in main(): --help, --list and --summarize run without them.
torch = None
cudnn = None


def bind_gpu_modules(torch_module, cudnn_module, handle):
    """Gives the modules that build, run and time graphs PyTorch, cudnn-frontend
    and the cuDNN handle, once the worker has imported them (module globals,
    read by their functions when called)."""
    for module in (cell, graphs, measure):
        module.torch, module.cudnn = torch_module, cudnn_module
    cell.HANDLE = measure.HANDLE = handle


def write_json(path, result):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


def parse_list(text, allowed, what):
    items = [t.strip() for t in text.split(",") if t.strip()]
    if items == ["all"]:
        return list(allowed)
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise SystemExit(f"--{what}: {', '.join(bad) or 'nothing'} not among {', '.join(allowed)}")
    return items


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Graphs and shapes: --list.")
    parser.add_argument("--json", default="cudnn_fusion_probe.json", help="result file (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=256, help="N (default: %(default)s)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated (default: %(default)s)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--shapes", default=",".join(DEFAULT_SHAPES),
                        help="comma-separated names from --list, or all (adds the stem; default: the six)")
    parser.add_argument("--patterns", default="all", help="comma-separated graph names from --list (default: all)")
    parser.add_argument("--seconds", type=float, default=240.0,
                        help="time budget; cells after it are recorded as skipped (default: %(default)s)")
    parser.add_argument("--graph-seconds", type=float, default=30.0,
                        help="a graph still building or running after this is marked \"timeout\" and the "
                             "run goes on in a new process (default: %(default)s)")
    parser.add_argument("--memory-gib", type=float, default=8.0,
                        help="PyTorch's allocator cap on the GPU, workspaces included (default: %(default)s)")
    parser.add_argument("--workspace-mib", type=int, default=1024,
                        help="plans needing more workspace are not built (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="runs before timing (default: %(default)s)")
    parser.add_argument("--iters", type=int, default=20, help="timed runs; the median counts (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true",
                        help="keep the cells already in --json and probe the others")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # a child of supervise()
    parser.add_argument("--list", action="store_true", help="print the graphs and shapes, and exit")
    parser.add_argument("--summarize", nargs="+", metavar="JSON",
                        help="print the tables of written result files (.json or .json.gz, joined), and exit")
    args = parser.parse_args(argv)
    args.dtypes = parse_list(args.dtypes, DTYPES, "dtypes")
    args.layouts = parse_list(args.layouts, LAYOUTS, "layouts")
    args.shapes = parse_list(args.shapes, tuple(SHAPES), "shapes")
    args.patterns = parse_list(args.patterns, tuple(PATTERN_BY_NAME), "patterns")
    if args.batch < 1 or args.iters < 1 or args.warmup < 0:
        raise SystemExit(f"--batch and --iters must be at least 1 and --warmup at least 0; got "
                         f"{args.batch}, {args.iters}, {args.warmup}")
    return args


def list_text():
    lines = ["graphs (--patterns):"]
    lines += [f"  {p.name:28s} {p.title}  [against conv {p.baseline}]" for p in PATTERNS]
    lines.append("shapes (--shapes; input H×W, C→K, filter):")
    lines += [f"  {name:28s} {s.describe()}{'' if name in DEFAULT_SHAPES else '  (not by default)'}"
              for name, s in SHAPES.items()]
    return "\n".join(lines)


def recorded(path):
    """The cells an earlier run's JSON at path has probed (not skipped), or []."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in json.load(f).get("results", []) if not r.get("skipped")]


def supervise(argv, args):
    """Runs the probe in child processes until every cell has a row.

    A graph that hangs or crashes ends its process (see --graph-seconds) with
    its row marked; the next child resumes after it, within what is left of
    --seconds."""
    deadline = time.monotonic() + args.seconds
    if not args.resume and os.path.exists(args.json):
        os.remove(args.json)
    while True:
        before = len(recorded(args.json))
        left = max(0.0, deadline - time.monotonic())
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), *argv,
                              "--worker", "--resume", "--seconds", f"{left:.0f}"])
        if rc == 0:
            return 0
        if len(recorded(args.json)) <= before:
            print(f"the probe's process ended with status {rc} before recording a cell; stopping", flush=True)
            return rc
        print(f"the probe's process ended with status {rc} (a graph past --graph-seconds, or a crash: "
              "its row says); going on in a new one", flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.list:
        print(list_text())
        return 0
    if args.summarize:
        summarize(args.summarize)
        return 0
    if not args.worker:
        return supervise(argv, args)
    global torch, cudnn
    import torch as torch_module
    torch = torch_module
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to PyTorch")
    import cudnn as cudnn_module
    cudnn = cudnn_module
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # float32 references in full precision
    torch.backends.cuda.matmul.allow_tf32 = False
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, args.memory_gib * 2**30 / total))
    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    bind_gpu_modules(torch, cudnn, handle)

    result = dict(
        question="which fused conv + batch-norm training graphs build, per data type and layout, "
                 "and their time against the convolution alone",
        gpu=torch.cuda.get_device_name(), cudnn_version=cudnn.backend_version(),
        frontend_version=getattr(cudnn, "__version__", None), torch_version=torch.__version__,
        torch_cuda=torch.version.cuda, torch_cudnn=torch.backends.cudnn.version(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        batch=args.batch, options={k: v for k, v in vars(args).items() if k not in ("list", "summarize")},
        tolerance=TOLERANCE, patterns={p.name: p.title for p in PATTERNS},
        shapes={name: SHAPES[name].describe() for name in args.shapes}, results=[], notes=[], complete=False)
    if args.resume and os.path.exists(args.json):
        with open(args.json) as f:
            earlier = json.load(f)
        # cells skipped for time are probed again; the rest are kept
        result["results"] = [r for r in earlier.get("results", []) if not r.get("skipped")]
        result["notes"] = [n for n in earlier.get("notes", []) if not n.startswith("time budget")]
    done = {(r["pattern"], r["dtype"], r["layout"], r["shape"]) for r in result["results"]}
    print(f"{result['gpu']}, cuDNN {result['cudnn_version']}, cudnn-frontend {result['frontend_version']}, "
          f"torch {result['torch_version']}", flush=True)
    start = time.monotonic()
    baselines = [BASELINES[d] for d in ("fprop", "dgrad", "wgrad")
                 if any(PATTERN_BY_NAME[p].baseline == d for p in args.patterns)]
    order = baselines + [p for p in args.patterns if p not in baselines]
    over_budget = False
    for layout in args.layouts:  # NHWC, the fused engines' layout, first
        for shape_name in args.shapes:
            for dtype in args.dtypes:
                cell = Cell(dtype, layout, SHAPES[shape_name], args.batch)
                conv_alone = {r["pattern"]: r.get("time_ms") for r in result["results"]
                              if (r["dtype"], r["layout"], r["shape"]) == (dtype, layout, shape_name)
                              and r["pattern"] in BASELINES.values()}
                conv_alone = {d: conv_alone[p] for d, p in BASELINES.items() if p in conv_alone}
                for name in order:
                    pattern = PATTERN_BY_NAME[name]
                    key = dict(pattern=name, dtype=dtype, layout=layout, shape=shape_name)
                    if (name, dtype, layout, shape_name) in done or (
                            name in baselines and name not in args.patterns and pattern.baseline in conv_alone):
                        continue
                    if not over_budget and time.monotonic() - start > args.seconds:
                        over_budget = True
                        result["notes"].append(f"time budget (--seconds) spent at {name} {dtype} {layout} "
                                               f"{shape_name}; the rest skipped")
                    if over_budget:
                        if name in args.patterns:
                            result["results"].append(dict(key, skipped=True))
                        continue
                    torch.manual_seed(args.seed)
                    # A graph that hangs (a plan's build can take minutes) ends the process:
                    # its row, written first, says so, and the rows before it are kept.
                    limit = max(10.0, min(args.graph_seconds, args.seconds - (time.monotonic() - start) + 30))
                    pending = dict(key, builds=False, stage="timeout",
                                   error=f"process ended after {limit:.0f} s in this graph (--graph-seconds, --seconds)")
                    if name in args.patterns:
                        result["results"].append(pending)
                        write_json(args.json, result)
                    faulthandler.dump_traceback_later(limit, exit=True)
                    began = time.monotonic()
                    row = probe(pattern, cell, args)
                    if name in baselines:
                        conv_alone[pattern.baseline] = row.get("time_ms")
                        if name in args.patterns:
                            try:
                                row["torch_ms"] = torch_conv_ms(cell, pattern.baseline, args.warmup, args.iters)
                            except Exception as e:  # noqa: BLE001
                                row["torch_error"] = f"{type(e).__name__}: {e}"[:500]
                    faulthandler.cancel_dump_traceback_later()
                    gc.collect()  # the graph and its tensors, before the next cell's (--memory-gib)
                    torch.cuda.empty_cache()
                    if name not in args.patterns:
                        continue  # timed as a baseline only
                    result["results"] = [r for r in result["results"] if r is not pending]
                    row["seconds"] = round(time.monotonic() - began, 2)
                    row = dict(key, **row, conv_alone_ms=conv_alone.get(pattern.baseline))
                    result["results"].append(row)
                    status = (f"{row['time_ms']:.3f} ms, rel err {row['rel_err']:.1e}" if row.get("time_ms")
                              is not None else f"{row.get('stage')}: {(row.get('error') or '')[:120]}")
                    print(f"{time.monotonic() - start:6.0f} s  {shape_name:16s} {layout} {dtype:9s} {name:28s} "
                          f"{status}", flush=True)
                    write_json(args.json, result)
                    try:
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001 -- a lost context ends the run
                        result["notes"].append(f"CUDA context lost after {name} {dtype} {layout} "
                                               f"{shape_name}: {e}; run stopped")
                        write_json(args.json, result)
                        print(tables(result))
                        return 1
            torch.cuda.empty_cache()
    result["complete"] = not over_budget
    write_json(args.json, result)
    print()
    print(tables(result))
    errors = errors_text(result)
    if errors:
        print("Errors:\n" + errors)
    for note in result["notes"]:
        print("Note:", note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
