"""``tf-ucudnn bench MODE`` and ``python -m tf_ucudnn.bench MODE``: one
subcommand per mode, each with its own options and help, as ``git`` and ``pip``
have them:

    tf-ucudnn bench layers       per convolution layer: stock TF vs tf_ucudnn per workspace limit
    tf-ucudnn bench models       one training step per model and setting
    tf-ucudnn bench memory-cap   the largest mini-batch that trains under a GPU memory cap
    tf-ucudnn bench plot         redraw the figures of saved JSON results (no GPU)
    tf-ucudnn bench overhead     what the engine adds to one cuDNN call
"""

import argparse
import json
import os
import sys
import textwrap

from tf_ucudnn.bench import harness, layers as layer_bench, memory_cap
from tf_ucudnn.bench.harness import PASSES
from tf_ucudnn.bench.layers import (LAYER_SETS, QUICK_LAYERS, REFERENCE_LIMIT, layer_set,
                                    read_layers, select_layers)
from tf_ucudnn.bench.models import MODEL_SPECS, MODELS, MODES, PRECISIONS
from tf_ucudnn.cli_args import at_least, byte_count, positive_int
from tf_ucudnn.units import format_bytes, parse_bytes

DEFAULT_LIMITS = "64MiB,256MiB"
DEFAULT_ITERS = 10
QUICK_ITERS = 2

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


def _model_modes(text):
    return _names(text, "--modes", MODES)


def _memory_cap_modes(text):
    return _names(text, "--modes", memory_cap.MODES)


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
    """--limits of memory-cap: whole MiB, or ``auto``."""
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
    """--caps: memory caps, whole MiB (TF's memory_limit is in MiB)."""
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


MODE_HELP = {
    "layers": "time forward + backward-data + backward-filter per convolution layer: stock TF "
              "vs tf_ucudnn at each workspace limit, stock TF at 8 GiB as the reference",
    "models": "one training step per model and setting: stock TF, tf_ucudnn's rewrite at "
              "--limits, Workspace Division at --totals, optionally under XLA",
    "memory-cap": "per model, memory cap and setting: the largest mini-batch that trains with "
                  "model.fit under the cap, and the best images/s",
    "plot": "redraw the figures of saved --json results (no GPU; needs matplotlib)",
    "overhead": "per layer and pass: a one-micro-batch plan through the engine against one "
                "direct cuDNN call with the same algorithm",
}
# The former one-command form, for the hint when an option comes before the mode.
_FORMER = ("the former options map to modes: --models M -> models --models M; --models M "
           "--memory-cap C -> memory-cap --models M --caps C; --plot J -> plot J; "
           "--overhead -> overhead; anything else -> layers")


def _layer_selection(parser, *, iters_help):
    """The options that pick and shape the layers (layers and overhead modes)."""
    group = parser.add_argument_group("layers")
    group.add_argument("--set", default="deepbench", choices=LAYER_SETS,
                       help="layer set (default deepbench: its 3x3 and 5x5 training layers)")
    group.add_argument("--csv", default=None,
                       help="a layer table of your own instead of --set (columns model,layer,"
                            "C,H,W,K,R,S,pad_h,pad_w,stride_h,stride_w, or DeepBench's)")
    group.add_argument("--layers", default="all",
                       help="comma list of model/layer, layer or model names, or 'all' "
                            "(default); layers of equal shape are measured once")
    group.add_argument("--quick", action="store_true",
                       help=f"tiny shapes ({len(QUICK_LAYERS)} layers, N={layer_bench.QUICK_BATCH}) "
                            f"and {QUICK_ITERS} iterations per repeat: a fast smoke test")
    group.add_argument("--passes", type=_pass_list, default=list(PASSES),
                       help="comma list of forward, backward-data, backward-filter (default all)")
    group.add_argument("--batch", type=positive_int, default=None,
                       help=f"mini-batch size N (default 256; {layer_bench.QUICK_BATCH} with --quick)")
    group.add_argument("--data-format", choices=("NCHW", "NHWC"), default="NHWC",
                       help="layout of the tensors given to both (default NHWC, what Keras "
                            "models use). Stock TF's layout optimizer may transpose float32 "
                            "NHWC convolutions to NCHW on a GPU, and those transposes are "
                            "timed as part of its layer; tf_ucudnn runs cuDNN in the layout "
                            "it is given. NCHW compares the convolutions in NCHW on both sides.")
    group.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    group.add_argument("--tf32", choices=("on", "off"), default="on",
                       help="TensorFloat-32 for float32 convolutions (default on)")
    group.add_argument("--iters", type=positive_int, default=None, help=iters_help)


