"""The ``tf-ucudnn`` command (also ``python -m tf_ucudnn``).

    tf-ucudnn run [demo options]      the main job (tf_ucudnn.demo)
    tf-ucudnn bench [bench options]   the per-layer GPU benchmark (tf_ucudnn.bench)
    tf-ucudnn cache show|clear        the benchmark database (tf_ucudnn.cache)
"""

import sys

_COMMANDS = ("run", "bench", "cache")


def main(argv=None):
    """Dispatches to the subcommand; returns its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in _COMMANDS:
        print(__doc__.strip(), file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, rest = argv[0], argv[1:]
    if command == "run":
        from tf_ucudnn import demo
        return demo.main(rest)
    if command == "bench":
        from tf_ucudnn import bench
        return bench.main(rest)
    from tf_ucudnn import cache
    return cache.main(rest)


if __name__ == "__main__":
    sys.exit(main())
