"""Panel haplotypes grouped by the minor alleles they carry in each gap
(genimpute.copying.patterns): the grouping the copying engine sums its
states' posteriors by before adding them to the untyped records."""

import numpy as np
import pytest

from genimpute.copying import patterns
from genimpute.copying.patterns import gap_patterns
from genimpute.copying.untyped import minor_tables
from genimpute.io.sparse_rows import SparseSpool


def _tables(tmp_path, rng, n_haplotypes: int, n_records: int, n_gaps: int, first_gap: int):
    """A random panel's minor tables and its records' gaps (some gaps empty,
    some records rare, some common, some with REF the minor allele)."""
    freqs = np.r_[rng.random(n_records // 2), rng.random(n_records - n_records // 2) ** 5]
    freqs[::7] = 1 - freqs[::7]
    alleles = (rng.random((n_records, n_haplotypes)) < freqs[:, None]).astype(np.uint8)
    alt_freq = (alleles.sum(axis=1) / n_haplotypes).astype(np.float32)
    record_gap = np.sort(rng.integers(first_gap, first_gap + n_gaps, n_records))
    gap_first = np.searchsorted(record_gap, np.arange(first_gap + n_gaps + 2))
    with SparseSpool(tmp_path) as spool:
        spool.append(np.packbits(alleles, axis=1))
        hap_starts, hap_records, _, common, hap_bits = minor_tables(spool.rows(), np.arange(n_records), alt_freq,
                                                                    n_haplotypes, 4000, 2)
    minor = np.where((alt_freq <= 0.5)[:, None], alleles, 1 - alleles)
    return (hap_starts, hap_records, common, hap_bits), record_gap, gap_first, minor


@pytest.mark.parametrize("small_ids", [np.uint16, np.uint8])  # uint8: a gap's patterns overflow it, uint32 instead
def test_each_haplotypes_pattern_carries_exactly_its_minor_alleles_in_the_gap(tmp_path, monkeypatch, small_ids):
    monkeypatch.setattr(patterns, "SMALL_IDS", small_ids)
    monkeypatch.setattr(patterns, "GAPS_AT_ONCE", 5)  # several chunks of gaps
    rng = np.random.default_rng(11)
    n_haplotypes, n_gaps, first_gap = 600, 23, 3
    minor_of, record_gap, gap_first, minor = _tables(tmp_path, rng, n_haplotypes, 400, n_gaps, first_gap)
    g_lo, pattern_of, pattern_first, starts, records = gap_patterns(minor_of, record_gap, gap_first)
    assert g_lo == record_gap[0] and pattern_of.shape == (n_haplotypes, record_gap[-1] + 1 - g_lo)
    assert pattern_of.dtype == (np.uint16 if small_ids == np.uint16 else np.uint32)
    for j in range(pattern_of.shape[1]):
        in_gap = np.flatnonzero(record_gap == g_lo + j)
        carried = [frozenset(in_gap[minor[in_gap, h] == 1].tolist()) for h in range(n_haplotypes)]
        distinct = {c for c in carried if c}
        assert pattern_first[j + 1] - pattern_first[j] == len(distinct) + 1  # and pattern 0
        assert starts[pattern_first[j]] == starts[pattern_first[j] + 1]  # pattern 0 carries none
        for h in range(n_haplotypes):
            slot = pattern_first[j] + pattern_of[h, j]
            assert (pattern_of[h, j] == 0) == (not carried[h])
            assert frozenset(records[starts[slot]:starts[slot + 1]].tolist()) == carried[h]
    assert small_ids == np.uint16 or pattern_of.max() > np.iinfo(small_ids).max


def test_patterns_are_the_same_whatever_the_threads(tmp_path):
    import numba
    rng = np.random.default_rng(5)
    tables = _tables(tmp_path, rng, 300, 200, 17, 0)[:3]
    before = numba.get_num_threads()
    try:
        results = []
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(threads)
            results.append(gap_patterns(*tables))
    finally:
        numba.set_num_threads(before)
    for one, many in zip(*results):
        np.testing.assert_array_equal(one, many)


def test_no_untyped_records_give_empty_patterns():
    minor = (np.zeros(4, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64),
             np.zeros((3, 0), dtype=np.uint64))
    g_lo, pattern_of, pattern_first, starts, records = gap_patterns(minor, np.zeros(0, dtype=np.int64),
                                                                    np.zeros(5, dtype=np.int64))
    assert pattern_of.shape == (3, 0) and pattern_first.tolist() == [0] and starts.tolist() == [0]
    assert len(records) == 0