def _json_option(parser, what="all results"):
    parser.add_argument("--json", metavar="PATH", help=f"also write {what} to PATH")


def _worker_timeout(parser):
    parser.add_argument("--worker-timeout", type=positive_int, default=1800,
                        help="seconds before a worker process is killed (default 1800)")


def _add_layers(commands):
    parser = commands.add_parser(
        "layers", help=MODE_HELP["layers"], description=MODE_HELP["layers"] + ". Each (mode, "
        "limit) runs in its own process, since TF reads TF_CUDNN_WORKSPACE_LIMIT_IN_MB once "
        "per process.", epilog=_EXIT_STATUS)
    _layer_selection(parser, iters_help=f"iterations per repeat, timed together between device "
                                        f"syncs (default {DEFAULT_ITERS})")
    parser.add_argument("--limits", type=_limit_list, default=_limit_list(DEFAULT_LIMITS),
                        help=f"comma list of workspace limits, whole MiB (default {DEFAULT_LIMITS})")
    parser.add_argument("--policy", choices=("undivided", "powerOfTwo", "all"), default=None,
                        help="tf_ucudnn batch-size policy (default: UCUDNN_BATCH_SIZE_POLICY, "
                             "else powerOfTwo)")
    parser.add_argument("--warmup", type=at_least(3), default=3,
                        help="warm-up iterations, >= 3 (they also trigger tf_ucudnn's planning "
                             "and TF's autotuning)")
    parser.add_argument("--repeats", type=at_least(5), default=5,
                        help="timed repeats, >= 5; the median is reported")
    _json_option(parser)
    parser.add_argument("--png", metavar="PREFIX",
                        help="write PREFIX_speedup.png and PREFIX_plans.png (default with "
                             "--json: the JSON path without .json)")
    _worker_timeout(parser)
    # Hidden: run the table on the CPU (for testing the mechanics), and the worker side.
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", metavar="PATH", help=argparse.SUPPRESS)


def _add_models(commands):
    parser = commands.add_parser("models", help=MODE_HELP["models"],
                                 description=MODE_HELP["models"] + ".", epilog=_EXIT_STATUS)
    parser.add_argument("--models", type=_model_list, required=True,
                        help=f"comma list of {', '.join(MODELS)}")
    parser.add_argument("--limits", type=_limit_list, default=None,
                        help=f"tf_ucudnn's workspace limits, whole MiB (default {DEFAULT_LIMITS}; "
                             "none when only --totals is given)")
    parser.add_argument("--totals", type=_optional_limit_list, default=[],
                        help="total workspace budgets for Workspace Division")
    parser.add_argument("--modes", type=_model_modes, default=None,
                        help=f"only these settings, in this order, a comma list of "
                             f"{', '.join(MODES)} (default: all but rewrite-layout and "
                             "ucudnn-xla-buffer, stock TF first)")
    parser.add_argument("--xla", action="store_true",
                        help="also stock TF compiled with XLA and tf_ucudnn under XLA "
                             "(rewrite_model, jit_compile=True) at --limits")
    parser.add_argument("--precision", default="float32", choices=PRECISIONS,
                        help="the Keras dtype policy of every run (default float32)")
    parser.add_argument("--batch", type=positive_int, default=None,
                        help="mini-batch size (default: each model's)")
    parser.add_argument("--planning", action="store_true",
                        help="also time planning cold and with a warm database")
    parser.add_argument("--runs", type=positive_int, default=1,
                        help="processes per setting (and cold/warm planning pairs); the table "
                             "gives their medians (default 1)")
    _json_option(parser)
    _worker_timeout(parser)


