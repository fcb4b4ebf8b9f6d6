"""A new mini-batch size after another: what planning it costs, and whether its
step is as fast as a cold plan's. Trains MODEL (tf_ucudnn.bench's models,
enable_rewrite at 64 MiB, optionally under XLA) at each N of --batches in turn,
in this one process; prints one JSON line per N: the first step (s), the
kernels' planning (s, the sum of their records' planning_ms), how many kernels
planned and how many micro-batch sizes they benchmarked, the steady step (ms,
median of --repeats epochs of --steps steps).

    db=/tmp/nbs.sqlite3; rm -f $db
    UCUDNN_DATABASE=$db python benchmarks/new_batch_size.py resnet50 --batches 128,100
    UCUDNN_DATABASE=$db python benchmarks/new_batch_size.py resnet50 --batches 100  # a new process
    UCUDNN_DATABASE=off python benchmarks/new_batch_size.py resnet50 --batches 100  # cold
"""
import argparse
import json
import statistics
import time

import keras
import tensorflow as tf

import tf_ucudnn
from tf_ucudnn.bench import harness, models
from tf_ucudnn.plan_registry import table_reuse

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=sorted(models.MODEL_SPECS))
    parser.add_argument("--batches", default="128,100")
    parser.add_argument("--xla", action="store_true", help="compile with XLA (jit_compile=True)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gpus = harness.describe_environment(bool(tf.config.list_physical_devices("GPU")))["gpus"]
    tf_ucudnn.enable_rewrite(workspace_limit=64 << 20)
    model = models.build_model(args.model)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=models.loss_for(args.model),
                  jit_compile=args.xla)
    for batch in (int(b) for b in args.batches.split(",")):
        x, y = models.synthetic_batch(args.model, batch, model.output_shape)
        data = tf.data.Dataset.from_tensors((x, y)).repeat()
        before = len(tf_ucudnn.plans())
        start = time.perf_counter()
        model.fit(data, steps_per_epoch=1, epochs=1, verbose=0, shuffle=False)
        harness.sync_devices()
        first_s = time.perf_counter() - start
        records = tf_ucudnn.plans()[before:]
        counted = [table_reuse(r) for r in records]
        times = []
        for _ in range(args.repeats):
            harness.sync_devices()
            start = time.perf_counter()
            model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0, shuffle=False)
            harness.sync_devices()
            times.append(1e3 * (time.perf_counter() - start) / args.steps)
        print(json.dumps(dict(
            model=args.model, xla=args.xla, batch=batch, first_step_s=round(first_s, 3),
            planning_s=round(sum(r["planning_ms"] or 0 for r in records) / 1e3, 3),
            kernels=len(records), cold_kernels=sum(c is None for c in counted),
            sizes_benchmarked_by_seeded_kernels=sum(c[1] for c in counted if c is not None),
            step_ms=round(statistics.median(times), 3), step_ms_repeats=[round(t, 3) for t in times],
            gpus=gpus)), flush=True)


if __name__ == "__main__":
    main()
