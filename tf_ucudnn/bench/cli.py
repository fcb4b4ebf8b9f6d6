"""``tf-ucudnn bench`` and ``python -m tf_ucudnn.bench``: the options and the
dispatch to the layer, model, memory-cap and overhead modes."""

import argparse
import json
import os
import sys

from tf_ucudnn.bench import harness, layers as layer_bench, memory_cap
from tf_ucudnn.bench.harness import PASSES
from tf_ucudnn.bench.layers import (LAYER_SETS, QUICK_LAYERS, REFERENCE_LIMIT, layer_set,
                                    read_layers, select_layers)
from tf_ucudnn.bench.models import MODEL_SPECS, MODELS, MODES, PRECISIONS
from tf_ucudnn.cli_args import at_least, positive_int
from tf_ucudnn.units import format_bytes, parse_bytes

DEFAULT_LIMITS = "64MiB,256MiB"

EXIT_NO_GPU = 2


def _pass_list(text):
    passes = [t.strip() for t in text.split(",") if t.strip()]
    bad = [p for p in passes if p not in PASSES]
    if bad or not passes:
        raise argparse.ArgumentTypeError(
            f"passes must be a comma list of {', '.join(PASSES)}, got {text!r}")
    return [p for p in PASSES if p in passes]

def _names(text, what, allowed):
    """A comma list of names from `allowed` (argparse type), in the order given."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or any(n not in allowed for n in names):
        raise argparse.ArgumentTypeError(
            f"{what} must be a comma list of {', '.join(allowed)}, got {text!r}")
    return names


def _model_list(text):
    return _names(text, "models", MODELS)


def _mode_list(text):
    """Modes of the model mode or of the memory-cap mode (parse_args checks which)."""
    return _names(text, "--modes", tuple(dict.fromkeys(MODES + memory_cap.MODES)))


def _limit_list(text):
    try:
        limits = [parse_bytes(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not limits:
        raise argparse.ArgumentTypeError("need at least one limit")
    for limit in limits:
        if limit % (1 << 20) or limit == 0:
            raise argparse.ArgumentTypeError(
                f"limits must be whole, positive MiB (TF_CUDNN_WORKSPACE_LIMIT_IN_MB), got {limit}")
    return limits

def _optional_limit_list(text):
    return _limit_list(text) if text.strip() else []


def _limit_or_auto_list(text):
    """--limits: whole MiB, or ``auto`` (parse_args allows it with --memory-cap only)."""
    tokens = [t.strip() for t in text.split(",") if t.strip()]
    if not tokens:
        raise argparse.ArgumentTypeError("need at least one limit")
    return [memory_cap.AUTO if t.lower() == memory_cap.AUTO else _limit_list(t)[0]
            for t in tokens]


def _limit_pair(text):
    """--compare-limits: two workspace limits, whole MiB or ``auto``."""
    limits = _limit_or_auto_list(text)
    if len(limits) != 2 or limits[0] == limits[1]:
        raise argparse.ArgumentTypeError(
            f"--compare-limits needs two different limits such as auto,64MiB, got {text!r}")
    return limits


def _cap_list(text):
    """--memory-cap: memory caps, whole MiB (TF's memory_limit is in MiB)."""
    try:
        caps = [parse_bytes(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not caps or any(c == 0 or c % (1 << 20) for c in caps):
        raise argparse.ArgumentTypeError(
            f"memory caps must be a comma list of whole, positive MiB such as 8GiB,16GiB, "
            f"got {text!r}")
    return caps


def _gpu_list(text):
    """--gpus: CUDA_VISIBLE_DEVICES values (indices or UUIDs), one sweep at a time on each."""
    gpus = [t.strip() for t in text.split(",") if t.strip()]
    if not gpus or len(set(gpus)) != len(gpus):
        raise argparse.ArgumentTypeError(f"--gpus must be a comma list of distinct GPUs such as "
                                         f"0,1, got {text!r}")
    return gpus

def parse_args(argv=None):
    """Parses the benchmark's command line.

    Args:
      argv: arguments without the program name; None uses sys.argv.

    Returns:
      An argparse.Namespace.
    """
    parser = argparse.ArgumentParser(
        prog="tf-ucudnn bench",
        description="Time forward + backward-data + backward-filter per convolution layer: "
                    "stock TF with TF_CUDNN_WORKSPACE_LIMIT_IN_MB = limit, tf_ucudnn with "
                    "workspace_limit = limit, and stock TF at 8 GiB (its default) as the "
                    "reference. Each (mode, limit) runs in its own process, since TF reads "
                    "the variable once per process.",
        epilog="Exit status: 0 done; 1 a worker, layer or check failed; 2 no GPU (the CPU "
               "self-check ran instead).")
    parser.add_argument("--set", default="deepbench", choices=LAYER_SETS,
                        help="layer set (default deepbench: its 3x3 and 5x5 training layers)")
    parser.add_argument("--csv", default=None,
                        help="a layer table of your own instead of --set (columns model,layer,"
                             "C,H,W,K,R,S,pad_h,pad_w,stride_h,stride_w, or DeepBench's)")
    parser.add_argument("--passes", type=_pass_list, default=",".join(PASSES),
                        help="comma list of forward, backward-data, backward-filter (default all)")
    parser.add_argument("--png", metavar="PREFIX",
                        help="write PREFIX_speedup.png and PREFIX_plans.png (default with "
                             "--json: the JSON path without .json)")
    parser.add_argument("--plot", metavar="JSON", nargs="+",
                        help="only draw the figures of a saved --json result (no GPU needed); "
                             "several memory-cap results are merged into one table and figure "
                             "(and one JSON with --json)")
    parser.add_argument("--compare-limits", type=_limit_pair, default=None,
                        metavar="CANDIDATE,REFERENCE",
                        help="with --plot of memory-cap results: whether tf_ucudnn's workspace "
                             "limit CANDIDATE (whole MiB or auto) is never more than 3%% slower "
                             "than REFERENCE at any N both trained and never out of memory "
                             "where REFERENCE trains, e.g. auto,64MiB")
    parser.add_argument("--models", type=_model_list, default=None,
                        help=f"model mode: comma list of {', '.join(MODELS)}; one training "
                             "step per setting (stock TF and tf_ucudnn's rewrite at --limits, "
                             "Workspace Division at --totals, stock TF at 8 GiB); with "
                             "--memory-cap, the memory-cap mode's models")
    parser.add_argument("--memory-cap", type=_cap_list, default=None, metavar="SIZE[,SIZE...]",
                        help="memory-cap mode (with --models): per model, cap (e.g. 8GiB,16GiB: "
                             "TF's GPU allocator is capped at it) and --modes setting, the "
                             "largest mini-batch that trains with model.fit and the best "
                             "images/s (tf_ucudnn.bench.memory_cap)")
    parser.add_argument("--precision", default="float32",
                        choices=PRECISIONS,
                        help="model mode: the Keras dtype policy of every run (default float32)")
    parser.add_argument("--modes", type=_mode_list, default=None,
                        help="model mode: only these settings, a comma list of "
                             "stock, rewrite, rewrite-layout, rewrite-wd, stock-xla, ucudnn-xla, "
                             "ucudnn-xla-buffer (default: all but rewrite-layout and "
                             "ucudnn-xla-buffer); memory-cap mode: of stock, stock-xla, ucudnn, "
                             "ucudnn-xla (default all four)")
    parser.add_argument("--xla", action="store_true",
                        help="model mode: also stock TF compiled with XLA and tf_ucudnn under XLA "
                             "(rewrite_model, jit_compile=True) at --limits")
    parser.add_argument("--totals", type=_optional_limit_list, default="",
                        help="model mode: total workspace budgets for Workspace Division")
    parser.add_argument("--overhead", action="store_true",
                        help="execution-overhead mode: per layer and pass, a one-micro-batch "
                             "plan through the engine against one direct cuDNN call with the "
                             "same algorithm (tf_ucudnn.bench.overhead); limit: the first of "
                             "--limits if given, else 8 GiB")
    parser.add_argument("--planning", action="store_true",
                        help="model mode: also time planning cold and with a warm database")
    parser.add_argument("--runs", type=positive_int, default=1,
                        help="model mode: processes per setting (and cold/warm planning "
                             "pairs); the table gives their medians (default 1); memory-cap "
                             "mode: processes per mini-batch size (it trains if all do)")
    parser.add_argument("--start-batch", type=positive_int, default=None,
                        help="memory-cap mode: each sweep's first mini-batch size (default "
                             "the model's: " + ", ".join(f"{name} {spec.start_batch}" for name, spec
                                                         in MODEL_SPECS.items()) + ")")
    parser.add_argument("--max-batch", type=positive_int, default=memory_cap.DEFAULT_MAX_BATCH,
                        help="memory-cap mode: the largest mini-batch size tried (default "
                             f"{memory_cap.DEFAULT_MAX_BATCH})")
    parser.add_argument("--bisect-steps", type=at_least(0), default=memory_cap.DEFAULT_BISECT_STEPS,
                        help="memory-cap mode: bisection steps between the largest size that "
                             "trained and the smallest that failed, after doubling (default "
                             f"{memory_cap.DEFAULT_BISECT_STEPS})")
    parser.add_argument("--steps-per-epoch", type=positive_int,
                        default=memory_cap.DEFAULT_STEPS_PER_EPOCH,
                        help="memory-cap mode: steps per timed epoch, S (default "
                             f"{memory_cap.DEFAULT_STEPS_PER_EPOCH})")
    parser.add_argument("--epochs", type=positive_int, default=memory_cap.DEFAULT_EPOCHS,
                        help="memory-cap mode: timed epochs, R; the step time is the median "
                             f"epoch / S (default {memory_cap.DEFAULT_EPOCHS})")
    parser.add_argument("--gpus", type=_gpu_list, default=None,
                        help="memory-cap mode: GPUs (CUDA_VISIBLE_DEVICES values) to run sweeps "
                             "on in parallel, one sweep per GPU (default: CUDA_VISIBLE_DEVICES, "
                             "else every GPU nvidia-smi lists)")
    parser.add_argument("--layers", default="all",
                        help="comma list of model/layer, layer or model names, or 'all' "
                             "(default); layers of equal shape are measured once")
    parser.add_argument("--batch", type=positive_int, default=None,
                        help=f"mini-batch size N (default 256; {layer_bench.QUICK_BATCH} with --quick)")
    parser.add_argument("--limits", type=_limit_or_auto_list, default=None,
                        help="comma list of workspace limits, whole MiB (default 64MiB,256MiB); "
                             "memory-cap mode: tf_ucudnn's, whole MiB or auto (free memory), "
                             "default 64MiB")
    parser.add_argument("--data-format", choices=("NCHW", "NHWC"), default="NHWC",
                        help="layout of the tensors given to both (default NHWC, what Keras "
                             "models use). Stock TF's layout optimizer may transpose float32 "
                             "NHWC convolutions to NCHW on a GPU, and those transposes are "
                             "timed as part of its layer; tf_ucudnn runs cuDNN in the layout "
                             "it is given. NCHW compares the convolutions in NCHW on both sides.")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    parser.add_argument("--tf32", choices=("on", "off"), default="on",
                        help="TensorFloat-32 for float32 convolutions, both modes (default on)")
    parser.add_argument("--policy", choices=("undivided", "powerOfTwo", "all"), default=None,
                        help="tf_ucudnn batch-size policy (default: UCUDNN_BATCH_SIZE_POLICY, "
                             "else powerOfTwo)")
    parser.add_argument("--warmup", type=at_least(3), default=3,
                        help="warm-up iterations, >= 3 (they also trigger tf_ucudnn's planning "
                             "and TF's autotuning)")
    parser.add_argument("--repeats", type=at_least(5), default=5,
                        help="timed repeats, >= 5; the median is reported")
    parser.add_argument("--iters", type=positive_int, default=10,
                        help="iterations per repeat, timed together between device syncs "
                             "(default 10)")
    parser.add_argument("--json", metavar="PATH", help="also write all results to PATH")
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny shapes ({len(QUICK_LAYERS)} layers, N={layer_bench.QUICK_BATCH}) and "
                             "2 iterations per repeat: a fast smoke test")
    parser.add_argument("--worker-timeout", type=positive_int, default=1800,
                        help="seconds before a worker process is killed (default 1800)")
    # Hidden: run the table on the CPU (for testing the mechanics), and the worker side.
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _check_mode_options(parser, args)
    args.limits_given = args.limits is not None
    if args.limits is None:
        args.limits = (list(memory_cap.DEFAULT_LIMITS) if args.memory_cap
                       else _limit_list(DEFAULT_LIMITS))
    for name, parse in (("totals", _optional_limit_list), ("passes", _pass_list)):
        if isinstance(getattr(args, name), str):
            setattr(args, name, parse(getattr(args, name)))
    args.batch_given = args.batch
    if args.batch is None:
        args.batch = layer_bench.QUICK_BATCH if args.quick else 256
    if args.quick and args.iters == 10:
        args.iters = 2
    return args

def _check_mode_options(parser, args):
    """Options whose values depend on the mode: --modes' names and --limits auto."""
    if args.memory_cap and not args.models:
        parser.error("--memory-cap needs --models")
    allowed = memory_cap.MODES if args.memory_cap else MODES
    if args.modes and any(m not in allowed for m in args.modes):
        parser.error(f"--modes{' with --memory-cap' if args.memory_cap else ''} must be a comma "
                     f"list of {', '.join(allowed)}, got {','.join(args.modes)}")
    if args.compare_limits and not args.plot:
        parser.error("--compare-limits reads saved memory-cap results: give them with --plot")
    if not args.memory_cap and memory_cap.AUTO in (args.limits or []):
        parser.error("--limits auto is for --memory-cap only (the other modes set "
                     "TF_CUDNN_WORKSPACE_LIMIT_IN_MB, a number)")


def _no_gpu():
    message = ("tf_ucudnn.bench: no GPU found. The benchmark compares cuDNN algorithms under "
               "workspace limits and needs a GPU; nothing was timed.")
    print(message)
    print("Running the CPU self-check instead (tf_ucudnn vs tf.nn.conv2d, one tiny layer):")
    ok, lines = layer_bench.self_check()
    print("\n".join(lines))
    print(f"self-check {'PASSED' if ok else 'FAILED'}")
    print(message)
    return EXIT_NO_GPU if ok else 1


def _plot(args):
    from tf_ucudnn.bench import figures

    saved = []
    for path in args.plot:
        with open(path) as f:
            saved.append(json.load(f))
    report, source = saved[0], args.plot[0]
    if len(saved) > 1:
        try:
            report = memory_cap.merge_reports(saved)
        except ValueError as e:
            print(f"tf_ucudnn.bench: error: --plot: {e}", file=sys.stderr)
            return 1
        memory_cap.print_table(report["summary"])
        if args.json:
            harness.write_json(args.json, report)
            source = args.json
    if args.compare_limits:
        if report.get("kind") != memory_cap.KIND:
            print("tf_ucudnn.bench: error: --compare-limits: --plot's JSON is not a memory-cap "
                  "result", file=sys.stderr)
            return 1
        candidate, reference = args.compare_limits
        memory_cap.print_limit_comparison(
            memory_cap.compare_limits(report["sweeps"], candidate, reference),
            candidate, reference)
    for path in figures.draw(report, args.png or os.path.splitext(source)[0]):
        print(f"wrote {path}")
    return 0


def main(argv=None):
    """Runs the benchmark (or, with the hidden --worker flag, one worker).

    Args:
      argv: arguments without the program name; None uses sys.argv.

    Returns:
      The exit status: 0 done, 1 a worker, a layer or a check failed (or a bad
      layer table), 2 no GPU (the CPU self-check passed).
    """
    args = parse_args(argv)
    if args.worker:
        return layer_bench.run_worker(args.worker, args.worker_out)
    if args.plot:
        return _plot(args)

    import tensorflow as tf

    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    if not on_gpu and not args.allow_cpu:
        return _no_gpu()
    if args.memory_cap:
        return _run_memory_cap(args, on_gpu, argv=sys.argv[1:] if argv is None else argv)
    if args.models:
        return _run_models(args, on_gpu)
    try:
        if args.quick:
            layers = list(QUICK_LAYERS)
        elif args.csv:
            layers = select_layers(read_layers(args.csv), args.layers)
        else:
            layers = select_layers(layer_set(args.set), args.layers)
    except (OSError, ValueError) as e:
        print(f"tf_ucudnn.bench: error: {e}", file=sys.stderr)
        return 1
    data_format = args.data_format
    if args.overhead:
        return _run_overhead(args, layers, data_format)
    return layer_bench.run(args, layers, data_format, on_gpu,
                           argv=sys.argv[1:] if argv is None else argv)


def _run_overhead(args, layers, data_format):
    """Overhead mode (tf_ucudnn.bench.overhead); writes --json if given."""
    import tensorflow as tf

    from tf_ucudnn.bench import overhead

    for gpu in tf.config.list_physical_devices("GPU"):  # the engine cudaMallocs its buffers
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.experimental.enable_tensor_float_32_execution(args.tf32 == "on")
    limit = args.limits[0] if args.limits_given else REFERENCE_LIMIT
    environment = harness.describe_environment(True)
    print(f"tf_ucudnn.bench --overhead: {', '.join(environment['gpus'])}; TensorFlow "
          f"{environment['tensorflow']}, cuDNN {environment['cudnn']}; N={args.batch}, "
          f"{data_format}, {args.dtype}, TF32 {args.tf32}; ms per call, {args.iters} calls "
          f"per repeat, median of 5")
    rows = overhead.run_overhead(layers, batch=args.batch, data_format=data_format,
                                dtype=args.dtype, workspace_limit=limit, iters=args.iters,
                                passes=args.passes)
    overhead.print_overhead(rows, limit)
    if args.json:
        harness.write_json(args.json, dict(
            environment=environment, batch=args.batch, data_format=data_format, dtype=args.dtype,
            tf32=args.tf32 == "on", workspace_limit=limit, iters=args.iters, results=rows))
    return 1 if any("error" in r for r in rows) else 0

def _run_models(args, on_gpu):
    """Model mode (tf_ucudnn.bench.models): needs a GPU; writes --json if given."""
    from tf_ucudnn.bench import models

    if not on_gpu:
        return _no_gpu()
    environment = harness.describe_environment(on_gpu)
    print(f"tf_ucudnn.bench --models: {', '.join(environment['gpus'])}; TensorFlow "
          f"{environment['tensorflow']}, cuDNN {environment['cudnn']}; one training step"
          + (", with and without XLA" if args.xla else ", no XLA"))
    # Only --totals given: no per-kernel limits.
    limits = args.limits if args.limits_given or not args.totals else []
    results = models.run_models(args.models, limits, args.totals, batch=args.batch_given,
                                planning=args.planning, timeout=args.worker_timeout,
                                xla=args.xla, modes=args.modes, precision=args.precision,
                                runs=args.runs)
    if args.json:
        harness.write_json(args.json, dict(
            environment=environment, models=args.models, limits=limits, xla=args.xla,
            precision=args.precision, totals=args.totals, runs=args.runs, results=results,
            summary=models.summarize(results)))
    return 1 if any("error" in r for r in results) else 0


def _run_memory_cap(args, on_gpu, argv):
    """Memory-cap mode (tf_ucudnn.bench.memory_cap); writes --json and the figure if asked."""
    gpus = args.gpus or memory_cap.visible_gpus()
    environment = harness.describe_environment(on_gpu)
    modes = args.modes or list(memory_cap.MODES)
    limits = args.limits
    print(f"tf_ucudnn.bench --memory-cap: {', '.join(environment['gpus']) or 'no GPU'}; "
          f"TensorFlow {environment['tensorflow']}, cuDNN {environment.get('cudnn', '-')}; caps "
          f"{', '.join(format_bytes(c) for c in args.memory_cap)}; modes "
          f"{', '.join(modes)}; tf_ucudnn at {', '.join(map(memory_cap.limit_label, limits))}; "
          f"model.fit, {args.epochs} x {args.steps_per_epoch} timed steps per run; "
          + (f"sweeps in parallel on GPUs {', '.join(gpus)}" if len(gpus) > 1 else
             "one sweep at a time"), flush=True)
    settings = dict(
        models=args.models, caps=args.memory_cap, modes=modes, limits=limits,
        start_batch=args.start_batch, max_batch=args.max_batch, bisect_steps=args.bisect_steps,
        steps_per_epoch=args.steps_per_epoch, epochs=args.epochs, runs=args.runs, gpus=gpus,
        precision=args.precision, worker_timeout=args.worker_timeout, argv=list(argv))

    def save_so_far(done):  # an interrupted run keeps every run that finished
        harness.write_json(args.json, memory_cap.report(done, environment=environment,
                                                        args=settings, complete=False), say=False)

    sweeps = memory_cap.run_memory_cap(
        args.models, args.memory_cap, modes=modes, limits=limits, start_batch=args.start_batch,
        max_batch=args.max_batch, bisect_steps=args.bisect_steps,
        steps_per_epoch=args.steps_per_epoch, epochs=args.epochs, runs=args.runs, gpus=gpus,
        timeout=args.worker_timeout, precision=args.precision,
        on_sweep=save_so_far if args.json else None)
    result = memory_cap.report(sweeps, environment=environment, args=settings)
    from tf_ucudnn.bench import figures

    figures.save_report(result, args.json, args.png)
    failed = [r for s in sweeps for r in s["runs"] if r["status"] in ("error", "timeout")]
    return 1 if failed else 0