def _add_memory_cap(commands):
    parser = commands.add_parser(
        "memory-cap", help=MODE_HELP["memory-cap"],
        description=MODE_HELP["memory-cap"] + ". A memory cap limits TF's GPU allocator to "
        "that size, standing in for a smaller GPU or for memory held by other work "
        "(tf_ucudnn.bench.memory_cap).", epilog=_EXIT_STATUS)
    parser.add_argument("--models", type=_model_list, required=True,
                        help=f"comma list of {', '.join(MODELS)}")
    parser.add_argument("--caps", type=_cap_list, required=True, metavar="SIZE[,SIZE...]",
                        help="memory caps, whole MiB, e.g. 8GiB,16GiB")
    parser.add_argument("--modes", type=_memory_cap_modes,
                        default=list(memory_cap.DEFAULT_MODES),
                        help=f"settings, a comma list of {', '.join(memory_cap.MODES)} "
                             f"(default {','.join(memory_cap.DEFAULT_MODES)})")
    parser.add_argument("--limits", type=_limit_or_auto_list, default=list(memory_cap.DEFAULT_LIMITS),
                        help="tf_ucudnn's workspace limits, whole MiB or auto (follows the free "
                             "memory); default 64MiB")
    parser.add_argument("--precision", default="float32", choices=PRECISIONS,
                        help="the Keras dtype policy of every run (default float32)")
    parser.add_argument("--start-batch", type=positive_int, default=None,
                        help="each sweep's first mini-batch size (default the model's: "
                             + ", ".join(f"{name} {spec.start_batch}"
                                         for name, spec in MODEL_SPECS.items()) + ")")
    parser.add_argument("--max-batch", type=positive_int, default=memory_cap.DEFAULT_MAX_BATCH,
                        help="the largest mini-batch size tried (default "
                             f"{memory_cap.DEFAULT_MAX_BATCH})")
    parser.add_argument("--bisect-steps", type=at_least(0), default=memory_cap.DEFAULT_BISECT_STEPS,
                        help="bisection steps between the largest size that trained and the "
                             "smallest that failed, after doubling (default "
                             f"{memory_cap.DEFAULT_BISECT_STEPS})")
    parser.add_argument("--steps-per-epoch", type=positive_int,
                        default=memory_cap.DEFAULT_STEPS_PER_EPOCH,
                        help=f"steps per timed epoch, S (default {memory_cap.DEFAULT_STEPS_PER_EPOCH})")
    parser.add_argument("--epochs", type=positive_int, default=memory_cap.DEFAULT_EPOCHS,
                        help="timed epochs, R; the step time is the median epoch / S (default "
                             f"{memory_cap.DEFAULT_EPOCHS})")
    parser.add_argument("--steps-per-execution", type=positive_int, default=1,
                        help="Keras' compile(steps_per_execution=): steps per call of the "
                             "training function; it must divide --steps-per-epoch (default 1, "
                             "Keras': fit waits for each step's loss)")
    parser.add_argument("--prefetch-to-device", action="store_true",
                        help="end the tf.data pipeline with tf.data.experimental."
                             "prefetch_to_device, so that the next batch's copy to the GPU runs "
                             "during the step (default: prefetch on the host; each step copies "
                             "its batch first)")
    parser.add_argument("--runs", type=positive_int, default=1,
                        help="processes per mini-batch size; it trains if all do (default 1)")
    parser.add_argument("--gpus", type=_gpu_list, default=None,
                        help="GPUs (CUDA_VISIBLE_DEVICES values) to run sweeps on in parallel, "
                             "one sweep per GPU (default: CUDA_VISIBLE_DEVICES, else every GPU "
                             "nvidia-smi lists)")
    _json_option(parser, "the sweeps (also as they finish)")
    parser.add_argument("--png", metavar="PREFIX",
                        help="write PREFIX_memory_cap.png (default with --json: the JSON path "
                             "without .json)")
    _worker_timeout(parser)
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)


