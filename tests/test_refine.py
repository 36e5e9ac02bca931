"""The refiner's context is the copying engine's own (its P(alt), its
states' posteriors and haplotypes), and an untrained refiner leaves the
engine's P(alt) as it is."""

import numpy as np
import pytest
from paths import ARRAY, PANEL

from genimpute.config import CopyingSettings
from genimpute.copying import ContigModel
from genimpute.io.array_list import read_array_list
from genimpute.panel import ReferencePanel, array_typed_mask
from genimpute.refine.context import NEAR_SITES, segment_context
from genimpute.refine.features import (
    RECORD_FEATURES,
    STATE_FEATURES,
    alt_probability,
    pair_features,
)
from genimpute.refine.heldout import held_out


@pytest.fixture(scope="module")
def split():
    panel = ReferencePanel.from_vcf(PANEL)
    typed = array_typed_mask(panel, read_array_list(ARRAY))
    return held_out(panel, 8, seed=3), typed


def _model(split, **settings):
    held, typed = split
    model = ContigModel(held.reference, 0, typed, CopyingSettings(**settings))
    return model, np.ascontiguousarray(held.haplotypes[model.typed_rows].astype(np.int8))


@pytest.fixture(scope="module")
def context(split):
    model, queries = _model(split)
    [segment] = model.segments()
    return model, segment, queries, segment_context(model, segment, queries, k=400)


def test_held_out_samples_are_not_in_the_reference(split):
    held, _ = split
    assert not set(held.samples) & set(held.reference.samples)
    assert held.haplotypes.shape == (len(held.reference), 16)
    assert held.reference.n_haplotypes + 16 == 2 * (len(held.reference.samples) + 8)


@pytest.mark.parametrize("settings", [{}, {"segment_sites": 25, "margin_sites": 10}])
def test_the_context_p_alt_is_the_engines(split, settings):
    model, queries = _model(split, **settings)
    queries[::7, 3] = -1  # missing calls too
    segments = model.segments()
    assert len(segments) == (1 if not settings else 3)
    excluded = np.full(queries.shape[1], -1)
    for segment in segments:
        engine = model.probabilities(segment, queries, excluded)[0]
        np.testing.assert_allclose(segment_context(model, segment, queries).p_alt, engine, rtol=0, atol=1e-6)


def test_the_states_carry_the_engines_p_alt(split):
    """With every state kept, the posterior of those carrying the minor
    allele is the engine's P(minor), where the engine skips no state below
    a posterior floor."""
    model, queries = _model(split, posterior_floor=0.0)
    [segment] = model.segments()
    ctx = segment_context(model, segment, queries, k=400)
    rows, cols = np.nonzero(np.ones(ctx.p_alt.shape, dtype=bool))
    rows, cols = rows[::5], cols[::5]  # every record and query still, K = 400 states each
    pairs = pair_features(ctx, rows, cols)
    p_minor = np.where(pairs.minor_is_alt, ctx.p_alt[rows, cols], 1 - ctx.p_alt[rows, cols])
    np.testing.assert_allclose(pairs.record[:, 8], p_minor, atol=2e-5)  # the K states' carriers' weight
    np.testing.assert_allclose(ctx.kept[cols, ctx.gap[rows]], 1, atol=1e-4)


def test_runs_and_mismatches_are_those_of_the_states_haplotypes(context, split):
    model, _, queries, ctx = context
    alleles = split[0].reference.haplotypes(model.typed_rows)  # (t, H)
    q, gi = 5, 30
    for i in range(3):
        left, right = gi - 1, gi
        for side, (site, step) in enumerate(((left, -1), (right, 1))):
            h = ctx.hap[q, gi, i, side]
            agree = (alleles[:, h] == queries[:, q]) | (queries[:, q] < 0)
            sites = range(site, -1, -1) if step < 0 else range(site, len(agree))
            run = next((n for n, j in enumerate(sites) if not agree[j]), len(sites))
            near = [j for j in list(sites)[:NEAR_SITES]]
            assert ctx.run[q, gi, i, side] == run
            assert ctx.mismatch[q, gi, i, side] == sum(not agree[j] for j in near)


def test_the_context_is_deterministic(context):
    model, segment, queries, ctx = context
    again = segment_context(model, segment, queries, k=400)
    for field in ("p_alt", "hap", "post", "run", "mismatch", "kept"):
        np.testing.assert_array_equal(getattr(again, field), getattr(ctx, field))


@pytest.mark.parametrize("backbone", ["affine", "mlp", "reweight", "attention"])
def test_an_untrained_refiner_leaves_p_alt_as_it_is(context, backbone):
    pytest.importorskip("torch")
    from genimpute.refine.train import Examples, build, corrections

    model, segment, queries, _ = context
    ctx = segment_context(model, segment, queries)  # the default K
    rows, cols = np.nonzero((ctx.p_alt > 1e-4) & (ctx.p_alt < 1 - 1e-4))
    pairs = pair_features(ctx, rows, cols)
    assert pairs.states.shape == (len(rows), ctx.hap.shape[2], STATE_FEATURES)
    assert pairs.record.shape == (len(rows), RECORD_FEATURES) and np.isfinite(pairs.states).all()
    refiner = build(backbone, seed=0)
    correction = corrections(refiner, Examples.of(pairs))
    assert correction.shape == (len(rows),) and not correction.any()
    np.testing.assert_allclose(alt_probability(pairs, correction), ctx.p_alt[rows, cols], rtol=0, atol=2e-6)


def test_training_is_deterministic(context):
    pytest.importorskip("torch")
    from genimpute.refine.train import Examples, build, corrections, fit

    model, segment, queries, _ = context
    ctx = segment_context(model, segment, queries)
    rows, cols = np.nonzero((ctx.p_alt > 1e-4) & (ctx.p_alt < 1 - 1e-4))
    pairs = pair_features(ctx, rows, cols)
    examples = Examples.of(pairs, np.random.default_rng(0).random(len(rows)).astype(np.float32))
    runs = [corrections(fit(build("mlp", seed=0), examples, examples, epochs=1, batch=256, log=lambda _: None),
                        examples) for _ in range(2)]
    np.testing.assert_array_equal(*runs)
