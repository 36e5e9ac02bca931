import pytest
import torch

from genimpute.config import MASKED, ModelConfig
from genimpute.errors import GenimputeError
from genimpute.models import REGISTRY, build_model
from genimpute.models.msa import TiedRowAttention


def _tokens(b=3, r=5, m=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 2, (b, r, m), generator=g)
    typed = torch.rand(m, generator=g) < 0.6
    tokens[:, 0, ~typed] = MASKED
    return tokens, typed


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_forward_backward_shapes(name):
    model = build_model(ModelConfig(name=name, dim=16, layers=2, heads=2))
    tokens, typed = _tokens()
    logits = model(tokens, typed)
    assert logits.shape == tokens.shape
    logits[:, 0, ~typed].sum().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("layers", [1, 3])
def test_query_logits_are_the_full_passs_query_cells(name, layers):
    """Imputation's shortcut computes the same numbers as the full pass."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(name=name, dim=16, layers=layers, heads=2)).eval()
    tokens, typed = _tokens(b=4, r=7, m=50)
    with torch.no_grad():
        full = model(tokens, typed)[:, 0][:, ~typed]
        torch.testing.assert_close(model.query_logits(tokens, typed), full, atol=1e-5, rtol=1e-5)


def test_unknown_model_lists_valid_names():
    with pytest.raises(GenimputeError, match="msa"):
        build_model(ModelConfig(name="nonesuch"))


def test_msa_is_equivariant_to_context_row_order():
    """No positional embedding across rows: permuting context rows permutes
    their outputs and leaves the query's prediction unchanged."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(dim=16, layers=2, heads=2)).eval()
    tokens, typed = _tokens(b=1, r=6)
    perm = torch.tensor([0, 3, 1, 5, 2, 4])
    with torch.no_grad():
        out = model(tokens, typed)
        out_perm = model(tokens[:, perm], typed)
    torch.testing.assert_close(out_perm, out[:, perm], atol=1e-5, rtol=1e-5)


def test_tied_row_attention_matches_explicit_formula():
    """One attention map per example, logits summed over rows, scaled by
    1/sqrt(R * dh) (Rao et al. 2021)."""
    torch.manual_seed(0)
    cfg = ModelConfig(dim=8, heads=2)
    layer = TiedRowAttention(cfg)
    x = torch.randn(2, 3, 5, 8)
    q, k, v = layer._split(x)  # (B, R, M, H, dh)
    logits = torch.einsum("brmhd,brnhd->bhmn", q, k) / (3 * 4) ** 0.5
    attn = logits.softmax(-1)
    expected = x + layer.out(torch.einsum("bhmn,brnhd->brmhd", attn, v).reshape(2, 3, 5, 8))
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)


def test_batch_elements_are_independent():
    torch.manual_seed(0)
    model = build_model(ModelConfig(dim=16, layers=1, heads=2)).eval()
    tokens, typed = _tokens(b=4)
    with torch.no_grad():
        together = model(tokens, typed)
        alone = model(tokens[2:3], typed)
    torch.testing.assert_close(together[2:3], alone, atol=1e-5, rtol=1e-5)


def test_too_many_columns_is_an_error():
    model = build_model(ModelConfig(dim=8, heads=2, max_columns=10))
    tokens, typed = _tokens(m=11)
    with pytest.raises(ValueError, match="at most 10"):
        model(tokens, typed)
