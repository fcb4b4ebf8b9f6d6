"""The benchmark database: cuDNN benchmark results kept in SQLite across processes.

Planning a kernel benchmarks every allowed micro-batch size (seconds for a
model). The results are stored per GPU model, cuDNN version and TensorFlow
version as one table per convolution, whatever its mini-batch size N: keyed by
the pass, the convolution without N, layout, dtype, TF32, determinism,
workspace limit, candidate set and how graph-API engines are searched
(``UCUDNN_GRAPH_SEARCH``, ``UCUDNN_GRAPH_LAYOUTS``,
``UCUDNN_GRAPH_PRUNE_FACTOR``), with the micro-batch sizes measured so far. A
later process planning that convolution at any N and batch-size policy
benchmarks only the sizes the table lacks, and adds them to it (μ-cuDNN's
``UCUDNN_DATABASE``).

``UCUDNN_DATABASE``: the SQLite file; unset means
``~/.cache/tf_ucudnn/benchmarks.sqlite3``; ``""`` or ``off`` turns the database
off. A database that is locked, unwritable, corrupt or of another schema gives
one warning and planning goes on without it; so do malformed records, which
are skipped. A database of an older schema (from an older tf_ucudnn) is
emptied once, with a warning, and then used.

The file is marked as tf_ucudnn's with SQLite's ``application_id`` (and its
schema version in ``user_version``); files of older tf_ucudnn versions are
recognised by their exact tables. Any other SQLite file is refused, with a
message, and never changed. Reading opens the file read-only and writes
nothing, so a database on a read-only filesystem can be read; reading never
creates a file or folder.

This module is the store: the SQLite schema, reading and writing it, and
the stored form of a record. :mod:`tf_ucudnn.database_link` seeds the engine
with the stored tables and stores the new ones at exit;
:mod:`tf_ucudnn.database_cli` is the command line, ``tf-ucudnn cache
show|clear [--database PATH]`` (or ``python -m tf_ucudnn cache ...``).
"""

import json
import math
import numbers
import os
import sqlite3
import struct
import time
import urllib.parse
import warnings

from tf_ucudnn import environment
from tf_ucudnn.units import format_workspace_limit

# 2: graph-API engines among the candidates (engine id and knobs in "algos")
# and the candidate set (UCUDNN_ENGINES) in the key.
# 3: transposed graph-API candidates (a flag after the engine id).
# 4: the graph-API search knobs (UCUDNN_GRAPH_*) in the key: before, a kernel
#    searched with UCUDNN_GRAPH_SEARCH=wide was seeded from a default search's
#    table, and wide changed nothing until the database was cleared.
# 5: one table per convolution whatever N: the key has no batch size, batch-
#    size policy or forced micro-batch size, and a table grows by the sizes
#    kernels of other N measure.
SCHEMA_VERSION = 5
# PRAGMA application_id of a tf_ucudnn database: "tfuc" as a big-endian int32.
APPLICATION_ID = int.from_bytes(b"tfuc", "big")
DEFAULT_PATH = os.path.join(os.path.expanduser("~"), ".cache", "tf_ucudnn", "benchmarks.sqlite3")
_TIMEOUT_S = 5.0

# How a record is stored (schema 5). The engine names every field
# (tf_ucudnn._engine.tables); the database keeps them in this order, enums
# by these numbers, so that files written before names crossed stay valid.
# key: pass, the convolution's fields (no batch size), then the settings:
# TF32, determinism, workspace limit, candidate set, graph search, graph
# layouts, prune factor (the bits of its double).
_CONV_FIELDS = ("in_channels", "in_height", "in_width", "out_channels",
                "filter_height", "filter_width", "groups", "stride_h", "stride_w",
                "dilation_h", "dilation_w", "pad_top", "pad_bottom", "pad_left", "pad_right",
                "out_height", "out_width", "layout", "dtype")
_SETTINGS = 1 + len(_CONV_FIELDS)  # where the settings start
_KEY_FIELDS = _SETTINGS + 4 + 3  # 27
# The stored pass: the forward pass with its bias epilogue (conv["bias"]), and
# with bias and ReLU (conv["relu"]), are passes of their own here, so that keys
# written before them keep their meaning.
_PASSES = ("forward", "backward-data", "backward-filter", "forward+bias", "forward+bias+relu")
_LAYOUTS = ("NHWC", "NCHW")
_DTYPES = ("float32", "float16", "bfloat16")
_ENGINE_SETS = ("all", "legacy", "graph", "auto")  # EngineSet's numbering (knobs.h)
_GRAPH_SEARCHES = ("default", "exhaustive", "wide")  # GraphSearch's numbering (knobs.h)
_GRAPH_LAYOUTS = ("both", "native", "transposed")  # GraphLayouts' numbering (knobs.h)


