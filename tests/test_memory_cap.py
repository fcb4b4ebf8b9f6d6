"""The memory-cap benchmark's CPU-side parts: the batch-size search, failure
bookkeeping, the summary, the JSON and its figure, parallel sweeps over GPUs,
the options, and one real run of the worker on the CPU."""

import contextlib
import glob
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from unittest import mock

import pytest
import tensorflow as tf

from tf_ucudnn import bench
from tf_ucudnn.bench import harness, memory_cap
from tf_ucudnn.bench.memory_cap import launcher as memory_cap_launcher
from tf_ucudnn.bench.memory_cap import runner as memory_cap_runner
from tf_ucudnn.bench.memory_cap import worker as memory_cap_worker

GiB, MiB = 1 << 30, 1 << 20


def threshold_trains(largest, status="oom"):
    """A fake run of N: ``"ok"`` up to ``largest``, else ``status``; records the sizes tried."""
    tried = []

    def trains(n):
        tried.append(n)
        return "ok" if n <= largest else status

    return trains, tried


def fake_run(batch, largest, *, ms_per_image=1.0, fixed_ms=10.0):
    """A fake worker's run dict: trains up to ``largest``, step time fixed + per image."""
    if batch > largest:
        return dict(status="oom", message="ResourceExhaustedError: OOM when allocating tensor")
    step_ms = fixed_ms + ms_per_image * batch
    return dict(status="ok", step_ms=step_ms, step_ms_repeats=[step_ms] * 3,
                images_per_s=1e3 * batch / step_ms, first_step_s=2.0, peak_bytes=batch * MiB,
                steady_peak_bytes=batch * MiB, loss=1.0)


