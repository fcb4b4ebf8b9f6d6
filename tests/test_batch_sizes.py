"""One benchmark table per convolution, whatever N: a kernel of a new mini-batch
size (the partial last batch of an epoch, `evaluate` or `predict` at another
batch size) plans from the micro-batch sizes already measured and benchmarks
only the sizes that table lacks, with the results of a cold plan."""

import json
import re

import pytest
import tensorflow as tf

from testing_utils import CAPPED_5X5_CHILD, run_python
from tf_ucudnn.plan_registry import table_reuse

# Training, evaluation and prediction of one convolution at four mini-batch
# sizes in a fresh process; prints each kernel's N, pass, whether it took the
# stored table, its sizes, each plan's note, and the errors against Keras.
_CHILD = """
    import json, numpy as np, tensorflow as tf, keras, tf_ucudnn
    from tf_ucudnn import _engine
    tf.config.experimental.enable_tensor_float_32_execution(False)
    keras.utils.set_random_seed(0)
    x = np.random.rand(100, 24, 24, 16).astype("float32")
    y = np.random.rand(100, 24, 24, 32).astype("float32")
    def build(conv):
        return keras.Sequential([keras.Input((24, 24, 16)), conv(32, 3, padding="same")])
    model = build(lambda *a, **k: tf_ucudnn.layers.Conv2D(*a, workspace_limit=16 << 20, **k))
    ref = build(keras.layers.Conv2D)
    for m in (model, ref):
        m.compile("sgd", "mse", jit_compile=False)
    ref.set_weights(model.get_weights())
    model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)  # N = 32, 32, 32, 4
    ref.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    w, w_ref = model.get_weights()[0], ref.get_weights()[0]
    weights_err = float(np.linalg.norm(w - w_ref) / np.linalg.norm(w_ref))
    ref.set_weights(model.get_weights())
    loss, ref_loss = (m.evaluate(x, y, batch_size=20, verbose=0) for m in (model, ref))
    pred, ref_pred = (m.predict(x, batch_size=50, verbose=0) for m in (model, ref))
    kernels = [dict(n=k["key"]["conv"]["batch"], kind=k["pass"], seeded=k["seeded"],
                    sizes=sorted({r["size"] for r in k["table"]})) for k in _engine.kernels()]
    records = [dict(n=r["batch"], kind=r["pass"], note=r["note"]) for r in tf_ucudnn.plans()]
    print(json.dumps(dict(
        kernels=kernels, records=records, weights_err=weights_err,
        loss_err=abs(loss - ref_loss) / ref_loss,
        pred_err=float(np.linalg.norm(pred - ref_pred) / np.linalg.norm(ref_pred)))))
"""

_NOTE = re.compile(r"stored benchmark table: (\d+) of (\d+) sizes(?:, (\d+) benchmarked)?")


def power_of_two_sizes(n):
    """The powerOfTwo policy's micro-batch sizes of a mini-batch of n."""
    return sorted({1 << k for k in range(n.bit_length()) if 1 << k <= n} | {n})


class TableReuseTest(tf.test.TestCase):
    """The plan record's note, as benchmarks and users read it."""

    def test_reused_and_benchmarked_sizes_are_read_from_the_note(self):
        for note, want in (("stored benchmark table: 6 of 7 sizes, 1 benchmarked", (6, 1)),
                           ("stored benchmark table: 3 of 3 sizes", (3, 0)),
                           ("workspace_limit=auto: planned within 5 bytes (1 of 2 free); "
                            "stored benchmark table: 0 of 2 sizes, 2 benchmarked", (0, 2)),
                           ("", None), ("benchmarked on GPUs 0, 1", None)):
            with self.subTest(note):
                self.assertEqual(table_reuse(dict(note=note)), want)


