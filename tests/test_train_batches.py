"""What a training step shows the model: no query sees its own sample or a
validation sample, hidden cells are hidden, and the query loss is weighted
as asked."""

import numpy as np
import pytest
import torch
from paths import ARRAY, PANEL

from genimpute.batches import NearestContext, SharedContext, batch_family, nearest_context_batch, shared_context_batch
from genimpute.config import MASKED, RunConfig, TrainConfig
from genimpute.errors import InputError
from genimpute.models import REGISTRY, build_model, default_window, model_config
from genimpute.models.kmers import group_columns
from genimpute.training import train
from genimpute.windows import block_site_weights


def _shared_case(ts, seed: int, n_queries: int, **kw):
    """A SPIN batch of a random window: (window, queries, batch, panel alleles (H, M) as int)."""
    rng = np.random.default_rng(seed)
    window = ts.random_window(rng, 40, 30)
    queries = rng.choice(ts.train_haps, n_queries, replace=False)
    batch = shared_context_batch(ts, window, queries, 5, rng, mask_rate=0.2, **kw)
    return window, queries, batch, ts.panel.haplotypes(window.columns).T.astype(int)


def test_shared_batch_context_leaves_out_queries_and_validation(training_set):
    ts = training_set
    window, queries, batch, haps = _shared_case(ts, 0, 6, missing_rate=0.1)
    allowed = np.ones(len(haps), bool)
    allowed[ts.is_val] = False
    allowed[queries] = allowed[queries ^ 1] = False
    context = batch.context.numpy()
    assert len(context) == allowed.sum()
    # every context row is an allowed haplotype, as given or with its untyped cells hidden
    shown = np.where(context == MASKED, -1, context)
    for row in shown:
        candidates = haps[allowed]
        match = ((candidates == row) | (row < 0)).all(axis=1)
        assert match.any()
    untyped = ~window.typed
    hidden_rows = (context[:, untyped] == MASKED).all(axis=1)
    assert 0 < hidden_rows.sum() < len(context)
    assert (context[~hidden_rows] != MASKED).all()

    is_query = batch.is_query.numpy()
    predicted, alleles = batch.predicted.numpy(), batch.alleles.numpy()
    assert is_query.sum() == 6 and len(predicted) == 6 + hidden_rows.sum()
    np.testing.assert_array_equal(alleles[:6], haps[queries])
    assert (predicted[:, untyped] == MASKED).all()  # queries and hidden rows: untyped cells hidden
    typed_cells = predicted[:6][:, window.typed]
    assert ((typed_cells == MASKED) | (typed_cells == haps[queries][:, window.typed])).all()
    np.testing.assert_array_equal(predicted[6:], context[hidden_rows])
    assert batch.target_groups.tolist() == group_columns(batch.typed.logical_not().nonzero().squeeze(1), 5).tolist()
    assert batch.counts() == (6 * len(batch.target_groups), int(hidden_rows.sum()) * len(batch.target_groups))


def test_share_splits_predicted_rows_and_keeps_the_context(training_set):
    ts = training_set
    rng = np.random.default_rng(1)
    window = ts.random_window(rng, 40, 30)
    batch = shared_context_batch(ts, window, rng.choice(ts.train_haps, 4, replace=False), 3, rng, 0.1)
    halves = [batch.share(slice(r, None, 2)) for r in (0, 1)]
    assert all(h.context is batch.context for h in halves)
    assert sum(len(h.predicted) for h in halves) == len(batch.predicted)
    assert sum(int(h.is_query.sum()) for h in halves) == 4


def test_maf_weights_favour_rare_untyped_variants(training_set):
    ts = training_set
    window = ts.random_window(np.random.default_rng(2), 60, 40)
    haps = ts.panel.haplotypes(window.columns)
    assert (ts.maf_weights(window, haps, 0.0) == 1).all()
    weights = ts.maf_weights(window, haps, 0.5)
    assert (weights[window.typed] == 1).all()
    untyped = weights[~window.typed]
    assert untyped.mean() == pytest.approx(1, rel=1e-5)
    alt = haps[~window.typed][:, ts.train_haps].mean(axis=1)
    maf = np.minimum(alt, 1 - alt)
    rare, common = np.argmin(maf), np.argmax(maf)
    assert maf[rare] < maf[common] and untyped[rare] > untyped[common]
    # the rarest weigh (MAF ratio)^0.5 times the commonest, MAF floored at one training haplotype
    floor = 1 / len(ts.train_haps)
    assert untyped[rare] / untyped[common] == pytest.approx((max(maf[rare], floor) / maf[common]) ** -0.5, rel=1e-4)


