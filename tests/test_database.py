"""The benchmark database (tf_ucudnn.database): round trips, concurrency, and every
fault giving one warning and no crash."""

import atexit
import contextlib
import io
import json
import multiprocessing
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import warnings

import pytest
import tensorflow as tf

from testing_utils import run_python
from tf_ucudnn import database, database_cli, database_link

GPU, CUDNN, TF = "NVIDIA H200", "9.19.0", "2.21.0"


def record(i):
    # pass, 19 convolution fields (no batch size; in_channels tells records
    # apart), TF32, determinism, limit, candidate set all, search default,
    # layouts native, prune factor 2.
    key = [0, 32 + i] + [1] * 18 + [1, 0, 64 << 20, 0, 0, 1, database._double_bits(2.0)]
    # A legacy algorithm and a transposed graph-API engine (id 34, knobs k2=1, k3=0).
    return dict(key=key, table=[[32, 0, 0.5, 0], [16, 1, 0.2, 1024]],
                algos=[[1, 2, 1], [0, 0, 1, 34, 1, 2, 1, 3, 0]], shape=f"C={32 + i}",
                **{"pass": "forward"})


def _write_many(path, start):
    database.BenchmarkDatabase(path).put(GPU, CUDNN, TF, [record(i) for i in range(start, start + 40)])


class ModulesTest(tf.test.TestCase):

    def test_the_store_its_command_line_and_its_engine_link_are_modules_of_their_own(self):
        self.assertTrue(hasattr(database, "BenchmarkDatabase"))
        for name in ("main", "load", "save", "seed_engine", "gpu_identity"):
            self.assertFalse(hasattr(database, name), f"database.{name}")
        self.assertTrue(callable(database_cli.main))
        for name in ("load", "save", "seed_engine", "gpu_identity"):
            self.assertTrue(callable(getattr(database_link, name)), name)


class BenchmarkDatabaseTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "sub", "bench.sqlite3")

    def assertOneWarning(self, caught, text):
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        self.assertLen(messages, 1, messages)
        self.assertIn(text, messages[0])

    def test_round_trip_per_gpu_cudnn_and_tf_version(self):
        db = database.BenchmarkDatabase(self.path)
        db.put(GPU, CUDNN, TF, [record(0), record(1)])
        got = db.get(GPU, CUDNN, TF)
        self.assertLen(got, 2)
        self.assertCountEqual([r["key"] for r in got], [record(0)["key"], record(1)["key"]])
        self.assertEqual(got[0]["algos"], record(0)["algos"])
        self.assertEmpty(db.get("NVIDIA H100", CUDNN, TF))
        self.assertEmpty(db.get(GPU, "9.3.0", TF))
        self.assertEmpty(db.get(GPU, CUDNN, "2.20.0"))

    def test_two_processes_writing_at_once_keep_every_row(self):
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_write_many, args=(self.path, start)) for start in (0, 40)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            self.assertEqual(p.exitcode, 0)
        self.assertLen(database.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF), 80)

    def test_corrupt_file_warns_once_and_reads_nothing(self):
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, "wb") as f:
            f.write(b"this is not a database" * 100)
        db = database.BenchmarkDatabase(self.path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertEmpty(db.get(GPU, CUDNN, TF))
            db.put(GPU, CUDNN, TF, [record(0)])
            self.assertEmpty(db.get(GPU, CUDNN, TF))
        self.assertOneWarning(caught, "planning continues without it")

    def test_an_older_schema_is_emptied_once_with_a_warning_then_used(self):
        # Schema 1, as the first tf_ucudnn wrote it (no application_id); and
        # schema 4, a table per kernel with its N (30-int keys), which schema
        # 5 replaced by one per convolution. Reading says nothing; the first
        # write drops the old rows with one warning.
        old_key = [0, 64] + [1] * 28
        for version, ours, key, tables in (
                (1, False, "[0]", "{}"),
                (4, True, json.dumps(old_key),
                 json.dumps(dict(table=[[64, 0, 0.5, 0]], algos=[[1, 2, 1]])))):
            path = os.path.join(tempfile.mkdtemp(), "bench.sqlite3")
            db = sqlite3.connect(path)
            if ours:
                db.execute(f"PRAGMA application_id = {database.APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {version}")
            db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
            db.execute("CREATE TABLE kernels (gpu TEXT, cudnn TEXT, tf TEXT, key TEXT, "
                       "tables TEXT, shape TEXT, pass TEXT, created REAL, "
                       "PRIMARY KEY (gpu, cudnn, tf, key))")
            db.execute("INSERT INTO kernels VALUES (?, ?, ?, ?, ?, '', 'forward', 0)",
                       (GPU, CUDNN, TF, key, tables))
            db.commit()
            db.close()
            with self.subTest(version=version), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                db = database.BenchmarkDatabase(path)
                self.assertEmpty(db.get(GPU, CUDNN, TF))
                self.assertEmpty(caught)  # reading changes nothing and says nothing
                db.put(GPU, CUDNN, TF, [record(0)])
                db.put(GPU, CUDNN, TF, [record(1)])
                got = database.BenchmarkDatabase(path).get(GPU, CUDNN, TF)
                self.assertOneWarning(caught, f"schema version {version} is older than "
                                              f"{database.SCHEMA_VERSION}")
                self.assertCountEqual([r["key"] for r in got],
                                      [record(0)["key"], record(1)["key"]])
                self.assertEqual(got[0]["algos"], record(0)["algos"])
                check = sqlite3.connect(path)
                self.assertEqual(check.execute("PRAGMA user_version").fetchone(),
                                 (database.SCHEMA_VERSION,))
                check.close()

    def test_a_table_grows_by_the_sizes_another_process_measured(self):
        # Two processes planning one convolution at other N: the stored table
        # keeps the sizes of both; a size both measured keeps the first rows,
        # and the second's candidates are renumbered into the first's list.
        db = database.BenchmarkDatabase(self.path)
        first = record(0)  # sizes 32 (algo [1, 2, 1]) and 16 (the graph engine)
        second = dict(record(0), table=[[16, 0, 9.0, 0], [8, 0, 0.1, 0], [100, 1, 2.0, 64]],
                      algos=[[0, 0, 1, 34, 1, 2, 1, 3, 0], [7, 1, 1]])
        db.put(GPU, CUDNN, TF, [first])
        db.put(GPU, CUDNN, TF, [second])
        got, = db.get(GPU, CUDNN, TF)
        self.assertEqual(got["algos"], first["algos"] + [[7, 1, 1]])
        self.assertCountEqual(got["table"], [[32, 0, 0.5, 0], [16, 1, 0.2, 1024],
                                             [8, 1, 0.1, 0], [100, 2, 2.0, 64]])
        self.assertIsNone(database.check_record(got))

    def test_a_size_measured_under_memory_pressure_never_shadows_one_measured_with_room(self):
        # A table whose search workspace could not be allocated in full marks
        # those sizes; a later measurement with room replaces them, and a
        # pressured one never replaces a roomy row.
        db = database.BenchmarkDatabase(self.path)
        pressured = dict(record(0), pressured=[16])
        db.put(GPU, CUDNN, TF, [pressured])
        roomy = dict(record(0), table=[[16, 0, 0.05, 0]], algos=[[9, 0, 1]], pressured=[])
        db.put(GPU, CUDNN, TF, [roomy])
        got, = db.get(GPU, CUDNN, TF)
        self.assertEqual(got["pressured"], [])
        self.assertCountEqual(got["table"], [[32, 0, 0.5, 0], [16, 2, 0.05, 0]])
        self.assertEqual(got["algos"], record(0)["algos"] + [[9, 0, 1]])
        again = dict(record(0), table=[[16, 0, 7.0, 0], [8, 0, 1.0, 0]], algos=[[5, 0, 1]],
                     pressured=[16, 8])
        db.put(GPU, CUDNN, TF, [again])
        got, = db.get(GPU, CUDNN, TF)
        self.assertEqual(got["pressured"], [8])  # 8 was new; 16 keeps the roomy row
        self.assertIn([16, 2, 0.05, 0], got["table"])
        self.assertIsNone(database.check_record(got))
        shown = _run_cli("show", "--database", self.path)
        self.assertIn("8*, 16, 32", " ".join(shown.stdout.split()))
        self.assertEqual(database.check_record(dict(record(0), pressured=[0])),
                         "pressured must be a list of sizes > 0")

    def test_pruned_graph_engines_are_stored_at_the_smallest_size_that_pruned_them(self):
        # A kernel benchmarking new sizes of a stored table leaves out the
        # engines pruned below each size, so the database keeps them.
        db = database.BenchmarkDatabase(self.path)
        db.put(GPU, CUDNN, TF, [dict(record(0), pruned={"a": 16, "b": 8})])
        db.put(GPU, CUDNN, TF, [dict(record(0), table=[[64, 0, 1.0, 0]],
                                     pruned={"a": 8, "b": 32, "c": 64})])
        got, = db.get(GPU, CUDNN, TF)
        self.assertEqual(got["pruned"], {"a": 8, "b": 8, "c": 64})
        self.assertIsNone(database.check_record(got))
        for bad in ({"a": 0}, {"a": 1.5}, ["a"]):
            with self.subTest(bad):
                self.assertEqual(database.check_record(dict(record(0), pruned=bad)),
                                 "pruned must map engine names to sizes > 0")

    def _loaded_link(self, mp):
        """This process's link to the database at self.path, loaded (the engine
        seeded by a stand-in), with no save at exit."""
        mp.setenv("UCUDNN_DATABASE", self.path)
        mp.setattr(database_link, "gpu_identity", lambda: (GPU, CUDNN, TF))
        mp.setattr(database_link, "seed_engine", lambda r: True)
        link = database_link._EngineLink()
        link.load()
        atexit.unregister(link.save)
        return link

    def test_a_process_saves_only_tables_with_sizes_the_database_lacks(self):
        from tf_ucudnn import _engine

        stored = database.engine_record(record(0))
        entry = dict(stored, shape="C=32 ...")
        grown = dict(entry, table=entry["table"] + [dict(size=64, algo=0, time_ms=1.0,
                                                         workspace_bytes=0)])
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0)])
        with pytest.MonkeyPatch.context() as mp:
            link = self._loaded_link(mp)
            puts = []
            mp.setattr(link.db, "put", lambda *args: puts.append(args[3]))
            mp.setattr(_engine, "tables", lambda: [entry])
            link.save()  # the sizes it loaded: nothing to write
            mp.setattr(_engine, "tables", lambda: [grown])
            link.save()
            link.save()  # written once
            mp.setattr(_engine, "tables", lambda: [dict(grown, pressured_sizes=[64])])
            link.save()  # nothing new: 64 is stored with room already
        self.assertEqual([len(p) for p in puts], [0, 1, 0, 0])
        self.assertEqual(sorted(row[0] for row in puts[1][0]["table"]), [16, 32, 64])

    def test_a_process_saves_a_size_it_measured_with_room_that_was_stored_pressured(self):
        from tf_ucudnn import _engine

        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF,
                                                  [dict(record(0), pressured=[16])])
        entry = dict(database.engine_record(record(0)), shape="C=32 ...")  # 16 with room
        with pytest.MonkeyPatch.context() as mp:
            link = self._loaded_link(mp)
            mp.setattr(_engine, "tables", lambda: [dict(entry, pressured_sizes=[16])])
            link.save()  # still pressured: nothing new
            mp.setattr(_engine, "tables", lambda: [entry])
            link.save()
        got, = database.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF)
        self.assertEqual(got["pressured"], [])

    def test_newer_schema_version_warns_once_and_is_left_alone(self):
        os.makedirs(os.path.dirname(self.path))
        db = sqlite3.connect(self.path)
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '99')")
        db.commit()
        db.close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = database.BenchmarkDatabase(self.path)
            self.assertEmpty(ours.get(GPU, CUDNN, TF))
            ours.put(GPU, CUDNN, TF, [record(0)])
        self.assertOneWarning(caught, "schema version 99")
        tables = sqlite3.connect(self.path).execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.assertEqual(tables, [("meta",)])

    def test_locked_database_warns_once_and_continues(self):
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0)])
        holder = sqlite3.connect(self.path)
        holder.execute("BEGIN EXCLUSIVE")
        old = database._TIMEOUT_S
        database._TIMEOUT_S = 0.2
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                db = database.BenchmarkDatabase(self.path)
                self.assertEmpty(db.get(GPU, CUDNN, TF))
                db.put(GPU, CUDNN, TF, [record(1)])
            self.assertOneWarning(caught, "locked")
        finally:
            database._TIMEOUT_S = old
            holder.rollback()
            holder.close()

    def test_unwritable_location_warns_once(self):
        blocker = os.path.join(self.dir, "a_file")
        open(blocker, "w").close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            db = database.BenchmarkDatabase(os.path.join(blocker, "bench.sqlite3"))
            db.put(GPU, CUDNN, TF, [record(0)])
            self.assertEmpty(db.get(GPU, CUDNN, TF))
        self.assertOneWarning(caught, "could not write")

    def test_database_path_from_the_environment(self):
        for value, want in ((None, database.DEFAULT_PATH), ("", None), ("off", None),
                            ("/tmp/x.sqlite3", "/tmp/x.sqlite3")):
            env = dict(os.environ)
            env.pop("UCUDNN_DATABASE", None)
            if value is not None:
                env["UCUDNN_DATABASE"] = value
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(os, "environ", env)
                self.assertEqual(database.database_path(), want, f"UCUDNN_DATABASE={value!r}")

