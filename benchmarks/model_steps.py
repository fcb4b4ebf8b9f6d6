"""Run on a GPU machine from the repository root: python benchmarks/model_steps.py

Training-step time of AlexNet and ResNet-18 (N=256, 224x224, no XLA) under a total
workspace budget: stock TF (TF_CUDNN_WORKSPACE_LIMIT_IN_MB), tf_ucudnn WR with the
budget split evenly per kernel, tf_ucudnn WD; plus stock TF at 8 GiB."""
import json, os, subprocess, sys, time
MiB = 1 << 20

def build(name, conv):
    import keras
    L = keras.layers
    inputs = keras.Input((224, 224, 3))
    if name == "alexnet":
        x = conv(64, 11, strides=4, padding="same", activation="relu")(inputs)
        x = L.MaxPooling2D(3, 2)(x)
        x = conv(192, 5, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(3, 2)(x)
        x = conv(384, 3, padding="same", activation="relu")(x)
        x = conv(256, 3, padding="same", activation="relu")(x)
        x = conv(256, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(3, 2)(x)
        x = L.Flatten()(x)
        x = L.Dense(4096, activation="relu")(x)
        x = L.Dense(4096, activation="relu")(x)
    else:
        x = conv(64, 7, strides=2, padding="same", use_bias=False)(inputs)
        x = L.ReLU()(L.BatchNormalization()(x))
        x = L.MaxPooling2D(3, 2, padding="same")(x)
        for c, s in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
            y = conv(c, 3, strides=s, padding="same", use_bias=False)(x)
            y = L.ReLU()(L.BatchNormalization()(y))
            y = conv(c, 3, padding="same", use_bias=False)(y)
            y = L.BatchNormalization()(y)
            if s != 1 or x.shape[-1] != c:
                x = L.BatchNormalization()(conv(c, 1, strides=s, use_bias=False)(x))
            x = L.ReLU()(x + y)
        x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, L.Dense(1000)(x))

def worker(model_name, mode, total):
    import keras, numpy as np, tensorflow as tf
    import tf_ucudnn
    from tf_ucudnn.bench import harness
    if mode == "stock":
        conv = keras.layers.Conv2D
    else:
        conv = tf_ucudnn.layers.Conv2D
    model = build(model_name, conv)
    n_conv = sum(isinstance(l, keras.layers.Conv2D) for l in model.layers)
    t0 = time.perf_counter()
    report = None
    if mode == "wr_even":
        for l in model.layers:
            if isinstance(l, tf_ucudnn.layers.Conv2D):
                l.workspace_limit = total // (3 * n_conv - 1)
    elif mode == "wd":
        report = tf_ucudnn.divide_workspace_budget(model, total, 256)
    plan_s = time.perf_counter() - t0
    x = tf.random.normal([256, 224, 224, 3]); y = tf.random.uniform([256], 0, 1000, tf.int32)
    opt = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    t0 = time.perf_counter(); step(); tf.test.experimental.sync_devices(); first_s = time.perf_counter() - t0
    for _ in range(3): step()
    tf.config.experimental.reset_memory_stats("GPU:0")
    # Median of 5 repeats of 5 steps, each from a synced device to a synced device.
    _, ts = harness.time_ms(step, (), warmup=0, repeats=5, iters=5)
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    return dict(model=model_name, mode=mode, total_mib=total >> 20, step_ms=float(np.median(ts)),
                first_step_s=round(first_s, 2), plan_s=round(plan_s, 2), peak_gib=round(peak / 2**30, 2),
                wd_workspace_mib=(report.workspace_bytes / MiB) if report else None,
                wd_predicted_ms=report.time_ms if report else None)

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print("RESULT " + json.dumps(worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))), flush=True)
        sys.exit(0)
    runs = []
    for model_name in ("alexnet", "resnet18"):
        runs.append((model_name, "stock", 8192 * MiB))
        for total in (64 * MiB, 256 * MiB):
            for mode in ("stock", "wr_even", "wd"):
                runs.append((model_name, mode, total))
    for model_name, mode, total in runs:
        env = dict(os.environ, TF_CUDNN_WORKSPACE_LIMIT_IN_MB=str(total >> 20), TF_CPP_MIN_LOG_LEVEL="2")
        done = subprocess.run([sys.executable, __file__, "--worker", model_name, mode, str(total)],
                              env=env, capture_output=True, text=True, timeout=300)
        line = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
        print(line[0][7:] if line else f"FAILED {model_name} {mode} {total >> 20}: {done.stderr[-800:]}", flush=True)
