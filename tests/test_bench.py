"""The benchmark's CPU-side parts: layer sets, arguments, passes, figures, the no-GPU exit."""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from tf_ucudnn import bench
from tf_ucudnn.bench import figures as bench_figures, models as bench_models
from tf_ucudnn.bench.models import runner as models_runner, summary as models_summary
from tf_ucudnn.bench import overhead as bench_overhead, report as bench_report
from testing_utils import rel_l2


class LayerSetTest(tf.test.TestCase):

    def test_deepbench_set_is_its_3x3_and_5x5_training_layers(self):
        layers = bench.layer_set("deepbench")
        self.assertLen(layers, 29)  # distinct shapes of the 3x3 / 5x5 rows
        self.assertTrue(all((l.R, l.S) in ((3, 3), (5, 5)) for l in layers))
        self.assertTrue(all(n.startswith("deepbench/") for l in layers for n in l.names))
        rows = bench.read_layers(bench.DEEPBENCH_CSV)
        self.assertGreater(len(rows), len(layers))  # 1x1 and other filters are left out

    def test_model_sets_and_unknown_names(self):
        self.assertLen(bench.layer_set("alexnet"), 6)
        self.assertLen(bench.layer_set("resnet18"), 11)
        self.assertLen(bench.layer_set("models"), 17)
        with self.assertRaisesRegex(ValueError, "--set"):
            bench.layer_set("lenet")

    def test_a_table_without_the_naming_columns_is_refused(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("C,H,W,K,R,S,pad_h,pad_w,stride_h,stride_w\n3,8,8,4,3,3,1,1,1,1\n")
        with self.assertRaisesRegex(ValueError, "missing columns"):
            bench.read_layers(f.name)


class ArgumentsTest(tf.test.TestCase):

    def test_passes_models_and_totals(self):
        args = bench.parse_args(["layers", "--passes", "backward-filter,forward"])
        self.assertEqual(args.passes, ["forward", "backward-filter"])
        self.assertEqual((args.mode, args.batch, args.iters), ("layers", 256, 10))
        args = bench.parse_args(["models", "--models", "vgg16", "--totals", "256MiB"])
        self.assertEqual((args.models, args.totals, args.limits), (["vgg16"], [256 << 20], []))
        args = bench.parse_args(["models", "--models", "vgg16"])
        self.assertEqual((args.totals, args.limits, args.batch), ([], [64 << 20, 256 << 20], None))
        for bad in (["layers", "--passes", "sideways"], ["models", "--models", "lenet"],
                    ["layers", "--limits", "1.5MiB"], ["models"], ["layers", "--models", "vgg16"],
                    ["layers", "--totals", "256MiB"], ["overhead", "--limits", "64MiB"]):
            with self.subTest(bad=bad):
                with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                    bench.parse_args(bad)

    def test_overhead_takes_one_limit_and_quick_shrinks_the_batch_and_iterations(self):
        args = bench.parse_args(["overhead", "--limit", "64MiB", "--quick"])
        self.assertEqual((args.limit, args.batch, args.iters), (64 << 20, 8, 2))
        self.assertEqual(bench.parse_args(["overhead"]).limit, 8 << 30)

    def test_every_classifier_takes_its_input_size_and_gives_1000_logits(self):
        classifiers = [name for name, spec in bench_models.MODEL_SPECS.items()
                       if spec.task == "classification"]
        self.assertLen(classifiers, 9)
        for name in classifiers:
            with self.subTest(model=name):
                model = bench_models.build_model(name)
                size = bench_models.INPUT_SIZE.get(name, 224)
                self.assertEqual(tuple(model.input_shape), (None, size, size, 3))
                self.assertEqual(tuple(model.output_shape), (None, 1000))
                self.assertTrue(any(type(layer).__name__ == "Conv2D" for layer in model.layers))

    def test_preactivation_models_put_batch_norms_before_convolutions(self):
        import tf_ucudnn

        for name, chains, recorded in (("resnet50v2", 32, 16), ("densenet121", 59, 61)):
            with self.subTest(model=name):
                model = tf_ucudnn.rewrite_model(bench_models.build_model(name, 32),
                                                fuse_batch_norm=True, verbose=0)
                kinds = [type(layer) for layer in model.layers]
                self.assertEqual(kinds.count(tf_ucudnn.layers.Conv2DBatchNorm), chains)
                self.assertEqual(kinds.count(tf_ucudnn.layers.BatchNormalization), recorded)

    def test_recompute_modes_recompute_resnet50s_1x1_outputs(self):
        # The ucudnn-bnrecompute modes: rewrite_model(recompute="1x1") through
        # batch_norm_fused, which marks the fused 1x1 convolutions only.
        import tf_ucudnn

        model = bench_models.build_model("resnet50", 32)
        for recompute, values in ((None, {None}), ("1x1", {True, False})):
            with self.subTest(recompute=recompute):
                fused = bench_models.batch_norm_fused(model, 64 << 20, recompute=recompute)
                chains = [layer for layer in fused.layers
                          if isinstance(layer, tf_ucudnn.layers.Conv2DBatchNorm)]
                chosen = [layer.recompute_output for layer in chains]
                self.assertEqual(set(chosen), values)
                if recompute:  # True exactly on the 1x1 convolutions
                    self.assertEqual(chosen, [layer.conv.kernel_size == (1, 1) for layer in chains])

    def test_each_batch_norm_mode_names_its_arguments(self):
        from tf_ucudnn.bench.models import builders

        calls = []

        def fused(model, workspace_limit, input_prologue=True, recompute=None):
            calls.append((input_prologue, recompute))
            return model

        with mock.patch.object(builders, "batch_norm_fused", fused):
            for mode in ("ucudnn-bn-xla", "ucudnn-bnstats", "ucudnn-bnrecompute-xla"):
                bench_models.batch_norm_fused_for_mode(None, 64 << 20, mode)
        self.assertEqual(calls, [(True, None), (False, None), (True, "1x1")])

    def test_resnet50_nobias_is_resnet50_without_its_convolutions_biases(self):
        import keras

        def convs(model):
            return [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]

        full, bare = bench_models.build_model("resnet50"), bench_models.build_model("resnet50-nobias")
        self.assertEqual([c.filters for c in convs(full)], [c.filters for c in convs(bare)])
        self.assertTrue(all(c.use_bias for c in convs(full)))
        self.assertFalse(any(c.use_bias for c in convs(bare)))
        self.assertEqual(full.count_params() - bare.count_params(),
                         sum(c.filters for c in convs(full)))

    def test_the_memory_bound_models_take_and_give_their_task_s_shapes(self):
        # name: (input, output) at the model's own size; the head: 9 anchors x (20 + 4).
        want = {"unet": ((512, 512, 3), (512, 512, 2)),
                "resnet50-640": ((640, 640, 3), (20, 20, 216)),
                "edsr": ((128, 128, 3), (512, 512, 3))}
        for name, (inputs, outputs) in want.items():
            with self.subTest(model=name):
                model = bench_models.build_model(name)
                self.assertEqual(tuple(model.input_shape), (None, *inputs))
                self.assertEqual(tuple(model.output_shape), (None, *outputs))
                x, y = bench_models.synthetic_batch(name, 2, model.output_shape)
                self.assertEqual(x.shape, (2, *inputs))
                target = {"unet": (2, 512, 512), "resnet50-640": (2, 20, 20, 216),
                          "edsr": (2, 512, 512, 3)}[name]
                self.assertEqual(y.shape, target)

    def test_unet_is_ronneberger_s_layers(self):
        import keras

        model = bench_models.build_model("unet", input_size=32)
        self.assertEqual(tuple(model.output_shape), (None, 32, 32, 2))
        convs = [l for l in model.layers if type(l) is keras.layers.Conv2D]
        ups = [l for l in model.layers if isinstance(l, keras.layers.Conv2DTranspose)]
        self.assertEqual([c.filters for c in convs],
                         [64] * 2 + [128] * 2 + [256] * 2 + [512] * 2 + [1024] * 2
                         + [512] * 2 + [256] * 2 + [128] * 2 + [64] * 2 + [2])
        self.assertEqual([(u.filters, u.kernel_size, u.strides) for u in ups],
                         [(f, (2, 2), (2, 2)) for f in (512, 256, 128, 64)])
        self.assertEqual(model.count_params(), 31031810)  # the paper's "31 million"

    def test_unet_bn_has_the_chains_that_the_batch_norm_rewrite_fuses(self):
        import keras

        import tf_ucudnn

        model = bench_models.build_model("unet-bn", input_size=32)
        self.assertEqual(tuple(model.output_shape), (None, 32, 32, 2))
        self.assertEqual(bench_models.model_spec("unet-bn").input_size, 384)
        convs = [l for l in model.layers if type(l) is keras.layers.Conv2D]
        self.assertLen([l for l in model.layers if type(l) is keras.layers.BatchNormalization],
                       18)
        self.assertEqual(sum(not c.use_bias for c in convs), 18)  # all but the 1x1 head
        fused = tf_ucudnn.rewrite_model(model, fuse_batch_norm=True, verbose=0)
        self.assertLen([l for l in fused.layers
                        if isinstance(l, tf_ucudnn.layers.Conv2DBatchNorm)], 18)
        x, _ = bench_models.synthetic_batch("unet-bn", 2, model.output_shape, input_size=32)
        self.assertAllClose(fused(x, training=False), model(x, training=False), atol=1e-4)

    def test_edsr_baseline_upscales_by_4_through_two_sub_pixel_stages(self):
        model = bench_models.build_model("edsr", input_size=16)
        self.assertEqual(tuple(model.output_shape), (None, 64, 64, 3))
        shuffles = [l for l in model.layers if type(l).__name__ == "DepthToSpace"]
        self.assertLen(shuffles, 2)
        self.assertLen([l for l in model.layers if type(l).__name__ == "Conv2D"],
                       1 + 2 * 16 + 1 + 2 + 1)
        x = np.arange(2 * 2 * 4, dtype=np.float32).reshape(1, 2, 2, 4)
        self.assertAllEqual(shuffles[0](tf.constant(x)), tf.nn.depth_to_space(x, 2))

    def test_each_model_trains_on_its_synthetic_batch_with_its_loss(self):
        """One CPU step of the small EDSR at N=2, with model mode's loss and data: the loss
        is L1 against a [0, 1) target, so finite and positive."""
        model = bench_models.build_model("edsr", input_size=8)
        model.compile(optimizer="sgd", loss=bench_models.loss_for("edsr"), jit_compile=False)
        x, y = bench_models.synthetic_batch("edsr", 2, model.output_shape, input_size=8)
        loss = model.train_on_batch(x, y)
        self.assertTrue(0 < float(loss) < 10, f"L1 loss {loss}")
        for name, kind in (("vgg16", "SparseCategoricalCrossentropy"),
                           ("unet", "SparseCategoricalCrossentropy"),
                           ("resnet50-640", "MeanSquaredError"), ("edsr", "MeanAbsoluteError")):
            self.assertEqual(type(bench_models.loss_for(name)).__name__, kind, name)

    def test_unknown_model_name_raises_value_error(self):
        with self.assertRaisesRegex(ValueError, "unknown model"):
            bench_models.build_model("lenet")


class PassesTest(tf.test.TestCase):

    def test_a_subset_of_passes_matches_stock_tf(self):
        layer = bench.QUICK_LAYERS[1]
        rng = np.random.default_rng(0)
        x = tf.constant(rng.standard_normal((4, layer.H, layer.W, layer.C)), tf.float32)
        w = tf.constant(rng.standard_normal((layer.R, layer.S, layer.C, layer.K)), tf.float32)
        p, q = layer.out_hw
        dy = tf.constant(rng.standard_normal((4, p, q, layer.K)), tf.float32)
        passes = ["forward", "backward-filter"]
        want = bench.make_passes("stock", layer, 4, "NHWC", passes=passes)(x, w, dy)
        got = bench.make_passes("ucudnn", layer, 4, "NHWC", passes=passes, micro_batch_size=3)(x, w, dy)
        self.assertLen(got, 2)
        for a, b in zip(got, want):
            self.assertEqual(a.shape, b.shape)
            self.assertLessEqual(rel_l2(a, b), 1e-5)


class FiguresTest(tf.test.TestCase):

    def test_two_png_figures_from_a_report(self):
        plan = {"micro_batches": [{"size": 128, "algo": "ALGO_1/tensor-op"},
                                  {"size": 128, "algo": "ALGO_0/default"}]}
        rows = [dict(name=f"set/layer{i}", limit=limit, speedup=1.0 + i, plans={
                    "forward": plan, "backward-data": plan, "backward-filter": plan})
                for i in range(3) for limit in (64 << 20, 256 << 20)]
        report = dict(device="test", results=rows,
                      settings=dict(batch=256, data_format="NHWC", dtype="float32"))
        prefix = os.path.join(tempfile.mkdtemp(), "fig")
        paths = bench_figures.draw(report, prefix)
        self.assertEqual(paths, [prefix + "_speedup.png", prefix + "_plans.png"])
        for path in paths:
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


def _layer_report():
    return dict(device="test", settings=dict(batch=8), results=[
        dict(name="a/b", limit=64 << 20, speedup=2.0, plans=None)])


def _run_bench(*argv):
    """``tf-ucudnn bench ARGV`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = bench.main(list(argv))
        except SystemExit as e:
            status = e.code
    return status, out.getvalue(), err.getvalue()


class SubcommandsTest(tf.test.TestCase):
    """One subcommand per mode, each with a help of its own options only."""

    # Options of each mode, and options of other modes that its help must not list.
    OWN = {"layers": (["--set", "--limits", "--policy", "--warmup", "--png"],
                      ["--caps", "--totals", "--models", "--force"]),
           "models": (["--models", "--limits", "--totals", "--xla", "--planning"],
                      ["--caps", "--set", "--warmup", "--force"]),
           "memory-cap": (["--models", "--caps", "--gpus", "--max-batch", "--png"],
                          ["--totals", "--set", "--warmup", "--xla"]),
           "plot": (["--output", "--force", "--compare-limits", "--json"],
                    ["--models", "--caps", "--set", "--limits"]),
           "overhead": (["--set", "--limit ", "--passes", "--iters"],
                        ["--limits", "--models", "--caps", "--png"])}

    def test_the_help_names_every_mode(self):
        status, out, _ = _run_bench("--help")
        self.assertEqual(status, 0)
        self.assertStartsWith(out, "usage: tf-ucudnn bench")
        for mode in self.OWN:
            self.assertIn(f"    {mode}", out)

    def test_each_modes_help_lists_its_options_only(self):
        for mode, (own, others) in self.OWN.items():
            with self.subTest(mode=mode):
                status, out, _ = _run_bench(mode, "--help")
                self.assertEqual(status, 0)
                self.assertStartsWith(out, f"usage: tf-ucudnn bench {mode}")
                for option in own:
                    self.assertIn(option, out)
                for option in others:
                    self.assertNotIn(option, out)
                self.assertNotIn("--worker ", out)  # hidden (--worker-timeout is not)
                self.assertNotIn("--allow-cpu", out)

    def test_no_mode_or_an_unknown_one_exits_2(self):
        status, _, err = _run_bench()
        self.assertEqual(status, 2)
        self.assertIn("MODE", err)
        status, _, err = _run_bench("deepbench")
        self.assertEqual(status, 2)
        self.assertIn("invalid choice: 'deepbench'", err)

    def test_an_option_before_the_mode_says_which_mode_it_belongs_to(self):
        status, _, err = _run_bench("--models", "vgg16", "--memory-cap", "8GiB")
        self.assertEqual(status, 2)
        self.assertIn("name the mode first", err)
        self.assertIn("--memory-cap C -> memory-cap --models M --caps C", err)

    def test_python_m_tf_ucudnn_bench_is_the_same_command(self):
        done = subprocess.run([sys.executable, "-m", "tf_ucudnn.bench", "plot", "--help"],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertStartsWith(done.stdout, "usage: tf-ucudnn bench plot")


class PlotCommandTest(tf.test.TestCase):
    """``tf-ucudnn bench plot``: where its figures go, and without matplotlib."""

    def setUp(self):
        super().setUp()
        self.results = tempfile.mkdtemp()  # where the JSON is (a committed figure may be too)
        self.here = tempfile.mkdtemp()     # the current directory
        self.json = os.path.join(self.results, "r.json")
        with open(self.json, "w") as f:
            json.dump(_layer_report(), f)

    def plot(self, *argv):
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(self.here)
            return _run_bench("plot", *argv)

    def test_figures_go_to_the_current_directory_not_beside_the_json(self):
        status, out, err = self.plot(self.json)
        self.assertEqual(status, 0, err)
        self.assertCountEqual(os.listdir(self.here), ["r_speedup.png", "r_plans.png"])
        self.assertEqual(os.listdir(self.results), ["r.json"])
        self.assertIn("wrote r_speedup.png", out)

    def test_output_names_the_prefix_and_its_folder_is_made(self):
        prefix = os.path.join(self.here, "figures", "deepbench")
        status, _, err = self.plot(self.json, "--output", prefix)
        self.assertEqual(status, 0, err)
        self.assertCountEqual(os.listdir(os.path.dirname(prefix)),
                              ["deepbench_speedup.png", "deepbench_plans.png"])

    def test_an_existing_figure_is_not_overwritten_without_force(self):
        committed = os.path.join(self.results, "r_speedup.png")
        with open(committed, "wb") as f:
            f.write(b"committed")
        status, out, err = self.plot(self.json, "--output", os.path.join(self.results, "r"))
        self.assertEqual(status, 1)
        self.assertIn(f"would overwrite {committed}", err)
        self.assertIn("--force", err)
        with open(committed, "rb") as f:
            self.assertEqual(f.read(), b"committed")
        self.assertNotIn("r_plans.png", os.listdir(self.results))  # nothing drawn
        status, _, err = self.plot(self.json, "--output", os.path.join(self.results, "r"),
                                   "--force")
        self.assertEqual(status, 0, err)
        with open(committed, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_without_matplotlib_it_says_to_install_the_bench_extra(self):
        real_import = __import__

        def no_matplotlib(name, *args, **kwargs):
            if name == "matplotlib" or name.startswith("matplotlib."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return real_import(name, *args, **kwargs)

        with mock.patch("builtins.__import__", no_matplotlib):
            status, out, err = self.plot(self.json)
        self.assertEqual(status, 1)
        self.assertIn("matplotlib, which is not installed", err)
        self.assertIn("pip install 'tf_ucudnn[bench]'", err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(os.listdir(self.here), [])

    def test_an_unreadable_json_is_named(self):
        status, _, err = self.plot(os.path.join(self.results, "missing.json"))
        self.assertEqual(status, 1)
        self.assertIn("cannot read", err)
        self.assertIn("missing.json", err)


class NoGpuTest(tf.test.TestCase):

    def test_without_a_gpu_the_self_check_runs_and_the_exit_status_says_so(self):
        if tf.config.list_physical_devices("GPU"):
            self.skipTest("a GPU is visible")
        self.assertEqual(bench.main(["models", "--models", "vgg16"]), bench.EXIT_NO_GPU)
        self.assertEqual(bench.main(["layers"]), bench.EXIT_NO_GPU)
        self.assertEqual(bench.main(["overhead"]), bench.EXIT_NO_GPU)
        self.assertEqual(bench.main(["memory-cap", "--models", "vgg16", "--caps", "8GiB"]),
                         bench.EXIT_NO_GPU)


class EnvironmentRecordTest(tf.test.TestCase):

    def test_the_json_records_the_variables_that_change_timings(self):
        from unittest import mock
        with mock.patch.dict(os.environ, {"CUDA_MODULE_LOADING": "EAGER",
                                          "UCUDNN_GRAPH_PRUNE_FACTOR": "0",
                                          "TF_CUDNN_WORKSPACE_LIMIT_IN_MB": "64",
                                          "XLA_FLAGS": "--xla_gpu_memory_limit_slop_factor=9",
                                          "CUDA_CACHE_DISABLE": "1",
                                          "UNRELATED_VARIABLE": "1"}):
            variables = bench.describe_environment(on_gpu=False)["variables"]
        self.assertEqual(variables.get("CUDA_MODULE_LOADING"), "EAGER")
        self.assertEqual(variables.get("UCUDNN_GRAPH_PRUNE_FACTOR"), "0")
        self.assertEqual(variables.get("TF_CUDNN_WORKSPACE_LIMIT_IN_MB"), "64")
        self.assertEqual(variables.get("XLA_FLAGS"), "--xla_gpu_memory_limit_slop_factor=9")
        self.assertEqual(variables.get("CUDA_CACHE_DISABLE"), "1")
        self.assertNotIn("UNRELATED_VARIABLE", variables)


class WriteJsonTest(tf.test.TestCase):

    def test_a_write_that_fails_midway_leaves_the_last_file(self):
        from tf_ucudnn.bench import harness
        path = os.path.join(self.get_temp_dir(), "report.json")
        harness.write_json(path, {"runs": 1}, say=False)

        def broken_dump(obj, f, **kwargs):
            f.write('{"runs": ')
            raise KeyboardInterrupt

        with mock.patch.object(harness.json, "dump", broken_dump), \
                self.assertRaises(KeyboardInterrupt):
            harness.write_json(path, {"runs": 2})
        with open(path) as f:
            self.assertEqual(json.load(f), {"runs": 1})


class OverheadTableTest(tf.test.TestCase):

    def test_summary_counts_kernels_within_three_percent(self):
        def row(layer, direct, plan, transform):
            return {"layer": layer, "pass": "forward", "algo": "IMPLICIT_GEMM/default",
                    "direct_ms": direct, "plan_ms": plan, "transform_ms": transform,
                    "direct_host_ms": 0.05, "plan_host_ms": 0.06,
                    "overhead": plan / direct - 1, "overhead_beyond_transform":
                    (plan - transform) / direct - 1}
        rows = [row("a", 1.0, 1.01, 0.005), row("b", 0.1, 0.11, 0.008),
                {"layer": "c", "pass": "forward", "error": "out of memory"}]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            bench_overhead.print_overhead(rows, 8 << 30)
        text = out.getvalue()
        self.assertIn("error: out of memory", text)
        # (1.01 + 0.11) / (1.0 + 0.1) - 1 = 1.8 % over both; b is 10 % alone, 2 % without
        # its filter transform.
        self.assertIn("overhead 1.8% over all 2 kernels' time; 1 of 2 kernels within 3%, "
                      "worst 10.0% (b forward); without the filter transform, worst 2.0%", text)


class ResultTablesTest(tf.test.TestCase):
    """The layer and model tables print through tf_ucudnn.table: one line per row, numbers
    right-aligned, errors in place."""

    def printed(self, fn, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fn(*args)
        return out.getvalue().splitlines()

    def test_layer_table(self):
        row = dict(name="resnet/conv2_1", shape="N=256 C=64 H=56 W=56 K=64 R=3 S=3", limit=64 << 20,
                   stock_ms=12.5, ucudnn_ms=8.25, speedup=12.5 / 8.25, reference_ms=7.0,
                   plan={"forward": "2x128 ALGO_1", "backward-filter": "1x256 ALGO_0"})
        failed = dict(row, name="vgg/conv1", ucudnn_ms=None, speedup=None, plan=None)
        lines = self.printed(bench_report.print_layer_table, [row, failed])
        self.assertLen(lines, 4)
        self.assertTrue(lines[0].startswith("layer"))
        self.assertIn("12.50 8.250 1.52x 7.000 F: 2x128 ALGO_1 | W: 1x256 ALGO_0",
                      " ".join(lines[2].split()))
        for title, value in (("stock ms", "12.50"), ("tf_ucudnn ms", "8.250"), ("speedup", "1.52x")):
            self.assertEqual(lines[0].index(title) + len(title), lines[2].index(value) + len(value),
                             f"{value} right-aligned under {title}")
        self.assertIn("error", lines[3])

    def test_model_table(self):
        stock = dict(model="vgg16", mode="stock", bytes=bench_models.REFERENCE_LIMIT, step_ms=100.0,
                     first_step_s=3.0, peak_bytes=6 << 30, run_peak_bytes=7 << 30)
        ours = dict(stock, mode="rewrite", bytes=64 << 20, step_ms=80.0)
        broken = dict(model="alexnet", mode="rewrite-wd", bytes=64 << 20, error="out of memory")
        lines = self.printed(bench_models.print_table, [stock, ours, broken])
        self.assertLen(lines, 5)
        self.assertIn("tf_ucudnn WR (per kernel) at 64 MiB", lines[3])
        self.assertTrue(lines[3].endswith("80.0           0.80x          3.00      6.00"
                                          "          7.00"), lines[3])  # right-aligned
        self.assertIn("error", lines[4])


def test_launch_extra_env_adds_and_overrides_the_worker_environment(monkeypatch):
    """extra_env reaches the worker's environment and may override the
    variables launch sets itself (stock TF's cuDNN workspace limit)."""
    seen = {}

    def fake_run(cmd, env, **kwargs):
        seen.update(cmd=cmd, env=env)
        return subprocess.CompletedProcess(cmd, 0, stdout='RESULT {"step_ms": 1.0}\n', stderr="")

    monkeypatch.setattr(models_runner.subprocess, "run", fake_run)
    result = models_runner.launch("vgg16", "stock-xla", 64 << 20, 8, 5)
    assert result == {"step_ms": 1.0}
    assert seen["env"]["TF_CUDNN_WORKSPACE_LIMIT_IN_MB"] == "64"
    assert seen["env"]["UCUDNN_DATABASE"] == "off"
    models_runner.launch("vgg16", "stock-xla", 64 << 20, 8, 5,
                         extra_env={"TF_CUDNN_WORKSPACE_LIMIT_IN_MB": "512", "XLA_FLAGS": "--x"})
    assert seen["env"]["TF_CUDNN_WORKSPACE_LIMIT_IN_MB"] == "512"
    assert seen["env"]["XLA_FLAGS"] == "--x"
    # The worker's own limit (tf_ucudnn's) stays the argument.
    assert seen["cmd"][-5:] == ["vgg16", "stock-xla", str(64 << 20), "8", "float32"]


def test_model_modes_select_the_settings_that_run(monkeypatch):
    """--modes keeps only the named settings, run in its order; --xla adds the two XLA
    settings."""

    launched = []

    def fake_launch(model, mode, bytes_, batch, timeout, extra_env=None, precision="float32"):
        launched.append((model, mode, bytes_))
        return dict(model=model, mode=mode, bytes=bytes_, batch=batch, step_ms=1.0,
                    first_step_s=1.0, peak_bytes=1, run_peak_bytes=1)

    monkeypatch.setattr(models_runner, "launch", fake_launch)
    bench_models.run_models(["vgg16"], [64 << 20], [], xla=True)
    assert [m for _, m, _ in launched] == ["stock", "stock", "rewrite", "stock-xla", "ucudnn-xla"]
    launched.clear()
    bench_models.run_models(["vgg16"], [64 << 20], [64 << 20], xla=True,
                            modes=["rewrite", "rewrite-wd"])
    assert launched == [("vgg16", "rewrite", 64 << 20), ("vgg16", "rewrite-wd", 64 << 20)]
    launched.clear()  # rewrite-layout runs only when named
    bench_models.run_models(["vgg16"], [64 << 20], [], modes=["stock", "rewrite", "rewrite-layout"])
    assert [m for _, m, _ in launched] == ["stock", "stock", "rewrite", "rewrite-layout"]
    launched.clear()  # so does ucudnn-xla-buffer, with --xla
    bench_models.run_models(["vgg16"], [64 << 20], [], xla=True,
                            modes=["stock-xla", "ucudnn-xla", "ucudnn-xla-buffer"])
    assert [m for _, m, _ in launched] == ["stock-xla", "ucudnn-xla", "ucudnn-xla-buffer"]
    launched.clear()  # and the batch-norm modes
    bench_models.run_models(["resnet50"], [64 << 20], [], xla=True,
                            modes=["stock-xla", "ucudnn-bn-xla", "ucudnn-bnrecompute-xla"])
    assert [m for _, m, _ in launched] == ["stock-xla", "ucudnn-bn-xla", "ucudnn-bnrecompute-xla"]
    launched.clear()  # in the order of --modes, each mode's limits as given
    bench_models.run_models(["resnet50"], [256 << 20, 64 << 20], [], xla=True,
                            modes=["ucudnn-bnstats-xla", "stock-xla"])
    assert [(m, b) for _, m, b in launched] == [
        ("ucudnn-bnstats-xla", 256 << 20), ("ucudnn-bnstats-xla", 64 << 20),
        ("stock-xla", models_runner.REFERENCE_LIMIT)]


def test_model_precision_reaches_every_worker_and_the_labels(monkeypatch):

    seen = []

    def fake_launch(model, mode, bytes_, batch, timeout, extra_env=None, precision="float32"):
        seen.append(precision)
        return dict(model=model, mode=mode, bytes=bytes_, batch=batch, step_ms=1.0,
                    first_step_s=1.0, peak_bytes=1, run_peak_bytes=1, precision=precision)

    monkeypatch.setattr(models_runner, "launch", fake_launch)
    results = bench_models.run_models(["vgg16"], [64 << 20], [], precision="mixed_bfloat16")
    assert seen and set(seen) == {"mixed_bfloat16"}
    assert all(models_summary._label(r).endswith(", mixed_bfloat16") for r in results)


def test_layer_rows_join_the_workers_results_and_flag_a_wrong_result():
    """collect_rows (the step after every worker ran): speedups from the
    workers' times, and a tf_ucudnn result beyond the tolerance reported."""
    import argparse
    import json as json_

    from tf_ucudnn.bench import layers as layer_bench

    first, second = layer_bench.layer_set("deepbench")[:2]
    limit = 64 << 20
    args = argparse.Namespace(limits=[limit], dtype="float32", tf32="off")
    key = lambda layer: json_.dumps(layer.shape_key)  # noqa: E731
    measured = {("stock", layer_bench.REFERENCE_LIMIT): {key(first): dict(ms=1.0),
                                                         key(second): dict(ms=1.0)},
                ("stock", limit): {key(first): dict(ms=4.0), key(second): dict(ms=2.0)},
                ("ucudnn", limit): {key(first): dict(ms=2.0, max_rel_err=0.0),
                                    key(second): dict(ms=1.0, max_rel_err=1.0)}}
    workers = [dict(mode=m, limit=b, rc=0) for m, b in measured]
    rows, errors, check_failures = layer_bench.collect_rows([first, second], args, measured,
                                                            workers)
    assert [r["speedup"] for r in rows] == [2.0, 2.0]
    assert errors == []
    assert len(check_failures) == 1 and second.name in check_failures[0], check_failures


def test_model_runs_repeat_every_setting_and_the_table_gives_medians(monkeypatch, capsys):
    """--runs K: K processes per setting and K cold/warm planning pairs, each
    pair with a database of its own; the table and the summary give medians."""
    launched = []
    first_steps = iter([3.0, 9.0, 4.0,  # stock 8 GiB
                        1.0, 1.0, 1.0,  # stock 64 MiB
                        2.0, 8.0, 5.0,  # rewrite
                        7.0, 1.0, 6.0, 2.0, 5.0, 3.0])  # planning: cold, warm per pair

    def fake_launch(model, mode, bytes_, batch, timeout, extra_env=None, precision="float32"):
        launched.append((mode, (extra_env or {}).get("UCUDNN_DATABASE")))
        first = next(first_steps)
        return dict(model=model, mode=mode, bytes=bytes_, batch=batch, precision=precision,
                    step_ms=10.0 * first, first_step_s=first, peak_bytes=int(first) << 30,
                    run_peak_bytes=int(first) << 30, from_database=0, kernels_planned=1)

    monkeypatch.setattr(models_runner, "launch", fake_launch)
    results = bench_models.run_models(["vgg16"], [64 << 20], [], planning=True,
                                      modes=["stock", "rewrite"], runs=3)
    assert [m for m, _ in launched[:9]] == ["stock"] * 6 + ["rewrite"] * 3
    assert len(results) == 15 and [r["run"] for r in results[:3]] == [0, 1, 2]
    databases = [db for _, db in launched[9:]]
    assert all(databases) and databases[0] == databases[1] != databases[2] == databases[3]
    rows = {(r["mode"], r["bytes"], r.get("planning")): r
            for r in bench_models.summarize(results)}
    assert len(rows) == 5
    stock = rows[("stock", bench_models.REFERENCE_LIMIT, None)]
    assert stock["first_step_s"] == 4.0  # median of 3, 9, 4
    assert stock["step_ms"] == 40.0
    assert stock["peak_bytes"] == 9 << 30  # the largest
    rows = {(mode, planning): r for (mode, _, planning), r in rows.items() if mode == "rewrite"}
    assert rows[("rewrite", None)]["first_step_runs_s"] == [2.0, 8.0, 5.0]
    assert rows[("rewrite", "cold")]["first_step_s"] == 6.0  # 7, 6, 5
    assert rows[("rewrite", "warm")]["first_step_s"] == 2.0  # 1, 2, 3
    out = capsys.readouterr().out
    assert "planning cold: median first step 6.00 s of 3 runs (7.00, 6.00, 5.00)" in out
    stock_line = [l for l in out.splitlines() if "stock TF at 8 GiB, median of 3 runs" in l]
    assert len(stock_line) == 1 and "4.00" in stock_line[0], out


def test_summarize_keeps_a_setting_whose_runs_all_failed():
    ok = dict(model="vgg16", mode="rewrite", bytes=1, step_ms=2.0, first_step_s=1.0,
              peak_bytes=1, run_peak_bytes=1)
    failed = dict(model="vgg16", mode="stock", bytes=1, error="exit status 1")
    rows = bench_models.summarize([failed, ok, dict(ok, error="timed out")])
    assert rows[0]["runs"] == 0 and rows[0]["error"] == "exit status 1"
    assert rows[1]["runs"] == 1 and rows[1]["first_step_s"] == 1.0
    with pytest.raises(ValueError, match="runs must be at least 1"):
        bench_models.run_models(["vgg16"], [], [], runs=0)
