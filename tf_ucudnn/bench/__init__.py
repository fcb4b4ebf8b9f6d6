"""The benchmarks: stock TensorFlow vs tf_ucudnn under cuDNN workspace limits.

Run as ``tf-ucudnn bench MODE`` or ``python -m tf_ucudnn.bench MODE``, one
subcommand per mode, each with its own ``--help``:

* ``layers`` (``make bench``): for every convolution layer of a layer set and
  every workspace limit, times forward + backward-data + backward-filter
  (``--passes`` picks a subset) at N=256: stock TF with
  ``TF_CUDNN_WORKSPACE_LIMIT_IN_MB`` set to the limit, tf_ucudnn with
  ``workspace_limit`` set to the limit, and stock TF at 8 GiB (TF's default
  limit), the reference. TF reads the variable once per process, so every
  (mode, limit) runs in its own worker process. Layer sets (``--set``):
  ``deepbench`` (default: the 3x3 and 5x5 training convolutions of Baidu's
  DeepBench, ``data/deepbench_conv_train.csv``, as in the paper's DeepBench
  figure), ``alexnet``, ``resnet18``, ``models`` (both), or ``--csv`` with a
  table of your own.
* ``models``: one training step per model and setting
  (:mod:`tf_ucudnn.bench.models`).
* ``memory-cap``: the largest mini-batch that trains under a GPU memory cap
  and its throughput, per setting (:mod:`tf_ucudnn.bench.memory_cap`).
* ``plot``: redraws the figures of saved ``--json`` results on any machine
  (several memory-cap results are merged into one), into the current
  directory or ``--output PREFIX``; it overwrites no file without
  ``--force``.
* ``overhead``: what the engine adds to one cuDNN call
  (:mod:`tf_ucudnn.bench.overhead`).

``--json PATH`` writes every figure and the GPU, driver, cuDNN and TF
versions; ``--png PREFIX`` (default: the JSON path without ``.json``) draws
the figures with matplotlib (``pip install 'tf_ucudnn[bench]'``). Without a
GPU the benchmark does not run: a CPU self-check of tf_ucudnn against
``tf.nn.conv2d`` runs instead and the exit status is 2.

The modules: :mod:`~tf_ucudnn.bench.harness` (timing, the environment, JSON:
public, for ``benchmarks/`` too), :mod:`~tf_ucudnn.bench.layers` (layer sets,
the passes, the layer mode's workers), :mod:`~tf_ucudnn.bench.report` (its
table and summary), :mod:`~tf_ucudnn.bench.models`,
:mod:`~tf_ucudnn.bench.memory_cap`, :mod:`~tf_ucudnn.bench.overhead`,
:mod:`~tf_ucudnn.bench.figures` and :mod:`~tf_ucudnn.bench.cli` (the
subcommands, ``main``). The package uses tf_ucudnn's public API only
(:mod:`tf_ucudnn.engine_info` for the engine's kernels). This package binds
the names below from them on first use: importing it imports none of its
modules.
"""

from tf_ucudnn._lazy import lazy_exports

# The public names and the module of each. They are bound on first use (PEP 562), so that
# importing this package imports none of its modules: a worker started as
# `python -m tf_ucudnn.bench.models` finds its module unimported (runpy runs it once, as
# __main__), and `from tf_ucudnn.bench import harness` imports the harness alone.
_EXPORTS = {
    "cli": ("EXIT_NO_GPU", "build_parser", "main", "parse_args"),
    "harness": ("PASSES", "describe_environment", "geometric_mean", "relative_error",
                "sync_devices", "time_ms", "write_json"),
    "layers": ("DEEPBENCH_CSV", "QUICK_LAYERS", "ConvLayer", "layer_set", "make_passes",
               "random_tensors", "read_layers", "select_layers"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