def quietly(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


class BatchSearchTest(tf.test.TestCase):
    """search_batch: doubling, then a few bisection steps, down from a start that fails."""

    def test_doubling_then_bisecting_brackets_the_threshold(self):
        trains, tried = threshold_trains(100)
        found = memory_cap.search_batch(trains, start=32, max_batch=4096, bisect_steps=2)
        # 32, 64 train; 128 fails; 96 trains; 112 fails.
        self.assertEqual(found, (96, 112), f"tried {tried}")
        self.assertEqual(tried, [32, 64, 128, 96, 112])

    def test_more_bisection_steps_reach_the_threshold(self):
        trains, tried = threshold_trains(100)
        found = memory_cap.search_batch(trains, start=32, bisect_steps=10)
        self.assertEqual(found, (100, 101), f"tried {tried}")
        trains, tried = threshold_trains(100)
        self.assertEqual(memory_cap.search_batch(trains, start=32, bisect_steps=0), (64, 128))
        self.assertEqual(tried, [32, 64, 128])

    def test_a_start_that_fails_halves_until_one_trains(self):
        trains, tried = threshold_trains(5)
        found = memory_cap.search_batch(trains, start=32, bisect_steps=2)
        self.assertEqual(found, (5, 6), f"tried {tried}")
        self.assertEqual(tried, [32, 16, 8, 4, 6, 5])
        trains, tried = threshold_trains(0)
        self.assertEqual(memory_cap.search_batch(trains, start=8), (None, 1))
        self.assertEqual(tried, [8, 4, 2, 1])

    def test_a_timeout_at_the_start_searches_down_but_an_error_ends_the_search(self):
        trains, tried = threshold_trains(3, status="timeout")
        self.assertEqual(memory_cap.search_batch(trains, start=8, bisect_steps=0), (2, 4))
        trains, tried = threshold_trains(3, status="error")
        self.assertEqual(memory_cap.search_batch(trains, start=8), (None, 8))
        self.assertEqual(tried, [8])

    def test_max_batch_bounds_the_doubling(self):
        trains, tried = threshold_trains(10_000)
        self.assertEqual(memory_cap.search_batch(trains, start=32, max_batch=100), (100, None))
        self.assertEqual(tried, [32, 64, 100])
        trains, tried = threshold_trains(10_000)
        self.assertEqual(memory_cap.search_batch(trains, start=500, max_batch=100), (100, None))
        self.assertEqual(tried, [100])

    def test_bad_arguments_are_refused(self):
        trains, _ = threshold_trains(1)
        for kwargs in (dict(start=0), dict(start=1, max_batch=0),
                       dict(start=1, bisect_steps=-1)):
            with self.subTest(**kwargs), self.assertRaisesRegex(ValueError, "need start"):
                memory_cap.search_batch(trains, **kwargs)


class StepSearchTest(tf.test.TestCase):
    """step_batch: fixed steps up from a start that trains, or down from one that fails."""

    def test_steps_up_until_a_size_fails(self):
        trains, tried = threshold_trains(420)
        self.assertEqual(memory_cap.step_batch(trains, start=384, step=16), (416, 432))
        self.assertEqual(tried, [384, 400, 416, 432])

    def test_steps_down_until_a_size_trains(self):
        trains, tried = threshold_trains(258)
        self.assertEqual(memory_cap.step_batch(trains, start=288, step=16), (256, 272))
        self.assertEqual(tried, [288, 272, 256])
        trains, tried = threshold_trains(3, status="timeout")
        self.assertEqual(memory_cap.step_batch(trains, start=9, step=4), (1, 5))
        trains, tried = threshold_trains(0)
        self.assertEqual(memory_cap.step_batch(trains, start=9, step=4), (None, 1))
        self.assertEqual(tried, [9, 5, 1])

    def test_an_error_on_the_way_down_ends_the_search(self):
        trains, tried = threshold_trains(3, status="error")
        self.assertEqual(memory_cap.step_batch(trains, start=9, step=4), (None, 9))
        self.assertEqual(tried, [9])

    def test_max_batch_bounds_the_steps(self):
        trains, tried = threshold_trains(10_000)
        self.assertEqual(memory_cap.step_batch(trains, start=64, step=16, max_batch=90),
                         (90, None))
        self.assertEqual(tried, [64, 80, 90])

    def test_bad_arguments_are_refused(self):
        trains, _ = threshold_trains(1)
        for kwargs in (dict(start=0, step=1), dict(start=1, step=0),
                       dict(start=1, step=1, max_batch=0)):
            with self.subTest(**kwargs), self.assertRaisesRegex(ValueError, "need start"):
                memory_cap.step_batch(trains, **kwargs)


class FailureBookkeepingTest(tf.test.TestCase):
    """oom, error and timeout: from the worker's exception, its output, or its clock."""

    def test_messages_that_read_as_out_of_memory(self):
        for message in ("ResourceExhaustedError: OOM when allocating tensor with shape[64,64]",
                        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.1GiB",
                        "Allocator (GPU_0_bfc) ran out of memory trying to allocate",
                        "CUDA_ERROR_OUT_OF_MEMORY: out of memory", "CUDNN_STATUS_ALLOC_FAILED",
                        "failed to allocate 1.00G (1073741824 bytes) from device"):
            self.assertEqual(memory_cap.failure_status(message), "oom", message)
        for message in ("ValueError: unknown model", "Segmentation fault", "", None,
                        "InvalidArgumentError: room for improvement"):
            self.assertEqual(memory_cap.failure_status(message), "error", message)

    def test_the_worker_reports_resource_exhausted_as_oom_and_other_exceptions_as_error(self):
        raised = {
            "oom": tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"),
            # XLA's allocation failure as another status: its message says so.
            "oom ": tf.errors.InternalError(None, None, "RESOURCE_EXHAUSTED: Out of memory"),
            "error": ValueError("workspace_limit must be a byte count, got 'auto'"),
        }
        for want, exception in raised.items():
            with self.subTest(exception=type(exception).__name__), \
                    mock.patch.object(memory_cap_worker, "_train", side_effect=exception):
                result = memory_cap.run_worker("vgg16", "ucudnn", "auto", 8 * GiB, 64)
            self.assertEqual(result["status"], want.strip(), result)
            self.assertIn(type(exception).__name__, result["message"])
            self.assertIn("note", result)

    def test_a_result_line_wins_over_the_exit_status_and_stderr_decides_otherwise(self):
        ok = dict(status="oom", message="OOM when allocating tensor")
        out = "noise\nRESULT " + json.dumps(ok) + "\n"
        self.assertEqual(memory_cap.parse_worker_output(-6, out, "Aborted"), ok)
        died = memory_cap.parse_worker_output(
            -6, "", "F0000 cuda_driver.cc] CUDA_ERROR_OUT_OF_MEMORY: out of memory\nAborted")
        self.assertEqual(died["status"], "oom")
        self.assertTrue(died["message"].startswith("exit status -6: "), died)
        failed = memory_cap.parse_worker_output(1, "", "x" * 5000 + "\nTypeError: bad")
        self.assertEqual(failed["status"], "error")
        self.assertTrue(failed["message"].endswith("TypeError: bad"))
        self.assertLessEqual(len(failed["message"]), 700)

    def test_a_run_keeps_tf_ucudnns_own_stderr_lines_and_its_line_counts_step_downs(self):
        step_down = ("I tf_ucudnn: workspace_limit=auto: 10 bytes free for forward N=96; "
                     "running a plan that needs 0 bytes instead of 512 (logged once per kernel)")
        plan = "tf_ucudnn: GPU:0 forward N=96: (96, algo 1) (workspace_limit=auto: planned)"
        stderr = "\n".join(["I0000 noise", plan, step_down, "W0000 more noise"])
        out = "RESULT " + json.dumps(fake_run(96, 128)) + "\n"
        ok = memory_cap.parse_worker_output(0, out, stderr)
        self.assertEqual(ok["ucudnn_log"], [plan, step_down])
        self.assertEqual(ok["status"], "ok")
        failed = memory_cap.parse_worker_output(1, "", stderr + "\nTypeError: bad")
        self.assertEqual((failed["status"], failed["ucudnn_log"]), ("error", [plan, step_down]))
        self.assertNotIn("ucudnn_log", memory_cap.parse_worker_output(0, out, "I0000 noise"))
        self.assertEqual(len(memory_cap.ucudnn_log("tf_ucudnn: x\n" * 1000)), 400)
        benchmarked = ("tf_ucudnn: benchmarked backward-filter N=96 at 8 sizes: legacy 0.005 s; "
                       "graph: 29 candidates (heuristics and plans 40.021 s)")
        host = " host: 8 op graphs 0.002 s, 8 heuristics queries 0.1 s"
        debug = "\n".join([benchmarked, host, " size 96:", "  eng48 kept", host, plan])
        self.assertEqual(memory_cap.ucudnn_log(debug), [benchmarked, host, plan])
        sweep = dict(model="vgg16", cap=8 * GiB, mode="ucudnn-xla", limit="auto")
        line = memory_cap_runner._run_line(sweep, dict(ok, batch=96, run=0))
        self.assertTrue(line.endswith(", 1 kernel stepped down"), line)
        ok["ucudnn_log"] = [step_down, step_down.replace("N=96", "N=95")]
        self.assertTrue(memory_cap_runner._run_line(sweep, dict(ok, batch=96, run=0))
                        .endswith(", 2 kernels stepped down"))
        self.assertNotIn("stepped down",
                         memory_cap_runner._run_line(sweep, dict(fake_run(96, 128), batch=96, run=0)))

        def slow(cmd, env, **kwargs):  # a timeout keeps what the worker wrote (bytes)
            raise subprocess.TimeoutExpired(cmd, kwargs["timeout"], stderr=stderr.encode())

        with mock.patch.object(memory_cap_launcher.subprocess, "run", side_effect=slow):
            timed_out = memory_cap.launch(sweep, 96, timeout=5)
        self.assertEqual((timed_out["status"], timed_out["ucudnn_log"]),
                         ("timeout", [plan, step_down]))

    def test_launch_records_a_timeout_and_pins_the_worker_to_its_gpu(self):
        sweep = dict(model="vgg16", cap=8 * GiB, mode="ucudnn", limit="auto")
        seen = {}

        def slow(cmd, env, **kwargs):
            seen.update(cmd=cmd, env=env, timeout=kwargs["timeout"])
            raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

        with mock.patch.object(memory_cap_launcher.subprocess, "run", side_effect=slow):
            result = memory_cap.launch(sweep, 32, gpu="1", timeout=5)
        self.assertEqual(result["status"], "timeout")
        self.assertEqual(result["message"], "timed out after 5 s")
        self.assertEqual(seen["env"]["CUDA_VISIBLE_DEVICES"], "1")
        spec = json.loads(seen["cmd"][-1])
        self.assertEqual((spec["limit"], spec["cap"], spec["batch"]), ("auto", 8 * GiB, 32))
        self.assertEqual((spec["steps_per_execution"], spec["prefetch_to_device"]), (1, False))

        def done(cmd, env, **kwargs):
            return subprocess.CompletedProcess(cmd, 0, "RESULT " + json.dumps(fake_run(8, 16)),
                                               "")

        with mock.patch.object(memory_cap_launcher.subprocess, "run", side_effect=done):
            result = memory_cap.launch(sweep, 8, gpu=None, timeout=5)
        self.assertEqual(result["status"], "ok")
        self.assertIsNone(result["gpu"])


class SweepTest(tf.test.TestCase):

    def test_runs_per_size_train_only_if_all_do_and_a_failure_skips_the_rest(self):
        calls = []

        def measure(sweep, batch):
            calls.append(batch)
            # 64 trains in its first process only: it does not count as trained.
            if batch == 64 and calls.count(64) == 2:
                return dict(status="oom", message="OOM")
            return fake_run(batch, 100, ms_per_image=len(calls) % 2 + 1)

        sweep = dict(model="vgg16", cap=8 * GiB, mode="stock", limit=None)
        result = memory_cap.run_sweep(sweep, measure, start_batch=32, max_batch=4096,
                                      bisect_steps=1, runs=3)
        # 32 x3; 64 ok then oom (third skipped); bisect 48 x3.
        self.assertEqual(calls, [32, 32, 32, 64, 64, 48, 48, 48])
        self.assertEqual([(r["batch"], r["run"]) for r in result["runs"]][3:5], [(64, 0), (64, 1)])
        row, = memory_cap.summarize([result])
        self.assertEqual((row["largest_batch"], row["failed_batch"], row["failure"]),
                         (48, 64, "oom"), row)
        # 48's step times (calls 6 to 8): 10 + 48 x (1, 2, 1) ms; the median 58 ms.
        self.assertEqual([r["step_ms"] for r in result["runs"][-3:]], [58.0, 106.0, 58.0])
        self.assertAlmostEqual(row["step_ms"], 58.0)
        self.assertAlmostEqual(row["best_images_per_s"], 48e3 / 58.0)

    def test_the_summary_gives_the_largest_size_the_best_throughput_and_ratios_to_stock(self):
        def sweep(mode, limit, largest, ms_per_image, fixed_ms=10.0, cap=8 * GiB):
            s = dict(model="vgg16", cap=cap, mode=mode, limit=limit)
            return memory_cap.run_sweep(
                s, lambda _, n: fake_run(n, largest, ms_per_image=ms_per_image, fixed_ms=fixed_ms),
                start_batch=16, max_batch=512, bisect_steps=2)

        sweeps = [sweep("stock", None, 40, 1.0),  # 16, 32 ok; 64 oom; 48 oom; 40 ok
                  sweep("stock-xla", None, 32, 0.5),  # 16, 32; 64, 48, 40 oom
                  sweep("ucudnn", 64 * MiB, 100, 0.8),  # 16..64; 128 oom; 96 ok; 112 oom
                  sweep("ucudnn-xla", "auto", 0, 1.0),  # nothing trains
                  sweep("stock", None, 20, 1.0, cap=16 * GiB)]  # another cap: its own stock
        rows = {(r["setting"], r["cap"]): r for r in memory_cap.summarize(sweeps)}
        stock, xla = rows[("stock", 8 * GiB)], rows[("stock-xla", 8 * GiB)]
        ours, none = rows[("ucudnn 64 MiB", 8 * GiB)], rows[("ucudnn-xla auto", 8 * GiB)]
        self.assertEqual((stock["largest_batch"], stock["failed_batch"]), (40, 48))
        self.assertEqual((xla["largest_batch"], xla["failed_batch"]), (32, 40))
        self.assertEqual((ours["largest_batch"], ours["failed_batch"]), (96, 112))
        # img/s = 1000 N / (10 + k N): stock-xla's best is 32 / 26 ms, ours 96 / 86.8 ms.
        self.assertEqual(xla["best_batch"], 32)
        self.assertAlmostEqual(xla["best_images_per_s"], 32e3 / 26)
        self.assertAlmostEqual(stock["best_images_per_s"], 40e3 / 50)
        self.assertAlmostEqual(ours["images_per_s_vs_stock"], (96e3 / 86.8) / (32e3 / 26))
        self.assertAlmostEqual(ours["batch_vs_stock"], 96 / 40)
        self.assertAlmostEqual(stock["batch_vs_stock"], 1.0)
        self.assertEqual((none["largest_batch"], none["failed_batch"], none["failure"]),
                         (None, 1, "oom"))
        self.assertIsNone(none["images_per_s_vs_stock"])
        self.assertAlmostEqual(rows[("stock", 16 * GiB)]["batch_vs_stock"], 1.0)
        self.assertEqual(stock["peak_bytes"], 40 * MiB)

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            memory_cap.print_table(memory_cap.summarize(sweeps))
        lines = out.getvalue().splitlines()
        self.assertLen(lines, 2 + len(sweeps))
        ours_line = " ".join(lines[4].split())
        self.assertIn(f"vgg16 8 GiB ucudnn 64 MiB 96 112 oom {96e3 / 86.8:.1f} 96 "
                      f"{(96e3 / 86.8) / (32e3 / 26):.2f}x 2.40x 2.00 0.09", ours_line)
        self.assertIn("ucudnn-xla auto none 1 oom", " ".join(lines[5].split()))


class ReportTest(tf.test.TestCase):

    def _report(self):
        sweeps = [memory_cap.run_sweep(dict(model="unet", cap=8 * GiB, mode=mode, limit=limit),
                                       lambda _, n, k=k: fake_run(n, k), bisect_steps=1)
                  for mode, limit, k in (("stock", None, 6), ("ucudnn", "auto", 20),
                                         ("ucudnn-xla", 256 * MiB, 2))]
        return memory_cap.report(sweeps, environment=dict(gpus=["NVIDIA H100"]),
                                 args=dict(models=["unet"], caps=[8 * GiB]))

    def test_the_json_round_trips_with_every_run_and_the_summary(self):
        report = self._report()
        path = os.path.join(tempfile.mkdtemp(), "cap.json")
        quietly(bench.write_json, path, report)
        with open(path) as f:
            saved = json.load(f)
        self.assertEqual(saved, report)
        self.assertEqual(set(saved), {"kind", "complete", "environment", "args", "sweeps",
                                      "summary"})
        self.assertEqual((saved["kind"], saved["complete"]), ("memory_cap", True))
        sweep = saved["sweeps"][1]
        self.assertEqual(set(sweep), {"model", "cap", "mode", "limit", "runs"})
        self.assertEqual(sweep["limit"], "auto")
        # unet starts at 4: 4, 8, 16 train, 32 fails, 24 fails.
        self.assertEqual([r["batch"] for r in sweep["runs"]], [4, 8, 16, 32, 24])
        self.assertEqual(saved["summary"], memory_cap.summarize(saved["sweeps"]))
        self.assertEqual([r["setting"] for r in saved["summary"]],
                         ["stock", "ucudnn auto", "ucudnn-xla 256 MiB"])

    def test_the_figure_is_drawn_from_a_saved_json(self):
        path = os.path.join(tempfile.mkdtemp(), "cap.json")
        quietly(bench.write_json, path, self._report())
        prefix = os.path.join(tempfile.mkdtemp(), "figures", "cap")
        self.assertEqual(quietly(bench.main, ["plot", path, "--output", prefix]), 0)
        png = prefix + "_memory_cap.png"
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class MergeReportsTest(tf.test.TestCase):

    def _one(self, mode, limit, k, gpu):
        sweep = memory_cap.run_sweep(dict(model="unet", cap=8 * GiB, mode=mode, limit=limit),
                                     lambda _, n, k=k: fake_run(n, k), bisect_steps=1)
        return memory_cap.report([sweep], environment=dict(gpus=[gpu]),
                                 args=dict(modes=[mode]))

    def test_merged_summary_takes_ratios_across_the_reports(self):
        stock = self._one("stock", None, 6, "NVIDIA H200 (GPU 0)")
        ours = self._one("ucudnn", "auto", 20, "NVIDIA H200 (GPU 1)")
        merged = memory_cap.merge_reports([stock, ours])
        self.assertEqual([s["mode"] for s in merged["sweeps"]], ["stock", "ucudnn"])
        self.assertEqual(merged["environment"]["gpus"],
                         ["NVIDIA H200 (GPU 0)", "NVIDIA H200 (GPU 1)"])
        self.assertEqual(merged["args"], dict(merged=[dict(modes=["stock"]),
                                                      dict(modes=["ucudnn"])]))
        alone = ours["summary"][0]
        row = merged["summary"][1]
        self.assertIsNone(alone["batch_vs_stock"])  # no stock sweep in its own report
        self.assertEqual(row["batch_vs_stock"],
                         row["largest_batch"] / merged["summary"][0]["largest_batch"])
        self.assertGreater(row["batch_vs_stock"], 1.0)

    def test_a_repeated_sweep_or_another_kind_of_report_is_refused(self):
        stock = self._one("stock", None, 6, "NVIDIA H200")
        with self.assertRaisesRegex(ValueError, "repeats the sweep"):
            memory_cap.merge_reports([stock, stock])
        with self.assertRaisesRegex(ValueError, "not a memory-cap report"):
            memory_cap.merge_reports([stock, dict(results=[])])

    def test_plot_of_several_jsons_writes_one_merged_json_and_figure(self):
        folder = tempfile.mkdtemp()
        paths = []
        for name, args in (("a", ("stock", None, 6)), ("b", ("ucudnn", "auto", 20))):
            paths.append(os.path.join(folder, f"{name}.json"))
            quietly(bench.write_json, paths[-1], self._one(*args, "NVIDIA H200"))
        merged_path = os.path.join(folder, "merged.json")
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(folder)  # the figure goes to the current directory
            self.assertEqual(quietly(bench.main, ["plot", *paths, "--json", merged_path]), 0)
        with open(merged_path) as f:
            merged = json.load(f)
        self.assertEqual([r["setting"] for r in merged["summary"]], ["stock", "ucudnn auto"])
        with open(os.path.join(folder, "merged_memory_cap.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with open(paths[0], "w") as f:
            json.dump(dict(results=[]), f)
        self.assertEqual(quietly(bench.main, ["plot", *paths, "--output",
                                              os.path.join(folder, "other")]), 1)


class CompareLimitsTest(tf.test.TestCase):
    """A workspace limit against another: the rule for making ``auto`` the default."""

    @staticmethod
    def _sweep(mode, limit, largest, ms_per_image, model="edsr", cap=8 * GiB):
        return memory_cap.run_sweep(
            dict(model=model, cap=cap, mode=mode, limit=limit),
            lambda _, n: fake_run(n, largest, ms_per_image=ms_per_image),
            start_batch=8, max_batch=64, bisect_steps=1)

    def test_ratios_at_common_sizes_lost_sizes_and_the_verdict(self):
        sweeps = [
            # ucudnn: auto 2 % slower per image, same largest N (16, 32; 64 oom; 48 ok).
            self._sweep("ucudnn", "auto", 50, 1.02), self._sweep("ucudnn", 64 * MiB, 50, 1.0),
            # ucudnn-xla: auto faster, but out of memory at 48 (so 32 is its largest N
            # after one bisection step) where 64 MiB trains.
            self._sweep("ucudnn-xla", "auto", 40, 0.5), self._sweep("ucudnn-xla", 64 * MiB, 50, 1.0),
            # stock-xla has no limit; unet only at 64 MiB: neither is compared.
            self._sweep("stock-xla", None, 30, 1.0), self._sweep("ucudnn", 64 * MiB, 50, 1.0, "unet")]
        same, lost = memory_cap.compare_limits(sweeps, "auto", 64 * MiB)
        self.assertEqual((same["mode"], lost["mode"]), ("ucudnn", "ucudnn-xla"))
        # img/s = 1000 N / (10 + k N): the ratio is (10 + N) / (10 + 1.02 N), worst at the largest N.
        self.assertEqual(list(same["ratios"]), [8, 16, 32, 48])
        self.assertEqual(same["worst_batch"], 48)
        self.assertAlmostEqual(same["worst_ratio"], 58 / (10 + 1.02 * 48))
        self.assertEqual((same["lost_batches"], same["largest_batches"]), ([], (48, 48)))
        self.assertTrue(same["holds"])
        self.assertEqual((lost["lost_batches"], lost["largest_batches"]), ([48], (32, 48)))
        self.assertGreater(lost["worst_ratio"], 1.0)
        self.assertFalse(lost["holds"])
        # A tolerance of 1 % turns the 2 % slowdown into a miss.
        self.assertFalse(memory_cap.compare_limits(sweeps[:2], "auto", 64 * MiB,
                                                   tolerance=0.01)[0]["holds"])
        with self.assertRaisesRegex(ValueError, "fraction"):
            memory_cap.compare_limits(sweeps, "auto", 64 * MiB, tolerance=1.0)

    def test_the_command_prints_each_pair_and_the_verdict(self):
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, "edsr.json")
        sweeps = [self._sweep("ucudnn", "auto", 50, 1.02), self._sweep("ucudnn", 64 * MiB, 50, 1.0)]
        quietly(bench.write_json, path, memory_cap.report(sweeps, environment={}, args={}))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = bench.main(["plot", path, "--compare-limits", "auto,64MiB", "--output",
                                 os.path.join(folder, "edsr_figure")])
        self.assertEqual(status, 0)
        text = out.getvalue()
        self.assertIn("workspace limit auto against 64 MiB", text)
        self.assertIn("edsr 8 GiB ucudnn 8,16,32,48 "
                      f"{58 / (10 + 1.02 * 48):.3f} 48 - 48 / 48 yes", " ".join(text.split()))
        self.assertIn("verdict: never more than 3% slower and never out of memory where 64 MiB "
                      "trains: holds (1 of 1 model, cap and mode pairs hold)", text)
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            bench.main(["plot", path, "--compare-limits", "auto"])
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            bench.main(["memory-cap", "--models", "edsr", "--caps", "8GiB",
                        "--compare-limits", "auto,64MiB"])


class ParallelSweepsTest(tf.test.TestCase):

    def test_two_gpus_run_distinct_sweeps_at_once_and_every_sweep_once(self):
        lock = threading.Lock()
        busy, overlap, launched = set(), [], []

        def launcher(sweep, batch, *, gpu, timeout, steps_per_epoch, epochs, precision,
                     steps_per_execution, prefetch_to_device):
            key = (sweep["model"], sweep["cap"], sweep["mode"], sweep["limit"])
            with lock:
                self.assertNotIn(gpu, busy, "two processes at once on one GPU")
                busy.add(gpu)
                launched.append((key, batch, gpu))
                overlap.append(len(busy))
            time.sleep(0.01)
            with lock:
                busy.discard(gpu)
            return fake_run(batch, 8)

        sweeps = quietly(memory_cap.run_memory_cap, ["edsr"], [8 * GiB, 16 * GiB],
                         limits=[64 * MiB, "auto"], gpus=["0", "1"], launcher=launcher,
                         progress=False, bisect_steps=0)
        self.assertLen(sweeps, 2 * 6)  # 2 caps x (stock, stock-xla, ucudnn x2, ucudnn-xla x2)
        keys = [(s["model"], s["cap"], s["mode"], s["limit"]) for s in sweeps]
        self.assertLen(set(keys), len(keys))
        self.assertEqual(keys, [(s["model"], s["cap"], s["mode"], s["limit"]) for s in
                                memory_cap.sweeps_of(["edsr"], [8 * GiB, 16 * GiB],
                                                     limits=[64 * MiB, "auto"])])
        for key in keys:  # edsr starts at 8: 8 trains, 16 fails; one GPU per sweep
            runs = [(batch, gpu) for k, batch, gpu in launched if k == key]
            self.assertEqual([b for b, _ in runs], [8, 16], key)
            self.assertLen({gpu for _, gpu in runs}, 1, key)
        self.assertEqual({gpu for _, _, gpu in launched}, {"0", "1"})
        self.assertEqual(max(overlap), 2, "the two GPUs never ran at once")
        self.assertEqual({s["gpu"] for s in sweeps}, {"0", "1"})

    def test_visible_gpus_without_starting_tensorflow(self):
        self.assertEqual(memory_cap.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}), ["2", "3"])
        self.assertEqual(memory_cap.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}), [])
        self.assertEqual(memory_cap.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}), [])
        fake = os.path.join(tempfile.mkdtemp(), "nvidia-smi")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nprintf '0\\n1\\n'\n")
        os.chmod(fake, 0o755)
        self.assertEqual(memory_cap.visible_gpus({}, nvidia_smi=fake), ["0", "1"])
        self.assertEqual(memory_cap.visible_gpus({}, nvidia_smi=fake + ".missing"), [])


