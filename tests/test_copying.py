"""The region-wide copying engine: its PBWT, its forward-backward against a
textbook implementation, its state choice, and imputation through the CLI."""

import gzip
import logging
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
import vcf_edit
from cli_helpers import run
from paths import PANEL, TARGET_PHASED

from genimpute import imputation, runtime
from genimpute.config import CopyingSettings
from genimpute.copying import ContigModel, pbwt
from genimpute.copying import model as copying_model
from genimpute.copying.pbwt import _zeros_before, pbwt_index, pbwt_indexes
from genimpute.copying.states import _packed_by_haplotype, _state_alleles, _transpose_bits, bits_by_haplotype
from genimpute.copying.untyped import minor_alleles, minor_tables
from genimpute.copying_engine import CopyingEngine
from genimpute.errors import InputError
from genimpute.io.sparse_rows import RowParts, SparseSpool, row_parts
from genimpute.io.vcf_reader import read_target
from genimpute.panel import ReferencePanel, align_target


def _panel(alleles: np.ndarray, cm_step: float = 1e-5) -> ReferencePanel:
    """A one-contig panel of alleles (M, H), records 100 bp and cm_step cM
    apart (0.1 cM per Mb: with tens of haplotypes, about as many switches
    per cM as a real panel has with thousands)."""
    m, h = alleles.shape
    return ReferencePanel(
        samples=[f"s{i}" for i in range(h // 2)], contig_names=["20"], contig_index=np.zeros(m, np.int32),
        positions=np.arange(1, m + 1, dtype=np.int64) * 100, ids=["."] * m, refs=["A"] * m, alts=["C"] * m,
        packed=np.packbits(alleles.astype(np.uint8), axis=1), alt_freq=alleles.mean(1).astype(np.float32),
        centimorgans=np.arange(m, dtype=np.float64) * cm_step)


def _random_model(seed: int, m: int, h: int, typed_share: float):
    """(rng, alleles (m, h), typed (m,), ContigModel, its one segment) of a random panel."""
    rng = np.random.default_rng(seed)
    alleles = rng.integers(0, 2, (m, h)).astype(np.uint8)
    typed = rng.random(m) < typed_share
    model = ContigModel(_panel(alleles), 0, typed, CopyingSettings())
    [segment] = model.segments()
    return rng, alleles, typed, model, segment


def _index(alleles: np.ndarray, reverse: bool = False, every: int = 1) -> tuple:
    """pbwt_index of alleles (t, H) 0/1, packed as the panel keeps its records."""
    return pbwt_index(np.packbits(alleles, axis=1), alleles.shape[1], reverse, every)


def _by_haplotype(alleles: np.ndarray) -> np.ndarray:
    """_packed_by_haplotype of alleles (t, H) 0/1, packed as the panel keeps its records."""
    return _packed_by_haplotype(np.packbits(alleles, axis=1), alleles.shape[1])


def _zeros_before_every_place(index, j: int) -> list:
    """_zeros_before at site j of a pbwt_index, for every place i = 0 .. H."""
    order_low, _, words, word_zeros = index
    return [_zeros_before(words, word_zeros, j, i) for i in range(order_low.shape[1] + 1)]


def _order_row(index, k: int, places=None) -> list:
    """Row k of a pbwt_index's order as the walk reads it, at `places` (default: all)."""
    order_low, order_high = index[:2]
    bits = pbwt._order_high_bits(order_low.shape[1])
    places = range(order_low.shape[1]) if places is None else places
    return [pbwt._order_at(order_low, order_high, bits, k, i) for i in places]


@pytest.mark.parametrize("every", [1, 2, 3])  # the order kept at every site, or at every few from the first
@pytest.mark.parametrize("n_haplotypes", [50, 64, 129])  # a ragged last word, none, and one bit in it
@pytest.mark.parametrize("reverse", [False, True])
def test_pbwt_orders_haplotypes_by_their_reversed_prefixes(n_haplotypes, reverse, every):
    alleles = np.random.default_rng(0).integers(0, 2, (30, n_haplotypes)).astype(np.uint8)
    index = _index(alleles, reverse, every)
    sites = alleles[::-1] if reverse else alleles  # the index's sites, in the order it reads them
    assert len(index[0]) == len(index[1]) == pbwt.sighted_sites(30, every)
    for k, site in enumerate(range(0, 30, every)):
        # sorted by the allele at the site first, then the one before it (after it, reversed), ..., ties by index
        j = 29 - site if reverse else site
        expected = np.lexsort([np.arange(n_haplotypes), *sites[:j + 1]])
        assert _order_row(index, k) == expected.tolist()
    for j in range(30):
        in_order = sites[j, np.lexsort([np.arange(n_haplotypes), *sites[:j]])]  # in the order before site j
        assert _zeros_before_every_place(index, j) == [0, *np.cumsum(in_order == 0)]
        bits = (index[2][j, np.arange(n_haplotypes) // 64] >> (np.arange(n_haplotypes) % 64).astype(np.uint64)) & 1
        assert bits.tolist() == in_order.tolist()


@pytest.mark.parametrize("n_haplotypes, high_bits",
                         [(65_534, 0), (65_536, 0), (65_537, 1), (131_073, 2), (262_145, 4), (1_048_577, 8)])
def test_pbwt_order_keeps_16_bits_and_packs_only_the_bits_the_panel_needs_above_them(n_haplotypes, high_bits):
    alleles = np.random.default_rng(1).integers(0, 2, (3, n_haplotypes)).astype(np.uint8)
    alleles[0] = 0  # the largest count of zeros, H, at the first site
    index = _index(alleles)
    order_low, order_high, _, word_zeros = index
    assert order_low.dtype == np.uint16 and word_zeros.dtype == np.int32
    assert order_high.shape == (3, -(-n_haplotypes * high_bits // 8))
    # both ends, where the largest haplotypes gather at the last site, and places between
    places = [*range(300), *np.random.default_rng(5).integers(0, n_haplotypes, 2000), *range(n_haplotypes - 300,
                                                                                                n_haplotypes)]
    for k in range(3):
        expected = np.lexsort([np.arange(n_haplotypes), *alleles[:k + 1]])
        assert _order_row(index, k, places) == expected[places].tolist()
    in_order = alleles[2, np.lexsort([np.arange(n_haplotypes), *alleles[:2]])]
    expected = np.concatenate([[0], np.cumsum(in_order == 0)])
    assert np.array_equal(_zeros_before_every_place(index, 2), expected)


def test_pbwt_index_refuses_more_haplotypes_than_its_orders_number():
    with pytest.raises(ValueError, match="expected at most 16,777,216 haplotypes; found 16,777,217"):
        pbwt._high_bits(pbwt.MAX_HAPLOTYPES + 1)


@pytest.mark.parametrize("n_threads, every", [(1, 1), (2, 1), (2, 2)])
def test_both_pbwt_directions_built_side_by_side_equal_each_built_alone(n_threads, every):
    alleles = np.random.default_rng(3).integers(0, 2, (25, 130)).astype(np.uint8)
    default = numba.get_num_threads()
    numba.set_num_threads(min(n_threads, numba.config.NUMBA_NUM_THREADS))
    try:
        both = pbwt_indexes(np.packbits(alleles, axis=1), alleles.shape[1], every)
    finally:
        numba.set_num_threads(default)
    for built, alone in zip(both, (_index(alleles, every=every), _index(alleles, reverse=True, every=every))):
        for array, expected in zip(built, alone):
            assert array.dtype == expected.dtype and np.array_equal(array, expected)


@pytest.mark.parametrize("t, n", [(1, 1), (64, 9), (70, 130)])  # whole and ragged words of sites
def test_packed_haplotypes_hold_site_j_in_bit_j_mod_64_of_word_j_div_64(t, n):
    alleles = np.random.default_rng(6).integers(0, 2, (t, n)).astype(np.uint8)
    packed = _by_haplotype(alleles)
    assert packed.shape == (n, (t + 63) // 64) and packed.dtype == np.uint64
    sites = np.arange(t)
    bits = (packed[:, sites // 64] >> (sites % 64).astype(np.uint64)) & np.uint64(1)
    assert np.array_equal(bits, alleles.T)
    if t % 64:  # no site past the last
        assert not (packed[:, -1] >> np.uint64(t % 64)).any()


def test_bit_transpose_is_the_transpose_of_the_8_x_8_bit_matrix():
    words = np.random.default_rng(7).integers(0, 2**63, 50, dtype=np.uint64)
    for word in words:
        bits = np.unpackbits(np.array([word]).view(np.uint8), bitorder="little").reshape(8, 8)  # bit 8 r + c
        got = np.unpackbits(np.array([_transpose_bits(word)]).view(np.uint8), bitorder="little").reshape(8, 8)
        assert np.array_equal(got, bits.T)


@pytest.mark.parametrize("n_states, last", [(1, 1), (8, 64), (13, 70), (800, 697)])  # whole and ragged blocks
def test_states_alleles_are_each_slots_haplotypes_alleles_over_its_segments(n_states, last):
    rng = np.random.default_rng(5)
    haplotype_alleles = rng.integers(0, 2, (50, last + 3)).astype(np.uint8)
    expected = np.empty((last, n_states), dtype=np.uint8)
    segments = []
    for slot in range(n_states):  # each slot's sites cut into up to three segments, each its own haplotype
        cuts = sorted({0, last, *rng.integers(0, last + 1, 2).tolist()})
        for start, end in zip(cuts, cuts[1:]):
            h = int(rng.integers(50))
            segments.append((slot, start, end, h))
            expected[start:end, slot] = haplotype_alleles[h, start:end]
    segments = np.array(segments, dtype=np.int64).T[:, rng.permutation(len(segments))].copy()
    got = _state_alleles(_by_haplotype(haplotype_alleles.T.copy()), segments, n_states, last)
    assert got.flags.c_contiguous and np.array_equal(got, expected)


@pytest.mark.parametrize("n_sites, n_haplotypes", [(40, 70), (6, 131_073)])  # two words of bits; 2 high bits
def test_pbwt_walk_finds_the_neighbours_of_the_query_and_follows_the_one_above_a_missing_call(n_sites, n_haplotypes):
    rng = np.random.default_rng(2)
    alleles = rng.integers(0, 2, (n_sites, n_haplotypes)).astype(np.uint8)
    query = (alleles[:, 5] ^ (rng.random(n_sites) < 0.1)).astype(np.int8)
    query[::6] = -1
    k = 3
    sightings = pbwt._sightings(_index(alleles), _index(alleles, reverse=True), query[:, None],
                                np.arange(1), k, 1, np.full(1, -1))[0]
    # by the reversed prefix, as tested above; orders[j] the order before site j
    orders = [np.lexsort([np.arange(n_haplotypes), *alleles[:j]]) for j in range(n_sites + 1)]
    place = 0
    for j in range(n_sites):
        call = query[j] if query[j] >= 0 else alleles[j, orders[j][min(place, n_haplotypes - 1)]]
        in_order = alleles[j, orders[j]]
        below = int((in_order[:place] == 0).sum())
        place = below if call == 0 else int((in_order == 0).sum()) + place - below
        expected = orders[j + 1][max(0, place - k):place + k].tolist()
        assert sightings[j, :2 * k].tolist() == expected + [-1] * (2 * k - len(expected))


def test_queries_walking_together_each_find_what_they_find_alone():
    # the walk visits a group's queries in the order of their places, which it keeps site by site
    rng = np.random.default_rng(8)
    alleles = rng.integers(0, 2, (40, 70)).astype(np.uint8)
    queries = (alleles[:, rng.integers(0, 70, 9)] ^ (rng.random((40, 9)) < 0.1)).astype(np.int8)
    queries[rng.random((40, 9)) < 0.1] = -1
    excluded = np.array([-1, 3, -1, 0, 34, -1, -1, 7, -1])
    indexes = _index(alleles), _index(alleles, reverse=True)
    together = pbwt._sightings(*indexes, queries, np.arange(9), 4, 1, excluded)
    for q in range(9):
        alone = pbwt._sightings(*indexes, queries[:, [q]].copy(), np.arange(1), 4, 1, excluded[[q]])[0]
        assert np.array_equal(together[q], alone)


@pytest.mark.parametrize("every", [2, 3, 40])
def test_sightings_every_few_sites_are_those_of_every_site_there(every):
    # each walk still follows the query through every site; only the reading out of neighbours is skipped
    rng = np.random.default_rng(5)
    alleles = rng.integers(0, 2, (41, 70)).astype(np.uint8)
    queries = (alleles[:, rng.integers(0, 70, 5)] ^ (rng.random((41, 5)) < 0.1)).astype(np.int8)
    queries[rng.random((41, 5)) < 0.1] = -1
    excluded = np.array([-1, 3, -1, 0, 34])
    everywhere = pbwt._sightings(_index(alleles), _index(alleles, reverse=True), queries, np.arange(5), 4, 1,
                                 excluded)
    sparse = pbwt._sightings(_index(alleles, every=every), _index(alleles, reverse=True, every=every), queries,
                             np.arange(5), 4, every, excluded)
    assert sparse.shape == (5, pbwt.sighted_sites(41, every), 16)
    assert np.array_equal(sparse, everywhere[:, ::every])


def test_walks_refuse_an_index_whose_order_is_kept_at_other_sites():
    alleles = np.random.default_rng(5).integers(0, 2, (41, 70)).astype(np.uint8)
    queries = alleles[:, :2].astype(np.int8)
    with pytest.raises(ValueError, match="order is kept at every"):
        pbwt._sightings(_index(alleles), _index(alleles, reverse=True), queries, np.arange(2), 4, 2, np.full(2, -1))


def _textbook_probabilities(alleles, typed, query, cm, ne, error, site_switch):
    """P(alt) at the untyped records by a float64 forward-backward over every
    haplotype with full transition matrices, interpolated in cM."""
    x = alleles[typed]
    t, k = x.shape
    emit = np.where(x == query[:, None], 1 - error, error)
    site_cm = (cm[typed][-1] - cm[typed][0]) / (t - 1)
    switch_cm = k / (0.04 * ne) + site_cm / site_switch  # k: every panel haplotype
    rho = -np.expm1(-np.diff(cm[typed]) / switch_cm)
    forward, backward = np.zeros((t, k)), np.ones((t, k))
    forward[0] = emit[0] / k
    for j in range(1, t):
        transition = (1 - rho[j - 1]) * np.eye(k) + rho[j - 1] / k
        forward[j] = emit[j] * (forward[j - 1] @ transition)
    for j in range(t - 2, -1, -1):
        transition = (1 - rho[j]) * np.eye(k) + rho[j] / k
        backward[j] = transition @ (emit[j + 1] * backward[j + 1])
    posterior = forward * backward
    posterior /= posterior.sum(1, keepdims=True)
    typed_rows, out = np.nonzero(typed)[0], []
    for r in np.nonzero(~typed)[0]:
        right = min(np.searchsorted(typed_rows, r), t - 1)
        left = max(right - 1, 0) if typed_rows[right] > r else right
        span = cm[typed_rows[right]] - cm[typed_rows[left]]
        w = (cm[r] - cm[typed_rows[left]]) / span if span > 0 else 0.5
        w = np.clip(w, 0, 1)
        out.append((1 - w) * posterior[left] @ alleles[r] + w * posterior[right] @ alleles[r])
    return np.array(out)


@pytest.mark.parametrize("common_minor", [0.0, 0.2, 1.0])  # every record's minor alleles as bits, some, none
def test_forward_backward_equals_a_textbook_one_over_every_haplotype(monkeypatch, common_minor):
    monkeypatch.setattr("genimpute.copying.untyped.COMMON_MINOR", common_minor)
    rng = np.random.default_rng(1)
    m, h = 60, 12
    alleles = rng.integers(0, 2, (m, h)).astype(np.uint8)
    typed = np.zeros(m, bool)
    typed[[3, 7, 8, 15, 22, 30, 31, 40, 52, 57]] = True
    # no floor: the sweeps alone (the floor has a test of its own)
    settings = CopyingSettings(neighbours=h, max_states=h, ne=300.0, error=0.02, site_switch=0.3, posterior_floor=0.0)
    model = ContigModel(_panel(alleles, cm_step=0.05), 0, typed, settings)
    [segment] = model.segments()
    queries = rng.integers(0, 2, (typed.sum(), 3)).astype(np.int8)
    got = model.probabilities(segment, queries, np.full(3, -1))[0]
    for q in range(3):
        expected = _textbook_probabilities(alleles, typed, queries[:, q], np.arange(m) * 0.05, 300.0, 0.02, 0.3)
        np.testing.assert_allclose(got[:, q], expected, atol=2e-5)


@pytest.mark.parametrize("common_minor", [0.0, 1.0])  # every record's minor alleles as bits, or none
@pytest.mark.parametrize("floor", [0.0, 1e-3])
def test_states_below_the_posterior_floor_are_left_out_and_each_record_renormalised(monkeypatch, floor, common_minor):
    """Three composite states: two copying one haplotype each over every
    site, the third changing haplotype halfway, its posterior 1e-4 up to
    the end of the block of sites after that (the floor is tested on
    blocks' maxima). Below a floor of 1e-3 it is skipped in those blocks,
    in both its segments: each record's P(minor) is then the kept states'
    sum over the kept states' posterior at its sites; after them it counts."""
    from genimpute.copying.untyped import MAXIMA_BLOCK, _impute_untyped
    monkeypatch.setattr("genimpute.copying.untyped.COMMON_MINOR", common_minor)
    rng = np.random.default_rng(4)
    m, h = 300, 20
    alleles = rng.integers(0, 2, (m, h)).astype(np.uint8)
    typed = rng.random(m) < 0.4
    model = ContigModel(_panel(alleles), 0, typed, CopyingSettings())
    [segment] = model.segments()
    untyped = model._build(segment, *model._untyped_span(segment.core_first, segment.core_last))[3]
    t = int(typed.sum())
    half = t // 2
    segments = np.array([[0, 0, t, 3], [1, 0, t, 7], [2, 0, half, 11], [2, half, t, 12]], dtype=np.int64).T.copy()
    posterior = np.empty((t, 3), dtype=np.float32)
    low_rows = (half // MAXIMA_BLOCK + 2) * MAXIMA_BLOCK  # whole blocks: the rows where it is skipped
    posterior[:, 2] = np.where(np.arange(t) < low_rows, 1e-4, 0.2)
    posterior[:, 0] = 0.6 * (1 - posterior[:, 2])
    posterior[:, 1] = 1 - posterior[:, 0] - posterior[:, 2]
    got = np.zeros(len(untyped[0]), dtype=np.float32)
    _impute_untyped(untyped, segments, posterior, 0, t, np.float32(floor), got)

    records = untyped[0]
    site = np.searchsorted(np.flatnonzero(typed), records) - 1  # the typed site before each record
    left, right = np.clip(site, 0, t - 1), np.clip(site + 1, 0, t - 1)
    weight = untyped[1]
    freq = alleles[records].mean(1)
    carries = alleles[records] == (freq <= 0.5)[:, None]  # each haplotype carries the record's minor allele

    def kept(state, row):  # (a kept state's posterior at typed sites, its P(minor) there)
        if state < 2:
            hap, skipped = np.full(len(row), (3, 7)[state]), np.zeros(len(row), dtype=bool)
        else:
            hap, skipped = np.where(row < half, 11, 12), (row < low_rows) & (floor > 1e-4)
        mass = np.where(skipped, 0.0, posterior[row, state])
        return mass, mass * carries[np.arange(len(records)), hap]
    terms = [(w, *kept(s, row)) for w, row in ((1 - weight, left), (weight, right)) for s in range(3)]
    mass = sum(w * state_mass for w, state_mass, _ in terms)
    p_minor = sum(w * minor for w, _, minor in terms) / mass
    assert (mass < 1).any() == (floor > 0)
    np.testing.assert_allclose(got, np.where(freq <= 0.5, p_minor, 1 - p_minor), atol=1e-6)


def test_a_wide_pass_averages_two_state_sets():
    rng = np.random.default_rng(9)
    alleles = rng.integers(0, 2, (400, 60)).astype(np.uint8)
    typed = rng.random(400) < 0.3
    typed[:2] = False
    queries = alleles[typed][:, :4].astype(np.int8)
    queries[::7, 1] = -1  # missing calls: the typed output is averaged too
    excluded = np.full(4, -1)

    def run(**settings):
        model = ContigModel(_panel(alleles), 0, typed, CopyingSettings(**settings))
        return model.probabilities(model.segments(with_untyped_only=False)[0], queries, excluded)

    narrow = run(neighbours=2, max_states=6, wide_states=0)
    wide = run(neighbours=5, max_states=20, wide_states=0)
    both = run(neighbours=2, max_states=6, wide_neighbours=5, wide_states=20)
    for part in (0, 1):  # untyped records, typed sites without a call
        assert np.abs(narrow[part] - wide[part])[np.isfinite(narrow[part])].max() > 0.05  # two passes that differ
        np.testing.assert_allclose(both[part], (narrow[part] + wide[part]) / 2, atol=1e-6)


def test_a_query_copying_one_haplotype_gets_its_alleles_and_an_excluded_sample_is_not_copied():
    _, alleles, typed, model, segment = _random_model(2, 400, 40, 0.3)
    copied = 13
    query = alleles[typed][:, [copied]].astype(np.int8)
    got = model.probabilities(segment, query, np.array([-1]))[0][:, 0]
    np.testing.assert_allclose(got, alleles[~typed, copied], atol=0.01)
    excluded = model.probabilities(segment, query, np.array([copied // 2]))[0][:, 0]
    assert np.abs(excluded - alleles[~typed, copied]).max() > 0.5


def test_missing_calls_leave_the_copied_haplotype_found():
    _, alleles, typed, model, segment = _random_model(3, 300, 30, 0.4)
    query = alleles[typed][:, [7]].astype(np.int8)
    query[::5] = -1
    got = model.probabilities(segment, query, np.array([-1]))[0][:, 0]
    np.testing.assert_allclose(got, alleles[~typed, 7], atol=0.01)


def test_segments_cover_every_untyped_record_once_and_agree_with_one_pass():
    rng = np.random.default_rng(4)
    base = rng.integers(0, 2, (1000, 8)).astype(np.uint8)
    alleles = base[:, rng.integers(0, 8, 60)] ^ (rng.random((1000, 60)) < 0.01)  # 60 haplotypes near 8 founders
    typed = rng.random(1000) < 0.2
    typed[:3] = False  # untyped records before the first typed one
    panel = _panel(alleles.astype(np.uint8))
    whole = ContigModel(panel, 0, typed, CopyingSettings())
    pieces = ContigModel(panel, 0, typed, CopyingSettings(segment_sites=37, margin_sites=30))
    segments = pieces.segments()
    covered = np.concatenate([s.predicted for s in segments])
    assert len(segments) > 4 and covered.tolist() == np.nonzero(~typed)[0].tolist()
    queries = alleles[typed][:, :6].astype(np.int8)
    one = whole.probabilities(whole.segments()[0], queries, np.full(6, -1))[0]
    split = np.concatenate([pieces.probabilities(s, queries, np.full(6, -1))[0] for s in segments])
    assert np.abs(one - split).mean() < 0.01


def test_each_new_segment_frees_the_last_ones_tables_and_gives_the_memory_back_first(monkeypatch):
    rng = np.random.default_rng(5)
    alleles = rng.integers(0, 2, (600, 40)).astype(np.uint8)
    typed = rng.random(600) < 0.2
    model = ContigModel(_panel(alleles), 0, typed, CopyingSettings(segment_sites=30, margin_sites=10))
    released = []
    monkeypatch.setattr(copying_model, "release_freed_memory",
                        lambda: released.append((model._index_of[0], model._tables_of[0])))
    queries = alleles[typed][:, :2].astype(np.int8)
    segments = model.segments()
    for segment in (segments[0], segments[0], segments[1]):  # a batch again in the same segment, then the next
        model.probabilities(segment, queries, np.full(2, -1))
    assert released == [(None, None), (None, None)]  # nothing of the last segment held while memory is given back


def test_segments_read_the_typed_sites_within_the_copying_models_reach_of_their_ends():
    """Either side of its core a segment reads margin_sites typed sites,
    and farther, all those within margin_switches switches of the model
    (in cM), so that fewer switches (a larger panel, a larger ne) read
    farther, up to half a segment's sites."""
    rng = np.random.default_rng(6)
    alleles = rng.integers(0, 2, (6000, 40)).astype(np.uint8)
    typed = np.zeros(6000, dtype=bool)
    typed[::3] = True  # 2,000 typed sites 3e-5 cM apart
    panel = _panel(alleles)
    cores = range(0, 2000, 500)

    def spans(**settings):
        model = ContigModel(panel, 0, typed, CopyingSettings(segment_sites=500, margin_sites=10, **settings))
        assert [s.core_first for s in model.segments()] == list(cores)
        return model, [(s.first, s.last) for s in model.segments()]

    assert spans(margin_switches=0)[1] == [(max(0, c - 10), min(2000, c + 510)) for c in cores]
    settings = CopyingSettings(margin_switches=0.5, ne=6e5)
    reach = settings.margin_switches * settings.switch_cm(40, 3e-5)  # 0.001 cM: 33 typed sites, under half a segment's 250
    model, within = spans(margin_switches=0.5, ne=6e5)
    cm = model.typed_cm
    for (first, last), core_first in zip(within, cores):
        assert first == 0 or cm[first - 1] < cm[core_first] - reach <= cm[first]
        assert last == 2000 or cm[last - 1] <= cm[core_first + 499] + reach < cm[last]
        assert first == 0 or core_first - first > 10
    # ten times the switches' reach: capped at half a segment
    assert spans(margin_switches=0.5, ne=6e4)[1] == [(max(0, c - 250), min(2000, c + 750)) for c in cores]


def test_each_segment_is_indexed_on_its_own_typed_sites_and_imputes_its_records():
    """A query copying one panel haplotype gets its alleles in every segment
    (their sites numbered from the segment's first), and the index kept is
    the segment's, not the contig's (4.5-5 bytes per typed site and haplotype)."""
    rng = np.random.default_rng(8)
    alleles = rng.integers(0, 2, (1200, 40)).astype(np.uint8)
    typed = rng.random(1200) < 0.3
    model = ContigModel(_panel(alleles), 0, typed, CopyingSettings(segment_sites=60, margin_sites=20))
    query = alleles[typed][:, [13]].astype(np.int8)
    segments = model.segments()
    assert len(segments) > 4
    for segment in segments:
        got = model.probabilities(segment, query, np.array([-1]))[0][:, 0]
        np.testing.assert_allclose(got, alleles[segment.predicted, 13], atol=0.01)
        order_low = model._index_of[1][0][0]
        assert order_low.shape == (pbwt.sighted_sites(segment.last - segment.first, model.settings.sight_every), 40)


def test_outputs_do_not_depend_on_the_thread_count():
    rng, alleles, typed, model, segment = _random_model(5, 500, 50, 0.3)
    queries = rng.integers(0, 2, (typed.sum(), 20)).astype(np.int8)
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = model.probabilities(segment, queries, np.full(20, -1))[0]
        numba.set_num_threads(previous)
        many = model.probabilities(segment, queries, np.full(20, -1))[0]
    finally:
        numba.set_num_threads(previous)
    assert one.tobytes() == many.tobytes()


def _records(path):
    with gzip.open(path, "rt") as handle:
        return [line.split("\t") for line in handle if not line.startswith("#")]


def test_threads_caps_the_engines_and_the_writers_threads_and_leaves_the_output_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "_thread_limit", None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--out", str(tmp_path / "all.vcf.gz")])
    torch = sys.modules.get("torch")  # imported by an earlier test, or not yet
    previous, previous_torch = numba.get_num_threads(), torch.get_num_threads() if torch else None
    try:
        run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--threads", "1",
             "--out", str(tmp_path / "one.vcf.gz")])
        assert numba.get_num_threads() == 1 and runtime.usable_cores() == 1
        if torch:
            assert torch.get_num_threads() == 1
        else:
            assert os.environ["OMP_NUM_THREADS"] == "1"  # read by torch when it is imported
    finally:
        numba.set_num_threads(previous)
        if torch:
            torch.set_num_threads(previous_torch)
    assert _records(tmp_path / "one.vcf.gz") == _records(tmp_path / "all.vcf.gz")
    refused = run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--threads", "0"], ok=False)
    assert refused.exit_code == 2 and "--threads" in refused.output


def test_impute_with_the_copying_engine_writes_every_record(tmp_path):
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--out", str(tmp_path / "model.vcf.gz")])
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--engine", "copying",
         "--out", str(tmp_path / "copying.vcf.gz")])
    model, copying = _records(tmp_path / "model.vcf.gz"), _records(tmp_path / "copying.vcf.gz")
    assert [r[:5] for r in model] == [r[:5] for r in copying]
    imputed = [r for r in copying if "IMP" in r[7]]
    assert len(imputed) > 100
    dosages = np.array([[float(g.split(":")[1]) for g in r[9:]] for r in imputed])
    assert 0 <= dosages.min() and dosages.max() <= 2 and len(np.unique(dosages)) > 10
    # the two engines agree on most genotypes
    calls = lambda rows: np.array([[g.split(":")[0] for g in r[9:]] for r in rows if "IMP" in r[7]])  # noqa: E731
    assert (calls(model) == calls(copying)).mean() > 0.95


def test_format_gt_ds_writes_the_default_runs_gt_and_ds_and_declares_only_them(tmp_path):
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--out", str(tmp_path / "all.vcf.gz")])
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--format", "GT,DS",
         "--out", str(tmp_path / "short.vcf.gz")])
    whole, short = _records(tmp_path / "all.vcf.gz"), _records(tmp_path / "short.vcf.gz")
    assert len(short) == len(whole) > 100
    for full, brief in zip(whole, short):
        assert brief[:8] == full[:8]
        if full[8] == "GT":  # passed through from the target
            assert brief[8:] == full[8:]
            continue
        assert brief[8] == "GT:DS"
        assert [c.rstrip("\n") for c in brief[9:]] == [":".join(c.split(":")[:2]).rstrip("\n") for c in full[9:]]
    with gzip.open(tmp_path / "short.vcf.gz", "rt") as handle:
        header = [line for line in handle if line.startswith("##FORMAT")]
    assert [line.split(",")[0] for line in header] == ["##FORMAT=<ID=GT", "##FORMAT=<ID=DS"]


def test_impute_refuses_an_unknown_format_field_in_one_line(tmp_path):
    result = run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--format", "GT:XX",
                  "--out", str(tmp_path / "out.vcf.gz")], ok=False)
    assert result.exit_code == 1 and "--format" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out.vcf.gz").exists()


@pytest.mark.parametrize("region", ["20:9000000-9050000", "20:9050001-"])
def test_copying_regions_are_slices_of_the_whole_run(tmp_path, region):
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--engine", "copying",
         "--out", str(tmp_path / "whole.vcf.gz")])
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--engine", "copying", "--region", region,
         "--out", str(tmp_path / "part.vcf.gz")])
    whole, part = _records(tmp_path / "whole.vcf.gz"), _records(tmp_path / "part.vcf.gz")
    assert part and all(r in whole for r in part)


def test_a_compact_panel_imputes_as_its_vcf_and_a_foreign_file_is_refused(tmp_path):
    compact = tmp_path / "panel.gpanel"
    result = run(["panel", str(PANEL), "--out", str(compact)])
    assert "records" in result.output
    assert run(["panel", str(PANEL), "--out", str(compact)], ok=False).exit_code == 1  # exists, no --force
    for ref, name in ((PANEL, "vcf"), (compact, "compact")):
        run(["-q", "impute", str(TARGET_PHASED), "--ref", str(ref), "--engine", "copying",
             "--out", str(tmp_path / f"{name}.vcf.gz")])
    assert _records(tmp_path / "vcf.vcf.gz") == _records(tmp_path / "compact.vcf.gz")
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, packed=np.zeros(3))
    result = run(["-q", "impute", str(TARGET_PHASED), "--ref", str(foreign), "--out", str(tmp_path / "x.vcf.gz")],
                 ok=False)
    assert result.exit_code == 1 and "expected a compact panel of format" in result.output


