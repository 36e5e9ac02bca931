"""genimpute.copying.phaser: genimpute's own phaser, on the real slice in
tests/data (as test_phasing.py reads it) and on small made-up panels
against a likelihood written out here."""

import numpy as np
import pytest
from phasing_slice import genotypes as _genotypes, read_slice

from genimpute.config import CopyingSettings, PhasingSettings
from genimpute.copying import phaser
from genimpute.io.vcf_reader import ABSENT, MISSING
from genimpute.phasing import switch_errors

CM_PER_BP = 1e-6


@pytest.fixture(scope="module")
def data():
    return read_slice()


def _phase(d, haps=None, ref_haps=None, kept=None, settings=PhasingSettings()):
    ref_haps = d.ref_haps if ref_haps is None else ref_haps
    return phaser.phase_targets(d.unphased if haps is None else haps, np.packbits(ref_haps, axis=1),
                                ref_haps.shape[1], kept, d.positions * CM_PER_BP, settings)


def test_phasing_keeps_genotypes_and_recovers_phase(data):
    phased = _phase(data)
    assert phased.dtype == np.int8 and phased.shape == data.unphased.shape
    np.testing.assert_array_equal(_genotypes(phased), _genotypes(data.unphased))
    het = _genotypes(data.unphased) == 1
    np.testing.assert_array_equal(phased[:, 0::2][~het], data.unphased[:, 0::2][~het])
    # measured: 4 switch errors in 191, as Beagle's 4 and shapeit4's 5 (test_phasing.py); REF first: 34
    switches, opportunities = switch_errors(phased, data.truth)
    assert opportunities > 150 and switches <= 8, f"{switches} switch errors in {opportunities}"
    # the first phase alone, each call ordered by the panel against the one before: 11
    first_only = _phase(data, settings=PhasingSettings(rounds=0, sampled_rounds=0, cohort_rounds=0))
    assert switch_errors(first_only, data.truth)[0] > 2 * max(switches, 1)


