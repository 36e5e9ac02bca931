"""The haplotype matcher's features and the properties its design promises."""

import numpy as np
import pytest
import torch

from genimpute.config import MASKED, ModelConfig
from genimpute.models import build_model, default_context
from genimpute.models.match import SITES, _counts_in, _left_right_bounds, _prefix_sums, _ranges


def _tokens(b=3, k=6, m=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 2, (b, 1 + k, m), generator=g).to(torch.int8)
    typed = torch.rand(m, generator=g) < 0.6
    tokens[:, 0, ~typed] = MASKED
    return tokens, typed


def _model():
    torch.manual_seed(0)
    return build_model(ModelConfig(name="match", dim=16, layers=2, heads=2)).eval()


def test_counts_are_sums_over_each_gaps_ranges():
    rng = np.random.default_rng(0)
    t = 150
    values = rng.integers(0, 2, size=(2, 3, t))
    lo = torch.tensor([0, 5, 70, 150, 149])
    hi = torch.tensor([0, 6, 70, 150, 150])
    left, right = _ranges(lo, hi, t)
    counts = _counts_in(_prefix_sums(torch.from_numpy(values).float()), lo, hi, left, right).numpy()
    n = len(SITES)
    for g in range(len(lo)):
        for s, d in enumerate(SITES):
            a, b = max(0, int(lo[g]) - d), min(t, int(hi[g]) + d)
            assert counts[..., g, s].tolist() == values[..., a: int(lo[g])].sum(-1).tolist()
            assert counts[..., g, n + s].tolist() == values[..., int(hi[g]): b].sum(-1).tolist()


def test_a_typed_column_is_not_its_own_evidence():
    typed = torch.tensor([True, False, True, True, False, True])
    lo, hi = _left_right_bounds(typed, torch.arange(6))
    assert lo.tolist() == [0, 1, 1, 2, 3, 3]
    assert hi.tolist() == [1, 1, 2, 3, 3, 4]


def test_query_prediction_ignores_the_order_of_context_rows():
    model = _model()
    tokens, typed = _tokens()
    perm = torch.tensor([0, 4, 2, 6, 1, 3, 5])
    with torch.no_grad():
        torch.testing.assert_close(model.query_logits(tokens[:, perm], typed), model.query_logits(tokens, typed))


def test_context_rows_that_agree_with_the_query_decide_after_training():
    """A few hundred steps on a toy copying problem: the row that matches the
    query around the gap carries the answer, the others are noise."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(name="match", dim=16, layers=2, heads=2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    typed = torch.ones(41, dtype=torch.bool)
    typed[20] = False

    def batch(n):
        g = torch.Generator().manual_seed(int(torch.randint(0, 10**6, ())))
        tokens = torch.randint(0, 2, (n, 9, 41), generator=g).to(torch.int8)
        donor = torch.randint(1, 9, (n,), generator=g)
        tokens[:, 0] = tokens[torch.arange(n), donor]  # the query copies one context row...
        noise = torch.rand(n, 41, generator=g) < 0.05  # ...with a few differences
        tokens[:, 0] ^= noise.to(torch.int8)
        truth = tokens[:, 0, 20].float()
        tokens[:, 0, 20] = MASKED
        return tokens, truth

    for _ in range(300):
        tokens, truth = batch(32)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model.query_logits(tokens, typed)[:, 0], truth)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    tokens, truth = batch(500)
    with torch.no_grad():
        accuracy = ((model.query_logits(tokens, typed)[:, 0] > 0).float() == truth).float().mean()
    assert accuracy > 0.9  # a vote of all rows would be right half the time


@pytest.mark.parametrize("name,k", [("match", 160), ("msa", 24), ("npssm", 24)])
def test_each_backbone_has_its_own_default_context(name, k):
    assert default_context(name) == k