def test_a_vcf_panel_is_spooled_beside_the_output_for_the_run_only(tmp_path, monkeypatch):
    """The engine reads a VCF panel's packed records from unnamed files in
    the output's directory (not memory): the whole records' and the listed
    ones' carriers, closed when the run ends."""
    seen = []

    def engine(panel, *args):
        fds = [panel.packed.whole.fd, panel.packed.positions.fd]
        seen.append((fds, [os.readlink(f"/proc/self/fd/{fd}") for fd in fds], panel.packed[:]))
        return CopyingEngine(panel, *args)

    monkeypatch.setattr(imputation, "CopyingEngine", engine)
    out = tmp_path / "out" / "imputed.vcf.gz"
    out.parent.mkdir()
    imputation.impute(TARGET_PHASED, tmp_path, out, "cpu", progress=False, ref=PANEL, copying=CopyingSettings())
    (fds, names, packed), = seen
    assert all(name.startswith(str(out.parent) + "/") and name.endswith("(deleted)") for name in names)
    np.testing.assert_array_equal(packed, ReferencePanel.from_vcf(PANEL).packed)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "imputed.html", "imputed.info.gz", "imputed.vcf.gz", "imputed.vcf.gz.tbi"]


def test_impute_refuses_a_missing_output_directory_before_reading_the_panel(tmp_path, monkeypatch):
    monkeypatch.setattr(imputation, "read_reference", lambda *a: pytest.fail("the panel was read"))
    with pytest.raises(InputError, match="does not exist"):
        imputation.impute(TARGET_PHASED, tmp_path, tmp_path / "no" / "out.vcf.gz", "cpu", ref=PANEL,
                          copying=CopyingSettings())


