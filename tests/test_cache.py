"""The benchmark database (tf_ucudnn.cache): round trips, concurrency, and every
fault giving one warning and no crash."""

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import warnings

import pytest
import tensorflow as tf

from testing_utils import run_python
from tf_ucudnn import cache

GPU, CUDNN, TF = "NVIDIA H200", "9.19.0", "2.21.0"


def record(i):
    key = [0, 32 + i] + [1] * 19 + [1, 0, 64 << 20, 1, 0, 0]
    # A legacy algorithm and a transposed graph-API engine (id 34, knobs k2=1, k3=0).
    return dict(key=key, table=[[32 + i, 0, 0.5, 0], [16, 1, 0.2, 1024]],
                algos=[[1, 2, 1], [0, 0, 1, 34, 1, 2, 1, 3, 0]], shape=f"N={32 + i}",
                **{"pass": "forward"})


def _write_many(path, start):
    cache.BenchmarkDatabase(path).put(GPU, CUDNN, TF, [record(i) for i in range(start, start + 40)])


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
        db = cache.BenchmarkDatabase(self.path)
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
        self.assertLen(cache.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF), 80)

    def test_corrupt_file_warns_once_and_reads_nothing(self):
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, "wb") as f:
            f.write(b"this is not a database" * 100)
        db = cache.BenchmarkDatabase(self.path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertEmpty(db.get(GPU, CUDNN, TF))
            db.put(GPU, CUDNN, TF, [record(0)])
            self.assertEmpty(db.get(GPU, CUDNN, TF))
        self.assertOneWarning(caught, "planning continues without it")

    def test_older_schema_is_emptied_once_with_a_warning_then_used(self):
        os.makedirs(os.path.dirname(self.path))
        db = sqlite3.connect(self.path)
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        db.execute("CREATE TABLE kernels (gpu TEXT, cudnn TEXT, tf TEXT, key TEXT, tables TEXT, "
                   "shape TEXT, pass TEXT, created REAL, PRIMARY KEY (gpu, cudnn, tf, key))")
        db.execute("INSERT INTO kernels VALUES (?, ?, ?, '[0]', '{}', '', 'forward', 0)",
                   (GPU, CUDNN, TF))
        db.commit()
        db.close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = cache.BenchmarkDatabase(self.path)
            self.assertEmpty(ours.get(GPU, CUDNN, TF))
            ours.put(GPU, CUDNN, TF, [record(0)])
            got = cache.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF)
        self.assertOneWarning(caught, f"schema version 1 is older than {cache.SCHEMA_VERSION}")
        self.assertEqual([r["key"] for r in got], [record(0)["key"]])
        self.assertEqual(got[0]["algos"], record(0)["algos"])

    def test_newer_schema_version_warns_once_and_is_left_alone(self):
        os.makedirs(os.path.dirname(self.path))
        db = sqlite3.connect(self.path)
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '99')")
        db.commit()
        db.close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = cache.BenchmarkDatabase(self.path)
            self.assertEmpty(ours.get(GPU, CUDNN, TF))
            ours.put(GPU, CUDNN, TF, [record(0)])
        self.assertOneWarning(caught, "schema version 99")
        tables = sqlite3.connect(self.path).execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.assertEqual(tables, [("meta",)])

    def test_locked_database_warns_once_and_continues(self):
        cache.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0)])
        holder = sqlite3.connect(self.path)
        holder.execute("BEGIN EXCLUSIVE")
        old = cache._TIMEOUT_S
        cache._TIMEOUT_S = 0.2
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                db = cache.BenchmarkDatabase(self.path)
                self.assertEmpty(db.get(GPU, CUDNN, TF))
                db.put(GPU, CUDNN, TF, [record(1)])
            self.assertOneWarning(caught, "locked")
        finally:
            cache._TIMEOUT_S = old
            holder.rollback()
            holder.close()

    def test_unwritable_location_warns_once(self):
        blocker = os.path.join(self.dir, "a_file")
        open(blocker, "w").close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            db = cache.BenchmarkDatabase(os.path.join(blocker, "bench.sqlite3"))
            db.put(GPU, CUDNN, TF, [record(0)])
            self.assertEmpty(db.get(GPU, CUDNN, TF))
        self.assertOneWarning(caught, "could not write")

    def test_database_path_from_the_environment(self):
        for value, want in ((None, cache.DEFAULT_PATH), ("", None), ("off", None),
                            ("/tmp/x.sqlite3", "/tmp/x.sqlite3")):
            env = dict(os.environ)
            env.pop("UCUDNN_DATABASE", None)
            if value is not None:
                env["UCUDNN_DATABASE"] = value
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(os, "environ", env)
                self.assertEqual(cache.database_path(), want, f"UCUDNN_DATABASE={value!r}")

    def test_command_line_show_and_clear(self):
        cache.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0), record(1)])
        run = lambda *args: subprocess.run(  # noqa: E731
            [sys.executable, "-m", "tf_ucudnn", "cache", *args, "--database", self.path],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        shown = run("show")
        self.assertEqual(shown.returncode, 0, shown.stderr[-2000:])
        self.assertIn("2 kernels", shown.stdout)
        self.assertIn(GPU, shown.stdout)
        cleared = run("clear")
        self.assertIn("removed 2 kernels", cleared.stdout)
        self.assertEmpty(cache.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF))


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
        self.assertEqual(second["notes"], ["benchmarks from the database"] * 3, second)
        self.assertLessEqual(second["err"], 1e-5)
        self.assertLen(cache.BenchmarkDatabase(path).get(*cache.gpu_identity()), 3)
