"""tf_ucudnn.engine_info: the engine's kernels and the overhead measurement,
and tf_ucudnn.bench using only public modules."""

import ast
import os

import tensorflow as tf

from tf_ucudnn import engine_info
from tf_ucudnn.bench import overhead

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tf_ucudnn",
                     "bench")


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
        private = []
        for name in sorted(os.listdir(BENCH)):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(BENCH, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                private += [f"{name}: {n}" for n in names if n.startswith("tf_ucudnn")
                            and any(part.startswith("_") for part in n.split(".")[1:])]
        self.assertEqual(private, [])
