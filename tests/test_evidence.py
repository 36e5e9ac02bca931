"""Copying evidence in the axial backbones (genimpute.models.evidence): a
backbone with evidence starts as the match backbone and learns a correction."""

from __future__ import annotations

import pytest
import torch

from genimpute.config import MASKED, RunConfig, TrainConfig, WindowConfig
from genimpute.models import build_model, model_config
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
