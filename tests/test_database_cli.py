"""``tf-ucudnn cache show|clear``: tf_ucudnn.database_cli."""

import os
import subprocess
import sys
import tempfile

import tensorflow as tf

from test_database import CUDNN, GPU, TF, _run_cli, record
from tf_ucudnn import database


class CacheCommandTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "bench.sqlite3")

    def test_command_line_show_and_clear(self):
        wide = record(1)
        wide["key"] = wide["key"][:24] + [2, 0, database._double_bits(3.0)]  # wide, both, 3
        database.BenchmarkDatabase(self.path).put(GPU, CUDNN, TF, [record(0), record(1), wide])
        run = lambda *args: subprocess.run(  # noqa: E731
            [sys.executable, "-m", "tf_ucudnn", "cache", *args, "--database", self.path],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        shown = run("show")
        self.assertEqual(shown.returncode, 0, shown.stderr[-2000:])
        self.assertIn("3 tables (one per convolution, any N;", shown.stdout)
        self.assertIn(GPU, shown.stdout)
        # The settings column tells tables of one convolution apart; the last
        # column lists the micro-batch sizes each holds.
        words = " ".join(shown.stdout.split())
        self.assertEqual(words.count("64 MiB, all, search default, layouts native, prune 2 16, "
                                     "32"), 2, shown.stdout)
        self.assertIn("64 MiB, all, search wide, layouts both, prune 3 16, 32", words)
        cleared = run("clear")
        self.assertIn("removed 3 tables", cleared.stdout)
        self.assertEmpty(database.BenchmarkDatabase(self.path).get(GPU, CUDNN, TF))

    def test_command_line_database_off_means_no_database(self):
        for value in ("off", "OFF", "none"):
            done = _run_cli("show", "--database", value, cwd=self.dir)
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            self.assertIn("the benchmark database is off", done.stdout)
        self.assertEmpty(os.listdir(self.dir))

    def test_command_line_empty_database_is_an_error(self):
        done = _run_cli("show", "--database", "", cwd=self.dir, UCUDNN_DATABASE="off")
        self.assertEqual(done.returncode, 2, done.stdout)
        self.assertIn("--database needs a file path, or 'off'", done.stderr)
        self.assertEmpty(os.listdir(self.dir))

    def test_command_line_creates_no_file_or_folder(self):
        missing = os.path.join(self.dir, "no", "such", "bench.sqlite3")
        for command in ("show", "clear"):
            done = _run_cli(command, "--database", missing)
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            self.assertIn(f"{missing}: no benchmark database there", done.stdout)
        self.assertEmpty(os.listdir(self.dir))
        open(self.path, "w").close()  # an empty file is a database with nothing in it
        done = _run_cli("show", "--database", self.path)
        self.assertIn("0 tables", done.stdout)
        done = _run_cli("clear", "--database", self.path)
        self.assertIn("removed 0 tables", done.stdout)
        self.assertEqual(os.path.getsize(self.path), 0)

    def test_a_directory_is_named_as_one_and_the_file_expected_is_said(self):
        for command in ("show", "clear"):
            done = _run_cli(command, "--database", self.dir)
            self.assertEqual(done.returncode, 1, done.stdout)
            self.assertIn(f"{self.dir}: is a directory, not a database file", done.stderr)
            self.assertIn(os.path.join(self.dir, "benchmarks.sqlite3"), done.stderr)
            self.assertNotIn("disk I/O error", done.stderr)
        self.assertEmpty(os.listdir(self.dir))

    def test_a_directory_in_ucudnn_database_warns_once_naming_it(self):
        with self.assertWarnsRegex(RuntimeWarning, "is a directory, not a database file"):
            db = database.BenchmarkDatabase(self.dir)
            self.assertEmpty(db.get(GPU, CUDNN, TF))
            db.put(GPU, CUDNN, TF, [record(0)])
        self.assertTrue(db.disabled)
        self.assertEmpty(os.listdir(self.dir))