def _double_bits(value):
    """A float as the int64 of its IEEE-754 bits (the key holds ints; exact)."""
    return struct.unpack("<q", struct.pack("<d", float(value)))[0]


def _bits_double(bits):
    return struct.unpack("<d", struct.pack("<q", bits))[0]


# The values of UCUDNN_DATABASE and --database that turn the database off (any case).
OFF_VALUES = ("off", "0", "none")


def database_path():
    """The database file from ``UCUDNN_DATABASE`` (None when turned off)."""
    path = environment.database()
    if path is None:
        return DEFAULT_PATH
    if path.strip().lower() in ("",) + OFF_VALUES:
        return None
    return path


class NotOurDatabase(sqlite3.DatabaseError):
    """The file is a database, but not tf_ucudnn's: it is left alone."""


# The tables of a tf_ucudnn database (also of the files older versions wrote,
# which had no application_id), with their columns.
_TABLES = {"meta": ["key", "value"],
           "kernels": ["gpu", "cudnn", "tf", "key", "tables", "shape", "pass", "created"]}
_INTERNAL = {"sqlite_autoindex_meta_1", "sqlite_autoindex_kernels_1"}


def _inspect(db):
    """What the open database is: ``(state, version)``, state ``"empty"`` (no
    tables: a new file), ``"ours"`` (our application_id) or ``"legacy"`` (an
    older tf_ucudnn's, without the id); version its schema version.

    Raises:
      NotOurDatabase: another program's database (tables tf_ucudnn does not
        create, or another application_id).
      sqlite3.DatabaseError: not a database at all.
    """
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    objects = db.execute("SELECT type, name FROM sqlite_master").fetchall()
    if app_id not in (0, APPLICATION_ID):
        raise NotOurDatabase(f"its application_id is {app_id:#x}, not tf_ucudnn's "
                             f"({APPLICATION_ID:#x})")
    if not objects:
        if app_id == APPLICATION_ID:
            return "ours", 0
        return "empty", None
    foreign = sorted(name for kind, name in objects
                     if not (kind == "table" and name in _TABLES)
                     and not (kind == "index" and name in _INTERNAL))
    for name in _TABLES:
        if any(n == name for _, n in objects):
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({name})")]
            if columns != _TABLES[name]:
                foreign.append(f"{name}({', '.join(columns)})")
    if foreign:
        raise NotOurDatabase(f"it has tables or indexes tf_ucudnn does not create: "
                             f"{', '.join(foreign)}")
    if app_id == APPLICATION_ID:
        return "ours", db.execute("PRAGMA user_version").fetchone()[0]
    row = None
    if any(n == "meta" for _, n in objects):
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or not str(row[0]).isdigit():
        raise NotOurDatabase("it has no application_id and no tf_ucudnn schema_version")
    return "legacy", int(row[0])


