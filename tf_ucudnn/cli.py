"""The ``tf-ucudnn`` command (also ``python -m tf_ucudnn``).

    tf-ucudnn demo [options]         the main job: tf_ucudnn vs stock Keras (tf_ucudnn.demo)
    tf-ucudnn bench MODE [options]   the GPU benchmarks: layers, models, memory-cap,
                                     plot, overhead (tf_ucudnn.bench)
    tf-ucudnn cache show|clear       the benchmark database (tf_ucudnn.database_cli)

Each command's options belong to its module (``demo.parse_args``,
``bench.main``, ``database_cli.main``): this parser reads what comes before the
command and the command's name, and hands everything after the name over as
it is, ``--help`` included. ``--help``, ``--version`` and ``cache`` import no
TensorFlow.
"""

import argparse
import sys

import tf_ucudnn

PROG = "tf-ucudnn"
# name -> (module, one-line help)
COMMANDS = {
    "demo": ("demo", "train one small CNN with tf_ucudnn.layers.Conv2D and with "
                     "keras.layers.Conv2D, side by side (runs on the CPU too)"),
    "bench": ("bench", "layers|models|memory-cap|plot|overhead: time tf_ucudnn against stock "
                       "TensorFlow (needs a GPU; plot redraws a saved result)"),
    "cache": ("database_cli", "show|clear: the benchmark database of cuDNN measurements"),
}
_DEPRECATED = {"run": "demo"}


def build_parser():
    """The top-level parser: ``--version`` and one subparser per command (for the
    help and the check of its name); the commands' options are their modules'."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="μ-cuDNN for TensorFlow: micro-batched cuDNN convolutions that fit fast "
                    "algorithms into a small workspace.",
        epilog=f"`{PROG} COMMAND --help` lists a command's options. Also runs as "
               f"`python -m tf_ucudnn`.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {tf_ucudnn.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, title="commands")
    for name, (_, text) in COMMANDS.items():
        # No help of its own: `tf-ucudnn demo --help` is the demo's help.
        commands.add_parser(name, help=text, add_help=False)
    return parser


def main(argv=None):
    """Runs the command line ``argv`` (default ``sys.argv[1:]``).

    Returns:
      The command's exit status (argparse exits with 0 for ``--help`` and
      ``--version`` and with 2 for an unknown command).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in _DEPRECATED:
        new = _DEPRECATED[argv[0]]
        print(f"{PROG}: '{argv[0]}' is deprecated; use '{PROG} {new}'", file=sys.stderr)
        argv = [new, *argv[1:]]
    # The command is the first argument that is not an option: what precedes it
    # and its name are ours, what follows is the command's, untouched.
    end = next((i + 1 for i, arg in enumerate(argv) if not arg.startswith("-")), len(argv))
    args = build_parser().parse_args(argv[:end])
    rest = argv[end:]
    if args.command == "demo":
        from tf_ucudnn import demo
        return demo.main(rest)
    if args.command == "bench":
        from tf_ucudnn import bench
        return bench.main(rest)
    from tf_ucudnn import database_cli
    return database_cli.main(rest)


if __name__ == "__main__":
    sys.exit(main())
