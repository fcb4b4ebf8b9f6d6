"""The memory-cap sweep's search for the largest mini-batch that trains:
doubling, then bisection (:func:`search_batch`), with several processes per
mini-batch size (:func:`run_sweep`); or fixed steps from a known N
(:func:`step_batch`)."""

from tf_ucudnn.bench.memory_cap.settings import DEFAULT_BISECT_STEPS, DEFAULT_MAX_BATCH
from tf_ucudnn.bench.models.specs import model_spec


def search_batch(trains, *, start, max_batch=DEFAULT_MAX_BATCH,
                 bisect_steps=DEFAULT_BISECT_STEPS):
    """The largest mini-batch size that trains, found cheaply.

    From ``start``, doubles N while it trains (up to ``max_batch``), then
    bisects ``bisect_steps`` times between the largest N that trained and
    the smallest that failed. If ``start`` fails with ``oom`` or
    ``timeout``, N halves until one trains (or 1 fails); an ``error`` there
    ends the search (it seldom depends on N, and each try is a process).

    Args:
      trains: ``trains(n)`` runs N and returns its status (:data:`STATUSES`).
      start: the first N, >= 1.
      max_batch: the largest N tried, >= 1.
      bisect_steps: bisection steps, >= 0.

    Returns:
      ``(largest, failed)``: the largest N that trained (None if none did)
      and the smallest N above it that failed (None if none did).

    Raises:
      ValueError: ``start`` or ``max_batch`` below 1, or ``bisect_steps`` below 0.
    """
    if start < 1 or max_batch < 1 or bisect_steps < 0:
        raise ValueError(f"need start >= 1, max_batch >= 1 and bisect_steps >= 0, got "
                         f"{start}, {max_batch} and {bisect_steps}")
    n = min(start, max_batch)
    status = trains(n)
    if status == "ok":
        good, bad = n, None
        while good < max_batch:
            n = min(2 * good, max_batch)
            if trains(n) != "ok":
                bad = n
                break
            good = n
    else:
        good, bad = _step_down(trains, status, n, lambda failed: failed // 2)
        if good is None:
            return None, bad
    for _ in range(bisect_steps):
        if bad is None or bad - good <= 1:
            break
        middle = (good + bad) // 2
        if trains(middle) == "ok":
            good = middle
        else:
            bad = middle
    return good, bad


def step_batch(trains, *, start, step, max_batch=DEFAULT_MAX_BATCH):
    """The largest mini-batch size that trains, in steps of ``step`` from a known N.

    For a cap near one already measured (twice the cap: about twice the N),
    where ``search_batch``'s doubling would overshoot: from ``start``, N goes up
    by ``step`` while it trains (up to ``max_batch``); if ``start`` fails with
    ``oom`` or ``timeout``, N goes down by ``step`` until one trains. An
    ``error`` at the start or on the way down ends the search, as in
    :func:`search_batch`. The answer is good to ``step``.

    Args:
      trains: ``trains(n)`` runs N and returns its status (:data:`STATUSES`).
      start: the first N, >= 1.
      step: the distance between sizes tried, >= 1.
      max_batch: the largest N tried, >= 1.

    Returns:
      ``(largest, failed)`` as :func:`search_batch`'s: the largest N that
      trained (None if none did) and the N one step above it that failed
      (None if none did).

    Raises:
      ValueError: ``start``, ``step`` or ``max_batch`` below 1.
    """
    if start < 1 or step < 1 or max_batch < 1:
        raise ValueError(f"need start, step and max_batch >= 1, got {start}, {step} and "
                         f"{max_batch}")
    n = min(start, max_batch)
    status = trains(n)
    if status == "ok":
        while n < max_batch:
            up = min(n + step, max_batch)
            if trains(up) != "ok":
                return n, up
            n = up
        return n, None
    return _step_down(trains, status, n, lambda failed: failed - step)


def _step_down(trains, status, failed, smaller):
    """From an N ``failed`` whose run ended with ``status``: tries
    ``smaller(failed)`` while the failures are ``oom`` or ``timeout`` and it
    is >= 1. Returns ``(n, failed)``: the first N that trained (None if none
    did) and the last one that failed above it."""
    while status in ("oom", "timeout") and smaller(failed) >= 1:
        n = smaller(failed)
        status = trains(n)
        if status == "ok":
            return n, failed
        failed = n
    return None, failed


def run_sweep(sweep, measure, *, start_batch=None, max_batch=DEFAULT_MAX_BATCH,
              bisect_steps=DEFAULT_BISECT_STEPS, runs=1, on_run=None):
    """One sweep: :func:`search_batch` with ``runs`` processes per N.

    Args:
      sweep: a dict of :func:`sweeps_of`.
      measure: ``measure(sweep, batch)`` runs one process and returns its
        run dict (``status`` and, where ``"ok"``, the timings; :func:`run_worker`).
      start_batch: the first N; None: the model's ``start_batch``.
      max_batch: the largest N tried.
      bisect_steps: bisection steps.
      runs: processes per N (>= 1): N trains if every one does; after the
        first that fails, N's other runs are skipped.
      on_run: called with each run dict as it comes (progress lines).

    Returns:
      ``sweep`` with ``runs``: every run dict in the order run, each with
      ``batch`` and ``run`` (its index among N's runs).
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    done = []

    def trains(batch):
        for i in range(runs):
            result = dict(measure(sweep, batch), batch=batch, run=i)
            done.append(result)
            if on_run:
                on_run(sweep, result)
            if result["status"] != "ok":
                return result["status"]
        return "ok"

    start = start_batch or model_spec(sweep["model"]).start_batch
    search_batch(trains, start=start, max_batch=max_batch, bisect_steps=bisect_steps)
    return dict(sweep, runs=done)
