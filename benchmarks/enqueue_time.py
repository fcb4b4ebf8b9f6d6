"""Does a tf_ucudnn op block the host until the GPU catches up? Host time to
enqueue 100 calls of one pass (no sync inside the timed region) against the
GPU time of the same 100 calls, stock TF and tf_ucudnn, on DeepBench's
vision_18 (64>128 112x112, N=256: about 1-3 ms of GPU work per pass, far more
than the host's dispatch). An asynchronous op enqueues in a fraction of the
GPU time; a blocking one takes as long as the GPU.

    python benchmarks/enqueue_time.py   # on a GPU machine
"""
import time

import tensorflow as tf

from tf_ucudnn import bench

layer = bench.ConvLayer(("deepbench/vision_18_3x3",), 64, 112, 112, 128, 3, 3, 1, 1, 1, 1)
x, w, dy = bench.random_tensors(layer, 256, "NHWC", tf.float32)
for name in bench.PASSES:
    for mode in ("stock", "ucudnn"):
        knobs = dict(workspace_limit=256 << 20) if mode == "ucudnn" else {}
        fn = tf.function(bench.make_passes(mode, layer, 256, "NHWC", passes=(name,), **knobs))
        with tf.device("/GPU:0"):
            for _ in range(5):
                fn(x, w, dy)
            bench.sync_devices()
            start = time.perf_counter()
            for _ in range(100):
                fn(x, w, dy)
            enqueued = time.perf_counter() - start
            bench.sync_devices()
            done = time.perf_counter() - start
        print(f"{name:16s} {mode:7s} host enqueue {1e3 * enqueued / 100:.3f} ms/call, "
              f"until the GPU is done {1e3 * done / 100:.3f} ms/call", flush=True)
