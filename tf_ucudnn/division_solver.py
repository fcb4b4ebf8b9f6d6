"""The Workspace Division solver: one shared workspace budget, one Pareto point
per kernel (Oyama et al. 2018, §III-C).

:func:`divide_workspace` chooses, for every kernel (forward, backward-data and
backward-filter of every layer), one point of its Pareto front
(:func:`tf_ucudnn.planner.pareto_front`) so that the kernels' times add up
to the least while their workspaces fit one budget: a multiple-choice
knapsack, solved as an integer linear program with HiGHS through PuLP, and
checked by an exact search in integer bytes.

This module is the solver alone: plain numbers in, a :class:`Division` out,
no GPU and no TensorFlow graph. :mod:`tf_ucudnn.division` applies it to a
Keras model (:func:`tf_ucudnn.divide_workspace_budget`) and to the kernels
that share a ``total_workspace`` at run time.
"""

import math
import numbers
import time
import warnings

from tf_ucudnn.planner import _check_time, check_bytes


def _point(p):
    """(time_ms, workspace_bytes) of a front point: a Plan, a dict or a pair."""
    if isinstance(p, dict):
        return p["time_ms"], p["workspace_bytes"]
    if hasattr(p, "time_ms") and hasattr(p, "workspace_bytes"):
        return p.time_ms, p.workspace_bytes
    time_ms, workspace_bytes = p
    return time_ms, workspace_bytes


DEFAULT_TIME_LIMIT_S = 10.0  # seconds the ILP solver may take per division
_TIGHTENINGS = 3  # re-solves with a smaller budget when a solution misses it by a rounding
_SOLVER_MAX_UNITS = 1 << 48  # HiGHS takes values beyond 1e15 as errors or infinite
_ILP_SHARE = 0.5  # of the time limit for HiGHS; the exact search has the rest
_CHECK_SHARE = 0.1  # of the time limit for the exact search to check a solution HiGHS proved


class Division(list):
    """What :func:`divide_workspace` returns: the chosen point of each kernel
    (a list, in the order of the fronts) and how good the choice is.

    Attributes:
      time_ms: the sum of the chosen points' times, ms.
      workspace_bytes: the sum of their workspaces, bytes; never more than the
        budget (checked in exact integers).
      gap: the relative optimality gap, ``(time_ms - bound) / time_ms`` for
        the best lower bound on the optimal time known (the linear
        relaxation's, or the ILP solver's dual bound); 0.0 when optimal.
      optimal: True when the choice is proven optimal: by an exact search
        (integer workspaces; no choice within the budget is faster by more
        than 1e-9 relative), or by HiGHS (within its tolerances) when the
        exact search, given a tenth of the time limit to check it, found
        nothing faster.
      status: ``"fastest"`` (every kernel's fastest point fits),
        ``"optimal"`` (proven optimal) or ``"time limit"`` (the best choice
        found when ``time_limit_s`` ran out; ``gap`` bounds how far it is
        from the optimum).
      distinct_fronts: how many distinct fronts the ILP had (identical fronts
        share one group of variables).
      solve_s: seconds spent in :func:`divide_workspace`.
    """

    def __init__(self, chosen, *, time_ms, workspace_bytes, gap, status, distinct_fronts,
                 solve_s):
        super().__init__(chosen)
        self.time_ms = time_ms
        self.workspace_bytes = workspace_bytes
        self.gap = gap
        self.optimal = status in ("fastest", "optimal")
        self.status = status
        self.distinct_fronts = distinct_fronts
        self.solve_s = solve_s

    def __repr__(self):
        return (f"Division({list.__repr__(self)}, time_ms={self.time_ms!r}, "
                f"workspace_bytes={self.workspace_bytes}, gap={self.gap:.3g}, "
                f"status={self.status!r})")