# A kernel as tf_ucudnn._engine.kernels() names it (the fields the database keeps).
_CONV = dict(batch=32, in_channels=3, in_height=28, in_width=27, out_channels=8,
             filter_height=5, filter_width=3, groups=1, stride_h=2, stride_w=1, dilation_h=1,
             dilation_w=2, pad_top=0, pad_bottom=1, pad_left=2, pad_right=2, out_height=12,
             out_width=23, layout="NCHW", dtype="bfloat16", bias=False, relu=False)
_KERNEL = dict(
    key={"pass": "backward-filter", "conv": _CONV, "allow_tf32": False, "deterministic": True,
         "workspace_limit": 64 << 20, "policy": "all", "forced_micro_batch": 4,
         "engines": "graph",
         "graph": {"search": "wide", "layouts": "both", "prune_factor": 2.5}},
    algos=[dict(algo=1, math_type=2, deterministic=True),
           dict(algo=0, math_type=0, deterministic=False,
                engine=dict(id=34, transposed=True, knobs=[[2, 1], [3, 0]]))],
    table=[dict(size=32, algo=0, time_ms=0.5, workspace_bytes=0),
           dict(size=16, algo=1, time_ms=0.25, workspace_bytes=1024)],
    shape="N=32 C=3 ...", **{"pass": "backward-filter"})


