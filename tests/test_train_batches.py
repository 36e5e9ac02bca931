"""What a training step shows the model: no query sees its own sample or a
validation sample, and hidden cells are hidden."""

import numpy as np
import pytest
from paths import ARRAY, PANEL

from genimpute.config import MASKED
from genimpute.io.array_list import read_array_list
from genimpute.models.kmers import group_columns
from genimpute.panel import ReferencePanel, array_typed_mask
from genimpute.train import TrainingSet


@pytest.fixture(scope="module")
def training_set():
    panel = ReferencePanel.from_vcf(PANEL)
    return TrainingSet(panel, array_typed_mask(panel, read_array_list(ARRAY)), 0.1, seed=3)


def test_shared_batch_context_leaves_out_queries_and_validation(training_set):
    ts = training_set
    rng = np.random.default_rng(0)
    window = ts.random_window(rng, 40, 30)
    queries = rng.choice(ts.train_haps, 6, replace=False)
    batch = ts.shared_batch(window, queries, 5, rng, mask_rate=0.2, missing_rate=0.1)
    haps = ts.panel.haplotypes(window.columns).T  # (H, M)
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
    batch = ts.shared_batch(window, rng.choice(ts.train_haps, 4, replace=False), 3, rng, 0.1)
    halves = [batch.share(slice(r, None, 2)) for r in (0, 1)]
    assert all(h.context is batch.context for h in halves)
    assert sum(len(h.predicted) for h in halves) == len(batch.predicted)
    assert sum(int(h.is_query.sum()) for h in halves) == 4
