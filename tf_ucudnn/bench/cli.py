"""``tf-ucudnn bench`` and ``python -m tf_ucudnn.bench``: the options and the
dispatch to the layer, model and overhead modes."""

import argparse
import json
import os
import sys

from tf_ucudnn.bench import harness, layers as layer_bench
from tf_ucudnn.bench.harness import PASSES
from tf_ucudnn.bench.layers import (LAYER_SETS, QUICK_LAYERS, REFERENCE_LIMIT, layer_set,
                                    read_layers, select_layers)
from tf_ucudnn.bench.models import MODELS, MODES, PRECISIONS
from tf_ucudnn.cli_args import at_least, positive_int
from tf_ucudnn.units import parse_bytes

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
    return _names(text, "--modes", MODES)


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
    parser.add_argument("--plot", metavar="JSON",
                        help="only draw the figures of a saved --json result (no GPU needed)")
    parser.add_argument("--models", type=_model_list, default=None,
                        help="model mode: comma list of alexnet, resnet18, vgg16, resnet50, "
                             "inceptionv3; one training step per setting (stock TF and tf_ucudnn's rewrite at "
                             "--limits, Workspace Division at --totals, stock TF at 8 GiB)")
    parser.add_argument("--precision", default="float32",
                        choices=PRECISIONS,
                        help="model mode: the Keras dtype policy of every run (default float32)")
    parser.add_argument("--modes", type=_mode_list, default=None,
                        help="model mode: only these settings, a comma list of "
                             "stock, rewrite, rewrite-layout, rewrite-wd, stock-xla, ucudnn-xla, "
                             "ucudnn-xla-buffer (default: all but rewrite-layout and "
                             "ucudnn-xla-buffer)")
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
                             "pairs); the table gives their medians (default 1)")
    parser.add_argument("--layers", default="all",
                        help="comma list of model/layer, layer or model names, or 'all' "
                             "(default); layers of equal shape are measured once")
    parser.add_argument("--batch", type=positive_int, default=None,
                        help=f"mini-batch size N (default 256; {layer_bench.QUICK_BATCH} with --quick)")
    parser.add_argument("--limits", type=_limit_list, default=None,
                        help="comma list of workspace limits, whole MiB (default 64MiB,256MiB)")
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
    args.limits_given = args.limits is not None
    if args.limits is None:
        args.limits = DEFAULT_LIMITS
    for name, parse in (("limits", _limit_list), ("totals", _optional_limit_list), ("passes", _pass_list)):
        if isinstance(getattr(args, name), str):
            setattr(args, name, parse(getattr(args, name)))
    args.batch_given = args.batch
    if args.batch is None:
        args.batch = layer_bench.QUICK_BATCH if args.quick else 256
    if args.quick and args.iters == 10:
        args.iters = 2
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
        from tf_ucudnn.bench import figures

        with open(args.plot) as f:
            saved = json.load(f)
        for path in figures.draw(saved, args.png or os.path.splitext(args.plot)[0]):
            print(f"wrote {path}")
        return 0

    import tensorflow as tf

    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    if not on_gpu and not args.allow_cpu:
        return _no_gpu()
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
