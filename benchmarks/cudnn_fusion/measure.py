"""One graph in one cell: built step by step, run, checked against PyTorch and
timed with CUDA events; PyTorch's own convolution timed alike."""

import statistics
import time

from cudnn_fusion.graphs import NotInApi
from cudnn_fusion.settings import TOLERANCE

# Bound by the worker (cudnn_fusion_probe.py's main) once it has imported them:
# --help, --list and --summarize run without PyTorch and cudnn-frontend.
torch = None
cudnn = None
HANDLE = None


class Failure(Exception):
    def __init__(self, stage, error):
        super().__init__(f"{stage}: {error}")
        self.stage, self.error = stage, error


def build(graph, workspace_bytes):
    """Validates and builds graph; raises Failure naming the step that failed."""
    steps = [("validate", graph.validate), ("build_operation_graph", graph.build_operation_graph),
             ("create_execution_plans",
              lambda: graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])),
             ("check_support", graph.check_support),
             ("workspace limit", lambda: limit_workspace(graph, workspace_bytes)),
             ("build_plans", graph.build_plans)]
    for stage, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 -- every failure is a result here
            raise Failure(stage, f"{type(e).__name__}: {e}") from None


def limit_workspace(graph, workspace_bytes):
    """Plans over the limit are not built (where the API can say so)."""
    deselect = getattr(graph, "deselect_workspace_greater_than", None)
    if deselect is not None:
        deselect(workspace_bytes)


def plan_name(graph):
    try:
        return graph.get_plan_name_at_index(getattr(graph, "_plan_index", 0))
    except Exception:  # noqa: BLE001 -- a name is a nicety
        return None


def median_ms(run, warmup, iters):
    """Median GPU time of run() in ms, and the host time of one call in ms.

    The GPU is first given a spin kernel longer than the host needs to enqueue
    all runs, so that each run's events enclose its kernels only."""
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        run()
    host_s = (time.perf_counter() - t0) / 3
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:  # cycles; 2e9 per second is an upper bound of the clock
        sleep(int(min(2.0, 1.5 * host_s * iters + 1e-3) * 2e9))
    for start, end in zip(starts, ends):
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)), host_s * 1e3


def torch_conv_ms(cell, direction, warmup, iters):
    """PyTorch's own convolution (cudnn.benchmark, TF32 allowed as TensorFlow allows it)."""
    x, w, dy = cell.x(), cell.w(), cell.normal(cell.y_dims())
    args = cell.torch_conv_args()
    run = {"fprop": lambda: torch.nn.functional.conv2d(x, w, **args),
           "dgrad": lambda: torch.nn.grad.conv2d_input(cell.x_dims(), w, dy, **args),
           "wgrad": lambda: torch.nn.grad.conv2d_weight(x, tuple(w.shape), dy, **args)}[direction]
    torch.backends.cudnn.allow_tf32 = True
    try:
        return median_ms(run, warmup, iters)[0]
    finally:
        torch.backends.cudnn.allow_tf32 = False


def probe(pattern, cell, args):
    """One graph in one cell: a result row (see the module docstring)."""
    row = dict(builds=False, stage=None, error=None, plan=None, workspace_bytes=None,
               time_ms=None, host_ms=None, rel_err=None, checked=None, ok=None)
    t0 = time.perf_counter()
    try:
        graph, pack, check = pattern.build(cell)
    except NotInApi as e:
        row.update(stage="api", error=str(e))
        return row
    except Exception as e:  # noqa: BLE001
        row.update(stage="graph", error=f"{type(e).__name__}: {e}")
        return row
    try:
        build(graph, args.workspace_mib << 20)
    except Failure as f:
        row.update(stage=f.stage, error=f.error[:2000], build_s=round(time.perf_counter() - t0, 3))
        return row
    row.update(builds=True, plan=plan_name(graph), build_s=round(time.perf_counter() - t0, 3))
    try:
        size = graph.get_workspace_size()
        row["workspace_bytes"] = int(size)
        workspace = torch.empty(max(int(size), 1), device="cuda", dtype=torch.uint8)
        run = lambda: graph.execute(pack, workspace, handle=HANDLE)
        run()
        torch.cuda.synchronize()
        err, checked = check()
        row.update(rel_err=err, checked=checked, ok=bool(err <= TOLERANCE[cell.dtype_name]))
        row["time_ms"], row["host_ms"] = median_ms(run, args.warmup, args.iters)
    except Exception as e:  # noqa: BLE001
        row.update(stage="execute", error=f"{type(e).__name__}: {e}"[:2000])
    return row