class BenchmarkDatabase:
    """Benchmark tables in one SQLite file, safe for concurrent processes.

    Every failure (locked, unwritable, corrupt, another program's file, other
    schema) is reported once with ``warnings.warn`` and turns the database off
    for this object; reads then return nothing and writes do nothing. Reads
    open the file read-only and write nothing; only :meth:`put` creates the
    file (and its folder), and only tables tf_ucudnn recognises as its own
    are ever changed.

    Args:
      path: the SQLite file.
    """

    def __init__(self, path):
        self.path = path
        self.disabled = False
        self.malformed = []  # why each row get() skipped could not be decoded

    def _fail(self, what, error):
        if not self.disabled:
            warnings.warn(f"tf_ucudnn: benchmark database {self.path}: {what} ({error}); "
                          f"planning continues without it", RuntimeWarning, stacklevel=3)
        self.disabled = True

    def exists(self):
        """Whether the file exists (reading never creates it).

        Raises:
          IsADirectoryError: the path is a directory, not a database file.
        """
        if os.path.isdir(self.path):
            raise IsADirectoryError(
                f"is a directory, not a database file: --database and UCUDNN_DATABASE name "
                f"the SQLite file itself, e.g. "
                f"{os.path.join(self.path, os.path.basename(DEFAULT_PATH))}")
        return os.path.exists(self.path)

    def _read(self):
        """A read-only connection and the schema version, or (None, None) when
        there is no file or nothing this version can read in it.

        Raises:
          sqlite3.DatabaseError: not a database, another program's, or a newer schema.
        """
        if not self.exists():
            return None, None
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
        db = sqlite3.connect(uri, uri=True, timeout=_TIMEOUT_S)
        try:
            state, version = _inspect(db)
        except BaseException:
            db.close()
            raise
        if state != "empty" and version > SCHEMA_VERSION:
            db.close()
            raise sqlite3.DatabaseError(f"schema version {version}, this tf_ucudnn reads "
                                        f"{SCHEMA_VERSION}")
        if state == "empty" or version < SCHEMA_VERSION or not _has_kernels(db):
            # Nothing stored, or an older schema's benchmarks: discarded on the next write.
            db.close()
            return None, None
        return db, version

    def _write(self, create):
        """A connection in a write transaction on a database that is ours, with
        our tables at the current schema (made so if new or older). With
        ``create`` False, a missing file is an error and an empty one is left
        as it is (None is returned).

        Raises:
          sqlite3.DatabaseError, OSError: as for reading, or not writable.
        """
        if create:
            self.exists()  # a directory: IsADirectoryError
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            db = sqlite3.connect(self.path, timeout=_TIMEOUT_S, isolation_level=None)
        else:
            uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=rw"
            db = sqlite3.connect(uri, uri=True, timeout=_TIMEOUT_S, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")  # inspect and change under one write lock
            state, version = _inspect(db)
            if state == "empty" and not create:
                db.execute("ROLLBACK")
                db.close()
                return None
            if state != "empty" and version > SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"schema version {version}, this tf_ucudnn reads "
                                            f"{SCHEMA_VERSION}")
            if state != "empty" and version < SCHEMA_VERSION and _has_kernels(db):
                # Older benchmarks lack candidates this version has: start afresh.
                db.execute("DROP TABLE kernels")
                warnings.warn(f"tf_ucudnn: benchmark database {self.path}: schema version "
                              f"{version} is older than {SCHEMA_VERSION}; its benchmarks were "
                              f"discarded", RuntimeWarning, stacklevel=4)
            if state != "ours" or version != SCHEMA_VERSION:
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                # Older tf_ucudnn versions read the version from here.
                db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                           (str(SCHEMA_VERSION),))
                db.execute("CREATE TABLE IF NOT EXISTS kernels (gpu TEXT, cudnn TEXT, tf TEXT, "
                           "key TEXT, tables TEXT, shape TEXT, pass TEXT, created REAL, "
                           "PRIMARY KEY (gpu, cudnn, tf, key))")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            db.close()
            raise
        return db

    def put(self, gpu, cudnn, tf_version, records):
        """Stores records ``{"key": [27 ints], "table": ..., "algos": ..., "shape", "pass"}``
        (:func:`stored_record`). A record whose key is stored already adds the
        sizes that the stored table lacks (:func:`merge_records`), so that two
        processes measuring different sizes of one convolution keep both."""
        if self.disabled or not records:
            return
        try:
            db = self._write(create=True)
            try:
                rows = []
                for r in records:
                    key = json.dumps(r["key"])
                    old = db.execute("SELECT tables FROM kernels WHERE gpu = ? AND cudnn = ? "
                                     "AND tf = ? AND key = ?",
                                     (gpu, cudnn, tf_version, key)).fetchone()
                    if old is not None:
                        try:
                            stored = _decoded(r["key"], old[0])
                            if check_record(stored) is None:
                                r = dict(r, **merge_records(stored, r))
                        except (ValueError, KeyError, TypeError):
                            pass  # a malformed row is replaced
                    rows.append((gpu, cudnn, tf_version, key, _encoded(r),
                                 r.get("shape", ""), r.get("pass", ""), time.time()))
                db.executemany("INSERT OR REPLACE INTO kernels VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               rows)
                db.execute("COMMIT")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                db.close()
        except NotOurDatabase as e:
            self._fail("not a tf_ucudnn benchmark database, so it is left alone", e)
        except (sqlite3.Error, OSError) as e:
            self._fail("could not write", e)

    def get(self, gpu, cudnn, tf_version):
        """Records stored for this GPU model, cuDNN and TensorFlow version.

        Rows that cannot be decoded are skipped (their reasons are in
        :attr:`malformed`); records are not checked further here (see
        :func:`check_record`).
        """
        if self.disabled:
            return []
        try:
            db, _ = self._read()
            if db is None:
                return []
            try:
                rows = db.execute("SELECT key, tables FROM kernels WHERE gpu = ? AND cudnn = ? "
                                  "AND tf = ?", (gpu, cudnn, tf_version)).fetchall()
            finally:
                db.close()
        except NotOurDatabase as e:
            self._fail("not a tf_ucudnn benchmark database, so it is left alone", e)
            return []
        except (sqlite3.Error, OSError) as e:
            self._fail("could not read", e)
            return []
        records = []
        for key, tables in rows:
            try:
                records.append(_decoded(json.loads(key), tables))
            except (ValueError, KeyError, TypeError) as e:
                self.malformed.append(f"{type(e).__name__}: {e}")
        return records

    def summary(self):
        """Rows ``(gpu, cudnn, tf, pass, shape, settings, sizes)``, one per
        stored table (a convolution without its N): ``settings`` as
        :func:`_settings` words them, ``sizes`` the micro-batch sizes the
        table holds, ascending, as text, ``*`` after a size measured under
        memory pressure (None for a record that cannot be decoded); None when
        there is no database file.

        Raises:
          sqlite3.DatabaseError: not a database, another program's, or a newer schema.
        """
        if not self.exists():
            return None
        db, _ = self._read()
        if db is None:
            return []
        try:
            rows = db.execute("SELECT gpu, cudnn, tf, pass, shape, key, tables FROM kernels "
                              "ORDER BY gpu, created").fetchall()
        finally:
            db.close()
        return [(g, c, t, p, s, _settings(key), _sizes(tables))
                for g, c, t, p, s, key, tables in rows]

    def clear(self):
        """Deletes every stored table; returns how many there were, or None when
        there is no database file (none is created).

        Raises:
          sqlite3.DatabaseError: not a database, another program's, or a newer schema.
        """
        if not self.exists():
            return None
        db = self._write(create=False)
        if db is None:  # an empty file: nothing to clear
            return 0
        try:
            count = db.execute("DELETE FROM kernels").rowcount
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
            db.close()
        return count


def _has_kernels(db):
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kernels'"
                      ).fetchone() is not None