@pytest.mark.parametrize("n_strips, block_rows", [(1, 45), (2, 45), (3, 7), (9, 1)])  # 9: strips of no words at 53
@pytest.mark.parametrize("n_haplotypes", [53, 1001])  # 53: a ragged last byte; 1001: rare records listed
@pytest.mark.parametrize("sparse", [False, True])
def test_minor_alleles_list_each_haplotypes_records_of_the_minor_allele(tmp_path, n_strips, block_rows, n_haplotypes,
                                                                       sparse):
    rng = np.random.default_rng(6)
    freqs = np.r_[rng.random(30), rng.random(10) ** 8, 1 - rng.random(10) ** 8]  # every frequency, rare ones too
    alleles = (rng.random((50, n_haplotypes)) < freqs[:, None]).astype(np.uint8)
    records = np.arange(5, 50, dtype=np.int64)  # numbered by their place among these
    minor_is_alt = 2 * alleles[records].sum(axis=1) <= n_haplotypes
    numbers = (3 * np.arange(len(records)) + 1).astype(np.int32)  # each listed by its own number
    packed = np.packbits(alleles[records], axis=1)
    with SparseSpool(tmp_path) as spool:
        spool.append(packed)
        rows = spool.rows() if sparse else packed
        assert not sparse or 0 < np.count_nonzero(rows.whole_at < 0) < len(packed)  # some listed, some whole

        def blocks():
            return (row_parts(rows, np.arange(lo, min(lo + block_rows, len(packed))))
                    for lo in range(0, len(packed), block_rows))

        hap_starts, hap_records = minor_alleles(blocks, n_haplotypes, minor_is_alt, numbers, n_strips)
    minor = np.where(minor_is_alt[:, None], alleles[records], 1 - alleles[records])
    for h in range(n_haplotypes):
        assert hap_records[hap_starts[h]:hap_starts[h + 1]].tolist() == numbers[np.flatnonzero(minor[:, h])].tolist()


