"""Planning time cold and with a warm benchmark database: run twice with the same
UCUDNN_DATABASE; the first step of the second run plans from the database.

    UCUDNN_DATABASE=/tmp/db.sqlite3 python benchmarks/planning_cold_warm.py   # twice
    UCUDNN_DATABASE=off UCUDNN_BENCHMARK_DEVICES=all python benchmarks/planning_cold_warm.py
"""
import json, time
import keras, tensorflow as tf, tf_ucudnn
from tf_ucudnn.plan_registry import table_reuse
def resnet18_convs():
    # The 3x3 and 1x1 convolutions of ResNet-18 at 224x224 (stem excluded), as one model.
    inputs = keras.Input((56, 56, 64)); x = inputs
    for c, s in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
        x = tf_ucudnn.layers.Conv2D(c, 3, strides=s, padding="same", activation="relu")(x)
    return keras.Model(inputs, x)
model = resnet18_convs()
x = tf.random.normal([256, 56, 56, 64])
@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(model(x, training=True)))
    return tape.gradient(loss, model.trainable_variables)
t0 = time.perf_counter(); step(); tf.test.experimental.sync_devices(); first = time.perf_counter() - t0
t0 = time.perf_counter(); step(); tf.test.experimental.sync_devices(); second = time.perf_counter() - t0
records = tf_ucudnn.plans()
notes = [r["note"] for r in records]
# planning_s: time inside the kernels' planning (benchmark or database, then Workspace Reuse),
# the rest of the first step is TensorFlow's tracing, graph optimisation and the step itself.
print(json.dumps(dict(first_step_s=round(first, 3), second_step_s=round(second, 3), kernels=len(notes),
                      planning_s=round(sum(r["planning_ms"] or 0 for r in records) / 1e3, 3),
                      from_db=sum((table_reuse(r) or (0, 1))[1] == 0
                                  for r in records),
                      multi_gpu=sum(n.startswith("benchmarked on GPUs") for n in notes))), flush=True)
