"""Importing tf_ucudnn after TensorFlow ran an op: a warning, since tf_ucudnn's
XLA kernels are missing then (TensorFlow makes its XLA JIT kernels once, at
its first op)."""

import tensorflow as tf

from testing_utils import run_python

CHILD = """
    import sys, warnings
    import tensorflow as tf
    if sys.argv[1] == "op_first":
        tf.constant(1.0) + 1.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import tf_ucudnn
    print("WARNED", any("imported after TensorFlow ran its first op" in str(w.message)
                        for w in caught))
    f = tf.function(lambda x, w: tf_ucudnn.conv2d(x, w, 1, "SAME"), jit_compile=True)
    try:
        f(tf.ones([1, 4, 4, 1]), tf.ones([3, 3, 1, 1]))
        print("XLA ok")
    except tf.errors.InvalidArgumentError as e:
        print("XLA failed", "No registered 'Ucudnn>Conv2D' OpKernel for XLA_CPU_JIT" in str(e))
"""


class ImportOrderTest(tf.test.TestCase):

    def run_child(self, order):
        done = run_python(CHILD, argv=[order], TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        return done.stdout.split("\n")

    def test_imported_first_it_compiles_with_xla_and_warns_nothing(self):
        lines = self.run_child("import_first")
        self.assertIn("WARNED False", lines)
        self.assertIn("XLA ok", lines)

    def test_imported_after_an_op_it_warns_of_the_missing_xla_kernels(self):
        lines = self.run_child("op_first")
        self.assertIn("WARNED True", lines)
        self.assertIn("XLA failed True", lines)  # what the warning foretells
