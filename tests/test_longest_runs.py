"""benchmarks/experiments/longest_runs.py: each haplotype's matching run through each
site, and the steps at whose first sites states are found as Beagle finds
them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks" / "experiments"))
from longest_runs import runs_through, step_starts  # noqa: E402


def test_runs_through_a_site_are_the_matching_runs_that_contain_it():
    target = np.array([0, 1, 1, 0, 1, 0], dtype=np.int8)
    panel = np.array([[0, 1, 1, 0, 1, 0],    # matches everywhere: a run of 6
                      [0, 1, 0, 0, 1, 0],    # differs at site 2: runs of 2 and 3
                      [1, 0, 0, 1, 0, 1]], dtype=np.int8).T  # differs everywhere
    expected = np.array([[6, 6, 6, 6, 6, 6], [2, 2, 0, 3, 3, 3], [0, 0, 0, 0, 0, 0]]).T
    np.testing.assert_array_equal(runs_through(panel, target), expected)


def test_uniform_landing_is_the_engines_forward_backward():
    from genimpute.copying.hmm import _posteriors
    from longest_runs import weighted_posteriors

    rng = np.random.default_rng(3)
    states = rng.integers(0, 2, (50, 12)).astype(np.uint8)
    query = states[:, 4].astype(np.int8)
    query[::9] ^= 1  # a few sites copied with an error
    jump = rng.uniform(0.001, 0.05, 49)
    uniform = weighted_posteriors(states, query, jump, 0.01, np.ones(states.shape))
    np.testing.assert_allclose(uniform, _posteriors(states, query, jump.astype(np.float32), 0.01, 0, len(query)), atol=1e-5)
    favoured = np.ones(states.shape)
    favoured[:, 7] = 50.0
    assert weighted_posteriors(states, query, jump, 0.01, favoured)[:, 7].mean() > uniform[:, 7].mean()


def test_steps_begin_half_a_step_in_then_every_step():
    centimorgans = np.array([0.0, 0.02, 0.06, 0.1, 0.14, 0.15, 0.3, 0.31])
    # the first step ends at 0.05 cM (site 2), the next at 0.06 + 0.1 (site 6), the next at 0.4 (none)
    assert step_starts(centimorgans, 0.1).tolist() == [0, 2, 6]
    # a step shorter than every gap starts at every site
    assert step_starts(centimorgans, 1e-6).tolist() == list(range(len(centimorgans)))


def test_its_passes_reduce_to_the_engine():
    """Each of longest_runs' ways, made the engine's (switches landing
    uniformly; no longest runs added; a step at every site with the
    engine's neighbours, sighted at every site, where the states outnumber the haplotypes), gives
    the engine's output: the script stays a variation of the engine as the
    engine's settings and calls change."""
    from longest_runs import impute, impute_ibs, impute_steps, impute_weighted

    from genimpute.config import CopyingSettings
    from genimpute.copying import ContigModel
    from genimpute.panel import ReferencePanel

    rng = np.random.default_rng(5)
    m, h = 400, 120
    alleles = rng.integers(0, 2, (m, h)).astype(np.uint8)
    panel = ReferencePanel(
        samples=[f"s{i}" for i in range(h // 2)], contig_names=["20"], contig_index=np.zeros(m, np.int32),
        positions=np.arange(1, m + 1, dtype=np.int64) * 100, ids=["."] * m, refs=["A"] * m, alts=["C"] * m,
        packed=np.packbits(alleles, axis=1), alt_freq=alleles.mean(1).astype(np.float32),
        centimorgans=np.arange(m, dtype=np.float64) * 1e-4)
    typed = rng.random(m) < 0.3
    model = ContigModel(panel, 0, typed, CopyingSettings(neighbours=2, max_states=1600, sight_every=1))
    [segment] = model.segments()
    queries = alleles[model.typed_rows][:, :6].astype(np.int8)
    queries[::7] ^= 1
    index = model._build(segment, *model._untyped_span(segment.core_first, segment.core_last))
    engine = model.probabilities(segment, queries, np.full(6, -1, dtype=np.int64))[0]
    np.testing.assert_allclose(impute_weighted(model, segment, index, queries, 0.0), engine, atol=1e-4)
    np.testing.assert_allclose(impute(model, segment, index, queries, 0, True), engine, atol=1e-5)
    np.testing.assert_allclose(impute_steps(model, segment, index, queries, 1e-9, 2), engine, atol=1e-5)
    # Beagle's IBS sets are other states: only a P(alt) for every record and query
    beagle_like = impute_ibs(model, segment, index, queries, 26, 7)
    assert beagle_like.shape == engine.shape and 0 <= beagle_like.min() and beagle_like.max() <= 1 + 1e-5


def test_ibs_sets_narrow_forward_as_beagle_draws_them():
    from longest_runs import ibs_sets

    query = np.array([0, 0, 1, 1, 0, 1], dtype=np.int8)  # three steps of two sites
    panel = np.array([[0, 0, 1, 1, 0, 1],    # 0: the query's alleles everywhere
                      [0, 0, 1, 1, 1, 1],    # 1: through steps 0 and 1
                      [0, 0, 0, 1, 0, 1],    # 2: steps 0 and 2
                      [0, 0, 0, 0, 0, 0],    # 3: step 0 only
                      [1, 0, 1, 1, 0, 1]],   # 4: steps 1 and 2
                     dtype=np.uint8)
    starts = np.array([0, 2, 4])
    rng = np.random.default_rng(0)
    sets = ibs_sets(panel, query, starts, 2, 3, rng)
    assert sets.shape == (6, 2) and (sets[[1, 3, 5]] == -1).all()  # only steps' first sites see haplotypes
    # step 0: 0-3 carry it, too many; through step 1 too, 0 and 1: the set
    assert sorted(sets[0]) == [0, 1]
    # step 1: 0, 1 and 4; through step 2, 0 and 4
    assert sorted(sets[2]) == [0, 4]
    # step 2, the last: 0, 2 and 4 carry it and no step is left to narrow them: two of them at random
    assert len(set(sets[4])) == 2 and set(sets[4]) <= {0, 2, 4}
    # room for three: step 0's narrowed set, 0 and 1, topped up at random from the set before it (2 and 3)
    wide = ibs_sets(panel, query, starts, 3, 3, rng)
    assert {0, 1} <= set(wide[0]) and len(set(wide[0])) == 3 and set(wide[0]) <= {0, 1, 2, 3}
    # no step to narrow over (N = 1): two of step 0's four at random
    unnarrowed = ibs_sets(panel, query, starts, 2, 1, rng)
    assert len(set(unnarrowed[0])) == 2 and set(unnarrowed[0]) <= {0, 1, 2, 3}
