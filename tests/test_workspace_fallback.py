"""When a cached plan's workspace cannot be allocated, the kernel runs the fastest
benchmarked plan that fits, logs that once, and the result is still right (GPU)."""

import json
import textwrap

import pytest
import tensorflow as tf

from testing_utils import CAPPED_5X5_CHILD, run_python

# The GPU is capped, planned with room to spare, then nearly filled by another
# tensor so that the plan's workspace no longer fits. Runs in a child so the cap
# applies before TensorFlow initialises the GPU.
_CHILD = CAPPED_5X5_CHILD + textwrap.dedent("""
    with tf.device("/GPU:0"):
        x = tf.constant(x_host)
        w = tf.constant(w_host)
        conv = lambda: tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit=2 << 30)
        first = conv().numpy()
        planned = tf_ucudnn.plans()[-1]["workspace_bytes"]
        # Leave free the output, half of the plan's workspace and 64 MiB of
        # slack (the filter copy and the allocator's fragmentation): the plan
        # no longer fits.
        blocks = fill_gpu(first.nbytes + planned // 2 + (64 << 20))
        hog_bytes = len(blocks) * (16 << 20)
        second = conv().numpy()
        del blocks
    print(json.dumps(dict(planned=planned, hog=hog_bytes, first=rel(first), second=rel(second))))
""")


@pytest.mark.gpu
class WorkspaceFallbackTest(tf.test.TestCase):

    def test_unallocatable_workspace_falls_back_to_a_plan_that_fits(self):
        done = run_python(_CHILD, TF_CPP_MIN_LOG_LEVEL="1")  # WARNING, the fallback message
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertGreater(result["planned"], 64 << 20,
                           f"the plan needs too little workspace to force a fallback: {result}")
        self.assertLessEqual(result["first"], 1e-5, result)
        self.assertLessEqual(result["second"], 1e-5, result)
        self.assertEqual(done.stderr.count("running a plan that needs"), 1,
                         f"expected one fallback message; stderr tail:\n{done.stderr[-2000:]}")


# workspace_limit="auto": planned within what the capped GPU has free, then
# run again with the GPU nearly filled (as above): the kernel takes the fastest
# planned plan that fits what is free, without a failed allocation (whose
# retries under XLA would stall), and says so once.
_AUTO_CHILD = CAPPED_5X5_CHILD + textwrap.dedent("""
    jit = sys.argv[1] == "xla"
    with tf.device("/GPU:0"):
        x = tf.constant(x_host)
        w = tf.constant(w_host)
        conv = tf.function(lambda x, w: tf_ucudnn.conv2d(x, w, 1, "SAME", workspace_limit="auto"),
                           jit_compile=jit)
        first = conv(x, w).numpy()
        record = [r for r in tf_ucudnn.plans() if "GPU" in r["device"]][-1]
        blocks = fill_gpu(first.nbytes + record["workspace_bytes"] // 2 + (64 << 20))
        start = time.perf_counter()
        second = conv(x, w).numpy()
        second_s = time.perf_counter() - start
        del blocks
    print(json.dumps(dict(record=record, first=rel(first), second=rel(second),
                          second_s=second_s)))
""")


@pytest.mark.gpu
class AutoWorkspaceLimitTest(tf.test.TestCase):

    def _run(self, mode):
        done = run_python(_AUTO_CHILD, argv=[mode], TF_CPP_MIN_LOG_LEVEL="1")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr

    def test_auto_plans_within_free_memory_and_steps_down_when_it_shrinks(self):
        for mode in ("tf", "xla"):
            result, stderr = self._run(mode)
            record = result["record"]
            self.assertIn("workspace_limit=auto: planned within", record["note"], record)
            # Planned within what a 6 GiB cap had free, less the margin.
            self.assertGreater(record["workspace_limit"], 1 << 30, record)
            self.assertLess(record["workspace_limit"], 6 << 30, record)
            self.assertLessEqual(record["workspace_bytes"], record["workspace_limit"], record)
            self.assertGreater(record["workspace_bytes"], 64 << 20,
                               f"{mode}: auto should let a large-workspace plan in: {record}")
            self.assertLessEqual(result["first"], 1e-5, result)
            self.assertLessEqual(result["second"], 1e-5, result)
            self.assertEqual(stderr.count("I tf_ucudnn: workspace_limit=auto:"), 1,
                             f"{mode}: one step-down message; stderr tail:\n{stderr[-2000:]}")
            self.assertNotIn("could not allocate", stderr, f"{mode}: no failed allocation")
            # No retries of a failed allocation (TF's allocator waits up to 10 s).
            self.assertLess(result["second_s"], 5.0, f"{mode}: {result}")


# A small CNN trained for a few steps under the rewrite at a workspace limit
# (argv[1]), with TF's GPU allocator capped at argv[2] MiB (0: no cap); prints
# whether it trained and its peak memory.
_TRAIN_CHILD = textwrap.dedent("""
    import json, sys, numpy as np, tensorflow as tf
    limit, cap_mib = sys.argv[1], int(sys.argv[2])
    gpu = tf.config.list_physical_devices("GPU")[0]
    if cap_mib:
        tf.config.set_logical_device_configuration(
            gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=cap_mib)])
    import keras, tf_ucudnn
    L = keras.layers
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64, 64, 3)),
                              L.Conv2D(64, 3, padding="same", activation="relu"),
                              L.Conv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(),
                              L.Conv2D(128, 3, padding="same", activation="relu"),
                              L.Conv2D(128, 3, padding="same", activation="relu"),
                              L.GlobalAveragePooling2D(), L.Dense(10)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
    rng = np.random.default_rng(0)
    data = tf.data.Dataset.from_tensors((rng.standard_normal((256, 64, 64, 3)).astype("float32"),
                                         rng.integers(0, 10, 256))).repeat()
    tf_ucudnn.enable_rewrite(workspace_limit=limit if limit == "auto" else int(limit))
    try:
        model.fit(data, steps_per_epoch=3, epochs=1, verbose=0)
        outcome = "trained"
    except tf.errors.ResourceExhaustedError:
        outcome = "oom"
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    print(json.dumps(dict(outcome=outcome, peak=peak)))
""")


@pytest.mark.gpu
class AutoUnderAMemoryCapTest(tf.test.TestCase):

    def _train(self, limit, cap_mib):
        done = run_python(_TRAIN_CHILD, argv=[limit, str(cap_mib)], UCUDNN_DATABASE="off")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        return json.loads(done.stdout.strip().splitlines()[-1])

    def test_auto_trains_where_a_64_mib_limit_trains_at_a_tight_cap(self):
        free = self._train(str(64 << 20), 0)
        self.assertEqual(free["outcome"], "trained", free)
        # A cap 15% (and 64 MiB) above what the 64 MiB run held at its peak.
        cap = int(free["peak"] * 1.15) // (1 << 20) + 64
        fixed = self._train(str(64 << 20), cap)
        self.assertEqual(fixed["outcome"], "trained", f"64 MiB at a {cap} MiB cap: {fixed}")
        auto = self._train("auto", cap)
        self.assertEqual(auto["outcome"], "trained",
                         f"auto at a {cap} MiB cap where 64 MiB trained ({fixed}): {auto}")
        self.assertLessEqual(auto["peak"], cap << 20, auto)
