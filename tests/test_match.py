"""The haplotype matcher's features and the properties its design promises."""

import numpy as np
import pytest
import torch
from cli_helpers import run

from genimpute.config import MASKED
from genimpute.models import build_model, default_window
from genimpute.models.match import NEAR, SITES, MatchConfig, _left_right_bounds, _prefix_sums, _range_ends, _ranges, _totals


def _tokens(b=3, k=6, m=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 2, (b, 1 + k, m), generator=g).to(torch.int8)
    typed = torch.rand(m, generator=g) < 0.6
    tokens[:, 0, ~typed] = MASKED
    return tokens, typed


def _cm(typed):
    """(M,) cM of a toy window's columns: 0.01 cM apart."""
    return torch.arange(len(typed), dtype=torch.float32) * 0.01


def _model(rows_per_gap=32):
    torch.manual_seed(0)
    return build_model(MatchConfig(dim=16, layers=2, heads=2, rows_per_gap=rows_per_gap)).eval()


def test_counts_are_sums_over_each_gaps_ranges():
    rng = np.random.default_rng(0)
    t = 150
    values = rng.integers(0, 2, size=(2, 3, t))
    lo = torch.tensor([0, 5, 70, 150, 149])
    hi = torch.tensor([0, 6, 70, 150, 150])
    left, right = _ranges(lo, hi, t)
    ends = _range_ends(lo, hi, left, right)
    counts = _totals(_prefix_sums(torch.from_numpy(values) == 1, torch.int16)[..., ends]).numpy()  # as the model
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
    cm = _cm(typed)
    with torch.no_grad():
        reordered = model.query_logits(tokens[:, perm], typed, cm)
        # sums over rows in another order round differently
        torch.testing.assert_close(reordered, model.query_logits(tokens, typed, cm), atol=1e-4, rtol=1e-4)


def test_each_gaps_candidates_are_the_rows_that_match_best_near_it():
    """Brute force: fewest mismatches among the NEAR typed sites either side,
    then fewest in the window, then the earlier row."""
    model = _model(rows_per_gap=5)
    g = torch.Generator().manual_seed(1)
    b, k, t = 2, 12, 60
    query = torch.randint(0, 2, (b, t), generator=g).to(torch.int8)
    query[0, 7] = MASKED
    context = torch.randint(0, 2, (b, k, t), generator=g).to(torch.int8)
    context[:, 3] = context[:, 4]  # tied rows
    lo, hi = torch.tensor([0, 10, 30, 31, 60]), torch.tensor([0, 10, 31, 31, 60])
    mismatch = (context != query[:, None]) & (query != MASKED)[:, None]
    rows = model._candidates(_prefix_sums(mismatch, torch.int16), _range_ends(lo, hi, *_ranges(lo, hi, t)))
    assert rows.shape == (b, 5, len(lo))
    for i in range(b):
        for gap in range(len(lo)):
            near = mismatch[i, :, max(0, int(lo[gap]) - NEAR): int(lo[gap])].sum(-1) \
                + mismatch[i, :, int(hi[gap]): int(hi[gap]) + NEAR].sum(-1)
            order = sorted(range(k), key=lambda j: (near[j], mismatch[i, j].sum(), j))
            assert sorted(rows[i, :, gap].tolist()) == sorted(order[:5])


def test_rows_that_are_not_candidates_do_not_vote_in_the_heads():
    """Rows 1-3 copy the query around the untyped column; the others
    disagree with it at every typed site. With 3 rows per gap, what the
    others carry at the untyped column changes nothing in the heads' vote;
    with every row, it does. (The copying model weighs every row, so its
    share of the output is set to 0 here.)"""
    typed = torch.ones(41, dtype=torch.bool)
    typed[20] = False
    tokens = torch.randint(0, 2, (1, 9, 41), generator=torch.Generator().manual_seed(2)).to(torch.int8)
    tokens[:, 1:4] = tokens[:, :1]
    tokens[:, 4:, typed] = 1 - tokens[:, :1, typed]
    tokens[:, 0, 20] = MASKED
    changed = tokens.clone()
    changed[:, 4:, 20] = 1 - changed[:, 4:, 20]
    with torch.no_grad():
        pruned, everyone = _model(rows_per_gap=3), _model(rows_per_gap=0)
        for model in (pruned, everyone):
            model.copying_mix.zero_()
        cm = _cm(typed)
        torch.testing.assert_close(pruned.query_logits(changed, typed, cm), pruned.query_logits(tokens, typed, cm))
        assert (everyone.query_logits(changed, typed, cm) - everyone.query_logits(tokens, typed, cm)).abs().max() > 1e-4


def _mosaic(t=40, k=6, switch_at=20, seed=3):
    """A query (1, t) that copies context row 0 on typed sites [0, switch_at)
    and row 1 from there on; rows 2.. random. Context (1, k, t)."""
    g = torch.Generator().manual_seed(seed)
    context = torch.randint(0, 2, (1, k, t), generator=g).to(torch.int8)
    query = torch.cat([context[:, 0, :switch_at], context[:, 1, switch_at:]], -1)
    return query, context


def _posteriors(model, query, context, genetic):
    """The copying posteriors (t, B, k) at every typed site."""
    return model._copying_posteriors(context != query[:, None], genetic, torch.arange(query.shape[1]))


def test_copying_posteriors_follow_the_row_the_query_copies():
    model = _model()
    query, context = _mosaic()
    with torch.no_grad():
        posterior = _posteriors(model, query, context, torch.arange(40.0) * 0.01)  # (t, B, k)
    torch.testing.assert_close(posterior.sum(-1), torch.ones(40, 1))
    assert (posterior[2:17, 0, 0] > 0.9).all() and (posterior[23:38, 0, 1] > 0.9).all()