@pytest.mark.gpu
class TablesAcrossBatchSizesGpuTest(tf.test.TestCase):

    def test_a_new_batch_size_benchmarks_only_the_sizes_the_table_lacks(self):
        done = run_python(_CHILD, UCUDNN_DATABASE="off", TF_CPP_MIN_LOG_LEVEL="2", timeout=600)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        got = json.loads(done.stdout.strip().splitlines()[-1])
        # Results as Keras gives them, at every N (fp32 without TF32).
        self.assertLessEqual(got["weights_err"], 1e-5, got)
        self.assertLessEqual(got["loss_err"], 1e-5, got)
        self.assertLessEqual(got["pred_err"], 1e-5, got)
        notes = {(r["n"], r["kind"]): r["note"] for r in got["records"]}
        measured = {}  # pass -> the sizes stored so far
        seen = []
        for k in got["kernels"]:
            key, allowed = (k["n"], k["kind"]), power_of_two_sizes(k["n"])
            seen.append(key)
            self.assertContainsSubset(k["sizes"], allowed, k)
            before = measured.setdefault(k["kind"], set())
            if not before:
                self.assertFalse(k["seeded"], k)  # the first N of a pass plans cold
                self.assertEqual(notes[key], "", k)
            else:
                self.assertTrue(k["seeded"], k)
                match = _NOTE.fullmatch(notes[key])
                self.assertIsNotNone(match, notes[key])
                reused, total, fresh = int(match[1]), int(match[2]), int(match[3] or 0)
                self.assertEqual(total, len(k["sizes"]), (k, notes[key]))
                # Only sizes no kernel of this convolution had measured.
                self.assertEqual(fresh, len(set(k["sizes"]) - before), (k, notes[key], before))
                self.assertEqual(reused, len(set(k["sizes"]) & before), (k, notes[key]))
            before.update(k["sizes"])
        # Training (32 and the last batch's 4), evaluate (20) and predict (50).
        self.assertContainsSubset([(32, "forward"), (4, "forward"), (20, "forward"),
                                   (50, "forward"), (32, "backward-filter"),
                                   (4, "backward-filter")], seen)

    def test_sizes_measured_under_memory_pressure_are_measured_again_with_room(self):
        done = run_python(_PRESSURE_CHILD, TF_CPP_MIN_LOG_LEVEL="2", UCUDNN_DATABASE="off",
                          timeout=600)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        got = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertLessEqual(got["first"], 1e-5, got)
        self.assertLessEqual(got["second"], 1e-5, got)
        first_note, second_note = got["notes"]
        self.assertIn("benchmarked under memory pressure at sizes", first_note, got)
        pressured, = got["stored_first"]
        self.assertNotEmpty(pressured, got)
        # N = 128 measures again every pressured size it may use (all but 256).
        again = [size for size in pressured if size <= 128]
        reuse = table_reuse(dict(note=second_note))
        self.assertIsNotNone(reuse, second_note)
        self.assertGreaterEqual(reuse[1], len(again), got)
        self.assertNotIn("memory pressure", second_note, got)
        left, = got["stored_second"]
        self.assertEqual([size for size in left if size <= 128], [], got)


# A convolution planned while the capped GPU is nearly full (its search
# workspace cannot be allocated in full), then, with the memory back, at
# another N: the sizes measured under pressure are measured again with room.
_PRESSURE_CHILD = CAPPED_5X5_CHILD + """
from tf_ucudnn import _engine
with tf.device("/GPU:0"):
    x, w = tf.constant(x_host), tf.constant(w_host)
    half = tf.constant(x_host[:128])
    conv = lambda inputs: tf_ucudnn.conv2d(inputs, w, 1, "SAME", workspace_limit=2 << 30)
    # Free: the output's bytes and 128 MiB (the filter's copy, the allocator's
    # fragmentation, a small search workspace), not the hundreds of MiB the
    # fast candidates of a 5x5 convolution of 256 samples can use (320 MiB
    # left them room; 48 MiB left none for the filter's copy).
    blocks = fill_gpu(want.nbytes + (128 << 20))
    first = conv(x).numpy()
    stored_first = [t["pressured_sizes"] for t in _engine.tables()]
    del blocks
    second = conv(half).numpy()
stored_second = [t["pressured_sizes"] for t in _engine.tables()]
most_workspace = max(r["workspace_bytes"] for t in _engine.tables() for r in t["table"])
print(json.dumps(dict(notes=[r["note"] for r in tf_ucudnn.plans()],
                      stored_first=stored_first, stored_second=stored_second,
                      most_workspace=most_workspace,
                      first=rel(first), second=rel(second, want[:128]))))
"""


if __name__ == "__main__":
    tf.test.main()