def test_batch_weights_scale_the_query_loss_alone(training_set):
    ts = training_set
    window = ts.random_window(np.random.default_rng(4), 30, 30)
    queries = ts.train_haps[:3]
    plain = nearest_context_batch(ts, window, queries, 5, np.random.default_rng(5), 0.2, 4)
    weighted = nearest_context_batch(ts, window, queries, 5, np.random.default_rng(5), 0.2, 4, maf_weight=1.0)
    torch.manual_seed(0)
    net = build_model(model_config("msa"))
    (q_plain, r_plain), (q_weighted, r_weighted) = plain.loss_sums(net), weighted.loss_sums(net)
    assert r_weighted.item() == pytest.approx(r_plain.item(), rel=1e-6)
    assert q_weighted.item() != pytest.approx(q_plain.item(), rel=1e-3)
    # by hand: the per-cell cross-entropy times each column's weight
    bce = torch.nn.functional.binary_cross_entropy_with_logits(net(plain.tokens, plain.typed), plain.alleles, reduction="none")
    expected = (bce * weighted.weights)[plain.query_cells].sum()
    assert q_weighted.item() == pytest.approx(expected.item(), rel=1e-5)


def test_maf_weight_is_refused_for_spin_and_below_zero(tmp_path):
    with pytest.raises(ValueError, match="maf_weight"):
        TrainConfig(maf_weight=-1)
    config = RunConfig(window=default_window("spin"), model=model_config("spin"), train=TrainConfig(maf_weight=0.5))
    with pytest.raises(InputError, match="nearest-context"):
        train(PANEL, ARRAY, tmp_path / "model", config, torch.device("cpu"))
    assert not (tmp_path / "model").exists()


def test_shared_batch_neighbours_are_nearest_and_never_the_rows_own_sample(training_set):
    ts = training_set
    window, queries, batch, haps = _shared_case(ts, 6, 5, neighbours=6)
    in_context = ~ts.is_val
    in_context[queries] = in_context[queries ^ 1] = False
    context_haps = np.nonzero(in_context)[0]
    nearest = batch.neighbours.numpy()
    assert nearest.shape == (len(batch.predicted), 6)
    # a query's neighbours: no context row is nearer on the typed sites than its farthest neighbour
    typed_context = haps[context_haps][:, window.typed]
    for q, row in zip(queries, nearest[:5]):
        distance = np.abs(typed_context - haps[q, window.typed]).sum(axis=1)
        assert distance[row].max() <= np.sort(distance)[5]
    # a hidden row reads no haplotype of its own sample (itself included)
    hidden_rows = np.nonzero((batch.context.numpy()[:, ~window.typed] == MASKED).all(axis=1))[0]
    for r, row in zip(hidden_rows, nearest[5:]):
        assert (context_haps[row] // 2 != context_haps[r] // 2).all()
    # without the reader there are none
    assert _shared_case(ts, 6, 5)[2].neighbours.shape[1] == 0


def test_each_backbone_has_the_family_of_its_context():
    families = {name: type(batch_family(entry.model)) for name, entry in REGISTRY.items()}
    assert families == {"match": NearestContext, "msa": NearestContext, "npssm": NearestContext, "spin": SharedContext}
    # match is scored on the query alone: its batches hide no context cells
    assert not batch_family(REGISTRY["match"].model).reconstructs_context
    assert batch_family(REGISTRY["msa"].model).reconstructs_context


def test_a_family_batch_is_the_batch_of_the_settings_it_reads(training_set):
    ts = training_set
    config = RunConfig(window=default_window("msa"), model=model_config("msa"),
                       train=TrainConfig(mask_rate=0.3, mask_span=2, maf_weight=0.5))
    window = ts.random_window(np.random.default_rng(7), 30, 30)
    queries = ts.train_haps[:3]
    by_family = batch_family(REGISTRY["msa"].model).training_batch(ts, window, queries, np.random.default_rng(8), config)
    w = config.window
    by_hand = nearest_context_batch(ts, window, queries, w.context, np.random.default_rng(8), 0.3, 2,
                                    config.train.query_missing_rate, 0.5,
                                    block_site_weights(window.typed, w.near_sites, w.near_weight))
    for name in ("tokens", "alleles", "query_cells", "masked_cells", "weights"):
        assert torch.equal(getattr(by_family, name), getattr(by_hand, name)), name
    unmasked = batch_family(REGISTRY["match"].model).training_batch(ts, window, queries, np.random.default_rng(8), config)
    assert not unmasked.masked_cells.any()
