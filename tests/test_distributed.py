"""tf.distribute.MirroredStrategy on two logical CPU devices: a model of tf_ucudnn
layers trains with the same losses as on one device, and each replica runs its
own kernels. (The two-GPU variant needs a two-GPU machine.)"""

import json
import textwrap

import tensorflow as tf

from testing_utils import run_python

# Logical devices must be configured before TensorFlow initialises: a child process.
_CHILD = textwrap.dedent("""
    import json
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    import keras, numpy as np, tf_ucudnn

    def build():
        inputs = keras.Input((8, 8, 3))
        x = tf_ucudnn.layers.Conv2D(6, 3, padding="same", activation="relu", micro_batch_size=3)(inputs)
        x = tf_ucudnn.layers.Conv2D(4, 3, strides=2, padding="same")(x)
        model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(x)))
        model.compile(optimizer=keras.optimizers.SGD(0.05), jit_compile=False,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 8, 8, 3)).astype(np.float32)
    y = rng.integers(0, 2, 32)
    keras.utils.set_random_seed(0)
    single = build()
    weights = single.get_weights()
    fit = lambda m: m.fit(x, y, batch_size=16, epochs=4, shuffle=False, verbose=0).history["loss"]
    single_losses = fit(single)
    tf_ucudnn.clear_plans()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        mirrored = build()
    mirrored.set_weights(weights)
    mirrored_losses = fit(mirrored)
    devices = sorted({r["device"].split("device:")[-1] for r in tf_ucudnn.plans()})
    print(json.dumps(dict(single=single_losses, mirrored=mirrored_losses, devices=devices,
                          replicas=strategy.num_replicas_in_sync)))
""")


class MirroredStrategyTest(tf.test.TestCase):

    def test_two_replicas_train_like_one_device(self):
        done = run_python(_CHILD, TF_CPP_MIN_LOG_LEVEL="3")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertEqual(result["replicas"], 2)
        self.assertAllClose(result["mirrored"], result["single"], rtol=1e-4,
                            msg=f"losses per epoch: {result}")
        self.assertEqual(result["devices"], ["CPU:0", "CPU:1"], result)