class OptionsTest(tf.test.TestCase):

    def test_caps_limits_and_the_sweep_options(self):
        args = bench.parse_args(["memory-cap", "--models", "vgg16,unet", "--caps", "8GiB,16GiB",
                                 "--limits", "64MiB,auto", "--gpus", "0,1"])
        self.assertEqual(args.caps, [8 * GiB, 16 * GiB])
        self.assertEqual(args.limits, [64 * MiB, "auto"])
        self.assertEqual(args.gpus, ["0", "1"])
        self.assertEqual((args.max_batch, args.bisect_steps, args.steps_per_epoch, args.epochs),
                         (4096, 2, 5, 3))
        args = bench.parse_args(["memory-cap", "--models", "edsr", "--caps", "12GiB", "--modes",
                                 "ucudnn,stock", "--start-batch", "3"])
        self.assertEqual((args.limits, args.modes, args.start_batch),
                         ([64 * MiB], ["ucudnn", "stock"], 3))
        self.assertEqual(bench.parse_args(["memory-cap", "--models", "edsr", "--caps", "8GiB"]
                                          ).modes, ["stock", "stock-xla", "ucudnn", "ucudnn-xla"])
        # The batch-norm modes run when asked for.
        self.assertEqual(bench.parse_args(["memory-cap", "--models", "unet-bn", "--caps", "8GiB",
                                           "--modes", "ucudnn-bn,ucudnn-bn-xla,"
                                           "ucudnn-bnrecompute-xla"]).modes,
                         ["ucudnn-bn", "ucudnn-bn-xla", "ucudnn-bnrecompute-xla"])
        self.assertEqual(bench.parse_args(["layers"]).limits, [64 * MiB, 256 * MiB])

    def test_the_input_pipeline_options_reach_every_worker_and_the_report(self):
        args = bench.parse_args(["memory-cap", "--models", "edsr", "--caps", "8GiB"])
        self.assertEqual((args.steps_per_execution, args.prefetch_to_device), (1, False))
        path = os.path.join(tempfile.mkdtemp(), "cap.json")
        seen = []

        def launcher(sweep, batch, **kwargs):
            seen.append((kwargs["steps_per_execution"], kwargs["prefetch_to_device"]))
            return fake_run(batch, 48)

        with mock.patch.object(memory_cap_runner, "launch", launcher):
            rc = quietly(bench.main, ["memory-cap", "--models", "vgg16", "--caps", "8GiB",
                                      "--modes", "stock", "--steps-per-epoch", "10",
                                      "--steps-per-execution", "5", "--prefetch-to-device",
                                      "--json", path, "--allow-cpu"])
        self.assertEqual(rc, 0)
        self.assertNotEqual(seen, [])
        self.assertEqual(set(seen), {(5, True)})
        with open(path) as f:
            saved = json.load(f)["args"]
        self.assertEqual((saved["steps_per_execution"], saved["prefetch_to_device"]), (5, True))
        with self.assertRaisesRegex(ValueError, "steps_per_execution=2 must divide "
                                                "steps_per_epoch=5"):
            memory_cap.run_memory_cap(["vgg16"], [8 * GiB], steps_per_execution=2,
                                      launcher=launcher, progress=False)

    def test_options_of_one_mode_are_refused_in_the_other(self):
        cap = ["memory-cap", "--models", "vgg16", "--caps", "8GiB"]
        for bad in ([*cap, "--modes", "rewrite"],
                    ["models", "--models", "vgg16", "--modes", "ucudnn"],
                    ["layers", "--limits", "auto"], ["models", "--models", "vgg16",
                                                     "--limits", "auto"],
                    ["memory-cap", "--caps", "8GiB"], ["memory-cap", "--models", "vgg16"],
                    ["memory-cap", "--models", "vgg16", "--caps", "1.5MiB"],
                    [*cap, "--gpus", "0,0"], [*cap, "--limits", "auto,1.5MiB"],
                    [*cap, "--totals", "256MiB"], [*cap, "--set", "alexnet"],
                    # Timed epochs must be whole calls of the training function.
                    [*cap, "--steps-per-execution", "2"],
                    [*cap, "--steps-per-epoch", "4", "--steps-per-execution", "3"]):
            with self.subTest(bad=bad), self.assertRaises(SystemExit), \
                    contextlib.redirect_stderr(io.StringIO()):
                bench.parse_args(bad)

    def test_the_command_writes_the_json_and_the_figure(self):
        path = os.path.join(tempfile.mkdtemp(), "cap.json")
        saved_while_running = []

        def launcher(sweep, batch, **kwargs):
            if os.path.exists(path):
                with open(path) as f:
                    saved = json.load(f)
                saved_while_running.append((saved["complete"], len(saved["sweeps"])))
            return fake_run(batch, 48)

        with mock.patch.object(memory_cap_runner, "launch", launcher):
            rc = quietly(bench.main, ["memory-cap", "--models", "vgg16", "--caps", "8GiB", "--modes",
                                      "stock,ucudnn", "--limits", "auto", "--gpus", "0",
                                      "--json", path, "--allow-cpu"])
        self.assertEqual(rc, 0)
        with open(path) as f:
            saved = json.load(f)
        self.assertEqual(saved["args"]["limits"], ["auto"])
        self.assertEqual([r["largest_batch"] for r in saved["summary"]], [48, 48])
        self.assertTrue(os.path.exists(path[:-len(".json")] + "_memory_cap.png"))
        # Sweeps run one at a time here: the second's runs saw the first saved.
        self.assertIn((False, 1), saved_while_running)
        self.assertTrue(saved["complete"])

    def test_a_fault_of_the_launcher_is_one_run_s_error_not_the_benchmark_s_end(self):
        def launcher(sweep, batch, **kwargs):
            if sweep["mode"] == "stock":
                raise json.JSONDecodeError("Expecting value", "RESULT {", 8)
            return fake_run(batch, 48)

        sweeps = quietly(memory_cap.run_memory_cap, ["vgg16"], [8 * GiB],
                         modes=["stock", "ucudnn"], launcher=launcher, progress=False)
        stock, ours = sweeps
        self.assertEqual([r["status"] for r in stock["runs"]], ["error"])
        self.assertIn("launching the worker: JSONDecodeError", stock["runs"][0]["message"])
        self.assertEqual(memory_cap.summarize(sweeps)[1]["largest_batch"], 48)

    def test_a_sweep_cut_off_keeps_the_runs_it_measured(self):
        """Each run is saved as it ends: a time limit that stops the benchmark in the
        middle of a sweep (a slow first step, say) loses only the run in progress."""
        snapshots = []

        def launcher(sweep, batch, **kwargs):
            if sweep["mode"] == "stock-xla" and batch == 48:
                raise KeyboardInterrupt  # the benchmark stopped from outside
            return fake_run(batch, 40)

        with self.assertRaises(KeyboardInterrupt):
            quietly(memory_cap.run_memory_cap, ["vgg16"], [8 * GiB], modes=["stock-xla"],
                    start_batch=32, launcher=launcher, progress=False,
                    on_sweep=lambda sweeps: snapshots.append(sweeps))
        last, = snapshots[-1]
        self.assertTrue(last["unfinished"])
        self.assertEqual([(r["batch"], r["status"]) for r in last["runs"]],
                         [(32, "ok"), (64, "oom")])
        row, = memory_cap.summarize(snapshots[-1])
        self.assertEqual((row["largest_batch"], row["failed_batch"], row["unfinished"]),
                         (32, 64, True))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            memory_cap.print_table([row])
        self.assertIn("stock-xla (cut off)", out.getvalue())

    def test_finished_sweeps_are_saved_without_the_unfinished_mark(self):
        snapshots = []
        quietly(memory_cap.run_memory_cap, ["vgg16"], [8 * GiB], modes=["stock", "stock-xla"],
                launcher=lambda sweep, batch, **kw: fake_run(batch, 48), progress=False,
                on_sweep=lambda sweeps: snapshots.append(sweeps))
        self.assertTrue(any(s.get("unfinished") for snap in snapshots for s in snap))
        self.assertEqual([s.get("unfinished") for s in snapshots[-1]], [None, None])
        self.assertEqual([r["unfinished"] for r in memory_cap.summarize(snapshots[-1])],
                         [False, False])