def test_minor_alleles_skip_whole_words_of_non_carriers_of_either_allele():
    """200 haplotypes: 25 bytes a row, padded to four words; one carrier of
    ALT, one of REF (its other words all ones), and none at all."""
    n = 200
    alleles = np.zeros((4, n), dtype=np.uint8)
    alleles[0, 70] = 1  # ALT the minor allele, carried in the second word alone
    alleles[1] = 1
    alleles[1, 199] = 0  # REF the minor allele, carried in the last, padded word
    alleles[2, [0, 63, 64, 128, 191, 192]] = 1  # words' first and last bits
    minor_is_alt = np.array([True, False, True, True])
    packed = np.packbits(alleles, axis=1)
    hap_starts, hap_records = minor_alleles(lambda: iter([row_parts(packed, np.arange(4))]), n, minor_is_alt,
                                            np.arange(4, dtype=np.int32), 2)
    lists = {h: hap_records[hap_starts[h]:hap_starts[h + 1]].tolist() for h in range(n)}
    assert {h: r for h, r in lists.items() if r} == {0: [2], 63: [2], 64: [2], 70: [0], 128: [2], 191: [2], 192: [2],
                                                      199: [1]}


def test_minor_alleles_refuse_a_record_listed_by_its_major_allele():
    parts = RowParts(np.zeros((0, 2), dtype=np.uint8), np.array([-1]), np.array([0, 2]),
                     np.array([3, 9], dtype=np.uint32), np.array([False]))  # its 0s listed, where ALT is the minor
    with pytest.raises(ValueError, match="lists its major allele's"):
        minor_alleles(lambda: iter([parts]), 16, np.array([True]), np.zeros(1, dtype=np.int32), 1)