def _settings(key):
    """What a stored key says beyond the convolution, for ``cache show``:
    ``"64 MiB, auto, search default, layouts native, prune 2"`` (workspace
    limit, candidate set, UCUDNN_GRAPH_SEARCH, UCUDNN_GRAPH_LAYOUTS,
    UCUDNN_GRAPH_PRUNE_FACTOR), named by :func:`engine_record`; ``"?"`` for a
    key that cannot be decoded."""
    try:
        named = engine_record(dict(key=json.loads(key), algos=[], table=[]))["key"]
    except (ValueError, KeyError, TypeError, IndexError, struct.error):
        return "?"
    graph = named["graph"]
    return (f"{format_workspace_limit(named['workspace_limit'])}, {named['engines']}, "
            f"search {graph['search']}, layouts {graph['layouts']}, "
            f"prune {graph['prune_factor']:g}")


def _sizes(tables):
    try:
        data = json.loads(tables)
        pressured = set(data.get("pressured", []))
        return [f"{size}*" if size in pressured else str(size)
                for size in sorted({row[0] for row in data["table"]})]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _is_int(value, low=_INT64[0], high=_INT64[1]):
    return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and low <= value <= high)


def check_record(record):
    """Why a stored record cannot seed the engine, or None if it can.

    A record is ``{"key": [27 ints], "table": [[size, algo index, time_ms,
    workspace_bytes], ...], "algos": [[ints], ...]}`` and optionally
    ``"pressured": [sizes]`` (measured under memory pressure) and ``"pruned":
    {graph engine name: size}`` (engines pruned from the sizes above): sizes
    positive, algo indices into ``algos``, times finite and >= 0, workspaces
    in [0, 2**63 - 1], each algo 3 ints or 5 plus knob pairs.
    """
    key, table, algos = record.get("key"), record.get("table"), record.get("algos")
    pressured = record.get("pressured", [])
    if not isinstance(pressured, list) or not all(_is_int(p, 1) for p in pressured):
        return "pressured must be a list of sizes > 0"
    pruned = record.get("pruned", {})
    if not isinstance(pruned, dict) or not all(
            isinstance(name, str) and _is_int(size, 1) for name, size in pruned.items()):
        return "pruned must map engine names to sizes > 0"
    if not isinstance(key, list) or len(key) != _KEY_FIELDS or not all(map(_is_int, key)):
        return f"key must be {_KEY_FIELDS} int64 values"
    if not isinstance(algos, list) or not all(
            isinstance(a, list) and (len(a) == 3 or (len(a) >= 5 and len(a) % 2 == 1))
            and all(map(_is_int, a)) for a in algos):
        return "algos must be lists of 3 ints, or of 5 ints and knob pairs"
    if not isinstance(table, list):
        return "table must be a list of [size, algo, time_ms, workspace_bytes] rows"
    for row in table:
        if not (isinstance(row, list) and len(row) == 4 and _is_int(row[0], 1)
                and _is_int(row[1], 0, len(algos) - 1)
                and isinstance(row[2], (int, float)) and not isinstance(row[2], bool)
                and math.isfinite(row[2]) and row[2] >= 0 and _is_int(row[3], 0)):
            return f"table row {row!r} is not [size > 0, algo index, time_ms >= 0, workspace_bytes >= 0]"
    return None


