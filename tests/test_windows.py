"""Window geometry and nearest-haplotype context, checked against brute force."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genimpute.config import MASKED
from genimpute.windows import (
    Window,
    assemble_rows,
    contig_rows,
    block_site_weights,
    nearest_haplotypes,
    plan_windows,
    typed_record_windows,
    window_for_block,
)

DATA = Path(__file__).parent / "data"


# --------------------------------------------------------------------------
# brute-force references
# --------------------------------------------------------------------------


def brute_windows(contig_index, positions, typed_mask, U, T):
    """[(contig, predicted rows, typed rows)] by the definition, with plain Python."""
    out = []
    for contig in sorted(set(contig_index.tolist())):
        rows = [i for i in range(len(contig_index)) if contig_index[i] == contig]
        untyped = [i for i in rows if not typed_mask[i]]
        typed = [i for i in rows if typed_mask[i]]
        for s in range(0, len(untyped), U):
            block = untyped[s: s + U]
            start, end = positions[block[0]], positions[block[-1]]

            def distance(i):
                p = positions[i]
                return max(start - p, p - end, 0)

            chosen = sorted(typed, key=lambda i: (distance(i), i))[:T]
            out.append((contig, block, sorted(chosen), [distance(i) for i in chosen]))
    return out


def brute_nearest(queries, panel, k, exclude=None, weights=None):
    weights = np.ones(panel.shape[1], int) if weights is None else weights
    result = []
    for b in range(len(queries)):
        d = [int((np.abs(queries[b].astype(int) - panel[h].astype(int)) * weights).sum()) for h in range(len(panel))]
        order = sorted(range(len(panel)), key=lambda h: (d[h], h))
        if exclude is not None:
            order = [h for h in order if not exclude[b, h]]
        result.append(order[:k])
    return np.asarray(result)


# --------------------------------------------------------------------------
# random layouts
# --------------------------------------------------------------------------


@st.composite
def layouts(draw, strict_positions=True):
    n_contigs = draw(st.integers(1, 4))
    sizes = [draw(st.integers(0, 40)) for _ in range(n_contigs)]
    if sum(sizes) == 0:
        sizes[0] = 1
    contig_index = np.repeat(np.arange(n_contigs, dtype=np.int32), sizes)
    positions, typed = [], []
    for size in sizes:
        if strict_positions:
            steps = draw(st.lists(st.integers(1, 50), min_size=size, max_size=size))
        else:  # duplicate positions, as split multi-allelic records have
            steps = draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
        start = draw(st.integers(1, 1000))
        positions.extend((start + np.cumsum(steps)).tolist())
        mask = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        if size and not all(mask) and not any(mask):
            mask[draw(st.integers(0, size - 1))] = True  # a contig with untyped records needs a typed one
        typed.extend(mask)
    U = draw(st.integers(1, 12))
    T = draw(st.integers(1, 12))
    return contig_index, np.asarray(positions, dtype=np.int64), np.asarray(typed, dtype=bool), U, T


def _check_structure(windows, contig_index, typed_mask, U, T):
    predicted = np.concatenate([w.predicted for w in windows]) if windows else np.zeros(0, int)
    untyped = np.nonzero(~typed_mask)[0]
    # every untyped record is predicted by exactly one window, in record order
    np.testing.assert_array_equal(predicted, untyped)
    remaining = {int(c): int(((contig_index == c) & ~typed_mask).sum()) for c in np.unique(contig_index)}
    for w in windows:
        assert isinstance(w, Window)
        assert len(w.columns) == len(w.typed)
        assert np.all(np.diff(w.columns) > 0)
        assert np.all(contig_index[w.columns] == w.contig)
        np.testing.assert_array_equal(typed_mask[w.columns], w.typed)
        n_pred = int((~w.typed).sum())
        assert n_pred == min(U, remaining[w.contig])
        remaining[w.contig] -= n_pred
        typed_on_contig = int(((contig_index == w.contig) & typed_mask).sum())
        assert int(w.typed.sum()) == min(T, typed_on_contig)
        # predicted records are consecutive untyped records of the contig
        untyped_here = np.nonzero((contig_index == w.contig) & ~typed_mask)[0]
        first = np.searchsorted(untyped_here, w.predicted[0])
        np.testing.assert_array_equal(w.predicted, untyped_here[first: first + n_pred])
    assert all(v == 0 for v in remaining.values())


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_plan_windows_matches_brute_force(layout):
    contig_index, positions, typed_mask, U, T = layout
    windows = plan_windows(contig_index, positions, typed_mask, U, T)
    _check_structure(windows, contig_index, typed_mask, U, T)
    expected = brute_windows(contig_index, positions, typed_mask, U, T)
    assert len(windows) == len(expected)
    for w, (contig, block, chosen, _) in zip(windows, expected):
        assert w.contig == contig
        assert w.predicted.tolist() == block
        assert w.columns[w.typed].tolist() == chosen


@settings(max_examples=300, deadline=None)
@given(layouts(strict_positions=False))
def test_plan_windows_with_duplicate_positions(layout):
    """With repeated positions the typed records chosen are still the T
    nearest by distance."""
    contig_index, positions, typed_mask, U, T = layout
    windows = plan_windows(contig_index, positions, typed_mask, U, T)
    _check_structure(windows, contig_index, typed_mask, U, T)
    expected = brute_windows(contig_index, positions, typed_mask, U, T)
    assert len(windows) == len(expected)
    for w, (contig, block, _, distances) in zip(windows, expected):
        assert w.predicted.tolist() == block
        start, end = positions[block[0]], positions[block[-1]]
        chosen_pos = positions[w.columns[w.typed]]
        got = np.maximum(np.maximum(start - chosen_pos, chosen_pos - end), 0)
        assert sorted(got.tolist()) == sorted(distances)


def test_window_for_block_prefers_typed_inside_the_span():
    positions = np.array([10, 20, 30, 40, 50, 60, 70])
    typed = np.array([0, 2, 3, 4, 6])
    w = window_for_block(np.array([1, 5]), typed, positions, 3, 0)
    # span 20..60: records 2, 3, 4 are inside (distance 0); 0 and 6 are 10 bp away
    assert w.columns.tolist() == [1, 2, 3, 4, 5]
    assert w.typed.tolist() == [False, True, True, True, False]
    w = window_for_block(np.array([1, 5]), typed, positions, 4, 0)
    assert w.columns[w.typed].tolist() == [0, 2, 3, 4]  # tie at 10 bp goes to the lower index


def test_window_for_block_tie_at_repeated_position_goes_to_lower_index():
    positions = np.array([5, 5, 10, 20])  # records 0 and 1: split multi-allelic site, both typed
    w = window_for_block(np.array([2]), np.array([0, 1]), positions, 1, 0)
    assert w.columns.tolist() == [0, 2]


def test_plan_windows_contig_without_typed_records():
    contig_index = np.array([0, 0, 1, 1])
    positions = np.array([1, 2, 1, 2])
    typed = np.array([True, False, False, False])
    with pytest.raises(ValueError, match="contig #1"):
        plan_windows(contig_index, positions, typed, 5, 5)
    # planning only the other contig is fine
    windows = plan_windows(contig_index, positions, typed, 5, 5, contigs=[0])
    assert [w.columns.tolist() for w in windows] == [[0, 1]]


def test_plan_windows_fully_typed_contig_has_no_window():
    contig_index = np.array([0, 0, 1, 1, 1])
    positions = np.array([1, 2, 1, 2, 3])
    typed = np.array([True, True, True, False, True])
    windows = plan_windows(contig_index, positions, typed, 2, 1)
    assert [(w.contig, w.columns.tolist()) for w in windows] == [(1, [2, 3])]
    untyped, typed_rows = contig_rows(contig_index, 1, typed)
    assert untyped.tolist() == [3] and typed_rows.tolist() == [2, 4]


# --------------------------------------------------------------------------
# nearest haplotypes
# --------------------------------------------------------------------------


@st.composite
def nearest_cases(draw):
    n_hap = draw(st.integers(1, 24))
    t = draw(st.integers(0, 12))  # few sites: many distance ties
    b = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    panel = rng.integers(0, 2, (n_hap, t)).astype(np.uint8)
    if draw(st.booleans()) and n_hap > 1:
        panel[n_hap // 2] = panel[0]  # exact duplicate haplotypes
    queries = rng.integers(0, 2, (b, t)).astype(np.uint8)
    exclude = None
    if draw(st.booleans()):
        exclude = rng.random((b, n_hap)) < draw(st.floats(0, 0.7))
        exclude[:, rng.integers(0, n_hap)] = False  # keep at least one available
    available = n_hap - (0 if exclude is None else int(exclude.sum(axis=1).max()))
    k = draw(st.integers(1, available))
    return queries, panel, k, exclude


@settings(max_examples=300, deadline=None)
@given(nearest_cases())
def test_nearest_haplotypes_matches_brute_force(case):
    queries, panel, k, exclude = case
    got = nearest_haplotypes(queries, panel, k, exclude)
    assert got.shape == (len(queries), k)
    np.testing.assert_array_equal(got, brute_nearest(queries, panel, k, exclude))
    for b in range(len(queries)):
        assert len(set(got[b].tolist())) == k
        if exclude is not None:
            assert not exclude[b, got[b]].any()
        d = np.abs(panel[got[b]].astype(int) - queries[b].astype(int)).sum(axis=1)
        assert np.all(np.diff(d) >= 0)  # nearest first


@settings(max_examples=100, deadline=None)
@given(nearest_cases(), st.integers(0, 2**32 - 1))
def test_weighted_nearest_haplotypes_match_brute_force(case, seed):
    queries, panel, k, exclude = case
    weights = np.random.default_rng(seed).integers(1, 8, panel.shape[1])
    np.testing.assert_array_equal(nearest_haplotypes(queries, panel, k, exclude, weights),
                                  brute_nearest(queries, panel, k, exclude, weights))


def test_block_site_weights_cover_the_block_and_its_flanks():
    typed = np.array([1, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1], bool)  # typed sites 0-3, block, 4, block, 5-9
    assert block_site_weights(typed, 0, 6).tolist() == [1, 1, 1, 1, 6, 1, 1, 1, 1, 1]
    assert block_site_weights(typed, 2, 6).tolist() == [1, 1, 6, 6, 6, 6, 6, 1, 1, 1]
    assert block_site_weights(typed, 20, 3).tolist() == [3] * 10


def test_nearest_haplotypes_ties_to_lower_index():
    panel = np.array([[1, 1], [0, 0], [1, 0], [0, 0], [0, 1]], dtype=np.uint8)
    queries = np.array([[0, 0]], dtype=np.uint8)
    assert nearest_haplotypes(queries, panel, 5).tolist() == [[1, 3, 2, 4, 0]]
    exclude = np.array([[False, True, False, False, False]])
    assert nearest_haplotypes(queries, panel, 3, exclude).tolist() == [[3, 2, 4]]


def test_nearest_haplotypes_excluding_own_sample_on_real_panel():
    from genimpute.io.array_list import read_array_list
    from genimpute.panel import ReferencePanel, array_typed_mask

    panel = ReferencePanel.from_vcf(DATA / "panel.vcf.gz")
    typed = array_typed_mask(panel, read_array_list(DATA / "omni2.5_chr20_9.0-9.1Mb.txt"))
    haps = panel.haplotypes(np.nonzero(typed)[0]).T  # (H, t)
    queries = np.arange(0, panel.n_haplotypes, 37)
    exclude = np.zeros((len(queries), panel.n_haplotypes), bool)
    for b, q in enumerate(queries):
        exclude[b, 2 * (q // 2): 2 * (q // 2) + 2] = True
    got = nearest_haplotypes(haps[queries], haps, 16, exclude)
    np.testing.assert_array_equal(got, brute_nearest(haps[queries], haps, 16, exclude))
    own = np.stack([2 * (queries // 2), 2 * (queries // 2) + 1], axis=1)
    assert all(not set(got[b].tolist()) & set(own[b].tolist()) for b in range(len(queries)))


@pytest.mark.parametrize("k", [0, 7])
def test_nearest_haplotypes_k_out_of_range(k):
    panel = np.zeros((6, 3), np.uint8)
    with pytest.raises(ValueError, match="k="):
        nearest_haplotypes(np.zeros((2, 3), np.uint8), panel, k)


def test_nearest_haplotypes_k_exceeds_haplotypes_left_after_exclusion():
    panel = np.zeros((6, 3), np.uint8)
    exclude = np.zeros((2, 6), bool)
    exclude[1, :2] = True  # the second query may use only 4
    nearest_haplotypes(np.zeros((2, 3), np.uint8), panel, 4, exclude)
    with pytest.raises(ValueError, match="4 haplotypes available"):
        nearest_haplotypes(np.zeros((2, 3), np.uint8), panel, 5, exclude)


# --------------------------------------------------------------------------
# assembled rows
# --------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    m=st.integers(1, 20),
    n_hap=st.integers(1, 16),
    b=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_assemble_rows(m, n_hap, b, seed, data):
    rng = np.random.default_rng(seed)
    window_haps = rng.integers(0, 2, (m, n_hap)).astype(np.uint8)
    queries = rng.integers(0, 2, (b, m)).astype(np.uint8)
    typed = rng.random(m) < 0.5
    k = data.draw(st.integers(1, n_hap))
    context = np.stack([rng.permutation(n_hap)[:k] for _ in range(b)])
    rows = assemble_rows(window_haps, queries, context, typed)
    assert rows.shape == (b, 1 + k, m) and rows.dtype == np.int8
    assert np.all(rows[:, 0][:, ~typed] == MASKED)
    np.testing.assert_array_equal(rows[:, 0][:, typed], queries[:, typed])
    for i in range(b):
        for j in range(k):
            np.testing.assert_array_equal(rows[i, 1 + j], window_haps[:, context[i, j]])
    assert not np.any(rows[:, 1:] == MASKED)


def test_assemble_rows_on_a_real_window():
    from genimpute.io.array_list import read_array_list
    from genimpute.panel import ReferencePanel, array_typed_mask

    panel = ReferencePanel.from_vcf(DATA / "panel.vcf.gz")
    typed_mask = array_typed_mask(panel, read_array_list(DATA / "omni2.5_chr20_9.0-9.1Mb.txt"))
    windows = plan_windows(panel.contig_index, panel.positions, typed_mask, 50, 20)
    assert len(windows) == -(-int((~typed_mask).sum()) // 50)
    w = windows[3]
    window_haps = panel.haplotypes(w.columns)  # (M, H)
    queries = window_haps.T[[0, 1, 200]]  # query haplotypes with their true untyped alleles
    context = nearest_haplotypes(queries[:, w.typed], window_haps[w.typed].T, 8)
    rows = assemble_rows(window_haps, queries, context, w.typed)
    assert rows.shape == (3, 9, len(w.columns))
    assert np.all(rows[:, 0, ~w.typed] == MASKED)
    np.testing.assert_array_equal(rows[:, 0, w.typed], queries[:, w.typed])
    np.testing.assert_array_equal(rows[:, 1:], np.transpose(window_haps[:, context], (1, 2, 0)))
    # each query's nearest haplotype (itself, or a lower-index copy) is at distance 0 on typed sites
    nearest = window_haps[w.typed][:, context[:, 0]].T
    np.testing.assert_array_equal(nearest, queries[:, w.typed])
    assert np.all(context[:, 0] <= [0, 1, 200])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.sampled_from([0.005, 0.05, 0.5, 1.0]))
def test_typed_record_windows_keep_each_record_near_its_evidence(seed, share):
    rng = np.random.default_rng(seed)
    n = 3000
    contig_index = np.repeat([0, 1], [2000, 1000])
    positions = np.concatenate([np.sort(rng.choice(10**7, 2000, replace=False)),
                                np.sort(rng.choice(10**7, 1000, replace=False))])
    typed_mask = rng.random(n) < 0.5
    predict = typed_mask & (rng.random(n) < share)
    predict[np.nonzero(typed_mask)[0][0]] = True  # at least one
    T, block, stride = 40, 4, 5
    windows = typed_record_windows(contig_index, positions, typed_mask, predict, block, T, stride)
    predicted = np.concatenate([w.predicted for w in windows])
    assert sorted(predicted.tolist()) == np.nonzero(predict)[0].tolist()  # each exactly once
    for w in windows:
        assert len(w.predicted) <= block and (contig_index[w.columns] == w.contig).all()
        evidence = w.columns[w.typed]
        assert not np.isin(evidence, w.predicted).any() and typed_mask[evidence].all()
        _, typed = contig_rows(contig_index, w.contig, typed_mask)
        rank = np.searchsorted(typed, w.predicted)
        assert len(set(rank % stride)) == 1 and rank.max() - rank.min() < T // 2
        for r in rank:  # the typed neighbours either side are evidence unless predicted with it
            for nb in typed[max(0, r - 1): r + 2]:
                assert nb in evidence or nb in w.predicted
