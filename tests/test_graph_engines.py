"""cuDNN graph-API engines as plan candidates (UCUDNN_ENGINES).

On the GPU, with UCUDNN_ENGINES=graph every micro-batch runs a graph-API
engine (cudnnBackendExecute), and forward, backward-data and backward-filter
still equal TensorFlow's convolution for every plan: forced micro-batches with
a remainder (backward-filter accumulates with beta = 1 after the first),
asymmetric padding, NHWC and NCHW, one input channel, 1x1 filters, float32
without TF32 and float16. The same holds with UCUDNN_GRAPH_LAYOUTS=transposed,
where every micro-batch computes in the other layout through transposed
copies in the workspace (or none, where a tensor's two layouts are the same
memory). Forward passes with a bias (Ucudnn>Conv2DWithBias) run graphs
with the bias add after the convolution, and with a ReLU after the add, in
both layouts. The whole GPU
equivalence grid of test_nn.py passes with graph engines alone. With the
default (all) both kinds compete in one benchmark table. UCUDNN_GRAPH_SEARCH=wide
proposes more candidates than the default and no more than exhaustive, and its
plans match TensorFlow too. A bad value is an
InvalidArgumentError on any device.
"""

import json
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

import tf_ucudnn
from testing_utils import ROOT, run_python

# Each case: forward + both gradients through tf.GradientTape against the
# composed CPU reference; prints the errors and every GPU plan's algorithms.
_CHILD = """
    import json, sys, numpy as np, tensorflow as tf
    sys.path.insert(0, "tests")
    tf.config.experimental.enable_tensor_float_32_execution(False)
    import tf_ucudnn
    from testing_utils import explicit_padding, random_tensor, reference_conv2d, rel_l2
    cases = [
        # (name, (N, H, W, C, K, R, S), stride, padding, data_format, dtype, micro_batch_size)
        ("nhwc_same_remainder", (8, 12, 12, 16, 32, 3, 3), 1, "SAME", "NHWC", "float32", 3),
        ("nchw_same_remainder", (8, 12, 12, 16, 32, 3, 3), 1, "SAME", "NCHW", "float32", 3),
        ("nhwc_asymmetric_stride2", (6, 10, 10, 8, 16, 3, 3), 2, "SAME", "NHWC", "float32", 4),
        ("nchw_explicit", (5, 9, 11, 8, 8, 3, 2), 1, ((1, 0), (0, 2)), "NCHW", "float32", 2),
        ("nhwc_planner", (16, 14, 14, 32, 32, 5, 5), 1, "SAME", "NHWC", "float32", None),
        ("nhwc_half_remainder", (8, 12, 12, 16, 32, 3, 3), 1, "SAME", "NHWC", "float16", 3),
        ("nhwc_one_channel_5x5", (8, 23, 40, 1, 16, 5, 5), 2, ((1, 1), (1, 1)), "NHWC", "float32", 3),
        ("nchw_1x1_remainder", (6, 7, 7, 16, 24, 1, 1), 1, "VALID", "NCHW", "float32", 4),
        # With a bias (Ucudnn>Conv2DWithBias): the graph's pointwise add.
        # Shapes of their own: gradient kernels of a shape seen before plan
        # nothing new, and every case checks the plans of all three passes.
        ("bias_nhwc_same_remainder", (9, 12, 12, 16, 32, 3, 3), 1, "SAME", "NHWC", "float32", 4),
        ("bias_nchw_explicit", (6, 9, 11, 8, 8, 3, 2), 1, ((1, 0), (0, 2)), "NCHW", "float32", 4),
        ("bias_nhwc_planner", (16, 14, 14, 32, 24, 5, 5), 1, "SAME", "NHWC", "float32", None),
        ("bias_nhwc_half_remainder", (9, 12, 12, 16, 32, 3, 3), 1, "SAME", "NHWC", "float16", 4),
        # With bias and ReLU: the add, then a pointwise ReLU.
        ("bias_relu_nhwc_same_remainder", (10, 12, 12, 16, 32, 3, 3), 1, "SAME", "NHWC", "float32", 4),
        ("bias_relu_nchw_explicit", (7, 9, 11, 8, 8, 3, 2), 1, ((1, 0), (0, 2)), "NCHW", "float32", 4),
        ("bias_relu_nhwc_half_remainder", (10, 12, 12, 16, 32, 3, 3), 1, "SAME", "NHWC", "float16", 4),
    ]
    rng = np.random.default_rng(1804)
    out = {}
    for name, (n, h, w, c, k, r, s), stride, padding, fmt, dtype, mb in cases:
        tf_ucudnn.clear_plans()
        dtype = tf.as_dtype(dtype)
        x, x32 = random_tensor(rng, (n, h, w, c) if fmt == "NHWC" else (n, c, h, w), dtype)
        f, f32 = random_tensor(rng, (r, s, c, k), dtype)
        b, b32 = random_tensor(rng, (k,), dtype)
        bias, relu = name.startswith("bias_"), name.startswith("bias_relu_")
        op_padding = padding if isinstance(padding, str) else explicit_padding(padding, fmt)
        with tf.device("/GPU:0"), tf.GradientTape() as tape:
            tape.watch([x, f])
            y = tf_ucudnn.conv2d(x, f, stride, op_padding, fmt, micro_batch_size=mb,
                                 bias=b if bias else None, activation="relu" if relu else None)
        dy, dy32 = random_tensor(rng, y.shape, dtype)
        dx, df = tape.gradient(y, [x, f], output_gradients=dy)
        if relu:  # the reference's gradients where the op's output is positive (as TF's Relu)
            dy32 = dy32 * tf.cast(y > 0, tf.float32)
        with tf.device("/CPU:0"), tf.GradientTape() as tape:
            tape.watch([x32, f32])
            y_ref = reference_conv2d(x32, f32, stride, padding, fmt)
            if bias:
                y_ref = tf.nn.bias_add(y_ref, b32, data_format=fmt)
        dx_ref, df_ref = tape.gradient(y_ref, [x32, f32], output_gradients=dy32)
        if relu:
            y_ref = tf.nn.relu(y_ref)
        out[name] = dict(
            errors=[rel_l2(y, y_ref), rel_l2(dx, dx_ref), rel_l2(df, df_ref)],
            plans={p["pass"]: [(m["size"], m["algo"]) for m in p["micro_batches"]]
                   for p in tf_ucudnn.plans() if "GPU" in p["device"]})
    print(json.dumps(out))
"""


