"""tf_ucudnn.engine_info: the engine's kernels and the overhead measurement,
and tf_ucudnn.bench using only public modules."""

import ast
import os

import tensorflow as tf

from tf_ucudnn import engine_info
from tf_ucudnn.bench import overhead

import tf_ucudnn.bench

# The package as imported: the checkout's, or the installed wheel's.
BENCH = os.path.dirname(os.path.abspath(tf_ucudnn.bench.__file__))


class EngineInfoTest(tf.test.TestCase):

    def test_no_gpu_kernels_on_a_cpu(self):
        if tf.config.list_physical_devices("GPU"):
            self.skipTest("a GPU is visible")
        x = tf.ones([2, 8, 8, 3])
        w = tf.ones([3, 3, 3, 4])
        import tf_ucudnn

        tf_ucudnn.conv2d(x, w, strides=1, padding="SAME")  # a CPU kernel: not the engine's
        self.assertEqual(engine_info.kernels(), [])

    def test_timing_an_unknown_kernel_is_a_value_error(self):
        with self.assertRaises(ValueError) as caught:
            engine_info.time_overhead(123456, 1)
        self.assertTrue(str(caught.exception))  # the engine's message, or how to build the library
        with self.assertRaises(RuntimeError):
            overhead.time_kernel_overhead(123456, 1)


class BenchUsesPublicApiTest(tf.test.TestCase):

    def test_no_bench_module_imports_a_private_tf_ucudnn_module(self):
        # The benchmark's own modules (tf_ucudnn.bench...) may be private, and so
        # may tf_ucudnn._lazy (how a package binds its names, no engine API); the
        # library's others may not. Every module of the package, subpackages included.
        private = []
        paths = sorted(os.path.join(folder, f) for folder, _, files in os.walk(BENCH)
                       for f in files if f.endswith(".py"))
        self.assertGreater(len(paths), 10)
        for path in paths:
            name = os.path.relpath(path, BENCH)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                private += [f"{name}: {n}" for n in names if n.startswith("tf_ucudnn")
                            and not n.startswith(("tf_ucudnn.bench.", "tf_ucudnn._lazy."))
                            and any(part.startswith("_") for part in n.split(".")[1:])]
        self.assertEqual(private, [])


class CudnnVersionTest(tf.test.TestCase):

    def test_cudnn_version_is_a_release_or_empty_without_cudnn(self):
        import re

        import tf_ucudnn
        version = tf_ucudnn.cudnn_version()
        self.assertTrue(version == "" or re.fullmatch(r"[1-9]\d*\.\d+\.\d+", version),
                        f"cudnn_version() = {version!r}: a release such as '9.19.0', or '' "
                        "where no cuDNN loads (never '0.0.0')")
