"""benchmarks/cudnn_fusion_probe.py without a GPU: its options, graph list and tables.

The probe imports PyTorch and cudnn-frontend only to measure; --help, --list and
--summarize run on the standard library, as they must on a machine without them.
Skipped where benchmarks/ is not beside the tests (a wheel's copy of tests/).
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "benchmarks", "cudnn_fusion_probe.py")
pytestmark = pytest.mark.skipif(not os.path.exists(SCRIPT),
                                reason="benchmarks/ is a checkout's, not beside these tests")


def _probe_module():
    spec = importlib.util.spec_from_file_location("cudnn_fusion_probe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)


def test_help_and_list_run_without_torch_or_cudnn():
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    assert "--graph-seconds" in done.stdout and "builds" in done.stdout
    listed = _run("--list")
    assert listed.returncode == 0, listed.stderr
    module = _probe_module()
    for pattern in module.PATTERNS:
        assert pattern.name in listed.stdout
    assert module.torch is None and module.cudnn is None  # imported lazily, in main()
    for part in (module.cell, module.graphs, module.measure):  # bound by main()'s worker
        assert part.torch is None and part.cudnn is None, part.__name__


def test_every_graph_compares_with_a_convolution_alone_that_is_probed():
    module = _probe_module()
    names = [p.name for p in module.PATTERNS]
    assert len(names) == len(set(names)), names
    assert set(module.BASELINES.values()) <= set(names)
    assert {p.baseline for p in module.PATTERNS} == set(module.BASELINES)


def test_option_lists_name_what_the_probe_has():
    module = _probe_module()
    args = module.parse_args(["--dtypes", "float16", "--layouts", "NHWC", "--shapes", "all",
                              "--patterns", "conv_sum,sbr_wgrad"])
    assert args.dtypes == ["float16"] and args.layouts == ["NHWC"]
    assert args.shapes == list(module.SHAPES) and args.patterns == ["conv_sum", "sbr_wgrad"]
    for bad in (["--dtypes", "float64"], ["--patterns", "conv_fused"], ["--shapes", ""]):
        with pytest.raises(SystemExit, match="not among"):
            module.parse_args(bad)


def test_stride_two_downsample_has_half_the_height():
    module = _probe_module()
    shape = module.SHAPES["28_256_512_1_s2"]
    assert (shape.ho, shape.pad) == (14, 0)
    assert module.SHAPES["56_64_64_3"].ho == 56 and module.SHAPES["224_3_64_7_s2"].ho == 112


def test_summarize_prints_one_table_per_shape_and_layout(tmp_path):
    rows = [
        dict(pattern="conv_fprop", dtype="float16", layout="NHWC", shape="56_64_64_3", builds=True,
             time_ms=0.128, torch_ms=0.130, rel_err=2e-4, ok=True, conv_alone_ms=0.128),
        dict(pattern="sbr_conv_genstats", dtype="float16", layout="NHWC", shape="56_64_64_3", builds=True,
             time_ms=0.144, rel_err=2e-6, ok=True, conv_alone_ms=0.128),
        dict(pattern="sbr_conv_genstats", dtype="bfloat16", layout="NHWC", shape="56_64_64_3", builds=False,
             stage="create_execution_plans", error="cudnnGraphNotSupportedError: no engine"),
        dict(pattern="bn_finalize", dtype="bfloat16", layout="NHWC", shape="56_64_64_3", builds=False,
             stage="api", error="no bn_finalize"),
        dict(pattern="conv_sum", dtype="float16", layout="NHWC", shape="56_64_64_3", builds=True,
             time_ms=0.2, rel_err=0.5, ok=False, conv_alone_ms=0.1),
        dict(pattern="sbr_conv_sum", dtype="float32", layout="NCHW", shape="56_64_64_3", builds=False,
             stage="timeout", error="process ended after 30 s in this graph"),
    ]
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(dict(gpu="test GPU", cudnn_version=91900, batch=256, results=rows)))
    done = _run("--summarize", str(path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("#### ") == 2, out  # 56² NHWC and 56² NCHW
    assert "| conv forward alone | — | 0.128 (torch 0.130) | — |" in out, out
    assert "| scale-bias-ReLU → conv → genstats | no engine | 0.144 (1.12×) | — |" in out, out
    assert "| batch-norm finalize (bn_finalize node) | not in API | — | — |" in out, out
    assert "wrong: rel err 5.0e-01" in out and "| timeout |" in out, out
    assert "Errors:" in out and "no bn_finalize" in out, out