def _encoded(record):
    """A record's ``tables`` column: JSON of its table, candidates, pressured
    sizes and pruned engines (:func:`_decoded` reads it back)."""
    return json.dumps(dict(table=record["table"], algos=record["algos"],
                           pressured=record.get("pressured", []),
                           pruned=record.get("pruned", {})))


def _decoded(key, tables):
    """The record of a stored row: ``key`` and the fields of its ``tables``
    JSON. Raises ValueError, KeyError or TypeError where they cannot be read."""
    data = json.loads(tables)
    return dict(key=key, table=data["table"], algos=data["algos"],
                pressured=data.get("pressured", []), pruned=data.get("pruned", {}))


def stored_record(entry):
    """A table of :func:`tf_ucudnn._engine.tables` (or a kernel of
    :func:`tf_ucudnn._engine.kernels`: its N, policy and forced size are left
    out) as the database stores it: ``{"key": [27 ints], "table": [[size,
    algo index, time_ms, workspace_bytes], ...], "algos": [[ints], ...],
    "pressured" (sizes measured under memory pressure), "pruned" (graph
    engines pruned from larger sizes: {name: size}), "shape" (the convolution
    without N), "pass"}`` (see :func:`check_record`)."""
    key, conv = entry["key"], entry["key"]["conv"]
    fields = [conv[name] for name in _CONV_FIELDS[:-2]]
    fields += [_LAYOUTS.index(conv["layout"]), _DTYPES.index(conv["dtype"])]
    stored_pass = ("forward+bias+relu" if conv.get("relu") else
                   "forward+bias" if conv.get("bias") else key["pass"])
    stored_key = [_PASSES.index(stored_pass), *fields, int(key["allow_tf32"]),
                  int(key["deterministic"]), key["workspace_limit"],
                  _ENGINE_SETS.index(key["engines"]),
                  _GRAPH_SEARCHES.index(key["graph"]["search"]),
                  _GRAPH_LAYOUTS.index(key["graph"]["layouts"]),
                  _double_bits(key["graph"]["prune_factor"])]
    algos = []
    for a in entry["algos"]:
        # (algo, math type, deterministic) [, engine id, transposed, knob, value, ...]
        stored = [a["algo"], a["math_type"], int(a["deterministic"])]
        if "engine" in a:
            stored += [a["engine"]["id"], int(a["engine"]["transposed"])]
            stored += [v for knob in a["engine"]["knobs"] for v in knob]
        algos.append(stored)
    table = [[r["size"], r["algo"], r["time_ms"], r["workspace_bytes"]] for r in entry["table"]]
    pressured = sorted(entry.get("pressured_sizes", []))
    shape = entry["shape"]
    if shape.startswith("N="):  # a kernel's shape: the table holds for any N
        shape = shape.split(" ", 1)[1]
    return {"key": stored_key, "table": table, "algos": algos, "pressured": pressured,
            "pruned": dict(sorted(entry.get("pruned_engines", {}).items())),
            "shape": shape, "pass": key["pass"]}