def _any_batch(key):
    """A kernel's key as its table is stored: for any N, policy and forced size."""
    return dict(key, conv=dict(key["conv"], batch=0), policy="powerOfTwo", forced_micro_batch=0)


class StoredRecordTest(tf.test.TestCase):
    """The engine names every field; the database stores schema 5's positions."""

    def test_stored_record_keeps_schema_5_positions_and_enum_numbers(self):
        stored = database.stored_record(_KERNEL)
        # No batch size, policy or forced size; 2.5 as the int64 of its
        # IEEE-754 bits: 0x4004000000000000.
        self.assertEqual(stored["key"], [2, 3, 28, 27, 8, 5, 3, 1, 2, 1, 1, 2, 0, 1, 2, 2, 12,
                                         23, 1, 2, 0, 1, 64 << 20, 2, 2, 0,
                                         0x4004000000000000])
        self.assertEqual(stored["algos"], [[1, 2, 1], [0, 0, 0, 34, 1, 2, 1, 3, 0]])
        self.assertEqual(stored["table"], [[32, 0, 0.5, 0], [16, 1, 0.25, 1024]])
        self.assertEqual(stored["shape"], "C=3 ...")  # the kernel's "N=32 C=3 ...": any N
        self.assertIsNone(database.check_record(stored))

    def test_kernels_of_other_batch_sizes_and_policies_share_one_key(self):
        keys = set()
        for batch, policy, forced in ((32, "all", 4), (100, "powerOfTwo", 0),
                                      (1, "undivided", 0)):
            kernel = dict(_KERNEL, key=dict(_KERNEL["key"], conv=dict(_CONV, batch=batch),
                                            policy=policy, forced_micro_batch=forced))
            keys.add(tuple(database.stored_record(kernel)["key"]))
        self.assertLen(keys, 1)

    def test_a_stored_record_names_back_what_the_engine_wrote(self):
        named = database.engine_record(database.stored_record(_KERNEL))
        self.assertEqual(named, dict(key=_any_batch(_KERNEL["key"]), algos=_KERNEL["algos"],
                                     table=_KERNEL["table"], pressured_sizes=[],
                                     pruned_engines={}))
        marked = dict(_KERNEL, pressured_sizes=[16], pruned_engines={"eng7_k3=1": 8})
        stored = database.stored_record(marked)
        self.assertEqual(stored["pressured"], [16])
        self.assertEqual(stored["pruned"], {"eng7_k3=1": 8})
        self.assertIsNone(database.check_record(stored))
        self.assertEqual(database.engine_record(stored)["pressured_sizes"], [16])
        self.assertEqual(database.engine_record(stored)["pruned_engines"], {"eng7_k3=1": 8})

    def test_a_forward_with_a_bias_is_a_stored_pass_of_its_own(self):
        # Pass 3: keys written before the bias epilogue keep their meaning.
        biased = dict(_KERNEL, key=dict(_KERNEL["key"], conv=dict(_CONV, bias=True),
                                        **{"pass": "forward"}))
        stored = database.stored_record(biased)
        self.assertEqual(stored["key"][0], 3)
        self.assertIsNone(database.check_record(stored))
        self.assertEqual(database.engine_record(stored)["key"], _any_batch(biased["key"]))
        plain = dict(_KERNEL, key=dict(_KERNEL["key"], **{"pass": "forward"}))
        self.assertEqual(database.stored_record(plain)["key"][0], 0)
        self.assertFalse(database.engine_record(database.stored_record(plain))["key"]["conv"]["bias"])

    def test_a_forward_with_bias_and_relu_is_a_stored_pass_of_its_own(self):
        # Pass 4: tables with the ReLU epilogue never seed a kernel without it.
        fused = dict(_KERNEL, key=dict(_KERNEL["key"], conv=dict(_CONV, bias=True, relu=True),
                                       **{"pass": "forward"}))
        stored = database.stored_record(fused)
        self.assertEqual(stored["key"][0], 4)
        self.assertIsNone(database.check_record(stored))
        self.assertEqual(database.engine_record(stored)["key"], _any_batch(fused["key"]))
        biased = dict(fused, key=dict(fused["key"], conv=dict(_CONV, bias=True)))
        self.assertEqual(database.stored_record(biased)["key"][0], 3)

    def test_kernels_searched_otherwise_are_stored_under_keys_of_their_own(self):
        # A table timed under UCUDNN_GRAPH_SEARCH=default must not seed a wide
        # kernel (schema 3 keyed them alike), nor one of another layout set or
        # prune factor; each knob's value comes back exactly.
        keys = set()
        for graph in ({"search": "default", "layouts": "native", "prune_factor": 2.0},
                      {"search": "wide", "layouts": "native", "prune_factor": 2.0},
                      {"search": "exhaustive", "layouts": "native", "prune_factor": 2.0},
                      {"search": "default", "layouts": "transposed", "prune_factor": 2.0},
                      {"search": "default", "layouts": "native", "prune_factor": 0.0},
                      {"search": "default", "layouts": "native", "prune_factor": 1.0000001}):
            kernel = dict(_KERNEL, key=dict(_KERNEL["key"], graph=graph))
            stored = database.stored_record(kernel)
            self.assertIsNone(database.check_record(stored))
            self.assertEqual(database.engine_record(stored)["key"]["graph"], graph)
            keys.add(tuple(stored["key"]))
        self.assertLen(keys, 6)

    def test_an_enum_number_out_of_range_is_refused(self):
        for position, what, count in ((0, "pass", 5), (18, "layout", 2), (19, "dtype", 3),
                                      (23, "engines", 4), (24, "graph search", 3),
                                      (25, "graph layouts", 3)):
            stored = database.stored_record(_KERNEL)
            stored["key"][position] = count
            with self.subTest(what), self.assertRaisesRegex(ValueError, what):
                database.engine_record(stored)


