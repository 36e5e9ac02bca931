"""The engine's next batch of P(alt) computed while the last one is
written: a run's windows and sample batches are asked for in an order known
before the first, so one background thread works one call ahead of the
writer. Formatting, INFO and the writer's Python leave cores idle that the
engine's next call then fills (see docs/results.md); the outputs are the
same, as each call's result does not depend on when it is made."""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor

import numba
import numpy as np

from genimpute.runtime import usable_cores


@numba.njit(cache=True, parallel=True)
def _parallel_sum(values):
    total = 0.0
    for i in numba.prange(len(values)):
        total += values[i]
    return total


def threads_may_overlap() -> bool:
    """Whether numba's threading layer lets two threads run parallel code
    at once: tbb and omp do; workqueue, the layer every install has, stops
    the process (numba loads its layer at the first parallel call, made
    here if none has been)."""
    _parallel_sum(np.zeros(2))
    return numba.threading_layer() in ("tbb", "omp")


@contextlib.contextmanager
def computed_ahead(compute, planned: list[tuple]):
    """compute, or a ComputedAhead of it over `planned` where more than
    one call is planned, the run has more than one core (--threads 1 keeps
    to one) and threads may overlap."""
    if len(planned) < 2 or usable_cores() < 2 or not threads_may_overlap():
        yield compute
        return
    with ComputedAhead(compute, planned) as ahead:
        yield ahead


def _same(planned: tuple, asked: tuple) -> bool:
    """Whether a call's arguments are the planned ones: the same objects,
    or equal slices (a batch's haplotypes)."""
    return len(planned) == len(asked) and all(
        p is a or (isinstance(p, slice) and p == a) for p, a in zip(planned, asked))


class ComputedAhead:
    """compute(*args) for each of `planned` (argument tuples, in the order
    they will be asked for), each computed in a background thread while the
    caller works on the one before: at most two results are alive at once,
    the one handed out and the next. A call off the plan is computed in
    the caller's thread, and the plan goes on after its entry. The thread
    runs numba's parallel code on as many threads as the caller's (numba
    counts them per thread). Use as a context manager: leaving it waits
    for the call in flight."""

    def __init__(self, compute, planned: list[tuple]):
        self.compute, self.planned = compute, planned
        self.threads = numba.get_num_threads()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="genimpute-ahead")
        self.pending: tuple[int, Future] | None = None
        self._submit(0)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.pending is not None:
            self.pending[1].cancel()
        self.pool.shutdown(wait=True)

    def __call__(self, *args):
        if self.pending is not None and _same(self.planned[self.pending[0]], args):
            index, future = self.pending
            result = future.result()
            self._submit(index + 1)
            return result
        self._drain()
        result = self.compute(*args)
        after = next((i + 1 for i, p in enumerate(self.planned) if _same(p, args)), len(self.planned))
        self._submit(after)
        return result

    def _submit(self, index: int) -> None:
        self.pending = None
        if index < len(self.planned):
            self.pending = index, self.pool.submit(self._run, *self.planned[index])

    def _run(self, *args):
        numba.set_num_threads(self.threads)
        return self.compute(*args)

    def _drain(self) -> None:
        """Drop the call in flight (its result is not wanted), once it ends."""
        if self.pending is not None:
            future = self.pending[1]
            if not future.cancel():
                future.exception()  # waits; its error, if any, is the dropped call's own
        self.pending = None