def _add_plot(commands):
    parser = commands.add_parser(
        "plot", help=MODE_HELP["plot"],
        description="Draw the figures of saved `--json` results with matplotlib (pip install "
                    "'tf_ucudnn[bench]'); no GPU needed. Several memory-cap results are merged "
                    "into one table and figure. Existing files are never overwritten without "
                    "--force.")
    parser.add_argument("inputs", metavar="JSON", nargs="+",
                        help="results of `tf-ucudnn bench layers|memory-cap --json`")
    parser.add_argument("--output", metavar="PREFIX", default=None,
                        help="path prefix of the figures: PREFIX_speedup.png and "
                             "PREFIX_plans.png, or PREFIX_memory_cap.png (default: the first "
                             "JSON's name without .json, in the current directory)")
    parser.add_argument("--force", action="store_true",
                        help="overwrite figures (and --json) that exist already")
    parser.add_argument("--json", metavar="PATH",
                        help="with several memory-cap results: also write the merged result "
                             "to PATH")
    parser.add_argument("--compare-limits", type=_limit_pair, default=None,
                        metavar="CANDIDATE,REFERENCE",
                        help="for memory-cap results: whether tf_ucudnn's workspace limit "
                             "CANDIDATE (whole MiB or auto) is never more than 3%% slower than "
                             "REFERENCE at any N both trained and never out of memory where "
                             "REFERENCE trains, e.g. auto,64MiB")


def _add_overhead(commands):
    parser = commands.add_parser(
        "overhead", help=MODE_HELP["overhead"],
        description=MODE_HELP["overhead"] + " (tf_ucudnn.bench.overhead).", epilog=_EXIT_STATUS)
    _layer_selection(parser, iters_help=f"calls per repeat (default {DEFAULT_ITERS})")
    parser.add_argument("--limit", type=byte_count, default=REFERENCE_LIMIT,
                        help=f"tf_ucudnn's workspace limit (default {format_bytes(REFERENCE_LIMIT)})")
    _json_option(parser)


_EXIT_STATUS = ("Exit status: 0 done; 1 a worker, layer or check failed; 2 no GPU (the CPU "
                "self-check ran instead) or bad options.")


def build_parser():
    """The parser of ``tf-ucudnn bench``: one subparser per mode (``args.mode``)."""
    parser = argparse.ArgumentParser(
        prog="tf-ucudnn bench",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The GPU benchmarks of tf_ucudnn against stock TensorFlow, one mode per "
                    "subcommand.",
        epilog=textwrap.dedent("""\
            examples:
              tf-ucudnn bench layers --set deepbench --limits 64MiB --json deepbench.json
              tf-ucudnn bench models --models vgg16,resnet50 --limits 64MiB --xla
              tf-ucudnn bench memory-cap --models vgg16 --caps 8GiB --json vgg16.json
              tf-ucudnn bench plot vgg16.json --output figures/vgg16

            `tf-ucudnn bench MODE --help` lists a mode's options. Also runs as
            `python -m tf_ucudnn.bench MODE`."""))
    commands = parser.add_subparsers(dest="mode", required=True, metavar="MODE",
                                     title="modes")
    for add in (_add_layers, _add_models, _add_memory_cap, _add_plot, _add_overhead):
        add(commands)
    return parser