def _dump(path):
    """Everything in a SQLite file: its header ids and every statement that rebuilds it."""
    db = sqlite3.connect(path)
    try:
        return (db.execute("PRAGMA application_id").fetchone(),
                db.execute("PRAGMA user_version").fetchone(), list(db.iterdump()))
    finally:
        db.close()


def _run_cli(*args, cwd=None, **env):
    """``tf-ucudnn cache ARGS`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        for name, value in env.items():
            mp.setenv(name, value)
        if cwd:
            mp.chdir(cwd)
        try:
            status = database_cli.main(list(args))
        except SystemExit as e:
            status = e.code
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


class DatabaseSafetyTest(tf.test.TestCase):
    """The database meets other programs' files, read-only files and malformed
    records without harm, and the command line creates only what it may."""

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "bench.sqlite3")

    def caught(self):
        manager = warnings.catch_warnings(record=True)
        caught = manager.__enter__()
        warnings.simplefilter("always")
        self.addCleanup(manager.__exit__, None, None, None)
        return caught

    def runtime_warnings(self, caught):
        return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]

    def make_foreign(self, app_id=0):
        # Another program's file: a meta(key, value) table with an old
        # schema_version and a kernels table of its own.
        db = sqlite3.connect(self.path)
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        db.execute("CREATE TABLE kernels (name TEXT, source TEXT)")
        db.execute("INSERT INTO kernels VALUES ('linux', 'git://...')")
        db.execute(f"PRAGMA application_id = {app_id}")
        db.commit()
        db.close()
        return _dump(self.path)

    def test_another_programs_database_is_refused_and_left_alone(self):
        for app_id in (0, 0x12345678):
            before = self.make_foreign(app_id)
            caught = self.caught()
            db = database.BenchmarkDatabase(self.path)
            self.assertEmpty(db.get(GPU, CUDNN, TF))
            db.put(GPU, CUDNN, TF, [record(0)])
            database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(1)])
            messages = self.runtime_warnings(caught)
            self.assertLen(messages, 2, messages)  # one per BenchmarkDatabase
            self.assertIn("not a tf_ucudnn benchmark database, so it is left alone", messages[0])
            self.assertEqual(_dump(self.path), before)
            for command in ("show", "clear"):
                done = _run_cli(command, "--database", self.path)
                self.assertEqual(done.returncode, 1, done.stdout + done.stderr[-2000:])
                self.assertIn("not a tf_ucudnn benchmark database", done.stderr)
            self.assertEqual(_dump(self.path), before)
            os.remove(self.path)

    def test_our_tables_next_to_another_table_are_not_ours(self):
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0)])
        db = sqlite3.connect(self.path)
        db.execute("CREATE TABLE users (name TEXT)")
        db.commit()
        db.close()
        before = _dump(self.path)
        caught = self.caught()
        self.assertEmpty(database.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF))
        self.assertIn("tables or indexes tf_ucudnn does not create: users",
                      self.runtime_warnings(caught)[0])
        self.assertEqual(_dump(self.path), before)

    def test_new_database_is_marked_as_tf_ucudnns(self):
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0)])
        app_id, version, _ = _dump(self.path)
        self.assertEqual(app_id, (database.APPLICATION_ID,))
        self.assertEqual(version, (database.SCHEMA_VERSION,))

    def test_database_of_an_older_tf_ucudnn_at_this_schema_is_kept(self):
        # What tf_ucudnn wrote before it set an application_id.
        db = sqlite3.connect(self.path)
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(database.SCHEMA_VERSION),))
        db.execute("CREATE TABLE kernels (gpu TEXT, cudnn TEXT, tf TEXT, key TEXT, tables TEXT, "
                   "shape TEXT, pass TEXT, created REAL, PRIMARY KEY (gpu, cudnn, tf, key))")
        db.execute("INSERT INTO kernels VALUES (?, ?, ?, ?, ?, '', 'forward', 0)",
                   (GPU, CUDNN, TF, json.dumps(record(0)["key"]),
                    json.dumps(dict(table=record(0)["table"], algos=record(0)["algos"]))))
        db.commit()
        db.close()
        caught = self.caught()
        ours = database.BenchmarkDatabase(self.path)
        self.assertLen(ours.get(GPU, CUDNN, TF), 1)
        ours.put(GPU, CUDNN, TF, [record(1)])
        self.assertEmpty(self.runtime_warnings(caught))
        self.assertLen(database.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF), 2)
        self.assertEqual(_dump(self.path)[0], (database.APPLICATION_ID,))

    def test_reading_writes_nothing(self):
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0)])
        before = (_dump(self.path), os.stat(self.path).st_mtime_ns)
        statements, connect = [], sqlite3.connect

        def traced(*args, **kwargs):
            db = connect(*args, **kwargs)
            db.set_trace_callback(statements.append)
            return db

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sqlite3, "connect", traced)
            self.assertLen(database.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF), 1)
            self.assertLen(database.BenchmarkDatabase(self.path).summary(), 1)
        writes = [s for s in statements
                  if re.match(r"\s*(CREATE|INSERT|UPDATE|DELETE|DROP|REPLACE|BEGIN|PRAGMA \w+ *=)",
                              s, re.I)]
        self.assertNotEmpty(statements)
        self.assertEmpty(writes)
        self.assertEqual((_dump(self.path), os.stat(self.path).st_mtime_ns), before)

    def test_database_on_a_read_only_file_and_folder_can_be_read(self):
        # As root, permissions do not stop writes: the reader drops to nobody.
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0), record(1)])
        os.chmod(self.path, 0o444)
        os.chmod(self.dir, 0o555)
        self.addCleanup(os.chmod, self.dir, 0o755)
        root = os.path.dirname(os.path.dirname(os.path.abspath(database.__file__)))
        code = textwrap.dedent(f"""
            import json, os, sys, warnings
            sys.path.insert(0, {root!r})
            from tf_ucudnn import database
            if os.getuid() == 0:  # after the imports: nobody may not read the Python install
                os.setgid(65534)
                os.setuid(65534)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = database.BenchmarkDatabase({self.path!r}).get({GPU!r}, {CUDNN!r}, {TF!r})
            try:
                open({self.path!r}, "ab")
                writable = True
            except OSError:
                writable = False
            shown = database.BenchmarkDatabase({self.path!r}).summary()  # what cache show prints
            print(json.dumps(dict(records=len(got), warnings=[str(w.message) for w in caught],
                                  writable=writable, shown=len(shown))))
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, cwd="/")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertFalse(result["writable"], "the test could not make the file read-only")
        self.assertEqual(result, dict(records=2, warnings=[], writable=False, shown=2))

    def load_with(self, records, extra_rows=()):
        """Stores records (and raw rows of key, tables), loads them as the first
        conv2d would; returns the warnings and the keys handed to the engine."""
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, records)
        db = sqlite3.connect(self.path)
        for key, tables in extra_rows:
            db.execute("INSERT INTO kernels VALUES (?, ?, ?, ?, ?, '', 'forward', 0)",
                       (GPU, CUDNN, TF, key, tables))
        db.commit()
        db.close()
        seeded, seed = [], database_link.seed_engine

        def seed_and_count(r):
            seeded.append(r["key"])
            return seed(r)

        link = database_link._EngineLink()
        caught = self.caught()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("UCUDNN_DATABASE", self.path)
            mp.setattr(database_link, "gpu_identity", lambda: (GPU, CUDNN, TF))
            mp.setattr(database_link, "seed_engine", seed_and_count)
            link.load()
        atexit.unregister(link.save)
        return self.runtime_warnings(caught), seeded

    def test_malformed_records_give_one_warning_and_planning_goes_on(self):
        # Valid JSON, wrong content: IndexError / TypeError in the first conv2d before.
        good = [record(0), record(1)]
        bad = [dict(record(2), table=[[1]]),                              # a row of one value
               dict(record(3), table=[[32, 5, 0.5, 0]]),                  # algo index 5 of 2
               dict(record(4), key=["x"] * 27),                           # not ints
               dict(record(5), algos=[[1, 2]]),                           # an algo of 2 values
               dict(record(6), table="rows"),                             # not a list
               dict(record(7), table=[[32, 0, -1.0, 0]]),                 # negative time
               dict(record(8), key=[0, 1 << 64] + [1] * 25)]              # beyond int64
        messages, seeded = self.load_with(good + bad)
        self.assertLen(messages, 1, messages)
        self.assertIn("skipped 7 malformed record(s)", messages[0])
        self.assertCountEqual(seeded, [r["key"] for r in good])

    def test_record_that_is_not_json_costs_only_itself(self):
        messages, seeded = self.load_with([record(0), record(1)], [("[1]", "{not json")])
        self.assertLen(messages, 1, messages)
        self.assertIn("skipped 1 malformed record(s)", messages[0])
        self.assertCountEqual(seeded, [record(0)["key"], record(1)["key"]])