@pytest.mark.parametrize("n_haplotypes, n_records, block_rows", [(53, 130, 64), (200, 64, 128), (1001, 200, 192)])
def test_bits_by_haplotype_set_a_bit_where_each_haplotype_carries_each_records_minor_allele(n_haplotypes,
                                                                                             n_records, block_rows):
    """Ragged last bytes (53, 1001), whole words (200: 25 bytes, padded),
    a ragged last word of records (130, 200) and blocks of several words."""
    rng = np.random.default_rng(12)
    alleles = (rng.random((n_records, n_haplotypes)) < rng.random((n_records, 1))).astype(np.uint8)
    minor_is_alt = 2 * alleles.sum(axis=1) <= n_haplotypes
    packed = np.packbits(alleles, axis=1)
    bits = bits_by_haplotype((packed[lo:lo + block_rows] for lo in range(0, n_records, block_rows)), n_haplotypes,
                             n_records, ~minor_is_alt)  # inverted where REF is the minor allele
    minor = np.where(minor_is_alt[:, None], alleles, 1 - alleles)  # (records, haplotypes)
    got = np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little")[:, :n_records]  # bit c % 64 of word c // 64
    assert bits.shape == (n_haplotypes, (n_records + 63) // 64)
    np.testing.assert_array_equal(got, minor.T)
    assert not np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little")[:, n_records:].any()


def test_minor_tables_keep_each_record_once_by_its_minor_alleles_share(tmp_path):
    """Common records (a minor allele on at least COMMON_MINOR of the
    haplotypes) as bits, the others listed, together every carrier of
    every minor allele."""
    from genimpute.copying.untyped import COMMON_MINOR
    rng = np.random.default_rng(3)
    n = 1001
    freqs = np.r_[rng.random(40), rng.random(40) ** 6, 1 - rng.random(20) ** 6]
    alleles = (rng.random((100, n)) < freqs[:, None]).astype(np.uint8)
    records = np.sort(rng.choice(100, 70, replace=False))
    alt_freq = (alleles.sum(axis=1) / n).astype(np.float32)
    with SparseSpool(tmp_path) as spool:
        spool.append(np.packbits(alleles, axis=1))
        hap_starts, hap_records, alt_major, common, hap_bits = minor_tables(spool.rows(), records, alt_freq[records],
                                                                            n, 2000, 2)
    share = np.minimum(alt_freq[records], 1 - alt_freq[records])
    assert common.tolist() == np.flatnonzero(share >= COMMON_MINOR).tolist() and 0 < len(common) < len(records)
    assert alt_major.tolist() == np.flatnonzero(alt_freq[records] > 0.5).tolist()
    minor = np.where((alt_freq[records] <= 0.5)[:, None], alleles[records], 1 - alleles[records])
    bits = np.unpackbits(hap_bits.view(np.uint8), axis=1, bitorder="little")
    for h in range(n):
        listed = hap_records[hap_starts[h]:hap_starts[h + 1]].tolist()
        assert sorted(listed + common[bits[h, :len(common)] == 1].tolist()) == np.flatnonzero(minor[:, h]).tolist()
        assert not set(listed) & set(common.tolist())


def test_a_copying_run_with_a_reference_panel_does_not_import_torch(tmp_path):
    """Torch costs 1.3 s to import here; a copying run with --ref, no missing calls and no --validate needs none."""
    code = ("import sys\nfrom genimpute.cli import main\n"
            f"sys.argv = ['genimpute', '-q', 'impute', '{TARGET_PHASED}', '--ref', '{PANEL}', '--engine', 'copying', "
            f"'--out', '{tmp_path / 'out.vcf.gz'}']\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_missing_calls_are_imputed_from_the_posterior_at_their_site():
    _, alleles, typed, model, _ = _random_model(7, 300, 30, 0.4)
    query = alleles[typed][:, [11]].astype(np.int8)
    hidden = np.arange(len(query)) % 7 == 3
    query[hidden] = -1
    got = model.typed_probabilities(query, np.array([-1]), hidden)[:, 0]
    assert np.isnan(got[~hidden]).all()
    np.testing.assert_allclose(got[hidden], alleles[typed][hidden, 11], atol=0.01)


def test_copying_fills_missing_calls_and_validates_without_a_model(tmp_path):
    import vcf_edit

    header, records = vcf_edit.read_lines()
    plain = {r[1]: list(r) for r in records}  # before hide_calls edits the records
    hidden = vcf_edit.hide_calls(records, 0.05, seed=3)
    target = vcf_edit.write(tmp_path / "missing.vcf", header, records)
    result = run(["-q", "impute", str(target), "--ref", str(PANEL), "--engine", "copying", "--validate",
                  "--out", str(tmp_path / "out.vcf.gz")])
    assert "empirical r2" in result.output
    out = [r for r in _records(tmp_path / "out.vcf.gz") if r[1] in plain]
    right = 0
    for record in out:
        n_hidden = sum((record[1], s) in hidden for s in range(9, len(record)))
        assert ("IMPMISS=%d" % n_hidden in record[7]) == (n_hidden > 0)
        for s in range(9, len(record)):
            if (record[1], s) in hidden:
                right += record[s].split(":")[0] == plain[record[1]][s].split(":")[0]
    assert right >= 0.9 * len(hidden)
    with gzip.open(tmp_path / "out.vcf.gz", "rt") as handle:
        header_lines = [line for line in handle if line.startswith("##genimpute")]
    assert any(line.startswith("##genimputeValidation=<MaskedSites=") for line in header_lines)
    assert any("copying engine" in line for line in header_lines)
    _check_loo_columns(tmp_path / "out.info.gz", next(line for line in header_lines if "Validation" in line))


def _check_loo_columns(info_path, validation_line: str) -> None:
    """The info file's LooRsq: one for each hidden site, on Genotyped lines;
    their LooSums pooled give the header's empirical r2."""
    from genimpute.io.info_file import COLUMNS, loo_r2, records

    lines = [dict(zip(COLUMNS, line)) for line in records(info_path)]
    hidden = [line for line in lines if line["LooSums"] != "-"]
    masked = int(validation_line.split("MaskedSites=")[1].split(",")[0])
    assert len(hidden) == masked and {line["Genotyped"] for line in hidden} == {"Genotyped"}
    assert all(line["LooRsq"] == "-" for line in lines if line["LooSums"] == "-")
    sums = np.array([line["LooSums"].split(",") for line in hidden], dtype=np.int64)
    np.testing.assert_allclose([float(line["LooRsq"]) for line in hidden if line["LooRsq"] != "-"],
                               [r for r in loo_r2(sums) if not np.isnan(r)], atol=5e-6)
    empirical = float(validation_line.split("EmpiricalR2=")[1].split(",")[0])
    assert loo_r2(sums.sum(axis=0)[None])[0] == pytest.approx(empirical, abs=5e-5)


def test_the_copying_engine_warns_without_a_genetic_map(tmp_path, caplog):
    from genimpute.imputation import impute

    examples = Path(__file__).parent.parent / "examples" / "data"
    genetic_map = examples / "plink.chr20_8.9-9.4Mb.GRCh37.map"
    for given, warned in ((None, True), (genetic_map, False)):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            impute(TARGET_PHASED, "unused", tmp_path / "out.vcf.gz", "cpu", force=True, progress=False, ref=PANEL,
                   genetic_map=given, copying=CopyingSettings())
        assert ("no genetic map" in caplog.text) == warned


@pytest.mark.parametrize("bad", [{"ne": 0}, {"ne": -5.0}, {"error": 0.5}, {"neighbours": 0}, {"max_states": 0},
                                 {"wide_neighbours": 0}, {"wide_states": -1}, {"site_switch": 0},
                                 {"site_switch": 1.5}, {"posterior_floor": -1e-5}, {"posterior_floor": 1.0},
                                 {"large_states_from": -1}, {"more_neighbours_from": -48000}])
def test_copying_settings_refuse_values_that_break_the_model(bad):
    with pytest.raises(ValueError, match="expected"):
        CopyingSettings(**bad)


@pytest.mark.parametrize("n_haplotypes", [0, 250, 2_000, 64_000])
@pytest.mark.parametrize("site_cm", [1e-4, 2e-3, 1e-2])
def test_the_switch_rate_is_li_and_stephens_bounded_per_typed_site(n_haplotypes, site_cm):
    """At most site_switch switches per typed site on average, that bound
    reached with no haplotypes; below Li and Stephens' rate, and close to it
    where the panel is large and its sites dense."""
    settings = CopyingSettings()
    switch_cm = settings.switch_cm(n_haplotypes, site_cm)
    assert site_cm / switch_cm <= settings.site_switch * (1 + 1e-12)
    if n_haplotypes == 0:
        assert site_cm / switch_cm == pytest.approx(settings.site_switch)
        return
    li_stephens_cm = n_haplotypes / (0.04 * settings.ne)
    assert switch_cm > li_stephens_cm
    if n_haplotypes == 64_000 and site_cm == 1e-4:
        assert switch_cm == pytest.approx(li_stephens_cm, rel=0.001)


@pytest.mark.parametrize("n_haplotypes, neighbours, states",
                         [(1_982, 16, 400), (3_999, 16, 400), (4_000, 16, 800), (47_999, 16, 800),
                          (48_000, 32, 1600), (64_000, 32, 1600)])
def test_large_panels_get_more_states_and_neighbours(n_haplotypes, neighbours, states):
    """The wide pass, off by default, doubles its states with the first
    pass's from large_states_from, not from more_neighbours_from."""
    settings = CopyingSettings(wide_states=100)
    wide_states = 200 if n_haplotypes >= 4_000 else 100
    assert settings.passes(n_haplotypes) == ((neighbours, states), (32, wide_states))


def test_the_engine_takes_its_states_from_the_panels_size():
    alleles = np.random.default_rng(3).integers(0, 2, (300, 20)).astype(np.uint8)
    typed = np.zeros(300, dtype=bool)
    typed[::3] = True
    for large_from, more_from, expected in ((21, 21, [16, 400]), (20, 21, [16, 800]), (20, 20, [32, 1600])):
        settings = CopyingSettings(large_states_from=large_from, more_neighbours_from=more_from)
        assert ContigModel(_panel(alleles), 0, typed, settings).passes.tolist() == [expected]


def test_large_panels_get_segments_twice_as_long_and_margins_with_them():
    """From more_neighbours_from haplotypes each forward-backward imputes
    twice segment_sites typed sites, and its margins reach half of that."""
    alleles = np.random.default_rng(5).integers(0, 2, (3000, 20)).astype(np.uint8)
    typed = np.zeros(3000, dtype=bool)
    typed[::3] = True  # 1,000 typed sites
    for more_from, core in ((21, 100), (20, 200)):
        settings = CopyingSettings(segment_sites=100, margin_sites=10, ne=1e-3, more_neighbours_from=more_from)
        segments = ContigModel(_panel(alleles), 0, typed, settings).segments()
        assert [s.core_first for s in segments] == list(range(0, 1000, core))
        assert [(s.first, s.last) for s in segments] == [(max(0, c - core // 2), min(1000, c + core + core // 2))
                                                         for c in range(0, 1000, core)]


def test_impute_refuses_a_non_positive_ne_in_one_line(tmp_path):
    result = run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--ne", "0",
                  "--out", str(tmp_path / "out.vcf.gz")], ok=False)
    assert result.exit_code == 2 and "--ne" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("every", [1, 4])
def test_composite_states_hold_every_sighted_haplotype_where_it_is_sighted(every):
    """More haplotypes are found than there are states, each over its own
    stretch: every one is copied by some state at the sites it was found
    at, and each state copies one haplotype at a time, over every site,
    sighted at every site or every few (to the last site past the last
    sighting)."""
    from genimpute.copying.states import _composite_states

    t, n_states, rng = 60, 4, np.random.default_rng(9)
    sightings = np.full((t, 2), -1, dtype=np.int32)
    for j in range(t):
        sightings[j, 0] = j // 6  # ten haplotypes, six sites each
        sightings[j, 1] = 20 + rng.integers(0, 2)  # two seen throughout
    sightings = sightings[::every].copy()
    capacity = sightings.size + n_states
    segments, used = _composite_states(sightings, every, t, n_states, np.full(30, -1, dtype=np.int32),
                                       np.empty((4, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64))
    copied = np.full((t, n_states), -1)
    for slot, start, end, h in segments.T:
        assert (copied[start:end, slot] == -1).all()  # one haplotype per state and site
        copied[start:end, slot] = h
    assert used == n_states and (copied >= 0).all()
    for row, found in enumerate(sightings):
        assert set(found.tolist()) <= set(copied[row * every].tolist())


def test_posteriors_of_some_sites_are_those_rows_of_all_the_sites():
    """The core's posteriors need neither sweep across the far margin."""
    from genimpute.copying.hmm import _posteriors

    rng = np.random.default_rng(8)
    states = rng.integers(0, 2, (60, 9)).astype(np.uint8)
    query = states[:, 2].astype(np.int8)
    query[::7] ^= 1
    query[5] = -1  # no call
    jump = rng.uniform(0.001, 0.05, 59).astype(np.float32)
    every = _posteriors(states, query, jump, 0.01, 0, 60)
    for lo, hi in ((0, 60), (10, 41), (0, 1), (59, 60), (20, 21)):
        np.testing.assert_array_equal(_posteriors(states, query, jump, 0.01, lo, hi), every[lo:hi])
    np.testing.assert_allclose(every.sum(axis=1), 1, rtol=1e-5)


def test_the_engine_frees_a_contigs_index_when_it_moves_to_the_next(tmp_path):
    from genimpute.copying_engine import CopyingEngine

    panel = ReferencePanel.from_vcf(vcf_edit.on_two_contigs(PANEL, tmp_path / "panel.vcf"))
    target = read_target(vcf_edit.on_two_contigs(TARGET_PHASED, tmp_path / "target.vcf"))
    aln = align_target(panel, target)
    engine = CopyingEngine(panel, aln, aln.typed_records(len(panel)), CopyingSettings(),
                           np.full(len(target.samples), -1))
    first, second = engine.model(0).segments()[0], engine.model(1).segments()[0]
    before = engine.probabilities(first, slice(0, 4)).copy()
    assert before.shape == (len(first.predicted), 4) and engine.models[0]._index_of[0] is not None
    engine.probabilities(second, slice(0, 4))
    assert engine.models[0]._index_of == engine.models[0]._tables_of == (None, None)
    np.testing.assert_array_equal(engine.probabilities(first, slice(0, 4)), before)  # built again, alike


def test_a_selection_group_is_cut_to_keep_its_sightings_within_bounds():
    from genimpute.copying.model import SELECTION_GROUP, SIGHTINGS_BYTES, selection_group

    assert selection_group(10_000, 4_000, 16, 2) == SELECTION_GROUP  # 131 MB at 16 neighbours: fits
    halved = selection_group(10_000, 4_000, 32, 2)
    assert halved * 4_000 * 4 * 32 * 4 <= SIGHTINGS_BYTES < (halved + 1) * 4_000 * 4 * 32 * 4
    assert selection_group(10, 4_000, 16, 4) == 3  # a small cohort: every thread a group
    assert selection_group(1, 10**9, 64, 1) == 1
