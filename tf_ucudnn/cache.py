"""The benchmark database: cuDNN benchmark results kept in SQLite across processes.

Planning a kernel benchmarks every allowed micro-batch size (seconds for a
model). The results are stored per GPU model, cuDNN version and TensorFlow
version, keyed by everything that defines the kernel (pass, convolution with
its batch size, layout, dtype, TF32, determinism, workspace limit, batch-size
policy, forced micro-batch size, candidate set), so that a later process planning the same
kernel benchmarks nothing (μ-cuDNN's ``UCUDNN_DATABASE``).

``UCUDNN_DATABASE``: the SQLite file; unset means
``~/.cache/tf_ucudnn/benchmarks.sqlite3``; ``""`` or ``off`` turns the database
off. A database that is locked, unwritable, corrupt or of another schema gives
one warning and planning goes on without it. A database of an older schema
(from an older tf_ucudnn) is emptied once, with a warning, and then used.

Command line: ``tf-ucudnn cache show|clear [--database PATH]`` (or
``python -m tf_ucudnn cache ...``).
"""

import argparse
import atexit
import json
import os
import sqlite3
import sys
import time
import warnings

# 2: graph-API engines among the candidates (engine id and knobs in "algos")
# and the candidate set (UCUDNN_ENGINES) in the key.
# 3: transposed graph-API candidates (a flag after the engine id).
SCHEMA_VERSION = 3
DEFAULT_PATH = os.path.join(os.path.expanduser("~"), ".cache", "tf_ucudnn", "benchmarks.sqlite3")
_TIMEOUT_S = 5.0
_KEY_FIELDS = 27  # see ucudnn_seed_kernel in cc/kernels/engine/c_api.cc


def gpu_identity():
    """What stored benchmarks are valid for: ``(GPU name, cuDNN version, TF
    version)`` of the first visible GPU, or None without a GPU."""
    import tensorflow as tf

    from tf_ucudnn import cudnn_version

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "unknown GPU")
    return name, cudnn_version(), tf.__version__


def database_path():
    """The database file from ``UCUDNN_DATABASE`` (None when turned off)."""
    path = os.environ.get("UCUDNN_DATABASE")
    if path is None:
        return DEFAULT_PATH
    if path.strip().lower() in ("", "off", "0", "none"):
        return None
    return path


class BenchmarkDatabase:
    """Benchmark tables in one SQLite file, safe for concurrent processes.

    Every failure (locked, unwritable, corrupt, other schema) is reported once
    with ``warnings.warn`` and turns the database off for this object; reads
    then return nothing and writes do nothing.

    Args:
      path: the SQLite file (created with its folder if missing).
    """

    def __init__(self, path):
        self.path = path
        self.disabled = False

    def _fail(self, what, error):
        if not self.disabled:
            warnings.warn(f"tf_ucudnn: benchmark database {self.path}: {what} ({error}); "
                          f"planning continues without it", RuntimeWarning, stacklevel=3)
        self.disabled = True

    def _connect(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_TIMEOUT_S)
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        if version.isdigit() and int(version) < SCHEMA_VERSION:
            # Older benchmarks lack candidates this version has: start afresh.
            with db:
                db.execute("DROP TABLE IF EXISTS kernels")
                db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                           (str(SCHEMA_VERSION),))
            warnings.warn(f"tf_ucudnn: benchmark database {self.path}: schema version {version} "
                          f"is older than {SCHEMA_VERSION}; its benchmarks were discarded",
                          RuntimeWarning, stacklevel=3)
            version = str(SCHEMA_VERSION)
        if version != str(SCHEMA_VERSION):
            db.close()
            raise sqlite3.DatabaseError(f"schema version {version}, this tf_ucudnn reads "
                                        f"{SCHEMA_VERSION}")
        db.execute("CREATE TABLE IF NOT EXISTS kernels (gpu TEXT, cudnn TEXT, tf TEXT, key TEXT, "
                   "tables TEXT, shape TEXT, pass TEXT, created REAL, "
                   "PRIMARY KEY (gpu, cudnn, tf, key))")
        db.commit()
        return db

    def put(self, gpu, cudnn, tf_version, records):
        """Stores records ``{"key": [27 ints], "table": ..., "algos": ..., "shape", "pass"}``."""
        if self.disabled or not records:
            return
        try:
            db = self._connect()
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO kernels VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(gpu, cudnn, tf_version, json.dumps(r["key"]),
                      json.dumps(dict(table=r["table"], algos=r["algos"])), r.get("shape", ""),
                      r.get("pass", ""), time.time()) for r in records])
            db.close()
        except (sqlite3.Error, OSError) as e:
            self._fail("could not write", e)

    def get(self, gpu, cudnn, tf_version):
        """Records stored for this GPU model, cuDNN and TensorFlow version."""
        if self.disabled:
            return []
        try:
            db = self._connect()
            rows = db.execute("SELECT key, tables FROM kernels WHERE gpu = ? AND cudnn = ? AND tf = ?",
                              (gpu, cudnn, tf_version)).fetchall()
            db.close()
            records = []
            for key, tables in rows:
                data = json.loads(tables)
                records.append(dict(key=json.loads(key), table=data["table"], algos=data["algos"]))
            return records
        except (sqlite3.Error, OSError, ValueError, KeyError, TypeError) as e:
            self._fail("could not read", e)
            return []

    def summary(self):
        """Rows ``(gpu, cudnn, tf, pass, shape, entries)``, one per stored kernel."""
        db = self._connect()
        rows = db.execute("SELECT gpu, cudnn, tf, pass, shape, tables FROM kernels "
                          "ORDER BY gpu, created").fetchall()
        db.close()
        return [(g, c, t, p, s, len(json.loads(tables)["table"])) for g, c, t, p, s, tables in rows]

    def clear(self):
        """Deletes every stored kernel; returns how many there were."""
        db = self._connect()
        with db:
            count = db.execute("DELETE FROM kernels").rowcount
        db.close()
        return count