def merge_records(stored, new):
    """The table of one key from two records (checked by :func:`check_record`):
    ``stored``'s rows, and ``new``'s rows of the sizes ``stored`` lacks or
    measured under memory pressure where ``new`` measured them with room;
    ``new``'s candidates are found in ``stored["algos"]`` or appended to them;
    pruned engines of both, each at the smaller size.

    Returns:
      ``{"table", "algos", "pressured", "pruned"}`` in the stored form.
    """
    algos = [list(a) for a in stored["algos"]]
    new_pressured = set(new.get("pressured", []))
    new_sizes = {row[0] for row in new["table"]}
    replaced = {size for size in stored.get("pressured", [])
                if size in new_sizes and size not in new_pressured}
    table = [list(row) for row in stored["table"] if row[0] not in replaced]
    pressured = set(stored.get("pressured", [])) - replaced
    have = {row[0] for row in table}
    index = {}
    for size, algo, time_ms, workspace in new["table"]:
        if size in have:
            continue
        if algo not in index:
            candidate = list(new["algos"][algo])
            if candidate not in algos:
                algos.append(candidate)
            index[algo] = algos.index(candidate)
        table.append([size, index[algo], time_ms, workspace])
        if size in new_pressured:
            pressured.add(size)
    pruned = dict(stored.get("pruned", {}))
    for name, size in new.get("pruned", {}).items():
        pruned[name] = min(size, pruned.get(name, size))
    return {"table": table, "algos": algos, "pressured": sorted(pressured),
            "pruned": dict(sorted(pruned.items()))}


def _named(names, index, what):
    if not 0 <= index < len(names):
        raise ValueError(f"{what} {index} is not one of 0..{len(names) - 1}")
    return names[index]


def engine_record(record):
    """A stored record (checked by :func:`check_record`) with its fields named,
    as :func:`tf_ucudnn._engine.seed_kernel` takes it.

    Raises:
      ValueError: an enum number out of range (pass, layout, dtype, policy,
        candidate set, graph search, graph layouts).
    """
    key = record["key"]
    conv = dict(batch=0, **dict(zip(_CONV_FIELDS, key[1:_SETTINGS])))
    conv["layout"] = _named(_LAYOUTS, conv["layout"], "layout")
    conv["dtype"] = _named(_DTYPES, conv["dtype"], "dtype")
    stored_pass = _named(_PASSES, key[0], "pass")
    conv["bias"] = stored_pass.startswith("forward+bias")
    conv["relu"] = stored_pass == "forward+bias+relu"
    tf32, deterministic, limit, engines, search, layouts, prune = key[_SETTINGS:]
    # A table holds for any N, batch-size policy and forced size: the engine
    # keys it without them (these values stand in).
    named_key = {"pass": "forward" if conv["bias"] else stored_pass, "conv": conv,
                 "allow_tf32": tf32 != 0, "deterministic": deterministic != 0,
                 "workspace_limit": limit, "policy": "powerOfTwo", "forced_micro_batch": 0,
                 "engines": _named(_ENGINE_SETS, engines, "engines"),
                 "graph": {"search": _named(_GRAPH_SEARCHES, search, "graph search"),
                           "layouts": _named(_GRAPH_LAYOUTS, layouts, "graph layouts"),
                           "prune_factor": _bits_double(prune)}}
    algos = []
    for a in record["algos"]:
        algo = dict(algo=a[0], math_type=a[1], deterministic=a[2] != 0)
        if len(a) >= 5:
            if a[4] not in (0, 1):
                raise ValueError(f"transposed flag {a[4]} is not 0 or 1")
            algo["engine"] = dict(id=a[3], transposed=a[4] != 0,
                                  knobs=[list(a[i:i + 2]) for i in range(5, len(a), 2)])
        algos.append(algo)
    table = [dict(size=r[0], algo=r[1], time_ms=r[2], workspace_bytes=r[3])
             for r in record["table"]]
    return dict(key=named_key, algos=algos, table=table,
                pressured_sizes=list(record.get("pressured", [])),
                pruned_engines=dict(record.get("pruned", {})))
