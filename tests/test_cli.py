"""The `tf-ucudnn` command (`python -m tf_ucudnn`): subcommands, help, version,
errors, and no TensorFlow where none is needed."""

import os
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import tensorflow as tf

import tf_ucudnn
from testing_utils import ROOT, run_python
from tf_ucudnn import cli, database

COMMANDS = ("demo", "bench", "cache")


def run_command(*args, executable=None):
    """Runs `python -m tf_ucudnn ARGS` (or the console script `executable`) with
    Python's import log on; returns (CompletedProcess, the modules imported)."""
    argv = [executable] if executable else [sys.executable, "-m", "tf_ucudnn"]
    done = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1",
                                   TF_CPP_MIN_LOG_LEVEL="3"))
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    return done, imported


def console_script():
    """The installed `tf-ucudnn` script beside this Python (None in a checkout)."""
    return shutil.which("tf-ucudnn", path=os.path.dirname(sys.executable))


class HelpAndVersionTest(tf.test.TestCase):

    def test_help_goes_to_stdout_names_every_command_and_imports_no_tensorflow(self):
        done, imported = run_command("--help")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertStartsWith(done.stdout, "usage: tf-ucudnn")
        for name in COMMANDS:
            self.assertIn(name, done.stdout)
        self.assertNotIn("usage:", done.stderr)
        self.assertIn("tf_ucudnn", imported)  # the log works
        self.assertNotIn("tensorflow", imported)
        self.assertNotIn("keras", imported)

    def test_version_prints_the_package_version_and_imports_no_tensorflow(self):
        done, imported = run_command("--version")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertEqual(done.stdout.strip(), f"tf-ucudnn {tf_ucudnn.__version__}")
        self.assertNotIn("tensorflow", imported)

    def test_the_installed_console_script_answers_without_tensorflow(self):
        script = console_script()
        if script is None:
            self.skipTest("no tf-ucudnn script beside this Python (run from a checkout)")
        done, imported = run_command("--version", executable=script)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertEqual(done.stdout.strip(), f"tf-ucudnn {tf_ucudnn.__version__}")
        self.assertNotIn("tensorflow", imported)
        done, _ = run_command("--help", executable=script)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertIn("demo", done.stdout)

    def test_a_commands_help_is_its_modules_help(self):
        done, imported = run_command("demo", "--help")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertStartsWith(done.stdout, "usage: tf-ucudnn demo")
        self.assertIn("--epochs", done.stdout)
        self.assertNotIn("tensorflow", imported)


    def test_bench_has_a_help_per_mode(self):
        done, _ = run_command("bench", "memory-cap", "--help")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertStartsWith(done.stdout, "usage: tf-ucudnn bench memory-cap")
        self.assertIn("--caps", done.stdout)
        self.assertNotIn("--totals", done.stdout)


class CommandErrorsTest(tf.test.TestCase):

    def test_unknown_command_exits_2_naming_the_valid_ones(self):
        done, _ = run_command("train")
        self.assertEqual(done.returncode, 2)
        self.assertIn("invalid choice: 'train'", done.stderr)
        for name in COMMANDS:
            self.assertIn(f"'{name}'", done.stderr)
        self.assertEqual(done.stdout, "")

    def test_no_command_exits_2(self):
        done, _ = run_command()
        self.assertEqual(done.returncode, 2)
        self.assertIn("usage: tf-ucudnn", done.stderr)

    def test_an_option_before_the_command_that_is_not_ours_exits_2(self):
        done, _ = run_command("--epochs", "1", "demo")
        self.assertEqual(done.returncode, 2)


class DispatchTest(tf.test.TestCase):
    """Everything after the command's name reaches its module as it was given."""

    def test_the_rest_of_the_line_reaches_the_command_unchanged(self):
        rest = ["--epochs", "1", "--filters", "4,4,4", "--json", "out.json"]
        for name, module in (("demo", "tf_ucudnn.demo"), ("bench", "tf_ucudnn.bench"),
                             ("cache", "tf_ucudnn.database_cli")):
            with self.subTest(command=name), mock.patch(f"{module}.main", return_value=7) as main:
                self.assertEqual(cli.main([name, *rest]), 7)
                main.assert_called_once_with(rest)

    def test_run_is_a_deprecated_alias_of_demo(self):
        with mock.patch("tf_ucudnn.demo.main", return_value=0) as main, \
                mock.patch("sys.stderr") as stderr:
            self.assertEqual(cli.main(["run", "--epochs", "2"]), 0)
        main.assert_called_once_with(["--epochs", "2"])
        written = "".join(call.args[0] for call in stderr.write.call_args_list)
        self.assertIn("deprecated", written)
        self.assertIn("tf-ucudnn demo", written)