def parse_args(argv=None):
    """Parses the benchmark's command line, ``MODE [options]``.

    Args:
      argv: arguments without the program name; None uses sys.argv.

    Returns:
      An argparse.Namespace; ``mode`` is the subcommand (``"layers"``,
      ``"models"``, ``"memory-cap"``, ``"plot"`` or ``"overhead"``).
    """
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        parser.error(f"name the mode first: tf-ucudnn bench MODE [options], MODE one of "
                     f"{', '.join(MODE_HELP)} ({_FORMER})")
    args = parser.parse_args(argv)
    if args.mode in ("layers", "overhead"):
        if args.batch is None:
            args.batch = layer_bench.QUICK_BATCH if args.quick else 256
        if args.iters is None:
            args.iters = QUICK_ITERS if args.quick else DEFAULT_ITERS
    if args.mode == "memory-cap":
        try:
            memory_cap.check_steps_per_execution(args.steps_per_execution, args.steps_per_epoch)
        except ValueError as e:
            parser.error(f"memory-cap: {e}")
    if args.mode == "models" and args.limits is None:
        # Only --totals given: no per-kernel limits.
        args.limits = [] if args.totals else _limit_list(DEFAULT_LIMITS)
    return args


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
    """``plot``: the figures (and with several memory-cap results the merged
    table and JSON) of saved results; never overwrites a file unless --force."""
    from tf_ucudnn.bench import figures

    saved = []
    for path in args.inputs:
        try:
            with open(path) as f:
                saved.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"tf_ucudnn.bench: error: plot: cannot read {path}: {e}", file=sys.stderr)
            return 1
    report, source = saved[0], args.inputs[0]
    if len(saved) > 1:
        try:
            report = memory_cap.merge_reports(saved)
        except ValueError as e:
            print(f"tf_ucudnn.bench: error: plot: {e}", file=sys.stderr)
            return 1
    elif args.json:
        print("tf_ucudnn.bench: error: plot --json writes the merge of several memory-cap "
              "results; one JSON was given", file=sys.stderr)
        return 1
    if args.compare_limits and report.get("kind") != memory_cap.KIND:
        print(f"tf_ucudnn.bench: error: plot --compare-limits: {source} is not a memory-cap "
              f"result", file=sys.stderr)
        return 1
    prefix = args.output or os.path.splitext(os.path.basename(args.json or source))[0]
    outputs = figures.figure_paths(report, prefix) + ([args.json] if args.json else [])
    existing = [p for p in outputs if os.path.exists(p)]
    if existing and not args.force:
        print(f"tf_ucudnn.bench: error: plot would overwrite {', '.join(existing)}: give "
              f"another --output PREFIX, or --force to overwrite", file=sys.stderr)
        return 1
    try:
        figures.pyplot()
    except ImportError as e:
        print(f"tf_ucudnn.bench: error: plot draws with matplotlib, which is not installed "
              f"({e}): pip install 'tf_ucudnn[bench]'", file=sys.stderr)
        return 1
    if os.path.dirname(prefix):
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
    if len(saved) > 1:
        memory_cap.print_table(report["summary"])
        if args.json:
            harness.write_json(args.json, report)
    if args.compare_limits:
        candidate, reference = args.compare_limits
        memory_cap.print_limit_comparison(
            memory_cap.compare_limits(report["sweeps"], candidate, reference),
            candidate, reference)
    for path in figures.draw(report, prefix):
        print(f"wrote {path}")
    return 0


