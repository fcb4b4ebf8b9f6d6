"""Overhead mode of the benchmark: what the engine adds to one cuDNN call.

``tf-ucudnn bench overhead`` measures, per layer and pass, a plan of one
micro-batch (``micro_batch_size`` = N, so one cuDNN call with the algorithm
the plan chose within the limit) run through the engine, against one direct
cuDNN call with the same algorithm, descriptors and workspace and the filter
already in cuDNN's layout; for a graph-API engine, ``cudnnBackendExecute``
with a variant pack built beforehand. The engine's extra work is its
allocations, the filter's transform into cuDNN's layout (and back, for
backward-filter), the plan lookup and its locks, and for a graph-API engine
the variant pack it builds on every call. Both are timed in the engine
(``TimeOverhead`` in ``cc/engine/overhead.cc``, built into
``_ucudnn_overhead.so`` by ``make build-bench``: benchmark-only, not in the
wheel; :func:`tf_ucudnn.engine_info.time_overhead`): wall-clock ms per call
over ``iters`` calls, from a synced stream to a synced stream, median of 5
alternating repeats; TF's own op dispatch, which stock TF pays as well, is
not in either figure.

The measurement allocates with ``cudaMalloc``, so this mode turns on TF's
memory growth before the GPU is initialised.
"""

from tf_ucudnn import engine_info, table
from tf_ucudnn.bench import layers as layer_bench
from tf_ucudnn.bench.harness import PASSES
from tf_ucudnn.units import format_bytes

def time_kernel_overhead(kernel_id, iters):
    """Times one planned kernel through the engine and as a direct cuDNN call.

    Args:
      kernel_id: the ``id`` of a kernel of :func:`tf_ucudnn.engine_info.kernels`
        whose plan is one micro-batch.
      iters: calls per timed repeat.

    Returns:
      A dict of ms per call: ``plan_ms`` (through the engine), ``direct_ms``
      (one direct cuDNN call), ``transform_ms`` (the filter transform alone),
      all wall-clock from a synced stream to a synced stream; and
      ``plan_host_ms``, ``direct_host_ms``: the host's time to enqueue them.

    Raises:
      RuntimeError: the engine could not measure (no such kernel, a plan of
        several micro-batches, out of memory), with its message.
    """
    try:
        return engine_info.time_overhead(kernel_id, iters)
    except ValueError as e:  # the engine's refusal, or the overhead library missing
        raise RuntimeError(str(e)) from None


def run_overhead(layers, *, batch, data_format, dtype, workspace_limit, iters, passes=PASSES):
    """Measures the execution overhead of every layer and pass on GPU:0.

    Args:
      layers: :class:`tf_ucudnn.bench.layers.ConvLayer` list.
      batch: N (the one micro-batch holds all of it).
      data_format: ``"NHWC"`` or ``"NCHW"``.
      dtype: ``"float32"``, ``"float16"`` or ``"bfloat16"``.
      workspace_limit: bytes the plan's algorithm may use.
      iters: calls per timed repeat.
      passes: which of :data:`PASSES`.

    Returns:
      One dict per (layer, pass): ``layer``, ``shape``, ``pass``, ``algo``,
      ``workspace_bytes``, the times of :func:`time_kernel_overhead`,
      ``overhead`` (``plan_ms / direct_ms - 1``) and
      ``overhead_beyond_transform`` (``(plan_ms - transform_ms) / direct_ms -
      1``), or ``error``.
    """
    import tensorflow as tf

    import tf_ucudnn

    rows = []
    for layer in layers:
        x, w, dy = layer_bench.random_tensors(layer, batch, data_format, getattr(tf, dtype))
        for name in (p for p in PASSES if p in passes):
            row = dict(layer=layer.name, shape=layer.describe(), **{"pass": name})
            try:
                fn = tf.function(layer_bench.make_passes(
                    "ucudnn", layer, batch, data_format, workspace_limit=workspace_limit,
                    micro_batch_size=batch, passes=(name,)))
                known = {k["id"] for k in engine_info.kernels()}
                with tf.device("/GPU:0"):
                    fn(x, w, dy)
                new = [k for k in engine_info.kernels() if k["id"] not in known]
                if len(new) != 1:
                    raise RuntimeError(f"expected one new kernel, found {len(new)}")
                kernel = new[0]
                step = kernel["plan"]["micro_batches"][0]
                row.update(algo=step["algo"], workspace_bytes=kernel["plan"]["workspace_bytes"])
                t = time_kernel_overhead(kernel["id"], iters)
                row.update(t, overhead=t["plan_ms"] / t["direct_ms"] - 1.0,
                           overhead_beyond_transform=(t["plan_ms"] - t["transform_ms"])
                           / t["direct_ms"] - 1.0)
            except (RuntimeError, tf.errors.OpError) as e:
                row["error"] = str(e).strip().splitlines()[0]
            rows.append(row)
    tf_ucudnn.clear_plans()
    return rows


def print_overhead(rows, workspace_limit):
    """Prints the overhead table (ms per call) and the worst overhead."""
    cells = []
    for r in rows:
        if "error" in r:
            cells.append((r["layer"], r["pass"], f"error: {r['error']}", *[""] * 7))
            continue
        cells.append((r["layer"], r["pass"], r["algo"], f"{r['direct_ms']:.4f}",
                      f"{r['plan_ms']:.4f}", f"{100 * r['overhead']:.1f}%",
                      f"{r['transform_ms']:.4f}", f"{100 * r['overhead_beyond_transform']:.1f}%",
                      f"{r['direct_host_ms']:.4f}", f"{r['plan_host_ms']:.4f}"))
    print(table.render(("layer", "pass", "algorithm", "direct ms", "plan ms", "overhead",
                        "filter ms", "w/o filter", "host: direct", "plan"), cells,
                       align="lllrrrrrrr"))
    done = [r for r in rows if "error" not in r]
    if done:
        worst = max(done, key=lambda r: r["overhead"])
        total = sum(r["plan_ms"] for r in done) / sum(r["direct_ms"] for r in done) - 1.0
        within = sum(r["overhead"] <= 0.03 for r in done)
        beyond = max(r["overhead_beyond_transform"] for r in done)
        print(f"one micro-batch of N within {format_bytes(workspace_limit)}: overhead "
              f"{100 * total:.1f}% over all {len(done)} kernels' time; {within} of {len(done)} "
              f"kernels within 3%, worst {100 * worst['overhead']:.1f}% ({worst['layer']} "
              f"{worst['pass']}); without the filter transform, worst {100 * beyond:.1f}%")
