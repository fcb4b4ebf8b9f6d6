"""The demo (`tf-ucudnn demo`): its shipped digits, its split, and a whole run on the CPU."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from testing_utils import ROOT, run_python
from tf_ucudnn import demo


class ShippedDigitsTest(tf.test.TestCase):

    def test_digits_are_1797_images_of_8x8_values_0_to_16_with_labels_0_to_9(self):
        images, labels = demo.load_digits()
        self.assertEqual((images.shape, images.dtype), ((1797, 8, 8), np.uint8))
        self.assertEqual((labels.shape, labels.dtype), ((1797,), np.uint8))
        self.assertEqual((images.min(), images.max()), (0, 16))
        self.assertAllEqual(np.unique(labels), np.arange(10))

    def test_digits_are_scikit_learns(self):
        datasets = pytest.importorskip("sklearn.datasets")
        digits = datasets.load_digits()
        images, labels = demo.load_digits()
        self.assertAllEqual(images, digits.images)
        self.assertAllEqual(labels, digits.target)

    def test_the_demo_data_loads_without_scikit_learn(self):
        done = run_python("""
            import sys
            sys.modules["sklearn"] = None  # any import of scikit-learn fails
            from tf_ucudnn import demo
            x_train, y_train, x_test, y_test = demo.load_digits_images(16, "channels_first", 0)
            print(x_train.shape, x_test.shape, float(x_train.max()))
        """, TF_CPP_MIN_LOG_LEVEL="3")
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertEqual(done.stdout.strip(), "(1437, 1, 16, 16) (360, 1, 16, 16) 1.0")


class StratifiedSplitTest(tf.test.TestCase):

    def test_every_index_once_with_each_class_in_proportion(self):
        _, labels = demo.load_digits()
        train, test = demo.stratified_split(labels, 0.2, seed=3)
        self.assertEqual((len(train), len(test)), (1437, 360))
        self.assertAllEqual(np.sort(np.concatenate([train, test])), np.arange(len(labels)))
        for digit in range(10):
            in_class = np.sum(labels == digit)
            self.assertLessEqual(abs(np.sum(labels[test] == digit) - 0.2 * in_class), 1.0)

    def test_the_seed_decides_the_split(self):
        labels = np.repeat(np.arange(3), [10, 7, 4])
        first = demo.stratified_split(labels, 0.25, seed=0)
        self.assertAllEqual(first[1], demo.stratified_split(labels, 0.25, seed=0)[1])
        self.assertNotAllEqual(first[1], demo.stratified_split(labels, 0.25, seed=1)[1])
        # ceil(0.25 * 21) = 6 test samples, shared 6 * (10, 7, 4) / 21 = 2.86, 2, 1.14:
        # 2, 2, 1 rounded down, and the one left goes to the largest remainder, class 0.
        self.assertAllEqual(np.bincount(labels[first[1]]), [3, 2, 1])


class DemoRunTest(tf.test.TestCase):

    def test_the_demo_command_trains_both_models_without_and_with_xla_on_the_cpu(self):
        # The command binds tf_ucudnn's API lazily: its op library must still
        # load before TensorFlow runs an op, or its XLA kernels are missing.
        done = subprocess.run(
            [sys.executable, "-m", "tf_ucudnn", "demo", "--epochs", "1", "--image-size", "8",
             "--filters", "2,2,2", "--batch-size", "512"],
            capture_output=True, text=True, timeout=600, cwd=ROOT,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
        self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
        self.assertIn("1437 train / 360 test", done.stdout)
        self.assertIn("losses without XLA MATCH", done.stdout)
        self.assertIn("tf_ucudnn plans after epoch 1", done.stdout)
        self.assertNotIn("no XLA kernel", done.stdout)
        self.assertIn("then with XLA (jit_compile=True)", done.stdout)
        self.assertIn("on the CPU both models' convolutions are XLA's own", done.stdout)
        self.assertIn("losses with XLA MATCH", done.stdout)

    def test_data_format_auto_is_channels_first_on_a_gpu_and_last_on_the_cpu(self):
        self.assertEqual(demo.data_format_for("auto", on_gpu=True), "channels_first")
        self.assertEqual(demo.data_format_for("auto", on_gpu=False), "channels_last")
        for choice in ("channels_first", "channels_last"):
            for on_gpu in (True, False):
                self.assertEqual(demo.data_format_for(choice, on_gpu), choice)

    def test_xla_is_on_by_default_and_no_xla_turns_it_off(self):
        args = demo.parse_args(["--no-xla"])
        self.assertFalse(args.xla)
        self.assertTrue(demo.parse_args([]).xla)
