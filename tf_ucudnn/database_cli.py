"""``tf-ucudnn cache show|clear [--database PATH]``: the command line of the
benchmark database (:mod:`tf_ucudnn.database`). Imports no TensorFlow."""

import argparse
import sqlite3
import sys

from tf_ucudnn.database import (DEFAULT_PATH, OFF_VALUES, BenchmarkDatabase, NotOurDatabase,
                                database_path)


def database_argument(value):
    """The database a command line names with ``--database VALUE``.

    Args:
      value: None (not given: ``UCUDNN_DATABASE``, else the default path),
        ``off`` (also ``none``, ``0``; any case: no database), or a file path.

    Returns:
      The path, or None for no database.

    Raises:
      ValueError: an empty value, which names neither a file nor ``off``.
    """
    if value is None:
        return database_path()
    if not value.strip():
        raise ValueError("--database needs a file path, or 'off' for no database; got ''")
    if value.strip().lower() in OFF_VALUES:
        return None
    return value


def main(argv=None):
    """``tf-ucudnn cache show|clear [--database PATH]``; returns the exit status.

    ``--database off`` means no database; an empty ``--database ''`` is an
    error (exit status 2). Neither command creates a file or folder: for a
    path with no file, both say that there is no database there.
    """
    parser = argparse.ArgumentParser(prog="tf-ucudnn cache",
                                     description="Show or clear tf_ucudnn's benchmark database.")
    parser.add_argument("command", choices=("show", "clear"))
    parser.add_argument("--database", default=None,
                        help=f"SQLite file, or 'off' (default: UCUDNN_DATABASE, else {DEFAULT_PATH})")
    args = parser.parse_args(argv)
    try:
        path = database_argument(args.database)
    except ValueError as e:
        parser.error(str(e))
    if path is None:
        print("the benchmark database is off (--database off, or UCUDNN_DATABASE is empty or 'off')")
        return 0
    try:
        db = BenchmarkDatabase(path)
        if args.command == "clear":
            count = db.clear()
            print(f"{path}: no benchmark database there" if count is None
                  else f"{path}: removed {count} tables")
            return 0
        rows = db.summary()
    except NotOurDatabase as e:
        print(f"{path}: not a tf_ucudnn benchmark database ({e}); left alone", file=sys.stderr)
        return 1
    except (sqlite3.Error, OSError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    if rows is None:
        print(f"{path}: no benchmark database there (nothing has been benchmarked into it)")
        return 0
    print(f"{path}: {len(rows)} tables (one per convolution, any N; a size with * was "
          f"measured under memory pressure and is measured again where there is room)")
    if rows:
        from tf_ucudnn import table
        print(table.render(("GPU", "cuDNN", "TF", "pass", "convolution", "settings",
                            "micro-batch sizes"),
                           [(*r[:4], r[4].split(" "), r[5].split(" "),
                             "malformed" if r[6] is None else ", ".join(r[6]).split(" "))
                            for r in rows], align="lllllll", max_width=150))
    return 0
