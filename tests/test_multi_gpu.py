"""Two GPUs: tf.distribute.MirroredStrategy over both, and
MultiWorkerMirroredStrategy with two worker processes on localhost (one GPU
each). A model of tf_ucudnn layers trains with the same losses as on one GPU,
and each replica plans its kernels on its own device. Skipped with fewer than
two GPUs."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from testing_utils import ROOT, run_python

_MODEL = """
import json, os
import keras, numpy as np, tensorflow as tf, tf_ucudnn
tf.config.experimental.enable_tensor_float_32_execution(False)

def build():
    inputs = keras.Input((16, 16, 8))
    x = tf_ucudnn.layers.Conv2D(32, 3, padding="same", activation="relu", workspace_limit=1 << 20)(inputs)
    x = tf_ucudnn.layers.Conv2D(16, 3, strides=2, padding="same", workspace_limit=1 << 20)(x)
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(x)))
    model.compile(optimizer=keras.optimizers.SGD(0.05), jit_compile=False,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model

rng = np.random.default_rng(0)
x = rng.standard_normal((64, 16, 16, 8)).astype(np.float32)
y = rng.integers(0, 2, 64)
fit = lambda m: m.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0).history["loss"]
"""

_LOOP = """
def train(strategy):
    # A custom loop (Keras 3's fit does not take MultiWorkerMirroredStrategy's
    # per-replica batches): global batch 32, each worker's replica gets its shard.
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build()
        optimizer = keras.optimizers.SGD(0.05)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dist = strategy.experimental_distribute_dataset(data.with_options(options))

    @tf.function(jit_compile=False)
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)),
                                              global_batch_size=32)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for _ in range(3):
        for xb, yb in dist:
            strategy.run(step, args=(xb, yb))
    return [float(np.sum(np.abs(w))) for w in model.get_weights()]
"""

_MIRRORED = _MODEL + """
keras.utils.set_random_seed(0)
with tf.device("/GPU:0"):
    single = build()
weights = single.get_weights()
single_losses = fit(single)
tf_ucudnn.clear_plans()
strategy = tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
with strategy.scope():
    mirrored = build()
mirrored.set_weights(weights)
mirrored_losses = fit(mirrored)
devices = sorted({r["device"].split("device:")[-1] for r in tf_ucudnn.plans()})
print("RESULT " + json.dumps(dict(single=single_losses, mirrored=mirrored_losses, devices=devices)))
"""

_WORKER = _MODEL + _LOOP + """
strategy = tf.distribute.MultiWorkerMirroredStrategy()
weights = train(strategy)
devices = sorted({r["device"] for r in tf_ucudnn.plans()})
print("RESULT " + json.dumps(dict(weights=weights, devices=devices,
                                  replicas=strategy.num_replicas_in_sync)))
"""

_SINGLE = _MODEL + _LOOP + """
print("RESULT " + json.dumps(dict(weights=train(tf.distribute.OneDeviceStrategy("/gpu:0")))))
"""


def _result(done):
    lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.gpu
class TwoGpuTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        if len(tf.config.list_physical_devices("GPU")) < 2:
            self.skipTest("needs two GPUs")

    def test_mirrored_strategy_on_two_gpus_trains_like_one_gpu(self):
        result = _result(run_python(_MIRRORED, timeout=600))
        self.assertAllClose(result["mirrored"], result["single"], rtol=1e-4, msg=str(result))
        self.assertEqual(result["devices"], ["GPU:0", "GPU:1"], result)

    def test_multi_worker_mirrored_strategy_two_processes_train_like_one_gpu(self):
        single = _result(run_python(_SINGLE, timeout=600, CUDA_VISIBLE_DEVICES="0"))
        ports = [_free_port(), _free_port()]
        cluster = {"worker": [f"localhost:{p}" for p in ports]}
        path = os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        procs = []
        for index in range(2):
            env = dict(os.environ, PYTHONPATH=path, CUDA_VISIBLE_DEVICES=str(index),
                       TF_CONFIG=json.dumps({"cluster": cluster,
                                             "task": {"type": "worker", "index": index}}))
            procs.append(subprocess.Popen([sys.executable, "-c", textwrap.dedent(_WORKER)],
                                          env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        results = []
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                self.fail("a MultiWorkerMirroredStrategy worker hung for 600 s")
            results.append(_result(subprocess.CompletedProcess(proc.args, proc.returncode, out, err)))
        for index, r in enumerate(results):
            self.assertEqual(r["replicas"], 2, r)
            # Each worker plans on its own (only) GPU.
            self.assertLen(r["devices"], 1, r)
            self.assertIn(f"task:{index}/device:GPU:0", r["devices"][0], r)
            # Weights after three epochs (sums of |w| per tensor) as on one GPU.
            self.assertAllClose(r["weights"], single["weights"], rtol=1e-4, msg=str((r, single)))