class WorkerStartTest(tf.test.TestCase):

    def test_the_worker_s_imports_leave_the_devices_configurable(self):
        """The worker caps the GPU after importing its modules (tf_ucudnn included): they
        must not start TensorFlow's devices, or the cap would fail. Shown on the CPU,
        whose logical devices can be split only before the devices start."""
        code = ("import tf_ucudnn.bench.memory_cap.worker\n"
                "import tensorflow as tf\n"
                "cpu, = tf.config.list_physical_devices('CPU')\n"
                "tf.config.set_logical_device_configuration(\n"
                "    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
                "print('logical CPUs', len(tf.config.list_logical_devices('CPU')))\n")
        env = harness.with_package_on_path(dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                                                CUDA_VISIBLE_DEVICES=""))
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertIn("logical CPUs 2", done.stdout)


class RealWorkerTest(tf.test.TestCase):
    """run_worker itself on the CPU: a small EDSR trained at N=2 with model.fit."""

    def test_a_tiny_model_trains_and_the_cap_is_a_no_op_without_a_gpu(self):
        if tf.config.list_physical_devices("GPU"):
            self.skipTest("a GPU is visible: the cap would start it in this process")
        start = time.perf_counter()
        result = memory_cap.run_worker("edsr", "stock", None, 8 * GiB, 2, steps_per_epoch=2,
                                       epochs=2, input_size=8)
        self.assertEqual(result["status"], "ok", result.get("message"))
        self.assertIn("no GPU", result["note"])
        self.assertLen(result["step_ms_repeats"], 2)
        self.assertGreater(result["step_ms"], 0)
        self.assertAlmostEqual(result["images_per_s"], 2e3 / result["step_ms"])
        self.assertGreater(result["first_step_s"], 0)
        self.assertIsNone(result["peak_bytes"])
        self.assertLess(time.perf_counter() - start, 30)
        json.dumps(result)  # what the worker prints

    def test_steps_per_execution_prefetch_to_device_and_a_profile(self):
        if tf.config.list_physical_devices("GPU"):
            self.skipTest("a GPU is visible: the cap would start it in this process")
        trace = tempfile.mkdtemp()
        result = memory_cap.run_worker("edsr", "stock", None, 8 * GiB, 2, steps_per_epoch=4,
                                       epochs=2, input_size=8, steps_per_execution=2,
                                       prefetch_to_device=True, profile_dir=trace)
        self.assertEqual(result["status"], "ok", result.get("message"))
        self.assertLen(result["step_ms_repeats"], 2)
        self.assertTrue(glob.glob(os.path.join(trace, "**", "*.xplane.pb"), recursive=True))
        with self.assertRaisesRegex(ValueError, "steps_per_execution=3 must divide "
                                                "steps_per_epoch=4"):
            memory_cap.run_worker("edsr", "stock", None, 8 * GiB, 2, steps_per_epoch=4,
                                  steps_per_execution=3)


def test_the_worker_entry_point_refuses_other_arguments(capsys):
    assert memory_cap_worker._worker_main([]) == 2
    assert "tf-ucudnn bench memory-cap" in capsys.readouterr().err
