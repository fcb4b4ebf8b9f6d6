"""The GPU suite, as ``make test-gpu`` and ``make test-gpu-wheel`` run it.

    python tests/gpu_suite.py [--gpus 0,1,2,3] [--timeout SECONDS] [--logs DIR] [--wheel WHEEL]

Every test file runs with ``-m gpu``, but ``test_xla.py``, which runs whole:
its unmarked cases take the XLA custom calls' GPU path where there is a GPU.

``--gpus`` with several GPUs splits the files into one part per GPU (by how
long they took on an H200), runs the parts at once, each part seeing its GPU
alone (``CUDA_VISIBLE_DEVICES``), and then runs the tests that need two GPUs
with the first two visible. Without ``--gpus`` (or with one GPU) the whole
suite is one part on the GPUs visible. One log per part in ``--logs``; the
result line of each is printed, and the exit status is 1 when a part failed
or ran out of ``--timeout`` seconds.

``--wheel`` runs the suite against that wheel instead of this checkout: the
wheel is installed without its dependencies (this Python's serve) into a
folder of its own, and the suite runs from a copy of ``tests/`` outside the
checkout, so that ``import tf_ucudnn`` finds the installed package.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
XLA = "test_xla.py"  # runs whole, not only its gpu-marked tests
TWO_GPUS = ("test_multi_gpu.py", "test_benchmark_devices.py")  # need two GPUs visible
# Relative time of the heavy files on an H200 (the rest count 0.5): what the split balances.
WEIGHTS = {"test_graph_engines.py": 8, XLA: 5, "test_batch_sizes.py": 2,
           "test_workspace_fallback.py": 2, "test_rewrite.py": 2, "test_determinism.py": 2,
           "test_database.py": 1, "test_division_budget.py": 1, "test_memory_cap.py": 1}
PYTEST_FLAGS = ["-q", "-rf", "-p", "no:cacheprovider", "--durations=40",
                "-o", "faulthandler_timeout=240"]  # a test stuck 240 s prints every stack


def split(files, parts):
    """``files`` in ``parts`` lists of about equal weight (longest first, each
    to the lightest part), each list sorted."""
    loads = [[0.0, []] for _ in range(parts)]
    for name in sorted(files, key=lambda f: (-WEIGHTS.get(f, 0.5), f)):
        lightest = min(loads, key=lambda load: load[0])
        lightest[0] += WEIGHTS.get(name, 0.5)
        lightest[1].append(name)
    return [sorted(names) for _, names in loads if names]


def plan(files, gpus):
    """The parts to run: ``[(name, CUDA_VISIBLE_DEVICES or None, files)]``;
    all but a last two-GPU part run at once."""
    if len(gpus) <= 1:
        return [("all", gpus[0] if gpus else None, sorted(files))]
    single = [f for f in files if f not in TWO_GPUS]
    parts = [(f"part{i}", gpu, names)
             for i, (gpu, names) in enumerate(zip(gpus, split(single, len(gpus))))]
    two = sorted(f for f in files if f in TWO_GPUS)
    return parts + ([("two_gpus", ",".join(gpus[:2]), two)] if two else [])


def run_part(files, *, cwd, env, log, deadline):
    """pytest on ``files`` (``-m gpu``; test_xla.py whole), the output to
    ``log``; returns (ok, the last result line)."""
    runs = [[f for f in files if f != XLA]] + ([[XLA]] if XLA in files else [])
    ok, last = True, "no tests"
    with open(log, "w") as out:
        for names in runs:
            if not names:
                continue
            mark = [] if names == [XLA] else ["-m", "gpu"]
            command = [sys.executable, "-m", "pytest", *[os.path.join("tests", n) for n in names],
                       *mark, *PYTEST_FLAGS]
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            try:
                done = subprocess.run(command, cwd=cwd, env=env, stdout=out,
                                      stderr=subprocess.STDOUT,
                                      timeout=max(1.0, deadline - time.monotonic()))
                ok &= done.returncode in (0, 5)  # 5: no test collected (no gpu mark there)
            except subprocess.TimeoutExpired:
                out.write("\ntimed out\n")
                ok = False
    with open(log) as f:
        results = [line.strip() for line in f if " passed" in line or " failed" in line
                   or " skipped" in line or "no tests ran" in line or "timed out" in line]
    if results:
        last = "; ".join(r.strip("= ") for r in results[-len(runs):])
    return ok, last


def install_wheel(wheel, env):
    """Installs ``wheel`` (no dependencies) and a copy of tests/ in a new
    folder; returns (the folder to run in, the environment)."""
    where = tempfile.mkdtemp(prefix="tf_ucudnn_wheel_tests_")
    site = os.path.join(where, "site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--target", site, wheel], check=True)
    shutil.copytree(TESTS, os.path.join(where, "tests"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(ROOT, "pytest.ini")) as f:
        ini = [line for line in f if not line.startswith("pythonpath")]
    with open(os.path.join(where, "pytest.ini"), "w") as f:
        f.writelines(ini)
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and os.path.abspath(p) != ROOT]
    return where, dict(env, PYTHONPATH=os.pathsep.join([site, *path]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="",
                        help="comma list of GPUs (CUDA_VISIBLE_DEVICES values), one part each")
    parser.add_argument("--timeout", type=float, default=3600,
                        help="seconds for the whole suite (default 3600)")
    parser.add_argument("--logs", default="gpu_out/gpu_tests", help="folder of the logs")
    parser.add_argument("--wheel", help="run against this wheel instead of the checkout")
    args = parser.parse_args(argv)
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    if args.wheel:
        cwd, env = install_wheel(args.wheel, env)
    else:
        cwd = ROOT
        library = os.path.join(ROOT, "tf_ucudnn", "_ucudnn_ops.so")
        if not os.path.exists(library):
            parser.error(f"{library} is missing: build it with `make build` first")
    where = subprocess.run([sys.executable, "-c", "import os, tf_ucudnn; "
                            "print(os.path.dirname(tf_ucudnn.__file__))"], cwd=cwd, env=env,
                           capture_output=True, text=True)
    print(f"tf_ucudnn from {where.stdout.strip() or where.stderr.strip()[-500:]}", flush=True)
    os.makedirs(args.logs, exist_ok=True)
    files = [f for f in os.listdir(os.path.join(cwd, "tests"))
             if f.startswith("test_") and f.endswith(".py")]
    parts = plan(files, gpus)
    deadline = time.monotonic() + args.timeout
    results = {}

    def run(name, gpu, names):
        part_env = dict(env) if gpu is None else dict(env, CUDA_VISIBLE_DEVICES=gpu)
        results[name] = run_part(names, cwd=cwd, env=part_env, deadline=deadline,
                                 log=os.path.join(os.path.abspath(args.logs), f"{name}.log"))

    parallel = [p for p in parts if p[0] != "two_gpus"]
    threads = [threading.Thread(target=run, args=part) for part in parallel]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for part in parts:
        if part[0] == "two_gpus":
            run(*part)
    for name, gpu, names in parts:
        ok, last = results[name]
        print(f"{name} (GPU {gpu or 'all visible'}, {len(names)} files): "
              f"{'ok' if ok else 'FAILED'}: {last}")
    print(f"logs in {os.path.abspath(args.logs)}")
    return 0 if all(ok for ok, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