def _check_time_limit(value):
    if (not isinstance(value, numbers.Real) or isinstance(value, bool)
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"time_limit_s must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def _candidates(points, spare):
    """Indices of the points of one front that a division may choose, by
    workspace ascending: the least-workspace point first, then every point
    faster than all before it whose extra workspace fits in ``spare`` bytes."""
    order = sorted(range(len(points)), key=lambda i: (points[i][1], points[i][0], i))
    base = points[order[0]][1]
    keep, best = [], math.inf
    for i in order:
        time_ms, workspace = points[i]
        if workspace - base > spare:
            break
        if time_ms < best:
            keep.append(i)
            best = time_ms
    return keep


def _hull(cands):
    """Indices of the lower convex hull of a front's ``(time_ms, extra_bytes)``
    points (extra ascending, time strictly decreasing), from the first point:
    the steps along it save less time per extra byte the further they go."""
    hull = []
    for i, (t, e) in enumerate(cands):
        # Pop the last point while it lies on or above the line from the one
        # before it to this one (its step would save less per byte than the next).
        while len(hull) >= 2:
            (t0, e0), (t1, e1) = cands[hull[-2]], cands[hull[-1]]
            if (t0 - t1) * (e - e1) <= (t1 - t) * (e1 - e0):
                hull.pop()
            else:
                break
        hull.append(i)
    return hull


def _greedy(groups, spare):
    """A feasible choice and a lower bound on the optimum, without a solver.

    The classic greedy of the multiple-choice knapsack: along each front's
    lower convex hull, take the steps that save the most time per extra byte
    first while they fit. Its value at the first step that does not fit in
    full, minus that step's saving times the fraction that fits, is the
    optimum of the linear relaxation, a lower bound on the optimal time.

    Args:
      groups: ``[(count, [(time_ms, extra_bytes), ...])]`` per distinct front,
        extra bytes ascending from 0 and times strictly decreasing.
      spare: bytes beyond every kernel's least-workspace point.

    Returns:
      ``(counts, bound_ms, price)``: ``counts[f][i]`` kernels of group f take
      point i; ``price`` (ms per byte) is the relaxation's dual value of the
      budget, the time saved per byte by the step that does not fit (0 when
      every step fits, and then the choice is optimal).
    """
    hulls = [_hull(cands) for _, cands in groups]
    steps = []
    for f, hull in enumerate(hulls):
        cands = groups[f][1]
        for j in range(1, len(hull)):
            (ta, ea), (tb, eb) = cands[hull[j - 1]], cands[hull[j]]
            steps.append((-(ta - tb) / (eb - ea), f, j))
    steps.sort()
    at = [[count] + [0] * (len(hull) - 1) for (count, _), hull in zip(groups, hulls)]
    time_ms = math.fsum(count * cands[0][0] for count, cands in groups)
    remaining, bound, price = spare, None, 0.0
    for _, f, j in steps:
        cands, hull = groups[f][1], hulls[f]
        (ta, ea), (tb, eb) = cands[hull[j - 1]], cands[hull[j]]
        movable = at[f][j - 1]
        n = min(movable, remaining // (eb - ea))
        at[f][j - 1] -= n
        at[f][j] += n
        remaining -= n * (eb - ea)
        time_ms -= n * (ta - tb)
        if n < movable and bound is None:
            bound = time_ms - (ta - tb) * remaining / (eb - ea)
            price = (ta - tb) / (eb - ea)
    counts = [_scatter(len(cands), hull, levels)
              for (_, cands), hull, levels in zip(groups, hulls, at)]
    return counts, (time_ms if bound is None else bound), price


def _prune(groups, bound, price, incumbent_ms):
    """Reduced-cost fixing: leaves out the points no solution better than the
    incumbent can use.

    For any feasible choice x, ``time(x) >= bound + Σ rc_fi x_fi`` with the
    reduced cost ``rc_fi = t_fi + price·e_fi - min_j (t_fj + price·e_fj)`` of
    the linear relaxation (``bound`` its optimum, ``price`` the dual value of
    the budget). A point whose ``bound + rc`` exceeds the incumbent's time
    cannot be part of an optimal choice.

    Returns:
      ``(groups, kept)``: the groups with the surviving points and, per group,
      the indices of those points in the original group.
    """
    slack = incumbent_ms - bound + 1e-9 * max(1.0, abs(incumbent_ms))
    pruned, kept = [], []
    for count, cands in groups:
        reduced = [t + price * e for t, e in cands]
        floor = min(reduced)
        keep = [i for i, r in enumerate(reduced) if r - floor <= slack]
        if keep[0] != 0:
            keep.insert(0, 0)  # the least-workspace point, so that every choice has a fallback
        pruned.append((count, [cands[i] for i in keep]))
        kept.append(keep)
    return pruned, kept


def _counts_time(groups, counts):
    return math.fsum(n * t for (_, cands), c in zip(groups, counts) for n, (t, _) in zip(c, cands))


def _counts_extra(groups, counts):
    return sum(n * e for (_, cands), c in zip(groups, counts) for n, (_, e) in zip(c, cands))


def _solve_ilp(groups, weights, cap, time_limit_s):
    """One ILP solve with PuLP and HiGHS: integer ``x[f][i]`` kernels of group
    f take point i, ``Σ_i x[f][i] = count_f``, ``Σ weights[f][i] · x[f][i] <= cap``.

    Returns:
      ``(counts or None, dual_bound_ms or None, proven_optimal, error)``: the
      counts are integers with the right sums, not yet checked against the
      budget; ``error`` says why there are none when the solver failed.
    """
    import pulp

    solver = pulp.HiGHS(msg=False, timeLimit=time_limit_s, gapRel=0.0)
    if not solver.available():
        raise RuntimeError("Workspace Division solves its ILP with HiGHS through PuLP, and "
                           "highspy is not installed: pip install 'highspy>=1.13,<1.16'")
    problem = pulp.LpProblem("workspace_division", pulp.LpMinimize)
    x = [[problem.add_variable(f"x_{f}_{i}", 0, count, cat=pulp.LpInteger)
          for i in range(len(cands))] for f, (count, cands) in enumerate(groups)]
    problem += pulp.lpSum(t * v for (_, cands), xs in zip(groups, x) for (t, _), v in zip(cands, xs))
    for (count, _), xs in zip(groups, x):
        problem += pulp.lpSum(xs) == count
    problem += pulp.lpSum(w * v for ws, xs in zip(weights, x) for w, v in zip(ws, xs) if w) <= cap
    try:
        problem.solve(solver)
        import highspy

        model = problem.solverModel
        optimal = model.getModelStatus() == highspy.HighsModelStatus.kOptimal
        dual_bound = model.getInfo().mip_dual_bound
    except Exception as e:  # noqa: BLE001  (a solver failure must not lose the greedy choice)
        return None, None, False, f"{type(e).__name__}: {e}"
    bound = dual_bound if math.isfinite(dual_bound) else None
    counts = []
    for (count, _), xs in zip(groups, x):
        values = [v.varValue for v in xs]
        if any(v is None or not math.isfinite(v) or abs(v - round(v)) > 1e-6 for v in values):
            return None, bound, False, None
        c = [int(round(v)) for v in values]
        if sum(c) != count or min(c) < 0:
            return None, bound, False, None
        counts.append(c)
    return counts, bound, optimal, None


def _expand(groups, kept, core_counts):
    """Counts over a pruned core (see :func:`_prune`) as counts over ``groups``."""
    return [_scatter(len(cands), keep, c) for (_, cands), keep, c in zip(groups, kept, core_counts)]


def _scatter(length, indices, values):
    """A list of ``length`` zeros with ``values`` at ``indices``."""
    out = [0] * length
    for i, n in zip(indices, values):
        out[i] = n
    return out


def _ilp(groups, spare, deadline):
    """Solves the division ILP with HiGHS (:func:`_solve_ilp`) and checks the
    solution in exact integers.

    Workspaces are given to the solver in units of the greatest common divisor
    of the extra workspaces (exact), or, beyond ``_SOLVER_MAX_UNITS`` units,
    rounded up to a coarser unit with the budget rounded down (any solution
    then fits in bytes). A solution that exceeds the budget in integers (the
    solver accepts integrality errors of about 1e-6, which times a workspace
    of gigabytes is bytes) is solved again with the budget lowered by the excess.

    Returns:
      ``(counts or None, dual_bound_ms or None, proven, note)``: a choice that
      fits; the solver's lower bound on the optimal time, in exact units;
      whether the solver proved the choice optimal (its first solution, in
      exact units, fit); and why any of these is missing.
    """
    unit = 0
    for _, cands in groups:
        for _, extra in cands:
            unit = math.gcd(unit, extra)
    unit = unit or 1
    # The budget never needs to exceed what every kernel's last point takes.
    spare_used = min(spare, sum(count * cands[-1][1] for count, cands in groups))
    exact = spare_used // unit <= _SOLVER_MAX_UNITS
    note = None
    if not exact:
        unit <<= (spare_used // unit // _SOLVER_MAX_UNITS).bit_length()
        note = f"workspaces were rounded up to multiples of {unit} bytes for the ILP solver"
    weights = [[-(-e // unit) for _, e in cands] for _, cands in groups]
    cap = spare_used // unit
    dual_bound = None
    for attempt in range(1 + _TIGHTENINGS):
        left = deadline - time.perf_counter()
        if left <= 0 or cap < 0:
            return None, dual_bound, False, note or "the ILP solver had no time left"
        counts, solver_bound, optimal, error = _solve_ilp(groups, weights, cap, left)
        if attempt == 0 and exact:
            dual_bound = solver_bound
        if counts is None:
            return None, dual_bound, False, f"the ILP solver failed ({error})" if error else (
                "the ILP solver found no solution in time")
        excess = _counts_extra(groups, counts) - spare
        if excess <= 0:
            return counts, dual_bound, optimal and exact and attempt == 0, note
        cap -= -(-excess // unit)
        note = "the ILP solver's solutions exceeded the budget by a rounding"
    return None, dual_bound, False, note


def _exact_search(groups, spare, best_ms, deadline):
    """Depth-first branch and bound in exact integer workspaces: proves that no
    choice is faster than ``best_ms`` (to 1e-9 relative), or finds the fastest.

    Fronts with one point are fixed; the others are searched most points
    first, deciding how many kernels take each point, fastest point first,
    and cut where the linear relaxation of what is left (:func:`_greedy`'s
    bound) cannot beat the best choice found.

    Returns:
      ``(counts or None, complete)``: the counts of a faster choice, if one
      was found, and whether the search finished (which proves the result optimal).
    """
    fixed_ms = math.fsum(count * cands[0][0] for count, cands in groups if len(cands) == 1)
    order = sorted((f for f, (_, cands) in enumerate(groups) if len(cands) > 1),
                   key=lambda f: -len(groups[f][1]))
    rank = {f: r for r, f in enumerate(order)}
    count = [groups[f][0] for f in order]
    cands_of = [groups[f][1] for f in order]
    steps = []
    for f in order:
        cands, hull = groups[f][1], _hull(groups[f][1])
        for a, b in zip(hull, hull[1:]):
            d, s = cands[b][1] - cands[a][1], cands[a][0] - cands[b][0]
            steps.append((-s / d, rank[f], d, s))
    steps.sort()
    least_after = [0.0] * (len(order) + 1)
    for r in range(len(order) - 1, -1, -1):
        least_after[r] = least_after[r + 1] + count[r] * cands_of[r][0][0]
    tolerance = 1e-9 * max(1.0, abs(best_ms))
    state = {"best": best_ms - fixed_ms, "found": None, "nodes": 0}
    assign = [[0] * len(c) for c in cands_of]

    def bound(r, m, cap):
        # The relaxation of the m kernels of front r still to place and every later front.
        t = least_after[r + 1] + m * cands_of[r][0][0]
        for _, rk, d, s in steps:
            mult = m if rk == r else count[rk] if rk > r else 0
            if not mult:
                continue
            if mult * d <= cap:
                cap -= mult * d
                t -= mult * s
            else:
                return t - s * cap / d
        return t

    stack = []  # frames [front rank, point, kernels left, bytes left, ms so far, next count, best then]

    def push(r, i, m, cap, t):
        while r < len(order) and i == 0:  # the least-workspace point takes the rest
            assign[r][0] = m
            t += m * cands_of[r][0][0]
            r += 1
            if r < len(order):
                i, m = len(cands_of[r]) - 1, count[r]
        if r == len(order):
            if t < state["best"] - tolerance:
                state["best"], state["found"] = t, [list(a) for a in assign]
            return
        if t + bound(r, m, cap) < state["best"] - tolerance:
            stack.append([r, i, m, cap, t, min(m, cap // cands_of[r][i][1]), state["best"]])

    if order:
        push(0, len(cands_of[0]) - 1, count[0], spare, 0.0)
    complete = True
    while stack:
        state["nodes"] += 1
        if state["nodes"] % 512 == 0 and time.perf_counter() > deadline:
            complete = False
            break
        frame = stack[-1]
        r, i, m, cap, t, n, best_then = frame
        if n < 0 or (state["best"] < best_then
                     and t + bound(r, m, cap) >= state["best"] - tolerance):
            stack.pop()
            continue
        frame[5], frame[6] = n - 1, state["best"]
        assign[r][i] = n
        time_ms, extra = cands_of[r][i]
        push(r, i - 1, m - n, cap - n * extra, t + n * time_ms)
    if state["found"] is None:
        return None, complete
    counts = []
    for f, (c, cands) in enumerate(groups):
        counts.append(state["found"][rank[f]] if f in rank else [c])
    return counts, complete


def divide_workspace(fronts, total_workspace, *, time_limit_s=DEFAULT_TIME_LIMIT_S):
    """Workspace Division (WD): one shared budget, one plan per kernel.

    Chooses one point of each kernel's Pareto front so that the sum of their
    times is smallest while the sum of their workspaces fits the budget: a
    multiple-choice knapsack, solved as an integer linear program with HiGHS
    through PuLP (Oyama et al. 2018, §III-C, Workspace Division):

        minimise  Σ_f Σ_i t_fi x_fi
        s.t.      Σ_i x_fi = n_f for every distinct front f,
                  Σ_f Σ_i (w_fi - w_f0) x_fi <= total_workspace - Σ_f n_f w_f0,
                  x_fi ∈ {0, 1, ..., n_f}.

    Kernels with identical fronts (the repeated blocks of a model) share one
    group of variables: ``x_fi`` counts how many of the ``n_f`` kernels with
    front f take its point i. Workspaces are counted above each front's
    least-workspace point ``w_f0``, in units of their greatest common divisor,
    and points that cannot fit are left out.

    How: a greedy choice along each front's convex hull gives a first
    division and the linear relaxation's bound; reduced-cost fixing leaves out
    the points that cannot beat it; HiGHS solves the ILP over the rest (half
    of ``time_limit_s``); and a branch and bound in exact integer workspaces
    either proves the best division found optimal or finds the optimum (it
    gets a tenth of the time limit to check a division HiGHS proved, else the
    rest). Every division is checked in exact integers: it never exceeds the
    budget, and a budget that holds every kernel's least-workspace point is
    never reported infeasible. When the time runs out, the best division
    found is returned with its optimality gap (:attr:`Division.gap`), and a
    ``RuntimeWarning`` says so.

    Args:
      fronts: one list per kernel (forward, backward-data and backward-filter
        of every layer) of candidate points, e.g. the :class:`Plan` list of
        :func:`pareto_front`; a point may also be a dict or a pair with
        ``time_ms`` (ms) and ``workspace_bytes`` (bytes).
      total_workspace: the budget in bytes for all kernels together.
      time_limit_s: seconds the division may take (> 0), the solver's and
        the exact search's time together; a ResNet-152 (about 450 kernels,
        fronts of up to 30 points) takes well under a second.

    Returns:
      A :class:`Division`: a list with the chosen point (the caller's object)
      for each kernel, in the order of ``fronts``, with the total time,
      workspace and optimality gap as attributes.

    Raises:
      ValueError: bad arguments, an empty front, or a budget smaller than the
        sum of every kernel's least-workspace point (the message names that
        smallest feasible budget).
      RuntimeError: the solver (highspy) is not installed.
    """
    start = time.perf_counter()
    total_workspace = check_bytes(total_workspace, "total_workspace")
    time_limit_s = _check_time_limit(time_limit_s)
    if not isinstance(fronts, (list, tuple)):
        raise ValueError(f"fronts must be a list of Pareto fronts, got {type(fronts).__name__}")
    points = []
    for k, front in enumerate(fronts):
        if not isinstance(front, (list, tuple)) or not front:
            raise ValueError(f"fronts[{k}] must be a non-empty list of points, got {front!r}")
        try:
            pairs = [_point(p) for p in front]
        except (TypeError, ValueError, KeyError):
            raise ValueError(f"fronts[{k}] has a point without time_ms and workspace_bytes") from None
        points.append([(_check_time(t, f"fronts[{k}]"), check_bytes(w, f"workspace_bytes of fronts[{k}]"))
                       for t, w in pairs])

    def result(chosen, status, gap=0.0, distinct=0):
        picked = [points[k][i] for k, i in enumerate(chosen)]
        return Division([fronts[k][i] for k, i in enumerate(chosen)],
                        time_ms=math.fsum(t for t, _ in picked),
                        workspace_bytes=sum(w for _, w in picked), gap=gap, status=status,
                        distinct_fronts=distinct, solve_s=time.perf_counter() - start)

    if not points:
        return result([], "fastest")
    least = [min(range(len(p)), key=lambda i: (p[i][1], p[i][0])) for p in points]
    smallest_budget = sum(points[k][i][1] for k, i in enumerate(least))
    if smallest_budget > total_workspace:
        raise ValueError(f"total_workspace {total_workspace} bytes is below the smallest feasible "
                         f"budget, {smallest_budget} bytes (every kernel at its least-workspace plan)")
    fastest = [min(range(len(p)), key=lambda i: (p[i][0], p[i][1])) for p in points]
    if sum(points[k][i][1] for k, i in enumerate(fastest)) <= total_workspace:
        return result(fastest, "fastest")  # the budget holds every fastest plan: nothing to divide

    # One group per distinct front: (kernel indices, candidate point indices).
    spare = total_workspace - smallest_budget
    by_front = {}
    for k, p in enumerate(points):
        by_front.setdefault(tuple(p), []).append(k)
    members, candidates, groups = [], [], []
    for key, kernels in by_front.items():
        keep = _candidates(list(key), spare)
        base = key[keep[0]][1]
        members.append(kernels)
        candidates.append(keep)
        groups.append((len(kernels), [(key[i][0], key[i][1] - base) for i in keep]))

    # A greedy choice and the linear relaxation's bound; then HiGHS on the
    # points that can beat the greedy choice; then an exact search (integer
    # workspaces) on the points that can beat the best choice so far, which
    # proves it optimal or finds the optimum.
    counts, lp_bound, price = _greedy(groups, spare)
    best_time = _counts_time(groups, counts)
    bound, status, note = lp_bound, "optimal", None
    if best_time - lp_bound > 1e-9 * max(1.0, best_time):
        deadline = start + time_limit_s
        core, kept = _prune(groups, lp_bound, price, best_time)
        solved, dual_bound, proven, note = _ilp(core, spare, start + _ILP_SHARE * time_limit_s)
        if solved is not None:
            full = _expand(groups, kept, solved)
            if _counts_time(groups, full) <= best_time:
                counts, best_time = full, _counts_time(groups, full)
        # The exact search checks a proven solution briefly (HiGHS's presolve
        # has been seen to cut off the optimum near the budget), and otherwise
        # searches for as long as there is time.
        core, kept = _prune(groups, lp_bound, price, best_time)
        found, complete = _exact_search(
            core, spare, best_time,
            min(deadline, time.perf_counter() + _CHECK_SHARE * time_limit_s) if proven else deadline)
        if found is not None:
            full = _expand(groups, kept, found)
            if _counts_extra(groups, full) <= spare and _counts_time(groups, full) < best_time:
                counts, best_time = full, _counts_time(groups, full)
                proven, dual_bound = False, None  # the solver was wrong: not its bound either
        if dual_bound is not None:
            bound = max(bound, dual_bound)
        if not (complete or proven):
            status = "time limit"
    gap = 0.0 if status == "optimal" or best_time <= 0 else max(0.0, (best_time - bound) / best_time)
    if status != "optimal":
        warnings.warn(f"tf_ucudnn: Workspace Division of {total_workspace} bytes among "
                      f"{len(points)} kernels reached its time limit of {time_limit_s:g} s"
                      f"{f' ({note})' if note else ''}: the division chosen predicts "
                      f"{best_time:.6g} ms, at most {gap:.3%} above the optimum",
                      RuntimeWarning, stacklevel=2)
    chosen = [0] * len(points)
    for kernels, keep, c in zip(members, candidates, counts):
        ks = iter(kernels)
        for i, n in zip(keep, c):
            for _ in range(n):
                chosen[next(ks)] = i
    division = result(chosen, status, gap, len(groups))
    if division.workspace_bytes > total_workspace:  # cannot happen: every path checks in integers
        raise AssertionError(f"Workspace Division chose {division.workspace_bytes} bytes, over the "
                             f"budget of {total_workspace}")
    return division