def main(argv=None):
    """Runs ``tf-ucudnn bench MODE [options]`` (or, with the hidden --worker
    option of ``layers``, one worker).

    Args:
      argv: arguments without the program name; None uses sys.argv.

    Returns:
      The exit status: 0 done, 1 a worker, a layer or a check failed (or a bad
      layer table, or a figure that exists already), 2 no GPU (the CPU
      self-check passed).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.mode == "plot":
        return _plot(args)
    if args.mode == "layers" and args.worker:
        return layer_bench.run_worker(args.worker, args.worker_out)

    import tensorflow as tf

    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    if not on_gpu and not getattr(args, "allow_cpu", False):
        return _no_gpu()
    if args.mode == "memory-cap":
        return _run_memory_cap(args, on_gpu, argv=argv)
    if args.mode == "models":
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
    if args.mode == "overhead":
        return _run_overhead(args, layers, args.data_format)
    return layer_bench.run(args, layers, args.data_format, on_gpu, argv=argv)


def _run_overhead(args, layers, data_format):
    """Overhead mode (tf_ucudnn.bench.overhead); writes --json if given."""
    import tensorflow as tf

    from tf_ucudnn.bench import overhead

    for gpu in tf.config.list_physical_devices("GPU"):  # the engine cudaMallocs its buffers
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.experimental.enable_tensor_float_32_execution(args.tf32 == "on")
    limit = args.limit
    environment = harness.describe_environment(True)
    print(f"tf-ucudnn bench overhead: {', '.join(environment['gpus'])}; TensorFlow "
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
    print(f"tf-ucudnn bench models: {', '.join(environment['gpus'])}; TensorFlow "
          f"{environment['tensorflow']}, cuDNN {environment['cudnn']}; one training step"
          + (", with and without XLA" if args.xla else ", no XLA"))
    limits = args.limits
    results = models.run_models(args.models, limits, args.totals, batch=args.batch,
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
    modes = args.modes
    limits = args.limits
    print(f"tf-ucudnn bench memory-cap: {', '.join(environment['gpus']) or 'no GPU'}; "
          f"TensorFlow {environment['tensorflow']}, cuDNN {environment.get('cudnn', '-')}; caps "
          f"{', '.join(format_bytes(c) for c in args.caps)}; modes "
          f"{', '.join(modes)}; tf_ucudnn at {', '.join(map(memory_cap.limit_label, limits))}; "
          f"model.fit, {args.epochs} x {args.steps_per_epoch} timed steps per run"
          + (f", {args.steps_per_execution} per execution" if args.steps_per_execution > 1 else "")
          + (", batches prefetched to the GPU" if args.prefetch_to_device else "") + "; "
          + (f"sweeps in parallel on GPUs {', '.join(gpus)}" if len(gpus) > 1 else
             "one sweep at a time"), flush=True)
    settings = dict(
        models=args.models, caps=args.caps, modes=modes, limits=limits,
        start_batch=args.start_batch, max_batch=args.max_batch, bisect_steps=args.bisect_steps,
        steps_per_epoch=args.steps_per_epoch, epochs=args.epochs, runs=args.runs, gpus=gpus,
        precision=args.precision, worker_timeout=args.worker_timeout,
        steps_per_execution=args.steps_per_execution,
        prefetch_to_device=args.prefetch_to_device, argv=list(argv))

    def save_so_far(done):  # an interrupted run keeps every run that finished
        harness.write_json(args.json, memory_cap.report(done, environment=environment,
                                                        args=settings, complete=False), say=False)

    sweeps = memory_cap.run_memory_cap(
        args.models, args.caps, modes=modes, limits=limits, start_batch=args.start_batch,
        max_batch=args.max_batch, bisect_steps=args.bisect_steps,
        steps_per_epoch=args.steps_per_epoch, epochs=args.epochs, runs=args.runs, gpus=gpus,
        timeout=args.worker_timeout, precision=args.precision,
        steps_per_execution=args.steps_per_execution, prefetch_to_device=args.prefetch_to_device,
        on_sweep=save_so_far if args.json else None)
    result = memory_cap.report(sweeps, environment=environment, args=settings)
    from tf_ucudnn.bench import figures

    figures.save_report(result, args.json, args.png)
    failed = [r for s in sweeps for r in s["runs"] if r["status"] in ("error", "timeout")]
    return 1 if failed else 0
