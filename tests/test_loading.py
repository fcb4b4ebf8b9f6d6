"""Importing tf_ucudnn: a missing op library or one built for another TensorFlow
gives an ImportError that says what to do."""

import importlib.metadata
import os
import shutil
import tempfile

import tensorflow as tf

import tf_ucudnn
from testing_utils import run_python

PACKAGE = os.path.dirname(os.path.abspath(tf_ucudnn.__file__))  # checkout or site-packages


class LoadingTest(tf.test.TestCase):

    def test_missing_library_says_how_to_build_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(PACKAGE, os.path.join(tmp, "tf_ucudnn"),
                            ignore=shutil.ignore_patterns("*.so", "__pycache__"))
            done = run_python("import tf_ucudnn", pythonpath=tmp, TF_CPP_MIN_LOG_LEVEL="3")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("ImportError", done.stderr)
        self.assertIn("make build", done.stderr)

    def test_other_tensorflow_version_names_the_one_it_was_built_for(self):
        done = run_python("""
            import tensorflow as tf
            built = tf.__version__
            tf.__version__ = "2.99.0"
            try:
                import tf_ucudnn
            except ImportError as e:
                print("ImportError:", e)
                print("built", ".".join(built.split(".")[:2]))
        """, TF_CPP_MIN_LOG_LEVEL="3")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        lines = done.stdout.strip().splitlines()
        self.assertTrue(lines[0].startswith("ImportError:"), done.stdout)
        built = lines[-1].split()[-1]
        self.assertIn(f"built for TensorFlow {built}", lines[0])
        self.assertIn("2.99.0", lines[0])


class WheelTagTest(tf.test.TestCase):

    def test_an_installed_wheel_is_tagged_manylinux(self):
        """The installed wheel (make wheel-test) carries auditwheel's manylinux
        tag: TensorFlow's libraries excluded, the rest within the policy."""
        try:
            wheel = importlib.metadata.distribution("tf_ucudnn").read_text("WHEEL")
        except importlib.metadata.PackageNotFoundError:
            wheel = None
        if wheel is None:
            self.skipTest("tf_ucudnn runs from a checkout, not an installed wheel")
        tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines()
                if line.startswith("Tag:")]
        self.assertTrue(tags and all("-manylinux_" in t for t in tags), wheel)
