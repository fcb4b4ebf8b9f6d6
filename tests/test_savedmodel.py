"""A Keras model of tf_ucudnn layers saved as a SavedModel (model.export) and as a
.keras file reloads in a new process with the same outputs."""

import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

import tf_ucudnn
from testing_utils import run_python


def run_child(code):
    return run_python(code, TF_CPP_MIN_LOG_LEVEL="3")


class SavedModelTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        inputs = keras.Input((12, 12, 3))
        x = tf_ucudnn.layers.Conv2D(8, 3, padding="same", activation="relu",
                                    micro_batch_size=2)(inputs)
        x = tf_ucudnn.layers.Conv2D(4, 3, strides=2, padding="same", groups=2)(x)
        self.model = keras.Model(inputs, keras.layers.Flatten()(x))
        self.x = np.random.default_rng(0).standard_normal((5, 12, 12, 3)).astype(np.float32)
        np.save(os.path.join(self.dir, "x.npy"), self.x)
        np.save(os.path.join(self.dir, "y.npy"), self.model.predict(self.x, verbose=0))

    def test_export_reloads_in_a_new_process_with_the_same_outputs(self):
        self.model.export(os.path.join(self.dir, "saved"), verbose=False)
        done = run_child(f"""
            import numpy as np, tensorflow as tf
            import tf_ucudnn  # registers the ops before loading
            loaded = tf.saved_model.load({os.path.join(self.dir, "saved")!r})
            x = np.load({os.path.join(self.dir, "x.npy")!r})
            y = np.load({os.path.join(self.dir, "y.npy")!r})
            got = loaded.serve(tf.constant(x)).numpy()
            print("max abs diff", float(np.max(np.abs(got - y))))
        """)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        self.assertLessEqual(float(done.stdout.split()[-1]), 1e-5, done.stdout)

    def test_loading_without_tf_ucudnn_names_the_missing_op(self):
        self.model.export(os.path.join(self.dir, "saved"), verbose=False)
        done = run_child(f"""
            import tensorflow as tf
            tf.saved_model.load({os.path.join(self.dir, "saved")!r})
        """)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("Ucudnn>Conv2D", done.stderr)

    def test_keras_file_reloads_in_a_new_process_with_the_same_outputs(self):
        path = os.path.join(self.dir, "model.keras")
        self.model.save(path)
        done = run_child(f"""
            import numpy as np, keras
            import tf_ucudnn
            model = keras.models.load_model({path!r})
            x = np.load({os.path.join(self.dir, "x.npy")!r})
            y = np.load({os.path.join(self.dir, "y.npy")!r})
            assert model.layers[1].micro_batch_size == 2, model.layers[1].get_config()
            print("max abs diff", float(np.max(np.abs(model.predict(x, verbose=0) - y))))
        """)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        self.assertLessEqual(float(done.stdout.split()[-1]), 1e-5, done.stdout)