def _run_child(engines, **env):
    done = run_python(_CHILD, pythonpath=ROOT, UCUDNN_ENGINES=engines, **env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
class GraphEnginesGpuTest(tf.test.TestCase):

    def assertMatchesTensorflow(self, result, suffix):
        for name, case in result.items():
            # float32 without TF32: summation order only. float16: rounding of
            # inputs and outputs to 11 bits (see testing_utils.TOLERANCE).
            tol = 2e-3 if "half" in name else 1e-5
            for what, error in zip(("forward", "backward-data", "backward-filter"),
                                   case["errors"]):
                self.assertLessEqual(error, tol, f"{name} {what}: {case}")
            self.assertCountEqual(case["plans"], ["forward", "backward-data", "backward-filter"])
            for pass_name, steps in case["plans"].items():
                for size, algo in steps:
                    self.assertTrue(algo.startswith("eng") and algo.endswith(suffix),
                                    f"{name} {pass_name}: micro-batch of {size} ran {algo}")

    def test_graph_engines_alone_match_tensorflow_for_every_plan(self):
        result = _run_child("graph", UCUDNN_GRAPH_LAYOUTS="native")
        self.assertMatchesTensorflow(result, "}")
        # The forced plans really are split, with a remainder where N % k != 0.
        self.assertEqual([size for size, _ in result["nhwc_same_remainder"]["plans"][
            "backward-filter"]], [3, 3, 2])

    def test_transposed_graph_engines_match_tensorflow_for_every_plan(self):
        # Inputs transposed into the workspace, outputs back (backward-filter
        # adds to the gradient after the first micro-batch), or no copy where
        # the layouts coincide (one channel; 1x1 filters).
        result = _run_child("graph", UCUDNN_GRAPH_LAYOUTS="transposed")
        self.assertMatchesTensorflow(result, "}/transposed")
        self.assertEqual([size for size, _ in result["nchw_1x1_remainder"]["plans"][
            "backward-filter"]], [4, 2])

    def _legacy_table(self, channels=32, **env):
        """A kernel of N = 32 and ``channels`` input channels, planned anew
        with the debug output on: its legacy rows' times by micro-batch size
        ({size: [ms, ...]}) and the debug log."""
        done = run_python(f"""
            import json, numpy as np, tensorflow as tf
            import tf_ucudnn
            from tf_ucudnn.division import kernels
            x = tf.random.normal((32, 14, 14, {channels}))
            f = tf.random.normal((3, 3, {channels}, 32))
            with tf.device("/GPU:0"):
                tf_ucudnn.conv2d(x, f, 1, "SAME")
            kernel = kernels()[0]
            graph = ["engine" in a for a in kernel["algos"]]
            legacy = {{}}
            for row in kernel["table"]:
                if not graph[row["algo"]]:
                    legacy.setdefault(row["size"], []).append(row["time_ms"])
            print(json.dumps(legacy))
        """, pythonpath=ROOT, UCUDNN_DATABASE="off", UCUDNN_DEBUG_OUTPUT="1", **env)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        legacy = json.loads(done.stdout.strip().splitlines()[-1])
        return {int(size): times for size, times in legacy.items()}, done.stderr

    def _candidate_sizes(self, channels=32, **env):
        """Micro-batch sizes at which a kernel of N = 32 and ``channels``
        input channels timed legacy algorithms (its table's rows) and graph
        engines (the debug log's "timed at" sizes: an engine a faster legacy
        algorithm dominates leaves no row): {"legacy": [...], "graph": [...]}."""
        legacy, log = self._legacy_table(channels, **env)
        graph = sorted({int(size) for size in re.findall(r"^ timed at (\d+):$", log,
                                                          re.MULTILINE)})
        return dict(legacy=sorted(legacy), graph=graph)

    def test_default_times_legacy_algorithms_below_the_graph_sizes_where_the_limit_binds(self):
        # UCUDNN_ENGINES=auto: graph engines from 8 samples up; legacy
        # algorithms at 1, 2 and 4 samples (powerOfTwo of N = 32) only where
        # the limit kept an engine out at 8 samples or more. 64 MiB keeps none
        # of this small convolution's out; 0 bytes keeps out every engine
        # that needs workspace.
        sizes = self._candidate_sizes()
        self.assertEqual(sizes["legacy"], [], sizes)
        self.assertEqual(sizes["graph"], [8, 16, 32], sizes)
        sizes = self._candidate_sizes(UCUDNN_DEFAULT_WORKSPACE_LIMIT="0")
        self.assertEqual(sizes["legacy"], [1, 2, 4], sizes)
        self.assertEqual(sizes["graph"], [8, 16, 32], sizes)

    def test_default_times_legacy_algorithms_at_every_size_for_a_first_layer(self):
        # cuDNN's image-first-layer kernels (at most 4 input channels) come
        # through its legacy algorithms only: auto times those at every size
        # there, as UCUDNN_ENGINES=all does; from 5 channels on, as above.
        sizes = self._candidate_sizes(channels=4)
        self.assertEqual(sizes["legacy"], [1, 2, 4, 8, 16, 32], sizes)
        self.assertEqual(sizes["graph"], [8, 16, 32], sizes)
        sizes = self._candidate_sizes(channels=5)
        self.assertEqual(sizes["legacy"], [], sizes)
        self.assertEqual(sizes["graph"], [8, 16, 32], sizes)

    def test_legacy_algorithms_are_timed_with_events_where_engines_compete(self):
        # At the sizes where graph engines are timed too (8, 16, 32 of N = 32),
        # cudnnFind's candidates near its fastest are timed again as the
        # engines are, and the table keeps those times; at 1, 2 and 4 (legacy
        # only) cudnnFind's times stay.
        legacy, log = self._legacy_table(channels=4)
        timed = {}
        for block in re.split(r" legacy timed again at ", log)[1:]:
            size, lines = block.split(":\n", 1)
            for ms in re.findall(r"^  \S+: cudnnFind [0-9.]+ ms, timed ([0-9.-]+) ms$", lines,
                                 re.MULTILINE):
                timed.setdefault(int(size), []).append(float(ms))
        self.assertEqual(sorted(timed), [8, 16, 32], log[-3000:])
        for size, times in timed.items():
            for ms in times:
                self.assertGreater(ms, 0)
                # The log prints 3 decimals.
                self.assertTrue(any(abs(ms - t) <= 6e-4 for t in legacy[size]),
                                (size, times, legacy))

    def test_all_times_legacy_algorithms_at_every_size(self):
        sizes = self._candidate_sizes(UCUDNN_ENGINES="all")
        self.assertEqual(sizes["legacy"], [1, 2, 4, 8, 16, 32], sizes)
        self.assertEqual(sizes["graph"], [8, 16, 32], sizes)

    def test_wide_search_matches_tensorflow_for_every_plan(self):
        # UCUDNN_GRAPH_SEARCH=wide: every config of both heuristics lists.
        result = _run_child("graph", UCUDNN_GRAPH_LAYOUTS="native", UCUDNN_GRAPH_SEARCH="wide")
        self.assertMatchesTensorflow(result, "}")

    def _graph_candidates(self, search):
        """Graph-API candidates proposed for the three passes of a float16
        5x5 convolution (DeepBench vision_30's channels, N = 16), summed from
        the debug cost lines ("graph: N candidates")."""
        done = run_python("""
            import tensorflow as tf
            import tf_ucudnn
            x = tf.random.normal((16, 28, 28, 192), dtype=tf.float16)
            f = tf.random.normal((5, 5, 192, 32), dtype=tf.float16)
            with tf.device("/GPU:0"), tf.GradientTape() as tape:
                tape.watch([x, f])
                y = tf_ucudnn.conv2d(x, f, 1, "SAME")
            tape.gradient(y, [x, f])
        """, pythonpath=ROOT, UCUDNN_ENGINES="graph", UCUDNN_GRAPH_SEARCH=search,
            UCUDNN_GRAPH_PRUNE_FACTOR="0", UCUDNN_DATABASE="off", UCUDNN_DEBUG_OUTPUT="1")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        counts = [int(n) for n in re.findall(r"graph: (\d+) candidates", done.stderr)]
        self.assertLen(counts, 3, done.stderr[-3000:])
        return sum(counts)

    def test_wide_search_proposes_more_than_default_and_no_more_than_exhaustive(self):
        # Default: 8 of mode A and 4 of the fallback list per size; wide: all of
        # both (mode A lists up to 37 configs for this convolution on an H200);
        # exhaustive: also every other engine with its default knobs.
        default, wide, exhaustive = (self._graph_candidates(s)
                                     for s in ("default", "wide", "exhaustive"))
        self.assertLess(default, wide)
        self.assertLessEqual(wide, exhaustive)

    def _retimed(self, setting):
        """The debug log's re-timing lines of a 3x3 convolution's three passes
        (N = 32, 64 channels at 56x56, planned with TF32 as ResNet-50's first
        3x3 layer is) and the relative errors of its results against
        tf.nn.conv2d without TF32."""
        done = run_python("""
            import json, numpy as np, tensorflow as tf
            import tf_ucudnn
            rng = np.random.default_rng(0)
            x = tf.constant(rng.standard_normal((32, 56, 56, 64)), tf.float32)
            f = tf.constant(rng.standard_normal((3, 3, 64, 64)), tf.float32)
            def grads(conv):
                with tf.device("/GPU:0"), tf.GradientTape() as tape:
                    tape.watch([x, f])
                    y = conv(x, f, 1, "SAME")
                return [y] + tape.gradient(y, [x, f], output_gradients=y)
            tf.config.experimental.enable_tensor_float_32_execution(False)
            want = grads(tf.nn.conv2d)
            tf.config.experimental.enable_tensor_float_32_execution(True)
            got = grads(tf_ucudnn.conv2d)
            print(json.dumps([float(np.linalg.norm(g - w) / np.linalg.norm(w))
                              for g, w in zip(got, want)]))
        """, pythonpath=ROOT, UCUDNN_GRAPH_RETIME=setting, UCUDNN_DATABASE="off",
            UCUDNN_DEBUG_OUTPUT="1")
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        errors = json.loads(done.stdout.strip().splitlines()[-1])
        return re.findall(r"re-timed [0-9.]+ ms -> [0-9.]+ ms", done.stderr), errors

    def test_candidates_near_the_best_are_timed_again_unless_retime_is_off(self):
        # Three passes at 8, 16 and 32 samples. With TF32, tensor-core
        # configs of one engine differ by a few percent here (an H200 timed
        # two or three within 15 % at each forward size), so some size has
        # two candidates within 15 % of each other; without TF32, once the
        # times left out the host's launch latency, an H200 found none.
        # Bound: TF32 rounds the inputs to 10 mantissa bits (unit roundoff
        # 2^-11, about 4.9e-4 per product), and the gradients take the TF32
        # output as their output gradient, so 5e-3 against float32.
        retimed, errors = self._retimed("on")
        self.assertNotEmpty(retimed)
        self.assertLessEqual(max(errors), 5e-3, errors)
        retimed, errors = self._retimed("off")
        self.assertEmpty(retimed)
        self.assertLessEqual(max(errors), 5e-3, errors)

    def test_equivalence_grid_passes_with_graph_engines_alone(self):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
             os.path.join("tests", "test_nn.py"), "-k", "Conv2dGpuTest"],
            cwd=ROOT, env=dict(os.environ, UCUDNN_ENGINES="graph"), capture_output=True,
            text=True, timeout=1200)
        self.assertEqual(done.returncode, 0, done.stdout[-4000:] + done.stderr[-2000:])
        self.assertIn("passed", done.stdout.strip().splitlines()[-1])