class CacheCommandTest(tf.test.TestCase):

    def test_cache_show_lists_a_database_without_importing_tensorflow(self):
        path = os.path.join(tempfile.mkdtemp(), "bench.sqlite3")
        record = dict(key=[0, 3] + [1] * 18 + [1, 0, 64 << 20, 0, 0, 1, 0],
                      table=[[32, 0, 0.5, 0], [8, 0, 0.2, 0]], algos=[[1, 2, 1]], shape="C=3",
                      **{"pass": "forward"})
        database.BenchmarkDatabase(path).put("NVIDIA H200", "9.19.0", "2.21.0", [record])
        done, imported = run_command("cache", "show", "--database", path)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertIn("1 tables", done.stdout)
        self.assertIn("NVIDIA H200", done.stdout)
        self.assertIn("8, 32", done.stdout)  # the micro-batch sizes the table holds
        self.assertNotIn("tensorflow", imported)


class ImportTest(tf.test.TestCase):

    def test_import_tf_ucudnn_outside_the_command_registers_the_ops_at_once(self):
        # SavedModels and .keras files need the ops registered by `import tf_ucudnn` alone.
        done = subprocess.run(
            [sys.executable, "-c", "import sys, tf_ucudnn; "
             "from tensorflow.python.framework import op_def_registry; "
             "print('tensorflow' in sys.modules, "
             "op_def_registry.get('Ucudnn>Conv2D') is not None, "
             "'conv2d' in vars(tf_ucudnn))"],
            capture_output=True, text=True, timeout=300, cwd=ROOT,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertEqual(done.stdout.split(), ["True", "True", "True"])

    def test_inside_the_command_the_api_and_submodules_bind_on_first_use(self):
        done = run_python("""
            import sys
            sys.argv = ["/usr/bin/tf-ucudnn", "demo"]  # as the console script starts
            import tf_ucudnn
            print("tensorflow" in sys.modules)
            print(tf_ucudnn.units.parse_bytes("1KiB"), "tensorflow" in sys.modules)
            try:
                tf_ucudnn.no_such_thing
            except AttributeError as e:
                print("AttributeError", "no_such_thing" in str(e))
            print(tf_ucudnn.division.division_reports(), callable(tf_ucudnn.conv2d))
            from tensorflow.python.framework import op_def_registry
            print(op_def_registry.get("Ucudnn>Conv2D") is not None)
        """, TF_CPP_MIN_LOG_LEVEL="3")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertEqual(done.stdout.split(), ["False", "1024", "False", "AttributeError", "True",
                                               "{}", "True", "True"])

    def test_python_dash_m_of_another_package_imports_tf_ucudnn_eagerly(self):
        # Only `python -m tf_ucudnn` itself defers the API, not another package run with
        # -m whose __init__ imports tf_ucudnn while Python looks for the module to run.
        with tempfile.TemporaryDirectory() as tmp:
            os.mkdir(os.path.join(tmp, "trainer"))
            with open(os.path.join(tmp, "trainer", "__init__.py"), "w") as f:
                f.write("import tf_ucudnn\nEAGER = 'conv2d' in vars(tf_ucudnn)\n")
            with open(os.path.join(tmp, "trainer", "main.py"), "w") as f:
                f.write("import trainer\nprint(trainer.EAGER)\n")
            done = subprocess.run(
                [sys.executable, "-m", "trainer.main"], capture_output=True, text=True,
                timeout=300, cwd=tmp,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                         PYTHONPATH=os.pathsep.join([tmp, ROOT, os.environ.get("PYTHONPATH", "")])))
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertEqual(done.stdout.strip(), "True")
