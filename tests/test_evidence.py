"""Copying evidence in the axial backbones (genimpute.models.evidence): a
backbone with evidence starts as the match backbone and learns a correction."""

from __future__ import annotations

import math

import pytest
import torch

from genimpute.batches import batch_family
from genimpute.config import MASKED, RunConfig, TrainConfig, WindowConfig
from genimpute.models import build_model, model_config
from genimpute.models.evidence import unsure_cells
from genimpute.run_state import pretrained_matcher, start_run

AXIAL = ["msa", "npssm"]


def _window(b=3, r=9, m=40, seed=0):
    """(tokens (B, R, M), typed (M,), cM (M,)) of a toy window, the query's untyped cells MASKED."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 2, (b, r, m), generator=g)
    typed = torch.rand(m, generator=g) < 0.6
    tokens[:, 0, ~typed] = MASKED
    return tokens, typed, torch.arange(m, dtype=torch.float32) * 0.01


def _model(name: str, **settings):
    torch.manual_seed(0)
    return build_model(model_config(name, dim=16, layers=2, evidence=True, **settings)).eval()


@pytest.mark.parametrize("name", AXIAL)
def test_a_backbone_with_evidence_starts_as_match_and_its_gate_lets_the_correction_in(name):
    model = _model(name)
    tokens, typed, cm = _window()
    with torch.no_grad():
        match = model.evidence.matcher.query_logits(tokens, typed, cm)
        torch.testing.assert_close(model.query_logits(tokens, typed, cm), match)
        model.evidence.gate.fill_(0.5)
        assert (model.query_logits(tokens, typed, cm) - match).abs().max() > 1e-3


@pytest.mark.parametrize("name", AXIAL)
@pytest.mark.parametrize("body_rows", [0, 3])
def test_query_logits_with_evidence_are_the_full_passs_query_cells(name, body_rows):
    model = _model(name, body_rows=body_rows)
    tokens, typed, cm = _window()
    with torch.no_grad():
        model.evidence.gate.fill_(0.5)
        full = model(tokens, typed, cm)
        torch.testing.assert_close(model.query_logits(tokens, typed, cm), full[:, 0][:, ~typed], atol=1e-5, rtol=1e-5)
    assert full.shape == tokens.shape
    assert not full[:, 1:].any()  # no context row is reconstructed


@pytest.mark.parametrize("name", AXIAL)
def test_the_layers_read_the_nearest_body_rows_and_match_reads_them_all(name):
    model = _model(name, body_rows=3)
    tokens, typed, cm = _window()
    far = tokens.clone()
    far[:, 4:] = 1 - far[:, 4:]  # rows beyond the query and its 3 nearest
    with torch.no_grad():
        model.evidence.gate.fill_(1.0)
        model.evidence.channel.weight.zero_()  # match's log-odds not read by the layers
        model.evidence.channel.bias.zero_()

        def correction(t):
            return model.query_logits(t, typed, cm) - model.evidence.matcher.query_logits(t, typed, cm)

        torch.testing.assert_close(correction(far), correction(tokens))
        assert (model.evidence.matcher.query_logits(far, typed, cm)
                - model.evidence.matcher.query_logits(tokens, typed, cm)).abs().max() > 1e-3


@pytest.mark.parametrize("name", AXIAL)
def test_training_with_evidence_reconstructs_no_context_and_learns_every_part(name):
    model = _model(name).train()
    assert not model.reconstructs_context and build_model(model_config(name)).reconstructs_context
    tokens, typed, cm = _window()
    model.evidence.gate.data.fill_(0.5)
    model(tokens, typed, cm)[:, 0, ~typed].sum().backward()
    for part in (model.evidence.matcher, model.evidence.channel, model.head, model.layers):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())


def test_body_rows_need_evidence_and_match_takes_neither():
    with pytest.raises(ValueError, match="msa body_rows: expected evidence"):
        model_config("msa", body_rows=4)
    with pytest.raises(ValueError, match="match settings: expected among .*; found evidence"):
        model_config("match", evidence=True)


def test_a_run_with_evidence_starts_from_the_pretrained_match_model():
    config = RunConfig(window=WindowConfig(untyped=20, typed=30, context=8),
                       model=model_config("msa", dim=16, evidence=True), train=TrainConfig())
    run = start_run(config, torch.device("cpu"), "fingerprint", None, None, None)
    pretrained = pretrained_matcher().state_dict()
    for key, value in run.model.evidence.matcher.state_dict().items():
        assert torch.equal(value, pretrained[key])
    assert run.model.evidence.gate.item() == 0.0


def test_unsure_cells_are_those_match_doubts_each_near_its_local_windows_middle():
    log_odds = torch.tensor([[9.0, 0.5, -0.2, 8.0, 1.0, -9.0], [-2.0, 9.0, 9.0, 9.0, 9.0, 0.0]])
    untyped = torch.tensor([1, 6, 9, 20, 38, 39])  # of 40 columns
    cells = unsure_cells(log_odds, untyped, 40, width=8, margin=0.1)  # unsure: |log-odds| < log(9)
    assert list(zip(cells.query.tolist(), cells.untyped.tolist())) == [(0, 1), (0, 2), (0, 4), (1, 0), (1, 5)]
    columns = cells.columns()[cells.window]  # each cell's window's columns
    assert torch.equal(columns[torch.arange(len(cells.query)), cells.offset], untyped[cells.untyped])
    assert torch.equal(cells.window_query[cells.window], cells.query)
    assert columns.min() == 0 and columns.max() == 39 and cells.width == 8
    # columns 6 and 9 of query 0 share a window, in its middle half; query 1's column 1 is another query's
    assert cells.window[0] == cells.window[1] and cells.window[3] != cells.window[0]
    assert 2 <= cells.offset[0] < 6 and 2 <= cells.offset[1] < 6
    narrow = unsure_cells(log_odds, untyped, 40, 8, margin=0.49)  # |log-odds| < 0.04
    assert narrow.query.tolist() == [1] and narrow.untyped.tolist() == [5]
    assert unsure_cells(log_odds, untyped, 6, 8, 0.1).width == 6  # no wider than the window


@pytest.mark.parametrize("name", AXIAL)
def test_local_windows_correct_only_the_unsure_cells_and_read_only_their_columns(name):
    model = _model(name, body_rows=3, local_columns=8, unsure=0.2)
    tokens, typed, cm = _window(m=60)
    with torch.no_grad():
        match = model.evidence.matcher.query_logits(tokens, typed, cm)
        torch.testing.assert_close(model.query_logits(tokens, typed, cm), match)  # gate 0: match
        model.evidence.gate.fill_(0.5)
        local = model.query_logits(tokens, typed, cm)
        torch.testing.assert_close(model(tokens, typed, cm)[:, 0][:, ~typed], local)
        unsure = match.abs() < math.log(4)
        assert unsure.any() and (~unsure).any()
        assert torch.equal(local[~unsure], match[~unsure]) and (local[unsure] - match[unsure]).abs().min() > 0

        # match's log-odds held, a cell's correction reads only its own window's columns
        model.evidence.log_odds = lambda *_: match
        cells = unsure_cells(match, torch.nonzero(~typed).squeeze(1), 60, 8, 0.2)
        first = cells.columns()[cells.window[0]]
        beyond = torch.ones(60, dtype=torch.bool)
        beyond[first] = False
        changed = tokens.clone()
        changed[:, 1:, beyond] = 1 - changed[:, 1:, beyond]
        q, u = cells.query[0], cells.untyped[0]
        assert model.query_logits(changed, typed, cm)[q, u] == local[q, u]


@pytest.mark.parametrize("name", AXIAL)
def test_training_on_local_windows_learns_every_part(name):
    model = _model(name, local_columns=8, unsure=0.2).train()
    tokens, typed, cm = _window(m=60)
    model.evidence.gate.data.fill_(0.5)
    model(tokens, typed, cm)[:, 0, ~typed].sum().backward()
    for part in (model.evidence.matcher, model.evidence.channel, model.head, model.layers):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())


@pytest.mark.parametrize("settings, said", [
    (dict(local_columns=8), "msa local_columns: expected evidence"),
    (dict(evidence=True, local_columns=600), "msa local_columns: expected at most max_columns = 512; found 600"),
    (dict(evidence=True, local_columns=8, unsure=0.5), r"msa unsure: expected a probability in \(0, 0.5\); found 0.5"),
])
def test_local_windows_need_evidence_and_fit_the_column_embedding(settings, said):
    with pytest.raises(ValueError, match=said):
        model_config("msa", **settings)


def test_local_windows_read_a_window_wider_than_the_column_embedding():
    config = model_config("msa", evidence=True, local_columns=8, max_columns=16)
    config.check_window(WindowConfig(untyped=20, typed=30))
    with pytest.raises(ValueError, match="expected at most max_columns = 16"):
        model_config("msa", evidence=True, max_columns=16).check_window(WindowConfig(untyped=20, typed=30))


def _spin(**settings):
    torch.manual_seed(0)
    return build_model(model_config("spin", dim=16, kmer=3, neighbours=4, evidence=True, **settings)).eval()


def _shared_window(b=3, r=12, m=40, seed=0):
    """(context (R, M), rows (B, M), typed (M,), neighbours (B, 4), cM (M,)) of a toy shared-context window."""
    tokens, typed, cm = _window(b=b + r, r=1, m=m, seed=seed)
    g = torch.Generator().manual_seed(seed)
    context = torch.randint(0, 2, (r, m), generator=g)
    neighbours = torch.stack([torch.randperm(r, generator=g)[:4] for _ in range(b)])
    return context, tokens[:b, 0], typed, neighbours, cm


def test_spin_with_evidence_starts_as_match_on_its_neighbours_and_its_gate_lets_the_correction_in():
    model = _spin()
    context, rows, typed, neighbours, cm = _shared_window()
    with torch.no_grad():
        memory = model.encode(context, typed)
        match = model.evidence.matcher.query_logits(torch.cat([rows[:, None], context[neighbours]], 1), typed, cm)
        torch.testing.assert_close(model.query_log_odds(memory, rows, typed, neighbours, cm), match,
                                   atol=1e-4, rtol=1e-4)
        model.evidence.gate.fill_(0.5)
        assert (model.query_log_odds(memory, rows, typed, neighbours, cm) - match).abs().max() > 1e-3


def test_spin_training_with_evidence_hides_no_context_row_and_learns_every_part():
    model = _spin().train()
    assert not model.reconstructs_context and not batch_family(model).reconstructs_context
    assert build_model(model_config("spin", neighbours=4)).reconstructs_context
    context, rows, typed, neighbours, cm = _shared_window()
    model.evidence.gate.data.fill_(0.5)
    model(context, rows, typed, neighbours, cm).logsumexp(-1).sum().backward()
    for part in (model.evidence.matcher, model.evidence.channel, model.head, model.xabd, model.reader):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())


def test_spin_evidence_needs_the_neighbours_its_match_reads():
    with pytest.raises(ValueError, match="spin evidence: expected neighbours"):
        model_config("spin", evidence=True)