def _valid(record):
    key, table, algos = record.get("key"), record.get("table"), record.get("algos")
    return (isinstance(key, list) and len(key) == _KEY_FIELDS and isinstance(table, list)
            and isinstance(algos, list))


class _EngineLink:
    """Moves benchmark tables between the engine and the database of this process."""

    def __init__(self):
        self.db = None
        self.identity = None
        self.loaded = False
        self.saved_keys = set()

    def load(self):
        """Seeds the engine with the database's tables for this GPU (once)."""
        if self.loaded:
            return
        self.loaded = True
        path = database_path()
        if path is None:
            return
        self.identity = gpu_identity()
        if self.identity is None:
            return
        self.db = BenchmarkDatabase(path)
        for record in self.db.get(*self.identity):
            if _valid(record):
                seed_engine(record)
                self.saved_keys.add(json.dumps(record["key"]))
        atexit.register(self.save)

    def save(self):
        """Stores the tables of every kernel benchmarked in this process."""
        if self.db is None or self.identity is None:
            return
        from tf_ucudnn.division import kernels

        records = []
        for k in kernels():
            if k["seeded"]:
                continue
            key = [_PASS_IDS[k["pass"]], *k["conv"], int(k["allow_tf32"]), int(k["deterministic"]),
                   k["workspace_limit"], k["policy"], k["forced_micro_batch"], k["engines"]]
            if json.dumps(key) in self.saved_keys:
                continue
            records.append(dict(key=key, table=k["table"], algos=k["algos"], shape=k["shape"],
                                **{"pass": k["pass"]}))
            self.saved_keys.add(json.dumps(key))
        self.db.put(*self.identity, records)


_PASS_IDS = {"forward": 0, "backward-data": 1, "backward-filter": 2}
_LINK = _EngineLink()


def seed_engine(record):
    """Hands one stored kernel's benchmark table to the engine."""
    import ctypes

    from tf_ucudnn._ops import clib

    key = (ctypes.c_int64 * _KEY_FIELDS)(*record["key"])
    # Each algo: (algo, math type, deterministic) [, engine id, transposed, knob, value, ...].
    lengths = [len(a) for a in record["algos"]]
    values = [v for a in record["algos"] for v in a]
    rows = record["table"]
    n = max(len(rows), 1)
    clib.ucudnn_seed_kernel(
        key, _KEY_FIELDS, len(lengths), (ctypes.c_int64 * max(len(lengths), 1))(*lengths),
        (ctypes.c_int64 * max(len(values), 1))(*values), len(rows), (ctypes.c_int64 * n)(*[r[0] for r in rows]),
        (ctypes.c_int32 * n)(*[r[1] for r in rows]), (ctypes.c_double * n)(*[r[2] for r in rows]),
        (ctypes.c_int64 * n)(*[r[3] for r in rows]))


def load():
    """Seeds the engine from the benchmark database (no-op without a GPU, or when off)."""
    _LINK.load()


def save():
    """Writes this process's new benchmark tables to the database now (also done at exit)."""
    _LINK.save()


def main(argv=None):
    """``tf-ucudnn cache show|clear [--database PATH]``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="tf-ucudnn cache",
                                     description="Show or clear tf_ucudnn's benchmark database.")
    parser.add_argument("command", choices=("show", "clear"))
    parser.add_argument("--database", default=None,
                        help=f"SQLite file (default: UCUDNN_DATABASE, else {DEFAULT_PATH})")
    args = parser.parse_args(argv)
    path = args.database or database_path()
    if path is None:
        print("the benchmark database is off (UCUDNN_DATABASE is empty or 'off')")
        return 0
    try:
        db = BenchmarkDatabase(path)
        if args.command == "clear":
            print(f"{path}: removed {db.clear()} kernels")
            return 0
        rows = db.summary()
    except (sqlite3.Error, OSError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    print(f"{path}: {len(rows)} kernels")
    if rows:
        from tf_ucudnn import table
        print(table.render(("GPU", "cuDNN", "TF", "pass", "convolution", "measurements"),
                           [(*r[:4], r[4].split(" "), r[5]) for r in rows], align="lllllr",
                           max_width=120))
    return 0

