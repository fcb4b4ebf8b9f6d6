"""The scripts of benchmarks/ (profiles, fusion bytes, variants, searches,
plan timings) on synthetic traces, modules and workers, without a GPU."""

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from unittest import mock

import numpy as np
import tensorflow as tf

from tf_ucudnn.bench import memory_cap, models as bench_models
from testing_utils import rel_l2


def _gpu_plane(kernel_names):
    """An XSpace with a GPU plane whose event metadata 1, 2, … name
    `kernel_names`, and the plane."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/device:GPU:0")
    for i, kernel in enumerate(kernel_names):
        plane.event_metadata[i + 1].name = kernel
    return space, plane


def _write_trace(space, directory=None):
    """`space` as a trace file in `directory` (a new one by default), which
    it returns."""
    directory = directory or tempfile.mkdtemp()
    with open(os.path.join(directory, "host.xplane.pb"), "wb") as f:
        f.write(space.SerializeToString())
    return directory


def _benchmark_script(test, name):
    """benchmarks/NAME.py (NAME may name a subfolder: "max_pool/sitecustomize")
    as a module, or skips `test` where the checkout's benchmarks/ is not
    beside the tests (make wheel-test copies tests/ alone)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "benchmarks", *name.split("/")[:-1], f"{name.split('/')[-1]}.py")
    if not os.path.exists(path):
        test.skipTest("benchmarks/ is a checkout's, not beside these tests")
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ProfileKindsTest(tf.test.TestCase):
    """benchmarks/xla_profile.py's kernel kinds, from names seen in H200 traces."""

    def test_kernel_names_read_as_their_kind(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        kinds = {
            # XLA's fusions, "convert" in the name included (once read as a convolution).
            "input_convert_reduce_fusion_39": "XLA fusion",
            "loop_select_fusion_1": "XLA fusion",
            "input_scatter_fusion": "XLA fusion",
            "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc":
                "convolution",
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT": "convolution",
            "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolution":
                "convolution",
            "void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, true>":
                "layout transform",
            "void cudnn::ops::nhwcToNchwKernel<float>": "layout transform",
            "MemcpyD2D": "copy / set",
            "Memset 3": "copy / set",
        }
        self.assertEqual({name: xla_profile.kind_of(name) for name in kinds}, kinds)
        parts = {"input_convert_reduce_fusion_39": "reductions",
                 "input_reduce_fusion": "reductions",
                 "loop_select_fusion_1": "elementwise",
                 "loop_convert_fusion_4": "elementwise"}
        self.assertEqual({name: xla_profile.fusion_part(name) for name in parts}, parts)


class ProfileLayersTest(tf.test.TestCase):
    """benchmarks/xla_profile.py's per-layer times, from the annotation XLA's
    runtime puts around each kernel launch (read back from an XPlane)."""

    def test_op_names_read_as_their_layer(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        names = {
            "gradient_tape/resnet50_1/conv3_block2_1_relu_1/ReluGrad": "conv3_block2_1",
            "resnet50_1/conv3_block2_1_conv_conv3_block2_1_bn_1/Ucudnn_Conv2DWithStatistics":
                "conv3_block2_1",
            "resnet50_1/conv1_pad_1/Pad": "conv1",
            "resnet50_1/conv4_block1_add_1/add": "conv4_block1_add_1",
            # Without the model's scope: the second of three components, else the first.
            "model_7/conv2d_3/Conv2D": "conv2d_3",
            "conv2d_3/Conv2D": "conv2d_3",
            "": "",
        }
        self.assertEqual({n: xla_profile.layer_of(n, "resnet50") for n in names}, names)
        # The scope found by the model's name, however deep.
        self.assertEqual(xla_profile.layer_of("a/b/resnet50/conv1_conv/Conv2D", "resnet50"),
                         "conv1")
        # The benchmark's model "unet-bn" is the Keras model "unet_bn".
        self.assertEqual(xla_profile.layer_of("a/unet_bn_1/up0_2_bn/FusedBatchNormV3", "unet-bn"),
                         "up0_2")

    def test_fusion_bandwidth_from_the_module(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        module = """HloModule step

%fused_computation.1 (p0: f16[8,4], p1: f32[4]) -> f16[8,4] {
  %p0 = f16[8,4]{1,0} parameter(0)
  ROOT %p1 = f16[8,4]{1,0} parameter(1)
}

ENTRY %step (a: f16[1000,1000], b: f32[1000]) -> f16[1000,1000] {
  %a = f16[1000,1000]{1,0} parameter(0)
  %b = f32[1000]{0} parameter(1)
  ROOT %loop_select_fusion.1 = f16[1000,1000]{1,0} fusion(f16[1000,1000]{1,0} %a, f32[1000]{0} %b), kind=kLoop, calls=%fused_computation.1, metadata={op_type="ReluGrad" op_name="gradient_tape/conv1_relu/ReluGrad"}
}
"""
        top = [dict(name="loop_select_fusion_1", ms=0.002, count=2, kind="XLA fusion"),
               dict(name="loop_add_fusion_9", ms=0.5, count=1, kind="XLA fusion"),
               dict(name="sm90_xmma_fprop", ms=0.3, count=1, kind="convolution")]
        xla_profile.add_bandwidth(top, xla_profile.kernel_fusions(module))
        # Two launches of 2 MB read + 4 kB read + 2 MB written, in 2 µs.
        self.assertAlmostEqual(top[0]["gb"], 2 * (2e6 + 4e3 + 2e6) / 1e9)
        self.assertAlmostEqual(top[0]["tb_per_s"], top[0]["gb"] / 0.002)
        self.assertNotIn("gb", top[1])  # not in the module
        self.assertNotIn("gb", top[2])  # no fusion

    def test_slow_fusions_against_the_steps_best_bandwidth(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        top = [dict(name="loop_select_fusion_1", ms=0.4, count=2, gb=1.6, tb_per_s=4.0),
               dict(name="loop_add_fusion_1", ms=0.33, count=1, gb=0.4, tb_per_s=0.4 / 0.33),
               dict(name="input_reduce_fusion", ms=0.2, count=1, gb=0.6, tb_per_s=3.0),
               # Too short to set the bandwidth, but ranked.
               dict(name="loop_tiny_fusion", ms=0.01, count=1, gb=0.06, tb_per_s=6.0),
               dict(name="sm90_xmma_fprop", ms=0.5, count=1)]
        slow, best = xla_profile.slow_fusions(top, count=3)
        self.assertEqual(best, 4.0)
        self.assertEqual([t["name"] for t in slow],
                         ["loop_add_fusion_1", "input_reduce_fusion", "loop_select_fusion_1"])
        self.assertAlmostEqual(slow[0]["excess_ms"], 0.33 - 0.1)
        self.assertAlmostEqual(slow[1]["excess_ms"], 0.2 - 0.15)
        self.assertAlmostEqual(slow[2]["excess_ms"], 0.0)
        self.assertEqual(xla_profile.slow_fusions(top[4:]), ([], 0))

    def test_kernel_times_add_up_per_layer_and_part(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        space, plane = _gpu_plane([])
        plane.stat_metadata[1].name = "name"
        plane.stat_metadata[2].name = "hlo_op"
        kernels = [  # (kernel name, TF op name or None, µs)
            ("sm90_xmma_fprop_implicit_gemm", "resnet50_1/conv2_block1_2_conv_conv2_block1_2_bn_1"
             "/Ucudnn_Conv2DWithStatistics", 300),
            ("sm90_xmma_wgrad_implicit_gemm", "gradient_tape/resnet50_1/conv2_block1_2_conv_"
             "conv2_block1_2_bn_1/Ucudnn_Conv2DBackpropFilter", 200),
            ("sm90_xmma_dgrad_implicit_gemm", "gradient_tape/resnet50_1/conv2_block1_2_conv/"
             "Conv2D/Conv2DBackpropInput", 150),
            ("input_reduce_fusion_3", "gradient_tape/resnet50_1/conv2_block1_2_conv_"
             "conv2_block1_2_bn_1/Sum", 120),
            ("loop_select_fusion_14", "gradient_tape/resnet50_1/conv2_block1_2_relu_1/ReluGrad",
             80),
            ("loop_maximum_fusion_2", "resnet50_1/conv2_block1_2_relu_1/Relu", 50),
            # A fusion whose kernel carries no name: its op from the module's fusion.
            ("loop_convert_fusion_7", None, 40),
            ("Memset", None, 10),
        ]
        line = plane.lines.add(timestamp_ns=0)
        offset = 0
        for i, (kernel, op_name, us) in enumerate(kernels):
            plane.event_metadata[i + 1].name = kernel
            event = line.events.add(metadata_id=i + 1, offset_ps=offset, duration_ps=us * 10**6)
            if op_name is not None:
                plane.stat_metadata[10 + i].name = op_name
                event.stats.add(metadata_id=1, ref_value=10 + i)
                event.stats.add(metadata_id=2, str_value=f"fusion.{i}")
            offset += us * 10**6
        directory = _write_trace(space)
        fusion_ops = {"loop_convert_fusion_7": ["gradient_tape/resnet50_1/conv2_block1_3_conv_"
                                                "conv2_block1_3_bn_1/Cast"]}
        trace = xla_profile.read_trace(directory, per=1, model="resnet50", fusion_ops=fusion_ops)
        self.assertEqual(trace["layers"], {
            "conv2_block1_2": {"forward": 0.3, "backward-filter": 0.2, "backward-data": 0.15,
                               "reductions": 0.12, "elementwise": 0.13},
            "conv2_block1_3": {"elementwise": 0.04}})
        self.assertAlmostEqual(trace["unnamed_ms"], 0.01)
        self.assertAlmostEqual(trace["busy_ms"], 0.95)
        self.assertEqual(sum(g["count"] for g in trace["gaps"]["by_length"].values()), 0)
        # Without the module the unnamed fusion is in no layer.
        self.assertAlmostEqual(xla_profile.read_trace(directory, per=1)["unnamed_ms"], 0.05)
        # A trace without the annotation has no per-layer times.
        for event in line.events:
            del event.stats[:]
        _write_trace(space, directory)
        self.assertNotIn("layers", xla_profile.read_trace(directory, per=1))

    def test_idle_gaps_are_split_by_length_and_the_longest_named(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        us = 10**6
        # Two streams; "b" overlaps "a" and ends last, so the gap after it is
        # b's; gaps of 5, 50 and 200 µs, and none inside the overlap.
        kernels = [(0, 100 * us, "a"), (50 * us, 120 * us, "b"), (125 * us, 130 * us, "c"),
                   (180 * us, 190 * us, "d"), (390 * us, 400 * us, "e")]
        gaps = xla_profile.idle_gaps(list(reversed(kernels)), per=2, largest=2)
        self.assertEqual(list(gaps["by_length"]), ["< 10 us", "10-100 us", ">= 100 us"])
        for name, ms, count in (("< 10 us", 0.005, 1), ("10-100 us", 0.05, 1),
                                (">= 100 us", 0.2, 1)):
            self.assertAlmostEqual(gaps["by_length"][name]["ms"], ms / 2)
            self.assertEqual(gaps["by_length"][name]["count"], count / 2)
        self.assertEqual(gaps["largest"], [dict(ms=0.2, before="d", after="e"),
                                           dict(ms=0.05, before="c", after="d")])
        self.assertEqual(xla_profile.idle_gaps([])["largest"], [])

    def test_copies_and_sets_go_to_the_op_of_the_kernel_after_them(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        kernels = [(30, "net/a/Conv", "copy / set"), (0, "Memset", "copy / set"),
                   (10, "Memset", "copy / set"), (20, "net/a/Conv", "convolution"),
                   (40, "net/b/Conv", "convolution"), (45, "fusion", "XLA fusion"),
                   (50, "MemcpyD2D", "copy / set")]
        self.assertEqual(xla_profile.copies_before(kernels, per=1), [
            dict(before="Conv", count=3, places=2), dict(before=None, count=1, places=0)])
        self.assertEqual(xla_profile.copies_before(kernels, per=2, top=1),
                         [dict(before="Conv", count=1.5, places=2)])

    def test_host_time_before_each_thunks_first_launch(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        us = 10**6
        # (start, stop, name, is_launch) of one host thread: a command buffer
        # around two fusions, each around its launch; a custom call whose
        # first launch comes 250 µs in, twice; a thunk without launches.
        events = [(0, 100 * us, "command_buffer", False),
                  (10 * us, 20 * us, "loop_fusion.1", False), (14 * us, 16 * us, "l1", True),
                  (30 * us, 40 * us, "loop_fusion.2", False), (32 * us, 34 * us, "l2", True),
                  (100 * us, 400 * us, "Ucudnn_Conv2D.9", False),
                  (350 * us, 360 * us, "l3", True), (380 * us, 390 * us, "l4", True),
                  (500 * us, 800 * us, "Ucudnn_Conv2D.9", False),
                  (750 * us, 760 * us, "l5", True),
                  (900 * us, 950 * us, "Thunks::Initialize", False)]
        rows = xla_profile.host_thunks(list(reversed(events)), per=2)
        self.assertEqual([r["name"] for r in rows], ["Ucudnn_Conv2D", "loop_fusion"])
        conv, fusion = rows
        self.assertEqual((conv["calls"], conv["median_us"], conv["max_us"],
                          conv["median_call_us"], conv["total_us"]), (1, 250, 250, 300, 250))
        self.assertEqual((fusion["calls"], fusion["median_us"], fusion["max_us"]), (1, 4, 4))
        self.assertEqual(len(xla_profile.host_thunks(events, top=1)), 1)

    def test_traces_are_kept_only_when_asked(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        trace, out = tempfile.mkdtemp(), tempfile.mkdtemp()
        os.makedirs(os.path.join(trace, "plugins", "run"))
        with open(os.path.join(trace, "plugins", "run", "host.xplane.pb"), "wb") as f:
            f.write(b"trace bytes")
        with mock.patch.dict(os.environ, {"OUT": out, "XLA_PROFILE_KEEP_TRACE": "0"}):
            xla_profile._keep_trace(trace, "kept.pb.gz")
        self.assertEqual(os.listdir(out), [])
        with mock.patch.dict(os.environ, {"OUT": out, "XLA_PROFILE_KEEP_TRACE": "1"}):
            xla_profile._keep_trace(trace, "kept.pb.gz")
        with gzip.open(os.path.join(out, "kept.pb.gz"), "rb") as f:
            self.assertEqual(f.read(), b"trace bytes")

    def test_fusion_kernels_named_from_the_module(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        module = HloFusionBytesTest.MODULE
        # Dots as underscores: the kernel of "loop_select_fusion.2" is "loop_select_fusion_2".
        module = module.replace("%loop_relu_fusion =", "%loop_select_fusion.2 =")
        self.assertEqual(xla_profile.fusion_op_names(xla_profile.kernel_fusions(module)), {
            "loop_select_fusion": ["gradient_tape/net/relu/ReluGrad"],
            "input_reduce_fusion": ["net/bn/Sum"],
            "loop_select_fusion_2": ["gradient_tape/net/relu_1/ReluGrad"]})
        # Identical fusions share a deduplicated name and one kernel: each of
        # their names maps to the group, its ops in program order.
        shared = module.replace(
            'op_name="gradient_tape/net/relu_1/ReluGrad"}',
            'op_name="gradient_tape/net/relu_1/ReluGrad" deduplicated_name="loop_select_fusion"}')
        fusions = xla_profile.kernel_fusions(shared)
        self.assertIs(fusions["loop_select_fusion_2"], fusions["loop_select_fusion"])
        both = ["gradient_tape/net/relu/ReluGrad", "gradient_tape/net/relu_1/ReluGrad"]
        self.assertEqual(xla_profile.fusion_op_names(fusions), {
            "loop_select_fusion": both, "input_reduce_fusion": ["net/bn/Sum"],
            "loop_select_fusion_2": both})

    def test_a_shared_kernels_launches_go_to_its_fusions_in_turn(self):
        # XLA's one kernel for identical fusions: in time order, across the
        # GPU's lines (streams), its launches take the group's op names in
        # turn, step after step.
        xla_profile = _benchmark_script(self, "xla_profile")
        space, plane = _gpu_plane(["loop_maximum_fusion_3", "loop_add_fusion"])
        compute = plane.lines.add(timestamp_ns=0)
        other = plane.lines.add(timestamp_ns=0)
        us = 10**6
        # Two steps: the shared kernel at 0 and 300 µs, 100 µs each; 50 µs at
        # 200 on another line; then 10 and 30 µs.
        for line, metadata, start, duration in ((compute, 1, 0, 100), (other, 1, 200, 50),
                                                (compute, 2, 120, 20), (compute, 1, 300, 10),
                                                (other, 1, 400, 30)):
            line.events.add(metadata_id=metadata, offset_ps=start * us, duration_ps=duration * us)
        directory = _write_trace(space)
        ops = ["resnet50_1/conv2_block1_2_relu_1/Relu", "resnet50_1/conv2_block2_2_relu_1/Relu"]
        trace = xla_profile.read_trace(directory, per=2, model="resnet50",
                                       fusion_ops={"loop_maximum_fusion_3": ops})
        self.assertEqual(set(trace["layers"]), {"conv2_block1_2", "conv2_block2_2"})
        self.assertAlmostEqual(trace["layers"]["conv2_block1_2"]["elementwise"], (0.1 + 0.01) / 2)
        self.assertAlmostEqual(trace["layers"]["conv2_block2_2"]["elementwise"], (0.05 + 0.03) / 2)
        self.assertAlmostEqual(trace["unnamed_ms"], 0.02 / 2)

    def test_mode_specs_carry_environment_variables(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        self.assertEqual(xla_profile.mode_spec("stock-xla"), ("stock-xla", {}))
        self.assertEqual(
            xla_profile.mode_spec("ucudnn-bnstats-xla@UCUDNN_STATISTICS_AFTER_CHANNELS=65536@A=b"),
            ("ucudnn-bnstats-xla", {"UCUDNN_STATISTICS_AFTER_CHANNELS": "65536", "A": "b"}))
        with self.assertRaisesRegex(ValueError, "@VAR=VALUE"):
            xla_profile.mode_spec("ucudnn-bnstats-xla@UCUDNN_STATISTICS_AFTER_CHANNELS")
        # In file names: paths by their first one's last component, no separators.
        self.assertEqual(xla_profile.file_part("ucudnn-bnstats-xla@UCUDNN_STATISTICS_AFTER_"
                                               "CHANNELS=65536"),
                         "ucudnn-bnstats-xla-UCUDNN_STATISTICS_AFTER_CHANNELS-65536")
        self.assertEqual(xla_profile.file_part(
            "ucudnn-bnstats-xla@PYTHONPATH=/w/benchmarks/relu_gradient/:/w:/site"
            "@RELU_GRADIENT_VARIANT=custom@XLA_FLAGS=--a=1 --b"),
            "ucudnn-bnstats-xla-PYTHONPATH-relu_gradient-RELU_GRADIENT_VARIANT-custom-"
            "XLA_FLAGS-a-1-b")

    def test_layers_print_side_by_side_longest_first(self):
        xla_profile = _benchmark_script(self, "xla_profile")
        runs = {"stock-xla": {"trace": {"unnamed_ms": 0.05, "layers": {
                    "conv1": {"forward": 0.4, "backward-filter": 0.1, "elementwise": 0.1},
                    "conv2_block1_1": {"forward": 0.2, "reductions": 0.3}}}},
                "ucudnn-bnstats-xla": {"trace": {"unnamed_ms": 0.01, "layers": {
                    "conv2_block1_1": {"backward-data": 0.25}}}}}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            xla_profile.print_layers(runs, top=1)
        rows = [l.split() for l in out.getvalue().splitlines()
                if l.startswith(("conv", "all", "no layer"))]
        # conv1 (0.6 ms in stock XLA) first; top=1 keeps it alone; ours has no conv1; then every
        # layer's sum and the time in none.
        self.assertEqual(rows, [
            ["conv1", "0.400/0.000/0.100", "0.000", "0.100", "0.000",
             "0.000/0.000/0.000", "0.000", "0.000", "0.000"],
            ["all", "layers", "0.600/0.000/0.100", "0.300", "0.100", "0.000",
             "0.000/0.250/0.000", "0.000", "0.000", "0.000"],
            ["no", "layer", "0.050", "0.010"]])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            xla_profile.print_layers({"stock-xla": {"trace": {}}})
        self.assertIn("no per-layer times", out.getvalue())


class HloFusionBytesTest(tf.test.TestCase):
    """benchmarks/hlo_fusion_bytes.py on a module in XLA's dump format."""

    MODULE = """HloModule step, entry_computation_layout={(f16[8,4,4,16]{3,2,1,0})->f16[8,4,4,16]{3,2,1,0}}

%fused_select (param_0: f16[8,4,4,16], param_1: f32[16]) -> f16[8,4,4,16] {
  %param_0 = f16[8,4,4,16]{3,2,1,0} parameter(0)
  ROOT %negate.1 = f16[8,4,4,16]{3,2,1,0} negate(%param_0)
}

ENTRY %main (x: f16[8,4,4,16], s: f32[16]) -> f16[8,4,4,16] {
  %x = f16[8,4,4,16]{3,2,1,0} parameter(0), metadata={op_name="x"}
  %s = f32[16]{0} parameter(1)
  %loop_select_fusion = f16[8,4,4,16]{3,2,1,0} fusion(%x, %s), kind=kLoop, calls=%fused_select, metadata={op_type="ReluGrad" op_name="gradient_tape/net/relu/ReluGrad" deduplicated_name="loop_select_fusion"}
  %input_reduce_fusion = (f32[16]{0}, f32[16]{0}) fusion(%loop_select_fusion), kind=kInput, calls=%fused_select, metadata={op_type="Sum" op_name="net/bn/Sum"}
  ROOT %loop_relu_fusion = f16[8,4,4,16]{3,2,1,0} fusion(%loop_select_fusion, %s), kind=kLoop, calls=%fused_select, metadata={op_type="ReluGrad" op_name="gradient_tape/net/relu_1/ReluGrad"}
}
"""

    def test_the_largest_dump_of_a_kind_is_the_steps(self):
        hlo_fusion_bytes = _benchmark_script(self, "hlo_fusion_bytes")
        directory = tempfile.mkdtemp()
        for name, size in (("module_0001.init.after_optimizations.txt", 10),
                           ("module_0002.step.after_optimizations.txt", 100),
                           ("module_0002.step.buffer-assignment.txt", 1000)):
            with open(os.path.join(directory, name), "w") as f:
                f.write("x" * size)
        self.assertEqual(os.path.basename(hlo_fusion_bytes.largest_dump(directory)),
                         "module_0002.step.after_optimizations.txt")
        self.assertIsNone(hlo_fusion_bytes.largest_dump(directory, "priority_fusion_dump.txt"))

    def test_counts_each_fusions_operands_and_result_by_origin(self):
        module = _benchmark_script(self, "hlo_fusion_bytes")
        self.assertEqual(module.shape_bytes("(f32[16]{0}, bf16[2,3]{1,0})"), 64 + 12)
        fusions = module.entry_fusions(self.MODULE)
        # Only the entry computation's fusions; the fused computation's own
        # instructions are not fusions of the step.
        self.assertEqual([f["name"] for f in fusions],
                         ["loop_select_fusion", "input_reduce_fusion", "loop_relu_fusion"])
        # XLA's name for a group of identical fusions, or the fusion's own.
        self.assertEqual([f["deduplicated_name"] for f in fusions],
                         ["loop_select_fusion", "input_reduce_fusion", "loop_relu_fusion"])
        tensor = 8 * 4 * 4 * 16 * 2
        self.assertEqual(fusions[0]["bytes_in"], tensor + 16 * 4)
        self.assertEqual(fusions[0]["bytes_out"], tensor)
        self.assertEqual(fusions[1]["bytes_out"], 2 * 16 * 4)
        self.assertEqual(module.by_origin(fusions), {
            ("kLoop", "backward", "ReluGrad"): [2, 2 * (2 * tensor + 16 * 4)],
            ("kInput", "forward", "Sum"): [1, tensor + 2 * 16 * 4]})

    def test_lists_one_layers_fusions_with_the_shapes_they_read_and_write(self):
        module = _benchmark_script(self, "hlo_fusion_bytes")
        fusions = module.entry_fusions(self.MODULE)
        # "relu" names both ReLU gradients (op names relu/ and relu_1/), in
        # program order; the f32[16] operand is small at 1 KiB.
        rows = module.layer_rows(fusions, "relu", min_bytes=1024)
        self.assertEqual(
            [r[:6] for r in rows],
            [("loop_select_fusion", "kLoop", "backward", "ReluGrad", "f16[8,4,4,16]; +1 small",
              "f16[8,4,4,16]"),
             ("loop_relu_fusion", "kLoop", "backward", "ReluGrad", "f16[8,4,4,16]; +1 small",
              "f16[8,4,4,16]")])
        self.assertEqual([r[0] for r in module.layer_rows(fusions, "bn/", min_bytes=1024)],
                         ["input_reduce_fusion"])
        self.assertEqual(module.layer_rows(fusions, "bn/")[0][4:6],
                         ("+1 small", "f32[16], f32[16]"))


class MaxPoolVariantsTest(tf.test.TestCase):
    """benchmarks/max_pool/sitecustomize.py: each formulation of the routed
    max-pool gives the shipped forward and gradient bit for bit."""

    def _variants(self):
        return _benchmark_script(self, "max_pool/sitecustomize")

    def test_every_variant_gives_the_shipped_pool_and_gradient(self):
        from tf_ucudnn import max_pool

        variants = self._variants()
        self.assertEqual(variants.VARIANT, "shipped")  # nothing patched without the variable
        shipped = (max_pool.pool_and_first_max_index, max_pool.spread_to_first_max)
        rng = np.random.default_rng(5)
        cases = [((3, 3), (2, 2), "SAME", 11, 12), ((3, 3), (2, 2), "VALID", 9, 10),
                 ((2, 2), (2, 2), "VALID", 8, 7), ((2, 3), (1, 2), "SAME", 6, 9),
                 ((3, 2), (3, 1), "SAME", 10, 5), ((1, 2), (3, 3), "VALID", 7, 8)]
        for variant in variants.VARIANTS[1:]:
            for dtype in (tf.float32, tf.float16):
                for pool_size, strides, padding, h, w in cases:
                    x = tf.constant(rng.integers(-2, 3, (2, h, w, 3)), dtype)  # many ties
                    weight = tf.constant(rng.standard_normal((2, h, w, 3)), tf.float32)

                    @tf.function(jit_compile=True)
                    def forward_and_gradient(x):
                        with tf.GradientTape() as tape:
                            tape.watch(x)
                            y = max_pool.max_pool2d(x, pool_size, strides, padding)
                            loss = tf.reduce_sum(tf.cast(y, tf.float32) * weight[:, :y.shape[1],
                                                                                 :y.shape[2]])
                        return y, tape.gradient(loss, x)

                    want = forward_and_gradient(x)
                    try:
                        variants._patch(variant)
                        counted = max_pool.first_max_gradients[0]
                        patched = tf.function(forward_and_gradient.python_function,
                                              jit_compile=True)
                        got = patched(x)
                        self.assertGreater(max_pool.first_max_gradients[0], counted)
                        hlo = patched.experimental_get_compiler_ir(x)(stage="hlo")
                        # The variant is what ran: XLA's reduce-window or not.
                        self.assertEqual("reduce-window(" in hlo, variant == "reduce-window")
                    finally:
                        max_pool.pool_and_first_max_index, max_pool.spread_to_first_max = shipped
                    where = f"{variant} {dtype.name} {pool_size} {strides} {padding} {h}x{w}"
                    self.assertAllEqual(got[0], want[0], msg=where)
                    self.assertAllEqual(got[1], want[1], msg=where)

    def test_an_unknown_variant_is_refused_naming_the_variants(self):
        with mock.patch.dict(os.environ, MAX_POOL_VARIANT="cudnn"):
            with self.assertRaisesRegex(ValueError, "shipped, shared-shifts, reduce-window"):
                self._variants()


class ReluGradientVariantsTest(tf.test.TestCase):
    """benchmarks/relu_gradient_variants.py: each formulation of a batch-norm
    ReLU's gradient is TF's own, and XLA's dumps read as they are written."""

    def _variants(self):
        return _benchmark_script(self, "relu_gradient_variants").variants_module()

    def test_every_variant_gives_tensorflows_gradient(self):
        variants = self._variants()
        rng = np.random.default_rng(3)
        for dtype, bound in ((tf.float32, 1e-6), (tf.float16, 1e-3)):
            for nhwc in (True, False):
                shape = [2, 5, 4, 3] if nhwc else [2, 3, 5, 4]
                y = tf.constant(rng.standard_normal(shape), dtype)
                scale = tf.constant(rng.standard_normal(3), tf.float32)
                offset = tf.constant(rng.standard_normal(3), tf.float32)
                weight = tf.constant(rng.standard_normal(shape), dtype)
                channels = [1, 1, 1, -1] if nhwc else [1, -1, 1, 1]

                def loss(variant, y, scale, offset):
                    out = tf.cast(tf.cast(y, tf.float32) * tf.reshape(scale, channels)
                                  + tf.reshape(offset, channels), dtype)
                    relu = (tf.nn.relu(out) if variant is None else
                            variants.normalized_relu(out, y, scale, offset, variant))
                    return tf.reduce_sum(tf.cast(relu * weight, tf.float32))

                def gradients(variant):
                    with tf.GradientTape() as tape:
                        tape.watch([y, scale, offset])
                        value = loss(variant, y, scale, offset)
                    return [value] + tape.gradient(value, [y, scale, offset])

                want = gradients(None)
                for variant in variants.VARIANTS[1:]:
                    got = gradients(variant)
                    for name, w, g in zip(("loss", "dy", "dscale", "doffset"), want, got):
                        self.assertLessEqual(rel_l2(g, w), bound,
                                             f"{variant} {name} {dtype.name} nhwc={nhwc}")

    def test_an_unknown_variant_is_refused_naming_the_variants(self):
        with mock.patch.dict(os.environ, RELU_GRADIENT_VARIANT="fused"):
            with self.assertRaisesRegex(ValueError, "autodiff, custom, stacked-sums"):
                self._variants()

    def test_reads_the_decisions_xla_made_for_each_producer(self):
        script = _benchmark_script(self, "relu_gradient_variants")
        step = "fusion_steps {{\n  {kind} {{\n{body}  }}\n}}\n"

        def update(producer, consumers, fused, unfused):
            body = f'    producer_name: "{producer}"\n' + "".join(
                f'    consumer_names: "{c}"\n' for c in consumers)
            body += f"    us_fused: {fused}\n    us_unfused: {unfused}\n"
            return step.format(kind="update_priority", body=body)

        def fuse(fusion, producer, consumer):
            body = (f'    fusion_name: "{fusion}"\n    producer_name: "{producer}"\n'
                    f'    consumer_name: "{consumer}"\n')
            return step.format(kind="fusion", body=body)

        module = ("HloModule m\\n\\nENTRY e {\\n"
                  "  ReluGrad.1.0 = pred[8,4]{1,0} compare(a, b), direction=GT\\n"
                  "  ReluGrad.2.0 = f16[8,4]{1,0} select(ReluGrad.1.0, c, d)\\n"
                  "  ReluGrad.3.0 = f16[8,4]{1,0} select(e, f, g)\\n}")
        dump = (update("ReluGrad.1.0", ["ReluGrad.2.0"], 4.0, 6.0)
                + fuse("fusion.1", "ReluGrad.1.0", "ReluGrad.2.0")
                # The fusion holding ReluGrad.2.0, estimated twice: the last counts.
                + update("fusion.1", ["Sum.1", "Sum.2"], 9.0, 12.0)
                + update("fusion.1", ["Sum.1", "Sum.2", "Cast.1"], 15.0, 12.0)
                + update("ReluGrad.3.0", ["Sum.3", "Cast.3"], 7.0, 9.0)
                + fuse("fusion.2", "ReluGrad.3.0", "Sum.3")
                + fuse("fusion.3", "ReluGrad.3.0", "Cast.3")
                # Estimates after a producer is fused do not replace the deciding one.
                + update("fusion.2", ["Add.1"], 1.0, 2.0)
                + f'hlo_module_before_fusion: "{module}"\n')
        decisions = script.fusion_decisions(dump, "ReluGrad")
        self.assertEqual(decisions, {
            "ReluGrad.1.0": dict(shape="pred[8,4]{1,0}", opcode="compare", consumers=1,
                                 us_fused=4.0, us_unfused=6.0, fused=True),
            "ReluGrad.2.0": dict(shape="f16[8,4]{1,0}", opcode="select", consumers=3,
                                 us_fused=15.0, us_unfused=12.0, fused=False),
            "ReluGrad.3.0": dict(shape="f16[8,4]{1,0}", opcode="select", consumers=2,
                                 us_fused=7.0, us_unfused=9.0, fused=True)})

    def test_counts_the_fusions_that_keep_a_relu_gradient_apart(self):
        script = _benchmark_script(self, "relu_gradient_variants")
        summary = script.module_summary(HloFusionBytesTest.MODULE)
        self.assertEqual(summary["fusions"], 3)
        self.assertEqual(summary["apart"], {"ReluGrad": 2})
        tensor = 8 * 4 * 4 * 16 * 2
        self.assertAlmostEqual(summary["gb"]["kLoop"], 2 * (2 * tensor + 16 * 4) / 1e9)


class FitProfileTest(tf.test.TestCase):
    """benchmarks/fit_profile.py: one profiled worker per cap, steps_per_execution
    and input pipeline, the batch's host-to-device copies summed apart."""

    def test_every_combination_runs_and_only_host_to_device_copies_count_as_the_batch_s(self):
        fit_profile = _benchmark_script(self, "fit_profile")
        import xla_profile  # on the path once fit_profile is loaded

        launched = []

        def launch(sweep, batch, **kwargs):
            launched.append((sweep["cap"], kwargs["steps_per_execution"],
                             kwargs["prefetch_to_device"], sweep["limit"], batch))
            return dict(status="ok", step_ms=40.0, images_per_s=4800.0, peak_bytes=6 << 30)

        top = [dict(name="MemcpyH2D", ms=16.0, count=3, kind="copy / set"),
               dict(name="MemcpyD2H", ms=0.1, count=1, kind="copy / set"),
               dict(name="MemcpyD2D", ms=0.2, count=4, kind="copy / set"),
               dict(name="input_scatter_fusion", ms=1.0, count=1, kind="XLA fusion")]
        trace = dict(span_ms=48.0, busy_ms=39.0, idle_ms=9.0, kernel_sum_ms=17.3,
                     kinds={"copy / set": dict(ms=16.3, count=8)}, top=top)
        out = self.get_temp_dir()
        with mock.patch.object(memory_cap, "launch", launch), \
                mock.patch.object(xla_profile, "read_trace", lambda d, per: dict(trace)), \
                mock.patch.dict(os.environ, {"OUT": out}), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            fit_profile.main(["resnet50v2", "ucudnn-bn-xla", "384", "--caps", "8GiB,96GiB",
                              "--steps-per-execution", "1,5", "--prefetch-to-device", "on"])
        self.assertEqual(launched, [(c, k, True, 64 << 20, 384) for c in (8 << 30, 96 << 30)
                                    for k in (1, 5)])
        with open(os.path.join(out, "fit_profile_resnet50v2_ucudnn-bn-xla_n384_mixed_float16"
                                    ".json")) as f:
            runs = json.load(f)["runs"]
        self.assertEqual([r["trace"]["host_to_device_ms"] for r in runs], [16.0] * 4)
        self.assertIn("96 GiB, x5, on device", printed.getvalue())
        # The step's own kernels: 17.3 ms in all, 16.3 of them copies and sets.
        self.assertRegex(printed.getvalue(), r"kernels, copies and sets left out ms +1\.00 ")


class LargestBatchTest(tf.test.TestCase):
    """benchmarks/largest_batch.py: concurrent step searches, then each cell timed alone at
    its largest N, with ratios to the stock cell of the same model, precision and cap."""

    def test_searches_then_times_each_cell_at_its_largest_n(self):
        largest_batch = _benchmark_script(self, "largest_batch")
        largest = {"stock-xla": 400, "ucudnn-bnrecompute-xla": 530}
        launched, lock = [], threading.Lock()

        def launch(sweep, batch, **kwargs):
            with lock:
                launched.append((sweep["mode"], batch, kwargs.get("epochs"), sweep["limit"],
                                 sweep["cap"]))
            if batch > largest.get(sweep["mode"], 64):
                return dict(status="oom", message="RESOURCE_EXHAUSTED: Out of memory")
            return dict(status="ok", images_per_s=10.0 * batch, step_ms=100.0,
                        peak_bytes=batch << 25, ucudnn_log=[f"tf_ucudnn: plan at N={batch}"])

        out = os.path.join(self.get_temp_dir(), "largest.json")
        with mock.patch.object(memory_cap, "launch", launch), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            largest_batch.main(["resnet50:stock-xla:mixed_float16:16GiB:400:16",
                                "resnet50:ucudnn-bnrecompute-xla:mixed_float16:16GiB:528:16",
                                "vgg16:ucudnn-xla:float32:8GiB:64", "--time", "--json", out])
        searches = sorted((m, n) for m, n, epochs, _, _ in launched if epochs == 1)
        self.assertEqual(searches, [("stock-xla", 400), ("stock-xla", 416),
                                    ("ucudnn-bnrecompute-xla", 528),
                                    ("ucudnn-bnrecompute-xla", 544)])
        timed = [(m, n, limit, cap) for m, n, epochs, limit, cap in launched if epochs is None]
        self.assertEqual(timed, [("stock-xla", 400, None, 16 << 30),
                                 ("ucudnn-bnrecompute-xla", 528, 64 << 20, 16 << 30),
                                 ("ucudnn-xla", 64, 64 << 20, 8 << 30)])
        # N 528 / 400 and img/s 5280 / 4000: both 1.32x.
        self.assertRegex(printed.getvalue(), r"528 \(544\) +1\.32x +5280\.0 +100\.0 +16\.50 "
                                             r"+1\.32x")
        with open(out) as f:
            cells = json.load(f)["cells"]
        self.assertEqual([(c["largest"], c["failed"]) for c in cells],
                         [(400, 416), (528, 544), (64, None)])
        # The timed runs keep tf_ucudnn's log lines (their plans); the searches' do not.
        self.assertEqual([c["timed"]["ucudnn_log"] for c in cells],
                         [["tf_ucudnn: plan at N=400"], ["tf_ucudnn: plan at N=528"],
                          ["tf_ucudnn: plan at N=64"]])
        self.assertFalse(any("ucudnn_log" in r for c in cells for r in c["search"]))

    def test_rounds_alternate_the_order_and_take_each_cells_median_run(self):
        largest_batch = _benchmark_script(self, "largest_batch")
        speeds = {"stock-xla": [3600.0, 3300.0, 3500.0], "ucudnn-bnrecompute-xla":
                  [4000.0, 4200.0, 4100.0]}
        order = []

        def launch(sweep, batch, **kwargs):
            order.append(sweep["mode"])
            ips = speeds[sweep["mode"]][order.count(sweep["mode"]) - 1]
            return dict(status="ok", images_per_s=ips, step_ms=batch / ips * 1e3,
                        peak_bytes=1 << 30)

        out = os.path.join(self.get_temp_dir(), "rounds.json")
        with mock.patch.object(memory_cap, "launch", launch), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            largest_batch.main(["resnet50:stock-xla:mixed_float16:8GiB:192",
                                "resnet50:ucudnn-bnrecompute-xla:mixed_float16:8GiB:256",
                                "--time", "--rounds", "3", "--json", out])
        self.assertEqual(order, ["stock-xla", "ucudnn-bnrecompute-xla", "ucudnn-bnrecompute-xla",
                                 "stock-xla", "stock-xla", "ucudnn-bnrecompute-xla"])
        # Medians 3500 and 4100: 4100 / 3500 = 1.17x, with each cell's range.
        self.assertRegex(printed.getvalue(), r"3500\.0 \(3300\.0–3600\.0\)")
        self.assertRegex(printed.getvalue(), r"4100\.0 \(4000\.0–4200\.0\) .* 1\.17x")
        with open(out) as f:
            cells = json.load(f)["cells"]
        self.assertEqual([len(c["timings"]) for c in cells], [3, 3])
        self.assertEqual([c["timed"]["images_per_s"] for c in cells], [3500.0, 4100.0])

    def test_a_run_killed_by_the_deadline_answers_nothing_and_runs_so_far_are_kept(self):
        largest_batch = _benchmark_script(self, "largest_batch")
        out = os.path.join(self.get_temp_dir(), "deadline.json")
        kept = []

        def launch(sweep, batch, timeout, **kwargs):
            if kwargs.get("epochs") == 1:  # a search's run: N = 16 trains, 20 runs to the deadline
                return (dict(status="ok", peak_bytes=1 << 30) if batch == 16
                        else dict(status="timeout", message=f"timed out after {timeout} s"))
            if sweep["mode"] == "ucudnn-bn-xla":  # the second timed run: the first is on file
                with open(out) as f:
                    kept.extend(c["timed"] for c in json.load(f)["cells"])
            return dict(status="ok", images_per_s=400.0, step_ms=40.0, peak_bytes=1 << 30)

        with mock.patch.object(memory_cap, "launch", launch), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            largest_batch.main(["unet-bn:stock-xla:float32:8GiB:16:4",
                                "unet-bn:ucudnn-bn-xla:float32:8GiB:12", "--time",
                                "--deadline", "1000", "--json", out])
        self.assertRegex(printed.getvalue(), r"stock-xla float32 8 GiB +>= 16 \(deadline\)")
        with open(out) as f:
            cells = json.load(f)["cells"]
        self.assertEqual((cells[0]["largest"], cells[0]["failed"]), (16, None))
        self.assertEqual(cells[0]["search"][-1]["status"], "skipped")
        self.assertIn("deadline", cells[0]["search"][-1]["message"])
        self.assertEqual([t and t["status"] for t in kept], ["ok", None])
        self.assertEqual([c["timed"]["status"] for c in cells], ["ok", "ok"])

    def test_the_largest_n_text_says_what_the_search_answered(self):
        largest_batch = _benchmark_script(self, "largest_batch")
        skipped = [dict(status="ok"), dict(status="skipped", message="deadline")]
        cases = [(dict(largest=16, failed=20, search=[dict(status="oom")]), "16 (20)"),
                 (dict(largest=16, failed=None, search=[dict(status="ok")]), "16"),
                 (dict(largest=16, failed=None, search=skipped), ">= 16 (deadline)"),
                 (dict(largest=None, failed=None, search=skipped[1:]), "- (deadline)"),
                 (dict(largest=None, failed=8, search=[dict(status="oom")]), "- (8)")]
        for cell, text in cases:
            self.assertEqual(largest_batch._largest_text(cell), text)

    def test_the_n_ratio_says_which_side_the_deadline_bounds(self):
        largest_batch = _benchmark_script(self, "largest_batch")
        done, cut = [dict(status="oom")], [dict(status="skipped", message="deadline")]
        stock = dict(largest=8, step=2, search=done)
        cases = [(dict(largest=12, step=2, search=done), stock, "1.50x"),
                 (dict(largest=12, step=2, search=cut), stock, ">= 1.50x"),
                 (dict(largest=12, step=2, search=done), dict(stock, search=cut), "<= 1.50x"),
                 (dict(largest=12, step=2, search=cut), dict(stock, search=cut), "? 1.50x"),
                 (dict(largest=12, step=None, search=[]), stock, ""),
                 (dict(largest=12, step=2, search=done), None, "")]
        for cell, stock_cell, text in cases:
            self.assertEqual(largest_batch._n_ratio_text(cell, stock_cell), text)

    def test_median_run_skips_failed_runs(self):
        largest_batch = _benchmark_script(self, "largest_batch")
        runs = [dict(status="ok", images_per_s=2.0), dict(status="oom"),
                dict(status="ok", images_per_s=1.0)]
        self.assertEqual(largest_batch.median_run(runs)["images_per_s"], 2.0)
        self.assertEqual(largest_batch.median_run([dict(status="oom")])["status"], "oom")
        self.assertIsNone(largest_batch.median_run([]))
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            largest_batch.main(["resnet50:stock-xla:float32:8GiB:96", "--rounds", "0"])

    def test_a_bad_cell_is_refused_with_the_forms_allowed(self):
        largest_batch = _benchmark_script(self, "largest_batch")
        with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
            largest_batch.main(["resnet50:nosuch:float32:8GiB:96"])
        self.assertIn("MODEL:MODE:PRECISION:CAP:START:STEP", err.getvalue())


class PlanBuildThreadsTest(tf.test.TestCase):
    """benchmarks/plan_build_threads.py: one child per thread count with the
    driver's JIT cache off, one that fills it, then each thread count with it
    warm; every child without the benchmark database."""

    def test_settings_run_in_order_with_their_environment(self):
        script = _benchmark_script(self, "plan_build_threads")
        seen = []

        def run(argv, env, **kwargs):
            seen.append((env["UCUDNN_PLAN_BUILD_THREADS"], env.get("CUDA_CACHE_DISABLE"),
                         env["UCUDNN_DATABASE"], argv[argv.index("--batch") + 1]))
            planning = 100.0 / int(env["UCUDNN_PLAN_BUILD_THREADS"])
            out = "RESULT " + json.dumps(dict(kernels=20, wall_s=planning + 10, planning_s=planning))
            return subprocess.CompletedProcess(argv, 0, stdout=out + "\n", stderr="")

        out = os.path.join(self.get_temp_dir(), "threads.json")
        with mock.patch.object(script.subprocess, "run", run), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            script.main(["--threads", "1,4", "--batch", "32", "--json", out])
        self.assertEqual(seen, [("1", "1", "off", "32"), ("4", "1", "off", "32"),
                                ("4", None, "off", "32"), ("1", None, "off", "32"),
                                ("4", None, "off", "32")])
        self.assertRegex(printed.getvalue(), r"4  on, filled here +25\.00 +35\.00")
        with open(out) as f:
            rows = json.load(f)["rows"]
        self.assertEqual([(r["threads"], r["jit_cache"]) for r in rows],
                         [(1, "off"), (4, "off"), (4, "on, filled here"), (1, "on"), (4, "on")])

    def test_a_failed_child_stops_with_its_setting(self):
        script = _benchmark_script(self, "plan_build_threads")

        def run(argv, env, **kwargs):
            return subprocess.CompletedProcess(argv, 1, stdout="", stderr="Traceback ...")

        with mock.patch.object(script.subprocess, "run", run), \
                contextlib.redirect_stderr(io.StringIO()), \
                self.assertRaisesRegex(SystemExit, "threads 1, JIT cache off: the child failed"):
            script.main(["--threads", "1"])


class StatisticsPlacementTest(tf.test.TestCase):
    """benchmarks/statistics_placement.py on a small shape on the CPU: every
    way and part timed, the three ways' values the same, the table printed
    and the JSON written."""

    def test_every_way_runs_and_computes_the_same_statistics(self):
        script = _benchmark_script(self, "statistics_placement")
        out = self.get_temp_dir()
        shapes = {"tiny": (2, 9, 3, 4, 3, 2, "VALID")}
        with mock.patch.dict(script.SHAPES, shapes, clear=True), \
                mock.patch.object(script.harness, "time_ms",
                                  lambda fn, args, **kw: (float(len(fn(*args))), [])), \
                mock.patch.dict(os.environ, {"OUT": out}), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            script.main(["--precisions", "float32", "--shapes", "tiny"])
        with open(os.path.join(out, "statistics_placement.json")) as f:
            row, = json.load(f)["rows"]
        # harness.time_ms stands in with the number of results: 3 (output and sums), 2 (gradients).
        self.assertEqual({k: v for k, v in row.items() if k.endswith("forward")},
                         {f"{w} forward": 3.0 for w, _ in script.WAYS})
        self.assertEqual({k: v for k, v in row.items() if k.endswith("step")},
                         {f"{w} step": 2.0 for w, _ in script.WAYS})
        self.assertRegex(printed.getvalue(), r"tiny +float32 .* 1\.00x")
        x = tf.random.stateless_normal((2, 9, 9, 3), seed=(1, 2))
        w = tf.random.stateless_normal((3, 3, 3, 4), seed=(3, 4))
        stock = script.layer_of("stock-xla", 2, "VALID")(x, w)
        for way in ("fused", "after"):
            for got, want in zip(script.layer_of(way, 2, "VALID")(x, w), stock):
                self.assertAllClose(got, want, rtol=1e-5, atol=1e-4)


class FirstLayerEnginesTest(tf.test.TestCase):
    """benchmarks/first_layer_engines.py's candidate table, from an
    engine_info kernel record: each candidate's best whole-batch time."""

    def test_each_candidate_keeps_its_fastest_size_scaled_to_the_batch(self):
        script = _benchmark_script(self, "first_layer_engines")
        kernel = {
            "key": {"conv": {"batch": 256}},
            "algos": [
                {"algo": 1, "math_type": 1},
                {"algo": 0, "math_type": 0,
                 "engine": {"id": 47, "transposed": False, "knobs": [[2, 2], [6, 0]]}},
                {"algo": 0, "math_type": 0,
                 "engine": {"id": 3, "transposed": True, "knobs": []}},
            ],
            "table": [
                {"size": 256, "algo": 0, "time_ms": 0.9, "workspace_bytes": 400},
                {"size": 128, "algo": 0, "time_ms": 0.2, "workspace_bytes": 200},
                {"size": 32, "algo": 0, "time_ms": 0.06, "workspace_bytes": 50},
                {"size": 256, "algo": 1, "time_ms": 0.8, "workspace_bytes": 0},
                {"size": 64, "algo": 2, "time_ms": 0.5, "workspace_bytes": 8},
            ],
        }
        got = script.candidates(kernel)
        # 128 x 2 = 0.4 ms beats 256 (0.9) and 32 x 8 (0.48) for the legacy algorithm.
        self.assertEqual([(name, size, ws) for _, name, size, ws in got],
                         [("legacy 1/math 1", 128, 200), ("eng47{k2=2,k6=0}", 256, 0),
                          ("eng3{}/transposed", 64, 8)])
        self.assertAllClose([ms for ms, *_ in got], [0.4, 0.8, 2.0])


class StatisticsLayersTest(tf.test.TestCase):
    """benchmarks/statistics_layers.py: the engine's timed choices between the
    fused statistics graph and the plain convolution with the reduction, read
    from its log lines."""

    LOG = (
        "I tf_ucudnn: forward N=256 C=64 H=56 W=56 K=64 R=1 S=1 stride=1x1 pad=0,0,0,0 dil=1x1 "
        "groups=1 NHWC float32 +stats: the statistics are reduced after the convolution "
        "(cudnnReduceTensor), measured faster: 0.100 + 0.050 ms against the fused graph's "
        "0.300 ms\n"
        "some other line\n"
        "tf_ucudnn: forward N=256 C=3 H=230 W=230 K=64 R=7 S=7 stride=2x2 pad=0,0,0,0 dil=1x1 "
        "groups=1 NHWC float32 +stats: the statistics stay fused: 1.635 + 11.313 ms against the "
        "fused graph's 6.962 ms\n")

    def test_reads_each_choice_and_sums_over_resnet50s_counts(self):
        statistics_layers = _benchmark_script(self, "statistics_layers")
        found = statistics_layers.parse_decisions(self.LOG)
        self.assertEqual(found[(56, 64, 64, 1, 1)],
                         dict(plain_ms=0.1, reduce_ms=0.05, fused_ms=0.3, fused=False))
        self.assertTrue(found[(230, 3, 64, 7, 2)]["fused"])
        self.assertLen(found, 2)
        log = os.path.join(self.get_temp_dir(), "engine.log")
        with open(log, "w") as f:
            f.write(self.LOG)
        out = os.path.join(self.get_temp_dir(), "table.json")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            status = statistics_layers.main(["--from-log", log, "--json", out])
        self.assertEqual(status, 0)
        self.assertIn("not reached", printed.getvalue())  # the 18 shapes without a line
        with open(out) as f:
            result = json.load(f)
        self.assertEqual([r["name"] for r in result["layers"]],
                         ["230² 3->64 7x7 /2", "56² 64->64 1x1"])
        # The 7x7 layer once, the 56² 1x1 (64 -> 64) once in ResNet-50.
        self.assertAlmostEqual(result["totals"]["fused_ms"], 6.962 + 0.3)
        self.assertAlmostEqual(result["totals"]["reduce_ms"], 11.313 + 0.05)

    def test_layers_selects_rows_and_refuses_others(self):
        statistics_layers = _benchmark_script(self, "statistics_layers")
        log = os.path.join(self.get_temp_dir(), "engine.log")
        with open(log, "w") as f:
            f.write(self.LOG)
        out = os.path.join(self.get_temp_dir(), "table.json")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            status = statistics_layers.main(["--from-log", log, "--layers", "1", "--json", out])
        self.assertEqual(status, 0)
        self.assertNotIn("not reached", printed.getvalue())
        self.assertNotIn("7x7", printed.getvalue())
        with open(out) as f:
            self.assertEqual([r["name"] for r in json.load(f)["layers"]], ["56² 64->64 1x1"])
        for bad in ("20", "x"):
            with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
                statistics_layers.main(["--from-log", log, "--layers", bad])
            self.assertIn("--layers", err.getvalue())


class XlaPeakTest(tf.test.TestCase):
    """benchmarks/xla_memory.py's replay of XLA's heap simulator trace: what is
    live at the temp allocation's peak."""

    def test_a_trace_s_peak_counts_a_shared_group_once(self):
        xla_memory = _benchmark_script(self, "xla_memory")
        from tensorflow.compiler.xla import xla_data_pb2
        from tensorflow.compiler.xla.service import hlo_pb2

        proto = hlo_pb2.HloProto()
        computation = proto.hlo_module.computations.add()
        ops = {"conv": ("custom-call", "resnet/conv2_block1_1_conv/Conv2D", [8, 4]),
               "bn": ("fusion", "resnet/conv2_block1_1_bn/FusedBatchNormV3", [8, 2]),
               "add": ("add", "resnet/conv2_block1_add/add", [4]),
               "grad": ("fusion", "gradient_tape/resnet/conv2_block1_1_conv/Conv2DBackpropInput",
                        [16])}
        for i, (name, (opcode, op_name, dims)) in enumerate(ops.items()):
            instruction = computation.instructions.add(name=name, opcode=opcode, id=100 + i)
            instruction.metadata.op_name = op_name
            instruction.shape.element_type = xla_data_pb2.F16
            instruction.shape.dimensions.extend(dims)
            if opcode == "custom-call":
                instruction.custom_call_target = "ucudnn_conv2d"
        assignment = proto.buffer_assignment
        for buffer_id, (instruction_id, size) in enumerate(
                [(100, 100), (101, 50), (102, 50), (103, 80)]):
            assignment.logical_buffers.add(id=buffer_id, size=size).defined_at.instruction_id = \
                instruction_id
        assignment.buffer_allocations.add(index=0, size=256)
        trace = assignment.heap_simulator_traces.add(buffer_allocation_index=0)
        event = hlo_pb2.HeapSimulatorTrace.Event
        for kind, buffer, shared in [(event.ALLOC, 0, 0), (event.ALLOC, 1, 0),
                                     (event.SHARE_WITH, 2, 1),  # in place: no new bytes
                                     (event.FREE, 1, 0),  # the group lives on in 2
                                     (event.ALLOC, 3, 0),  # 100 + 50 + 80: the peak
                                     (event.FREE, 0, 0), (event.FREE, 2, 0), (event.FREE, 3, 0)]:
            trace.events.add(kind=kind, buffer_id=buffer, share_with_canonical_id=shared)
        # Before it, a trace with a lower peak, of an allocation too small for the
        # first: the trace with the highest peak is the one read.
        assignment.buffer_allocations.add(index=1, size=100)
        small = hlo_pb2.HeapSimulatorTrace(buffer_allocation_index=1)
        for kind in (event.ALLOC, event.FREE):
            small.events.add(kind=kind, buffer_id=0)
        big = hlo_pb2.HeapSimulatorTrace()
        big.CopyFrom(trace)
        del assignment.heap_simulator_traces[:]
        assignment.heap_simulator_traces.extend([small, big])
        peak = xla_memory.peak_live(proto, top=2)
        self.assertEqual((peak["allocation_bytes"], peak["peak_bytes"], peak["buffers"]),
                         (256, 230, 3))
        # A trace that names an allocation smaller than its peak: no allocation size.
        assignment.heap_simulator_traces[1].buffer_allocation_index = 1
        unnamed = xla_memory.peak_live(proto)
        self.assertEqual((unnamed["allocation_bytes"], unnamed["peak_bytes"]), (None, 230))
        self.assertEqual([(b["instruction"], b["bytes"], b["kind"], b["layer"], b["shape"])
                          for b in peak["largest"]],
                         [("conv", 100, "custom-call ucudnn_conv2d", "conv2_block1_1_conv",
                           "f16[8,4]"),
                          ("grad", 80, "fusion", "gradient_tape/conv2_block1_1_conv",
                           "f16[16]")])
        self.assertEqual(peak["by_kind"], {"custom-call ucudnn_conv2d": 100, "fusion": 130})
        self.assertEqual(peak["by_pass"], {"forward": 150, "backward": 80})

    def test_the_peak_of_a_real_cpu_module(self):
        """A small convolution step compiled by XLA on the CPU, dumped as a proto
        in a process of its own (XLA reads XLA_FLAGS once per process)."""
        xla_memory = _benchmark_script(self, "xla_memory")
        dump = self.get_temp_dir()
        code = ("import tensorflow as tf\n"
                "@tf.function(jit_compile=True)\n"
                "def step(x, w):\n"
                "    with tf.GradientTape() as tape:\n"
                "        tape.watch(w)\n"
                "        y = tf.nn.relu(tf.nn.conv2d(x, w, 1, 'SAME'))\n"
                "        loss = tf.reduce_sum(tf.nn.conv2d(y, w, 1, 'SAME') ** 2)\n"
                "    return tape.gradient(loss, w)\n"
                "step(tf.ones([2, 8, 8, 4]), tf.ones([3, 3, 4, 4]))\n")
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2",
                   XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_proto")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        peak = xla_memory.read_proto(dump)
        self.assertIsNotNone(peak)
        self.assertBetween(peak["peak_bytes"], 1, peak["allocation_bytes"])
        self.assertEqual(sum(b["bytes"] for b in peak["largest"]), peak["peak_bytes"])
        # The forward convolution's output (f32 2x8x8x4: 2 KiB) is kept for the gradient.
        self.assertIn(("convolution", "f32[2,8,8,4]", 2048),
                      [(b["kind"], b["shape"], b["bytes"]) for b in peak["largest"]])


class PlanningProfileTest(tf.test.TestCase):
    """benchmarks/planning_profile.py sums the host lines of old and new logs,
    and the gates that opened by themselves where the log counts them."""

    def _printed(self, kernel_tails, gzipped=False):
        """What planning_profile.py prints for a log of one kernel line per tail
        (the text after "1 engines pruned": a gate count, a host line)."""
        planning_profile = _benchmark_script(self, "planning_profile")
        path = os.path.join(self.get_temp_dir(), "debug.log" + (".gz" if gzipped else ""))
        with (gzip.open if gzipped else open)(path, "wt") as f:
            for i, tail in enumerate(kernel_tails):
                f.write(f"tf_ucudnn: benchmarked forward N=64 C={i + 1} H=8 W=8 K=8 NHWC float32 "
                        f"at 4 sizes: legacy 0.010 s; graph: 5 candidates (heuristics and plans "
                        f"0.020 s), 9 runs 0.030 s, 1 engines pruned{tail}\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            planning_profile.main(path)
        return out.getvalue()

    def _summary(self, host_lines, gzipped=False):
        printed = self._printed(["\n" + host for host in host_lines], gzipped)
        return [line for line in printed.splitlines() if line.startswith("host side")]

    def test_configs_fetched_is_summed_where_every_line_has_it(self):
        new = (" host: 4 op graphs 0.001 s, 4 heuristics queries 0.008 s (configs fetched "
               "0.006 s), fallback lists 0.002 s, 3 plan builds: engine configs 0.004 s, plans "
               "0.001 s")
        old = (" host: 4 op graphs 0.001 s, 4 heuristics queries 0.010 s, fallback lists 0.002 s, "
               "3 plan builds: engine configs 0.004 s, plans 0.001 s")
        both_new, = self._summary([new, new])
        self.assertIn("8 heuristics queries: mode A 0.016 s (configs fetched 0.012 s), "
                      "fallback lists 0.004 s; 6 plan builds: engine configs 0.008 s, "
                      "execution plans 0.002 s", both_new)
        self.assertEqual(self._summary([new, new], gzipped=True), [both_new])
        mixed, = self._summary([old, new])
        self.assertIn("mode A 0.018 s, fallback lists 0.004 s", mixed)
        self.assertNotIn("configs fetched", mixed)

    def test_gate_counts_are_summed_where_the_log_has_them(self):
        printed = self._printed([", 2 gates opened by themselves",
                                 ", 0 gates opened by themselves", ", 1 gates opened by themselves"])
        self.assertIn("gates that opened by themselves (a launch waited for a kernel load; its "
                      "runs timed again): 3", printed)
        # The kernels' other columns read as before.
        self.assertIn("all                        3", printed)
        self.assertNotIn("gates that opened", self._printed(["", ""]))


class LaunchLatencyTest(tf.test.TestCase):
    """benchmarks/planning_profile.py: screening runs against back-to-back runs."""

    def test_short_trials_give_the_screening_runs_excess_in_microseconds(self):
        planning_profile = _benchmark_script(self, "planning_profile")
        path = os.path.join(self.get_temp_dir(), "debug.log")
        with open(path, "w") as f:
            f.write("tf_ucudnn: benchmarked forward N=64 C=8 H=8 W=8 K=8 NHWC float32 at 1 "
                    "sizes: legacy 0.000 s; graph: 12 candidates (heuristics and plans 0.001 s), "
                    "36 runs 0.003 s, 0 engines pruned\n timed at 64:\n")
            for i in range(10):  # 0.070 + i us screened against 0.060 ms timed
                f.write(f"  eng{i}{{}} (workspace 0 bytes): loaded, screened "
                        f"{0.070 + i / 1e3:.3f} ms, timed 0.060 ms\n")
            # Over 0.2 ms, and dominated (no timed runs): neither counts.
            f.write("  eng20{} (workspace 0 bytes): loaded, screened 0.900 ms, timed 0.500 ms\n")
            f.write("  eng21{} (workspace 0 bytes): loaded, screened 0.090 ms, dominated\n")
        count, p10, p50, p90 = planning_profile.launch_latency_us(
            planning_profile.read_log(path))
        self.assertEqual(count, 10)
        self.assertAllClose([p10, p50, p90], [10.1, 14.5, 18.9], atol=0.01)
        self.assertIsNone(planning_profile.launch_latency_us(
            planning_profile.read_log(path), short_ms=0.05))


class PlanSpreadTest(tf.test.TestCase):
    """benchmarks/plan_spread.py: kernels whose plan differs between processes."""

    def test_differing_plans_are_counted_with_the_lead_their_processes_measured(self):
        plan_spread = _benchmark_script(self, "plan_spread")
        fwd = dict(shape="N=64 C=128 H=56 W=56 K=256 R=3 S=3", **{"pass": "forward"})
        bwd = dict(shape="N=64 C=64 H=56 W=56 K=64 R=3 S=3", **{"pass": "backward-data"})
        one, two = [[64, "eng51"]], [[32, "eng51"], [32, "eng51"]]

        def run(fwd_plan, fwd_gap, t64, t32):
            fwd_kernel = dict(fwd, plan="1x64 eng51" if fwd_plan is one else "2x32 eng51",
                              micro_batches=fwd_plan, gap=fwd_gap,
                              times={"64 eng51": t64, "32 eng51": t32})
            return dict(kernels=[fwd_kernel, dict(bwd, plan="1x64 eng7", gap=0.01,
                                                  micro_batches=[[64, "eng7"]],
                                                  times={"64 eng7": 1.0})])

        # VGG-16's forward 3x3 128->256 on an H200: the candidate at each size
        # leads by 14 % or more, but one 64 and two 32 cost about the same.
        runs = [run(one, 0.20, 1.00, 0.51), run(two, 0.143, 1.03, 0.50),
                run(one, 0.31, 0.99, 0.51)]
        (pass_, shape, plans, lead, gap, prices), = plan_spread.plan_differences(runs)
        self.assertEqual((pass_, shape), ("forward", fwd["shape"]))
        self.assertEqual(plans, {"1x64 eng51": 2, "2x32 eng51": 1})
        self.assertAlmostEqual(gap, 0.143)
        # Prices of 2x32 over 1x64 by process: +2 %, -2.9 %, +3 %: median 2 %.
        self.assertAlmostEqual(lead, 0.02)
        # Each process: its choice, and both plans at its own times.
        self.assertEqual([chosen for chosen, _ in prices],
                         ["1x64 eng51", "2x32 eng51", "1x64 eng51"])
        self.assertAllClose([list(p.values()) for _, p in prices],
                            [[1.00, 1.02], [1.03, 1.00], [0.99, 1.02]])
        self.assertEqual(plan_spread.plan_differences(runs[::2]), [])
        # Where the processes measured 1x64 clearly ahead, the lead says so.
        runs = [run(one, 0.2, 1.0, 0.6), run(two, 0.2, 1.3, 0.6), run(one, 0.2, 1.0, 0.62)]
        (*_, lead, _gap, _prices), = plan_spread.plan_differences(runs)
        self.assertAlmostEqual(lead, 0.2)
        # A plan another process did not time has no price there: no lead.
        runs[0]["kernels"][0]["times"] = {"64 eng51": 1.0}
        runs[1]["kernels"][0]["times"] = {"32 eng51": 0.5}
        runs[2]["kernels"][0].pop("times")
        (*_, lead, _gap, prices), = plan_spread.plan_differences(runs)
        self.assertIsNone(lead)
        self.assertEqual([p for _, p in prices],
                         [{"1x64 eng51": 1.0, "2x32 eng51": None},
                          {"1x64 eng51": None, "2x32 eng51": 1.0},
                          {"1x64 eng51": None, "2x32 eng51": None}])

    def test_processes_price_each_others_plans_by_candidate_name_not_index(self):
        plan_spread = _benchmark_script(self, "plan_spread")
        fast64 = dict(algo=0, math_type=1, engine=dict(id=51, transposed=False, knobs=[[27, 8]]))
        fast32 = dict(algo=0, math_type=1, engine=dict(id=51, transposed=False, knobs=[[27, 1]]))
        legacy = dict(algo=1, math_type=1)

        def kernel(algos, rows, plan):
            """A record of _engine.kernels(): rows (size, candidate, ms, bytes)."""
            return dict(shape="N=64 C=128 H=56 W=56 K=256 R=3 S=3", planned_limit=64 << 20,
                        table=[dict(size=s, algo=algos.index(a), time_ms=t, workspace_bytes=b)
                               for s, a, t, b in rows],
                        algos=algos, plan=dict(micro_batches=plan), **{"pass": "forward"})

        def mb(size, algo, ms, bytes_=0):
            return dict(size=size, algo=algo, time_ms=ms, workspace_bytes=bytes_)

        # Two processes list the same candidates in other orders.
        a = kernel([fast64, fast32, legacy],
                   [(64, fast64, 1.00, 0), (64, fast32, 1.20, 0), (64, legacy, 1.10, 8),
                    (64, legacy, 0.50, 65 << 20), (32, fast32, 0.52, 0), (32, fast64, 0.60, 0)],
                   [mb(64, "eng51{k27=8}", 1.00)])
        b = kernel([legacy, fast32, fast64],
                   [(64, fast64, 1.02, 0), (32, fast32, 0.50, 0), (64, legacy, 1.30, 8)],
                   [mb(32, "eng51{k27=1}", 0.50)] * 2)
        c = kernel([legacy, fast64], [(64, fast64, 1.12, 0), (64, legacy, 1.05, 8)],
                   [mb(64, "ALGO_1/tensor-op", 1.05, 8)])
        (pa,), (pb,), (pc,) = (bench_models.kernel_plans([k]) for k in (a, b, c))
        self.assertEqual(pa["micro_batches"], [[64, "eng51{k27=8}"]])
        self.assertEqual(pc["micro_batches"], [[64, "legacy 1/math 1"]])
        # Over the limit, or over 25 % slower than the fastest of its size: not kept.
        self.assertEqual(set(pa["times"]), {"64 eng51{k27=8}", "64 eng51{k27=1}",
                                            "64 legacy 1/math 1", "32 eng51{k27=1}",
                                            "32 eng51{k27=8}"})
        self.assertNotIn("64 legacy 1/math 1", pb["times"])
        self.assertAlmostEqual(pa["gap"], 0.1)
        # 2x32 over 1x64: +4 % in a, -1.96 % in b; median +1.02 %.
        (*_, lead, _gap, _prices), = plan_spread.plan_differences([dict(kernels=[pa]),
                                                                   dict(kernels=[pb])])
        self.assertAlmostEqual(lead, (0.04 + 1.0 / 1.02 - 1) / 2)
        # c's legacy plan: +10 % in a, -6.25 % in c.
        (*_, lead, _gap, _prices), = plan_spread.plan_differences([dict(kernels=[pa]),
                                                                   dict(kernels=[pc])])
        self.assertAlmostEqual(lead, (0.10 + 1.05 / 1.12 - 1) / 2)

    # A kernel record as plan_spread's processes write it (kernel_plans).
    _KERNEL = dict(shape="N=64 C=64 H=56 W=56 K=64 R=3 S=3", gap=0.02,
                   micro_batches=[[64, "eng7"]], times={"64 eng7": 1.0}, plan="1x64 eng7",
                   **{"pass": "forward"})

    def _summarized(self, files):
        """What ``plan_spread.py --summarize`` prints for JSONs written with
        these runs: files, {name: runs}, gzipped where the name ends in .gz."""
        plan_spread = _benchmark_script(self, "plan_spread")
        paths = []
        for name, runs in files.items():
            paths.append(os.path.join(self.get_temp_dir(), name))
            with (gzip.open if name.endswith(".gz") else open)(paths[-1], "wt") as f:
                json.dump(dict(runs=runs), f)
        out = io.StringIO()
        with mock.patch("sys.argv", ["plan_spread.py", "--summarize", *paths]), \
                contextlib.redirect_stdout(out):
            plan_spread.main()
        return out.getvalue()

    def test_summarize_reads_a_written_json_gzipped_or_not(self):
        runs = {"stock": [dict(step_ms=10.0), dict(step_ms=10.5)],
                "rewrite": [dict(step_ms=9.0, kernels=[self._KERNEL]),
                            dict(step_ms=9.9, kernels=[dict(self._KERNEL, plan="2x32 eng7")])]}
        outputs = [self._summarized({name: runs}) for name in ("spread.json", "spread.json.gz")]
        self.assertEqual(outputs[0], outputs[1])
        self.assertIn("stock: steps 10.00, 10.50 ms; spread 1.050", outputs[0])
        self.assertIn("rewrite: steps 9.00, 9.90 ms; spread 1.100; 1 of 1 kernels planned "
                      "differently", outputs[0])

    def test_summarize_pools_the_processes_of_several_files(self):
        # Each file's processes agree; only pooled do the plans differ.
        text = self._summarized({
            "pooled0.json": {"stock": [dict(step_ms=10.0)],
                             "rewrite": [dict(step_ms=9.0, kernels=[self._KERNEL])] * 2},
            "pooled1.json": {"stock": [dict(step_ms=11.0)],
                             "rewrite": [dict(step_ms=9.9,
                                              kernels=[dict(self._KERNEL, plan="2x32 eng7")])]}})
        self.assertIn(os.path.join(self.get_temp_dir(), "pooled0.json") + ":\n", text)
        self.assertEqual(text.count("0 of 1 kernels planned differently"), 2)
        pooled = text.split("pooled, 2 files:\n")[1]
        self.assertIn("stock: steps 10.00, 11.00 ms; spread 1.100", pooled)
        self.assertIn("rewrite: steps 9.00, 9.00, 9.90 ms; spread 1.100; 1 of 1 kernels planned "
                      "differently", pooled)


class NeighbourReplayTest(tf.test.TestCase):
    """benchmarks/neighbour_replay.py: candidates of a new size from its neighbours' rows."""

    def test_rules_count_candidates_and_the_time_they_miss_at_the_new_size(self):
        replay = _benchmark_script(self, "neighbour_replay")
        conv = "C=64 H=56 W=56 K=64 R=1 S=1 NHWC float32"

        def kernel(batch, rows):
            lines = [f"tf_ucudnn: benchmarked forward N={batch} {conv} at {len(rows)} sizes: "
                     "legacy 0.000 s; graph: 4 candidates (heuristics and plans 0.001 s), "
                     "12 runs 0.010 s, 0 engines pruned"]
            for size, trials in rows.items():
                lines.append(f" timed at {size}:")
                lines += [f"  {name} (workspace {ws} bytes): loaded, screened {ms} ms{verdict}"
                          for name, ws, ms, verdict in trials]
            return lines

        log = kernel(128, {
            64: [("eng1{}", 0, 1.00, ", timed 1.00 ms"),
                 ("eng2{}", 100, 1.02, ", timed 1.02 ms"),  # behind eng1 within the slack: off
                 ("eng3{}", 8 << 20, 0.90, ", timed 0.90 ms"),
                 ("eng4{}", 0, 1.50, ", dominated")],  # dropped: not in the row
            128: [("eng1{}", 0, 2.00, ", timed 2.00 ms"), ("eng2{}", 0, 2.10, ", timed 2.10 ms")],
        }) + ["  eng1{}: re-timed 2.00 ms -> 1.95 ms"] + kernel(100, {
            100: [("eng2{}", 0, 1.50, ", timed 1.50 ms"), ("eng1{}", 0, 1.55, ", timed 1.55 ms"),
                  ("eng3{}", 8 << 20, 1.60, ", timed 1.60 ms")],
        })
        path = os.path.join(self.get_temp_dir(), "debug.log")
        with open(path, "w") as f:
            f.write("\n".join(log) + "\n")
        rows = replay.read_rows(replay.read_log(path))
        self.assertEqual(rows[("forward", conv, 128)][128]["eng1{}"], (1.95, 0))
        self.assertNotIn("eng4{}", rows[("forward", conv, 128)][64])
        results = {name: (count, loss) for name, count, loss, _ in
                   replay.replay(rows, 128, 100, 64, 128)}
        # Whole rows: eng1, eng2, eng3; the fastest at 100 (eng2) among them.
        self.assertEqual(results["whole rows"][0], 3)
        self.assertAlmostEqual(results["whole rows"][1], 0.0)
        # Fronts: eng1 and eng3 at 64, eng1 at 128; eng2 is missed: 1.55 / 1.50.
        self.assertEqual(results["Pareto front per row"][0], 2)
        self.assertAlmostEqual(results["Pareto front per row"][1], 1.55 / 1.50 - 1)