class EngineSetValueTest(tf.test.TestCase):

    def _invalid_argument(self, **env):
        """The InvalidArgument message of a convolution under `env` (stdout)."""
        done = run_python("""
            import tensorflow as tf
            import tf_ucudnn
            try:
                tf_ucudnn.conv2d(tf.ones((1, 4, 4, 1)), tf.ones((3, 3, 1, 1)), 1, "SAME")
            except tf.errors.InvalidArgumentError as e:
                print("InvalidArgument:", e.message)
        """, pythonpath=ROOT, **env)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        return done.stdout

    def test_unknown_value_is_invalid_argument_naming_the_choices(self):
        self.assertIn("UCUDNN_ENGINES must be one of auto, all, legacy, graph; got 'cudnn'",
                      self._invalid_argument(UCUDNN_ENGINES="cudnn"))

    def test_a_bad_retime_value_is_invalid_argument_naming_the_choices(self):
        self.assertIn("UCUDNN_GRAPH_RETIME must be one of on, off; got '5'",
                      self._invalid_argument(UCUDNN_GRAPH_RETIME="5"))

    def test_a_bad_plan_build_thread_count_is_invalid_argument_naming_the_range(self):
        self.assertIn("UCUDNN_PLAN_BUILD_THREADS must be a whole number from 1 to 64; got '0'",
                      self._invalid_argument(UCUDNN_PLAN_BUILD_THREADS="0"))