# Plans a convolution in a fresh process and reports how its kernels were planned.
_CHILD = textwrap.dedent("""
    import json, time, numpy as np, tensorflow as tf, tf_ucudnn
    tf.config.experimental.enable_tensor_float_32_execution(False)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((64, 28, 28, 64)), tf.float32)
    w = tf.constant(rng.standard_normal((3, 3, 64, 96)), tf.float32)
    start = time.perf_counter()
    with tf.device("/GPU:0"), tf.GradientTape() as tape:
        tape.watch([x, w])
        y = tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit=32 << 20)
        grads = tape.gradient(tf.reduce_sum(y * y), [x, w])
    seconds = time.perf_counter() - start
    want = tf.nn.conv2d(x, w, 1, "SAME")
    err = float(tf.norm(y - want) / tf.norm(want))
    print(json.dumps(dict(notes=[r["note"] for r in tf_ucudnn.plans()], seconds=seconds, err=err)))
""")


@pytest.mark.gpu
class BenchmarkDatabaseGpuTest(tf.test.TestCase):

    def test_second_process_plans_from_the_database(self):
        path = os.path.join(tempfile.mkdtemp(), "bench.sqlite3")
        results = []
        for _ in range(2):
            done = run_python(_CHILD, UCUDNN_DATABASE=path, TF_CPP_MIN_LOG_LEVEL="2")
            self.assertEqual(done.returncode, 0, done.stderr[-3000:])
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        first, second = results
        self.assertLen(first["notes"], 3)
        self.assertEqual(first["notes"], ["", "", ""], first)
        # Every size from the database's table, none benchmarked.
        for note in second["notes"]:
            self.assertRegex(note, r"^stored benchmark table: (\d+) of \1 sizes$", second)
        self.assertLessEqual(second["err"], 1e-5)
        self.assertLen(database.BenchmarkDatabase(path).get(*database_link.gpu_identity()), 3)

    def test_workspace_division_kernel_benchmarks_the_small_sizes_its_seed_lacks(self):
        # A kernel planned for itself skips the micro-batches below 8 where its
        # limit does not bind; the database's key has no Workspace Division
        # total, so its table seeds a Workspace Division kernel of the same
        # limit, whose Pareto front needs those sizes: it benchmarks them alone.
        path = os.path.join(tempfile.mkdtemp(), "bench.sqlite3")
        limit = 64 << 20
        child = textwrap.dedent(f"""
            import json, os, numpy as np, tensorflow as tf, tf_ucudnn
            from tf_ucudnn import _engine
            tf.config.experimental.enable_tensor_float_32_execution(False)
            rng = np.random.default_rng(0)
            x = tf.constant(rng.standard_normal((64, 28, 28, 64)), tf.float32)
            w = tf.constant(rng.standard_normal((3, 3, 64, 96)), tf.float32)
            divided = "UCUDNN_TOTAL_WORKSPACE_SIZE" in os.environ
            with tf.device("/GPU:0"):
                y = tf_ucudnn.conv2d(x, w, 1, "SAME",
                                     workspace_limit=None if divided else {limit})
            err = float(tf.norm(y - tf.nn.conv2d(x, w, 1, "SAME")) / tf.norm(y))
            k, = [k for k in _engine.kernels() if k["pass"] == "forward"]
            note = [r["note"] for r in tf_ucudnn.plans() if r["pass"] == "forward"][0]
            print(json.dumps(dict(total=k["total_workspace"], seeded=k["seeded"], err=err,
                                  sizes=sorted({{row["size"] for row in k["table"]}}),
                                  note=note)))
        """)
        results = []
        for env in ({}, {"UCUDNN_TOTAL_WORKSPACE_SIZE": str(limit)}):
            done = run_python(child, UCUDNN_DATABASE=path, TF_CPP_MIN_LOG_LEVEL="2", **env)
            self.assertEqual(done.returncode, 0, done.stderr[-3000:])
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        alone, divided = results
        self.assertEqual(alone["total"], 0, alone)
        self.assertNotIn(1, alone["sizes"], f"the limit should not bind here: {alone}")
        self.assertEqual(divided["total"], limit, divided)
        self.assertTrue(divided["seeded"], divided)
        self.assertContainsSubset([1, 2, 4, 8, 16, 32, 64], divided["sizes"], divided)
        small = len(set(divided["sizes"]) - set(alone["sizes"]))
        self.assertGreaterEqual(small, 3, divided)  # 1, 2 and 4 at least
        self.assertIn(f", {small} benchmarked", divided["note"])
        self.assertLessEqual(divided["err"], 1e-5)

    def test_a_wide_search_takes_no_seed_from_a_default_search(self):
        # Schema 3 keyed kernels without UCUDNN_GRAPH_*: a database filled
        # under the default search seeded wide kernels with the default's
        # table, so wide changed nothing until the database was cleared.
        path = os.path.join(tempfile.mkdtemp(), "bench.sqlite3")
        child = textwrap.dedent('''
            import json, numpy as np, tensorflow as tf, tf_ucudnn
            from tf_ucudnn import _engine
            tf.config.experimental.enable_tensor_float_32_execution(False)
            rng = np.random.default_rng(0)
            x = tf.constant(rng.standard_normal((32, 28, 28, 64)), tf.float32)
            w = tf.constant(rng.standard_normal((3, 3, 64, 96)), tf.float32)
            with tf.device("/GPU:0"):
                y = tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit=64 << 20)
            err = float(tf.norm(y - tf.nn.conv2d(x, w, 1, "SAME")) / tf.norm(y))
            k, = [k for k in _engine.kernels() if k["pass"] == "forward"]
            print(json.dumps(dict(search=k["key"]["graph"]["search"], seeded=k["seeded"],
                                  candidates=len(k["algos"]), err=err)))
        ''')
        results = []
        for search in ("default", "wide", "wide", "default"):
            done = run_python(child, UCUDNN_DATABASE=path, UCUDNN_GRAPH_SEARCH=search,
                              TF_CPP_MIN_LOG_LEVEL="2")
            self.assertEqual(done.returncode, 0, done.stderr[-3000:])
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        default, wide, wide_again, default_again = results
        self.assertEqual([r["search"] for r in results], ["default", "wide", "wide", "default"])
        self.assertEqual([r["seeded"] for r in results], [False, False, True, True], results)
        self.assertGreater(wide["candidates"], default["candidates"], results)
        self.assertEqual(wide_again["candidates"], wide["candidates"])
        self.assertEqual(default_again["candidates"], default["candidates"])
        for r in results:
            self.assertLessEqual(r["err"], 1e-5, r)
        self.assertLen(database.BenchmarkDatabase(path).get(*database_link.gpu_identity()), 2)