def test_copying_posteriors_are_the_textbook_forward_backward():
    """Against forward-backward written out with the full transition matrix,
    in float64, on a random problem with a missing call and uneven distances."""
    model = _model()
    g = torch.Generator().manual_seed(5)
    b, k, t = 2, 5, 12
    context = torch.randint(0, 2, (b, k, t), generator=g)
    query = torch.randint(0, 2, (b, t), generator=g)
    observed = torch.ones(b, t, dtype=torch.bool)
    observed[0, 4] = False
    genetic = torch.cumsum(torch.rand(t, generator=g) * 0.3, 0)
    sites = torch.tensor([0, 3, 4, 11])
    with torch.no_grad():
        got = model._copying_posteriors((context != query[:, None]) & observed[:, None], genetic, sites)
        error = torch.sigmoid(model.copy_error).double()
        switch = 1 - torch.exp(-model.switch_rate.exp().double() * torch.diff(genetic).double())
    emit = torch.where(context == query[:, None], 1 - error, error).double()
    emit = torch.where(observed[:, None], emit, torch.ones(()).double())  # (b, k, t)
    for q in range(b):
        alpha, beta = torch.zeros(t, k, dtype=torch.float64), torch.ones(t, k, dtype=torch.float64)
        alpha[0] = emit[q, :, 0] / k
        for i in range(1, t):
            move = (1 - switch[i - 1]) * torch.eye(k, dtype=torch.float64) + switch[i - 1] / k
            alpha[i] = emit[q, :, i] * (alpha[i - 1] @ move)
        for i in range(t - 2, -1, -1):
            move = (1 - switch[i]) * torch.eye(k, dtype=torch.float64) + switch[i] / k
            beta[i] = move @ (emit[q, :, i + 1] * beta[i + 1])
        expected = alpha * beta
        expected /= expected.sum(1, keepdim=True)
        torch.testing.assert_close(got[:, q].double(), expected[sites], atol=1e-5, rtol=1e-4)


def test_copying_across_a_wide_gap_forgets_the_row():
    """Across tens of cM (a centromere) the posteriors stay finite, and the
    row copied before the gap says nothing after it."""
    model = _model()
    query, context = _mosaic()
    genetic = torch.arange(40.0) * 0.01
    genetic[20:] += 60.0
    with torch.no_grad():
        posterior = _posteriors(model, query, context, genetic)
    assert torch.isfinite(posterior).all()
    assert posterior[19, 0, 0] > 0.9 and posterior[20, 0, 1] > 0.9


def test_copying_never_switches_rows_without_genetic_distance():
    """At 0 cM between every pair of sites the query copies one row the
    whole window, so every site has the same posterior; with distance it
    follows the mosaic."""
    model = _model()
    query, context = _mosaic()
    with torch.no_grad():
        flat = _posteriors(model, query, context, torch.zeros(40))
        spread = _posteriors(model, query, context, torch.arange(40.0) * 0.01)
    torch.testing.assert_close(flat, flat[:1].expand_as(flat))
    assert (spread[0] - spread[-1]).abs().max() > 0.5


def test_an_untyped_column_copies_the_row_of_its_side():
    """Untyped columns inside each half of a mosaic take the allele of the
    row the query copies there, where the heads' vote is left out."""
    model = _model()
    query, context = _mosaic(t=41)
    typed = torch.ones(41, dtype=torch.bool)
    typed[[8, 32]] = False
    context[0, 0, 8], context[0, 1, 8], context[0, 0, 32], context[0, 1, 32] = 1, 0, 0, 1
    context[0, 2:, [8, 32]] = 0
    tokens = torch.cat([query[:, None], context], 1)
    tokens[:, 0, ~typed] = MASKED
    with torch.no_grad():
        model.copying_mix.fill_(1.0)
        model.mix.zero_()
        model.bias.zero_()
        p = torch.sigmoid(model.query_logits(tokens, typed, _cm(typed)))[0]
    assert p[0] > 0.9 and p[1] > 0.9  # column 8: row 0 carries ALT; column 32: row 1 does


def test_context_rows_that_agree_with_the_query_decide_after_training():
    """A few hundred steps on a toy copying problem: the row that matches the
    query around the gap carries the answer, the others are noise."""
    torch.manual_seed(0)
    model = build_model(MatchConfig(dim=16, layers=2, heads=2))
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
        logits = model.query_logits(tokens, typed, _cm(typed))[:, 0]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, truth)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    tokens, truth = batch(500)
    with torch.no_grad():
        accuracy = ((model.query_logits(tokens, typed, _cm(typed))[:, 0] > 0).float() == truth).float().mean()
    assert accuracy > 0.9  # a vote of all rows would be right half the time


@pytest.mark.parametrize("name,untyped,typed,k", [("match", 300, 300, 128), ("msa", 100, 200, 24),
                                                  ("npssm", 100, 200, 24)])
def test_each_backbone_has_its_own_default_window(name, untyped, typed, k):
    window = default_window(name)
    assert (window.untyped, window.typed, window.context) == (untyped, typed, k)


def test_train_help_states_each_backbones_default_window():
    text = " ".join(run(["train", "--help"]).output.split())
    match, others = default_window("match"), {default_window(n) for n in ("msa", "npssm", "spin")}
    assert len(others) == 1  # the help names one window for the backbones other than match
    (other,) = others
    for flag, field in (("--untyped", "untyped"), ("--typed", "typed"), ("--context", "context")):
        wanted = f"{getattr(match, field)} for match, {getattr(other, field)} for the others"
        assert wanted in text.split(flag, 1)[1].split("--", 1)[0], flag