def test_missing_half_missing_and_haploid_calls_come_back_as_given(data):
    haps = data.unphased.copy()
    n = len(haps)
    haps[::7, 2:4] = MISSING
    haps[1::9, 6] = MISSING
    haps[:, 5] = ABSENT
    haps[: n // 2, 9] = ABSENT
    haps[: n // 2, 8] = np.maximum(haps[: n // 2, 8], 0)
    phased = _phase(data, haps)
    diploid = _genotypes(haps) >= 0
    untouched = ~np.repeat(_genotypes(haps) == 1, 2, axis=1)
    np.testing.assert_array_equal(phased[untouched], haps[untouched])
    np.testing.assert_array_equal(_genotypes(phased)[diploid], _genotypes(haps)[diploid])
    switches, opportunities = switch_errors(phased[n // 2:, 8:10], data.truth[n // 2:, 8:10])
    assert opportunities >= 5 and switches <= 2


def test_haplotypes_left_out_of_the_reference_are_not_copied(data):
    """Targets that are panel samples are phased with their own haplotypes
    left out (`kept`): as against a panel without them, not as against
    one that hands them their true phase."""
    with_truth = np.concatenate((data.ref_haps, np.maximum(data.truth, 0).astype(np.uint8)), axis=1)
    kept = np.arange(with_truth.shape[1]) < data.ref_haps.shape[1]
    np.testing.assert_array_equal(_phase(data, ref_haps=with_truth, kept=kept), _phase(data))
    copied = _phase(data, ref_haps=with_truth)
    assert switch_errors(copied, data.truth)[0] < switch_errors(_phase(data), data.truth)[0]


def test_the_phase_is_the_same_from_run_to_run_and_on_any_number_of_threads(data):
    import numba

    first = _phase(data)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        np.testing.assert_array_equal(_phase(data), first)
    finally:
        numba.set_num_threads(threads)


def test_nothing_to_phase_comes_back_as_given(data):
    one_het = data.unphased[:, :2].copy()
    hets = np.nonzero(_genotypes(one_het)[:, 0] == 1)[0]
    one_het[hets[1:]] = [[0, 0]]
    np.testing.assert_array_equal(_phase(data, one_het), one_het)


def _log_likelihood(states, haplotype, jump_rate, error):
    """The Li and Stephens likelihood of one haplotype copying `states` (t, K), written out."""
    t, k = states.shape
    forward, total = np.full(k, 1.0 / k), 0.0
    for j in range(t):
        if j:
            forward = (1 - jump_rate[j - 1]) * forward + jump_rate[j - 1] / k
        if haplotype[j] >= 0:
            forward = forward * np.where(states[j] == haplotype[j], 1 - error, error)
        total += np.log(forward.sum())
        forward /= forward.sum()
    return total


def _random_case(seed, missing):
    """(states (t, K), a target's true pair of haplotypes (t, 2): two
    mosaics of the states, its genotypes with a fraction `missing` of them
    missing, jump rate, error)."""
    rng = np.random.default_rng(seed)
    t, k = 80, 10
    states = (rng.random((t, k)) < 0.3).astype(np.uint8)
    cut = rng.integers(1, t, 2)
    pair = np.stack([np.where(np.arange(t) < cut[h], states[:, rng.integers(k)], states[:, rng.integers(k)])
                     for h in range(2)], axis=1)
    genotypes = pair.sum(axis=1).astype(np.int8)
    genotypes[rng.random(t) < missing] = -1
    return states, pair, genotypes, np.full(t - 1, 0.05), np.float32(0.01)


def _rephased(states, genotypes, orientation, jump_rate, error):
    """(orientation after one greedy round, the missing calls' fills, the changes made)."""
    changed = orientation.copy()
    fills = np.full(((genotypes < 0).sum(), 2), -1, dtype=np.int8)
    changes = phaser._rephase(states, phaser._haplotypes(genotypes, orientation), genotypes, changed, fills,
                              jump_rate, error, -1)
    return changed, fills, changes


@pytest.mark.parametrize("seed", range(40))
def test_a_round_never_makes_the_pair_less_likely(seed):
    """Each change a greedy round makes (exchanges from a call on, blocks of
    up to MAX_BLOCK calls) is the most likely given the phase to its left
    and the changes to its right, so the pair's likelihood never falls."""
    states, _, genotypes, jump_rate, error = _random_case(seed, missing=0.05)
    orientation = np.random.default_rng(seed).integers(0, 2, len(genotypes)).astype(np.int8)

    def likelihood(o):
        haplotypes = phaser._haplotypes(genotypes, o)
        return sum(_log_likelihood(states, haplotypes[:, h], jump_rate, error) for h in range(2))

    changed = _rephased(states, genotypes, orientation, jump_rate, error)[0]
    assert likelihood(changed) >= likelihood(orientation) - 1e-3
    assert (changed[genotypes != 1] == orientation[genotypes != 1]).all()


def test_a_missing_call_is_filled_with_each_haplotypes_more_probable_allele():
    """Where a round leaves the phase as it was, each missing call's fill
    is the allele its haplotype more probably carries there: the one whose
    likelihood, written out as if it had been called, is higher. Against
    the truth, the fills beat calling every missing allele ref."""
    compared = right = ref_right = 0
    for seed in range(40):
        states, pair, genotypes, jump_rate, error = _random_case(seed, missing=0.15)
        truth = (pair[:, 0] > pair[:, 1]).astype(np.int8)  # the true orientation at heterozygous calls
        changed, fills, changes = _rephased(states, genotypes, truth, jump_rate, error)
        missing = np.nonzero(genotypes < 0)[0]
        if changes or not len(missing):
            continue
        haplotypes = phaser._haplotypes(genotypes, changed)
        for h in range(2):
            for m, j in enumerate(missing):
                called = [haplotypes[:, h].copy() for _ in range(2)]
                called[0][j], called[1][j] = 0, 1
                ref, alt = (_log_likelihood(states, c, jump_rate, error) for c in called)
                if abs(alt - ref) > 1e-3:
                    assert fills[m, h] == (alt > ref), f"seed {seed}, site {j}, haplotype {h}"
                    compared += 1
            right += (fills[:, h] == pair[missing, h]).sum()
            ref_right += (pair[missing, h] == 0).sum()
    assert compared > 100
    assert right > ref_right


def test_draws_are_uniform_and_reproducible():
    draws = np.array([phaser._uniform(7, q, j) for q in range(50) for j in range(200)])
    assert draws.min() >= 0 and draws.max() < 1
    assert abs(draws.mean() - 0.5) < 0.01 and len(np.unique(draws)) == len(draws)
    assert phaser._uniform(7, 3, 5) == phaser._uniform(7, 3, 5) != phaser._uniform(8, 3, 5)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="expected 0 <= sampled_rounds, cohort_rounds <= rounds; found 9, 2 and 8"):
        PhasingSettings(sampled_rounds=9)
    with pytest.raises(ValueError, match="phasing error: expected a probability in"):
        PhasingSettings(error=0.5)
    with pytest.raises(ValueError, match="phasing states: expected at least 1; found 0"):
        PhasingSettings(states=0)
    with pytest.raises(ValueError, match="phasing switch rate: expected ne > 0 and 0 < site_switch <= 1; found 0"):
        PhasingSettings(ne=0)


def test_the_phaser_copies_from_its_own_states_and_switch_rate(data):
    """PhasingSettings' neighbours, states and ne reach the rounds: two
    states phase far worse than the defaults, and an ne 500 times lower
    (fewer switches) phases otherwise. Its switch rate has the copying
    engine's form."""
    phased = _phase(data)
    assert switch_errors(_phase(data, settings=PhasingSettings(neighbours=1, states=2)), data.truth)[0] > \
        2 * max(1, switch_errors(phased, data.truth)[0])
    assert not np.array_equal(_phase(data, settings=PhasingSettings(ne=1e3)), phased)
    settings = PhasingSettings(ne=4e5, site_switch=0.2)
    assert settings.switch_cm(1000, 0.01) == CopyingSettings(ne=4e5, site_switch=0.2).switch_cm(1000, 0.01) == \
        pytest.approx(1000 / (0.04 * 4e5) + 0.01 / 0.2)


def test_a_reference_with_no_haplotype_kept_is_refused(data):
    with pytest.raises(ValueError, match="expected a reference of at least one haplotype; found none kept"):
        _phase(data, kept=np.zeros(data.ref_haps.shape[1], dtype=bool))


def test_ties_keep_the_phase():
    """Where every state carries one allele, exchanging a heterozygous
    call's alleles leaves the pair's likelihood as it was: the greedy
    choice keeps the phase however the float32 sums round, so that a
    compile that orders them otherwise phases alike. Exchanging the
    haplotypes from the call on, a real change, is still taken."""
    rng = np.random.default_rng(5)
    k, kept, exchanged = 800, 0, 0
    blocks, block_scales, offset = np.zeros((phaser.MAX_BLOCK, 2, k), np.float32), \
        np.ones((phaser.MAX_BLOCK, 2), np.float32), np.zeros((phaser.MAX_BLOCK, 2))
    valid, scales = np.zeros(phaser.MAX_BLOCK, dtype=np.bool_), np.ones(2, np.float32)
    for _ in range(200):
        first, second, beyond = (rng.random((n, k)).astype(np.float32) for n in (1, 1, 2))
        alleles = np.full(k, rng.integers(2), dtype=np.int8)
        choice = phaser._change(first[0], second[0], beyond, scales, blocks, block_scales, np.float32(0.0), offset,
                                valid, alleles, 1, 0, np.float32(0.01), np.float32(0.9), np.float32(1e-4), -1.0)
        assert choice in (-1, 0)
        kept, exchanged = kept + (choice == -1), exchanged + (choice == 0)
    assert kept > 20 and exchanged > 20
