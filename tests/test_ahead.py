"""The engine's next call computed while the last result is written
(genimpute.ahead): results in the order asked, one call ahead in a thread
of its own, with the caller's numba threads, and the same output bytes
as a run that computes each call when asked."""

import gzip
import threading
import time

import numba
import pytest
from paths import PANEL, TARGET_PHASED

from genimpute import ahead
from genimpute.ahead import ComputedAhead, computed_ahead
from genimpute.config import CopyingSettings
from genimpute.imputation import impute
from genimpute.modeldir import PRETRAINED_DIR


class _Recorder:
    """A compute() that notes which thread ran each call, and that no two ran at once."""

    def __init__(self, seconds: float = 0.0):
        self.seconds, self.threads, self.started, self.running, self.most_at_once = seconds, {}, [], 0, 0
        self.lock = threading.Lock()

    def __call__(self, name, part):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.started.append((name, part))
        time.sleep(self.seconds)
        self.threads[(name, part.start)] = threading.get_ident()
        with self.lock:
            self.running -= 1
        return f"{name}:{part.start}", numba.get_num_threads()


def _plan():
    windows = [object(), object()]  # compared by identity, as the engine's segments are
    return windows, [(w, slice(s, s + 2)) for w in windows for s in (0, 2)]


def test_results_come_in_the_order_asked_each_computed_ahead_in_another_thread():
    _, plan = _plan()
    compute = _Recorder(seconds=0.05)
    with ComputedAhead(compute, plan) as computed:
        results = [computed(*call)[0] for call in plan]
        assert compute.started == plan  # the last one was started while the one before was handed out
    assert results == [f"{w}:{p.start}" for w, p in plan]
    assert threading.get_ident() not in compute.threads.values()
    assert compute.most_at_once == 1


def test_the_next_call_starts_before_it_is_asked_for():
    _, plan = _plan()
    compute = _Recorder(seconds=0.0)
    with ComputedAhead(compute, plan) as computed:
        computed(*plan[0])
        deadline = time.monotonic() + 10
        while len(compute.started) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert compute.started == plan[:2]


def test_a_call_off_the_plan_is_computed_in_place_and_the_plan_goes_on_after_it():
    _, plan = _plan()
    compute = _Recorder(seconds=0.02)
    with ComputedAhead(compute, plan) as computed:
        assert computed(*plan[2])[0] == f"{plan[2][0]}:0"  # skips the first window
        assert compute.threads[(plan[2][0], 0)] == threading.get_ident()
        assert computed(*plan[3])[0] == f"{plan[3][0]}:2"
        assert compute.threads[(plan[3][0], 2)] != threading.get_ident()
        stranger = (object(), slice(0, 2))
        assert computed(*stranger)[0] == f"{stranger[0]}:0"
    assert compute.most_at_once == 1


def test_an_error_of_a_call_computed_ahead_is_raised_where_it_is_asked_for():
    _, plan = _plan()

    def compute(window, part):
        if part.start == 2:
            raise ValueError("expected a segment; found none")
        return part.start

    with ComputedAhead(compute, plan) as computed:
        assert computed(*plan[0]) == 0
        with pytest.raises(ValueError, match="found none"):
            computed(*plan[1])


def test_the_thread_ahead_runs_as_many_numba_threads_as_the_caller():
    _, plan = _plan()
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with ComputedAhead(_Recorder(), plan) as computed:
            assert [computed(*call)[1] for call in plan] == [1] * len(plan)
    finally:
        numba.set_num_threads(before)


def test_nothing_is_computed_ahead_on_one_core_one_call_or_where_threads_may_not_overlap(monkeypatch):
    _, plan = _plan()
    compute = _Recorder()
    with computed_ahead(compute, plan[:1]) as computed:
        assert computed is compute
    monkeypatch.setattr(ahead, "usable_cores", lambda: 1)  # --threads 1
    with computed_ahead(compute, plan) as computed:
        assert computed is compute
    monkeypatch.setattr(ahead, "usable_cores", lambda: 2)
    monkeypatch.setattr(numba, "threading_layer", lambda: "workqueue")
    assert not ahead.threads_may_overlap()
    with computed_ahead(compute, plan) as computed:
        assert computed is compute
    monkeypatch.setattr(numba, "threading_layer", lambda: "omp")
    assert ahead.threads_may_overlap()


def test_an_imputation_computed_ahead_writes_the_bytes_of_one_computed_in_turn(tmp_path, monkeypatch):
    bodies, handed_out = [], []

    class Counted(ComputedAhead):
        def __call__(self, *args):
            handed_out.append(args)
            return super().__call__(*args)

    monkeypatch.setattr(ahead, "ComputedAhead", Counted)
    monkeypatch.setattr(ahead, "usable_cores", lambda: 2)  # whatever cores the test machine has
    for overlap in (True, False):
        monkeypatch.setattr(ahead, "threads_may_overlap", lambda overlap=overlap: overlap)
        out = tmp_path / f"ahead{overlap}.vcf.gz"
        summary = impute(TARGET_PHASED, PRETRAINED_DIR, out, "cpu", progress=False, ref=PANEL, batch_samples=7,
                         copying=CopyingSettings(segment_sites=15, margin_sites=5))
        with gzip.open(out, "rt") as handle:
            bodies.append([line for line in handle if not line.startswith("#")])
    assert summary["windows"] >= 5 and len(handed_out) > summary["windows"]  # several batches, all computed ahead
    assert bodies[0] == bodies[1]
