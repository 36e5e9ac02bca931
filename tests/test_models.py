import json

import numpy as np
import pytest
import torch
from paths import DATA

from genimpute.config import MASKED, RunConfig, WindowConfig
from genimpute.errors import GenimputeError
from genimpute.models import REGISTRY, build_model, model_config, settings_of
from genimpute.models.blocks import CrossAttentionBlock
from genimpute.models.kmers import alt_log_odds
from genimpute.modeldir import FORMAT, read_config
from genimpute.models.match import MatchConfig
from genimpute.models.msa import MSAConfig, TiedRowAttention
from genimpute.models.spin import SPINConfig
from genimpute.models.npssm import chunked_scan, reference_scan
from genimpute.predict import window_probabilities
from genimpute.windows import Window

NEAREST = sorted(name for name, entry in REGISTRY.items() if not entry.model.shares_context)
# a small model of each backbone: of these, the settings it reads
SMALL = dict(dim=16, layers=2, heads=2, kmer=3, latents=4, inducing=8)


def _small(name: str, **settings):
    return model_config(name, **{k: v for k, v in SMALL.items() if k in settings_of(name)} | settings)


def _tokens(b=3, r=5, m=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 2, (b, r, m), generator=g)
    typed = torch.rand(m, generator=g) < 0.6
    tokens[:, 0, ~typed] = MASKED
    return tokens, typed


def _cm(typed):
    """(M,) cM of a toy window's columns: 0.01 cM apart."""
    return torch.arange(len(typed), dtype=torch.float32) * 0.01


def test_registry_has_the_four_backbones():
    assert sorted(REGISTRY) == ["match", "msa", "npssm", "spin"]
    assert NEAREST == ["match", "msa", "npssm"]


@pytest.mark.parametrize("name", NEAREST)
def test_forward_backward_shapes(name):
    model = build_model(_small(name))
    tokens, typed = _tokens()
    logits = model(tokens, typed, _cm(typed))
    assert logits.shape == tokens.shape
    logits[:, 0, ~typed].sum().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("name", NEAREST)
@pytest.mark.parametrize("layers", [1, 3])
def test_query_logits_are_the_full_passs_query_cells(name, layers):
    """Imputation's shortcut computes the same numbers as the full pass."""
    torch.manual_seed(0)
    model = build_model(_small(name, layers=layers)).eval()
    tokens, typed = _tokens(b=4, r=7, m=50)
    with torch.no_grad():
        full = model(tokens, typed, _cm(typed))[:, 0][:, ~typed]
        torch.testing.assert_close(model.query_logits(tokens, typed, _cm(typed)), full, atol=1e-5, rtol=1e-5)


def test_unknown_model_lists_valid_names():
    with pytest.raises(GenimputeError, match="match, msa, npssm, spin"):
        model_config("nonesuch")


def test_msa_is_equivariant_to_context_row_order():
    """No positional embedding across rows: permuting context rows permutes
    their outputs and leaves the query's prediction unchanged."""
    torch.manual_seed(0)
    model = build_model(MSAConfig(dim=16, layers=2, heads=2)).eval()
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
    cfg = MSAConfig(dim=8, heads=2)
    layer = TiedRowAttention(cfg)
    x = torch.randn(2, 3, 5, 8)
    q, k, v = layer._split(x)  # (B, R, M, H, dh)
    logits = torch.einsum("brmhd,brnhd->bhmn", q, k) / (3 * 4) ** 0.5
    attn = logits.softmax(-1)
    expected = x + layer.out(torch.einsum("bhmn,brnhd->brmhd", attn, v).reshape(2, 3, 5, 8))
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)


def test_batch_elements_are_independent():
    torch.manual_seed(0)
    model = build_model(MSAConfig(dim=16, layers=1, heads=2)).eval()
    tokens, typed = _tokens(b=4)
    with torch.no_grad():
        together = model(tokens, typed)
        alone = model(tokens[2:3], typed)
    torch.testing.assert_close(together[2:3], alone, atol=1e-5, rtol=1e-5)


def test_too_many_columns_is_an_error():
    model = build_model(MSAConfig(dim=8, heads=2, max_columns=10))
    tokens, typed = _tokens(m=11)
    with pytest.raises(ValueError, match="at most 10"):
        model(tokens, typed)


@pytest.mark.parametrize("name,neighbours", [(name, 0) for name in sorted(REGISTRY)] + [("spin", 2)])
def test_checkpoint_reloads_into_an_identical_model(name, neighbours, tmp_path):
    """Weights and the config saved as a model directory does rebuild the same model."""
    torch.manual_seed(0)
    config = RunConfig(window=WindowConfig(untyped=20, typed=10),
                       model=_small(name, **{"neighbours": neighbours} if name == "spin" else {}))
    model = build_model(config.model).eval()
    torch.save({"model": model.state_dict()}, tmp_path / "w.pt")
    again = build_model(read_config(config.to_dict(), FORMAT).model).eval()
    again.load_state_dict(torch.load(tmp_path / "w.pt")["model"])
    tokens, typed = _tokens(b=2, r=6, m=30)
    with torch.no_grad():
        if model.shares_context:
            nearest = torch.tensor([[0, 1], [2, 3]])[:, :neighbours] if neighbours else None
            outputs = [m.query_log_odds(m.encode(tokens[0, 1:], typed), tokens[:, 0], typed, nearest)
                       for m in (model, again)]
        else:
            outputs = [m.query_logits(tokens, typed, _cm(typed)) for m in (model, again)]
    torch.testing.assert_close(outputs[0], outputs[1], atol=0, rtol=0)


# SPIN

def _spin(**kw):
    torch.manual_seed(0)
    return build_model(_small("spin", **kw))


def _nearest(n_rows: int, n_context: int, n: int, seed: int = 0):
    """(n_rows, n) distinct context indices per row, or None for n = 0."""
    if not n:
        return None
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(n_context, generator=g)[:n] for _ in range(n_rows)])


@pytest.mark.parametrize("neighbours", [0, 4])
def test_spin_forward_backward_shapes(neighbours):
    model = _spin(neighbours=neighbours)
    tokens, typed = _tokens(b=1, r=12, m=41)
    n_untyped = int((~typed).sum())
    # encode 11 context rows, predict 3 rows
    logits = model(tokens[0, 1:], tokens[0, :3], typed, _nearest(3, 11, neighbours))
    assert logits.shape == (3, -(-n_untyped // 3), 2 ** 3)
    logits.logsumexp(-1).sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("neighbours", [0, 5])
def test_spin_encode_once_equals_the_full_model_per_query(neighbours):
    """Imputation encodes the panel once and predicts every query from it:
    the same numbers as a full pass (encode + predict) for each query alone."""
    model = _spin(neighbours=neighbours).eval()
    tokens, typed = _tokens(b=1, r=20, m=50)
    context, queries = tokens[0, 4:], tokens[0, :4].clone()
    queries[:, ~typed] = MASKED
    groups = model.target_groups(typed)
    nearest = _nearest(4, 16, neighbours)
    with torch.no_grad():
        once = model.query_log_odds(model.encode(context, typed), queries, typed, nearest)
        alone = torch.cat([alt_log_odds(model(context, queries[i:i + 1], typed, None if nearest is None else nearest[i:i + 1]),
                                        groups) for i in range(4)])
    assert once.shape == (4, int((~typed).sum()))
    torch.testing.assert_close(once, alone, atol=1e-5, rtol=1e-5)


def test_spin_encodes_each_distinct_token_once_with_the_values_of_encoding_every_token():
    """encode works on each distinct (position, K-mer) once and gathers: the
    points and the reader's keys and values of a panel with repeated
    haplotypes are those of the blocks applied to every token."""
    model = _spin(neighbours=3).eval()
    tokens, typed = _tokens(b=1, r=6, m=50)
    context = tokens[0, 1:].repeat(4, 1)  # 20 rows, 5 distinct
    n_targets = len(model.target_groups(typed))
    with torch.no_grad():
        memory = model.encode(context, typed)
        every = model._tokens(context, typed)
        points = model.inducing[None]
        for layer in model.xabd:
            points = layer(points, model._summarise(every).flatten(1)[None])
        keys, values = model.reader.keys_values(model.row_encoder(every[:, :n_targets], every))
    for got, want in [(memory.points, points[0]), (memory.keys, keys), (memory.values, values)]:
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_attend_each_is_attention_of_each_token_over_its_own_tokens():
    """CrossAttentionBlock.attend_each: token l of row i attends to keys[i, :, l] alone, as forward would."""
    torch.manual_seed(0)
    block = CrossAttentionBlock(8, 2, 2)
    x, read = torch.randn(3, 5, 8), torch.randn(3, 4, 5, 8)  # 3 rows of 5 tokens, each reading 4 tokens
    keys, values = block.keys_values(read)
    one_by_one = block(x.reshape(15, 1, 8), read.transpose(1, 2).reshape(15, 4, 8)).reshape(x.shape)
    torch.testing.assert_close(block.attend_each(x, keys, values), one_by_one, atol=1e-5, rtol=1e-5)


def test_spin_context_is_a_set():
    """The encoder pools over haplotypes: their order does not matter, their alleles do."""
    model = _spin().eval()
    tokens, typed = _tokens(b=1, r=15, m=30)
    context, query = tokens[0, 1:], tokens[0, :1]
    with torch.no_grad():
        out = model.query_log_odds(model.encode(context, typed), query, typed)
        shuffled = model.query_log_odds(model.encode(context[torch.randperm(len(context))], typed), query, typed)
        other = model.query_log_odds(model.encode(1 - context, typed), query, typed)
    torch.testing.assert_close(out, shuffled, atol=1e-5, rtol=1e-5)
    assert (out - other).abs().max() > 1e-3


def test_spin_reads_its_neighbours_as_a_set():
    """With the neighbour reader, which context rows a query reads matters; their order does not."""
    model = _spin(neighbours=4).eval()
    tokens, typed = _tokens(b=1, r=15, m=30)
    context, query = tokens[0, 1:], tokens[0, :1]
    with torch.no_grad():
        memory = model.encode(context, typed)
        out = model.query_log_odds(memory, query, typed, torch.tensor([[0, 1, 2, 3]]))
        reordered = model.query_log_odds(memory, query, typed, torch.tensor([[3, 1, 0, 2]]))
        others = model.query_log_odds(memory, query, typed, torch.tensor([[7, 8, 9, 10]]))
        with pytest.raises(ValueError, match="neighbour indices"):
            model.query_log_odds(memory, query, typed)
    torch.testing.assert_close(out, reordered, atol=1e-5, rtol=1e-5)
    assert (out - others).abs().max() > 1e-3


def _spin_imputation(neighbours: int, n_queries: int, n_panel: int, m: int):
    """A SPIN model and one window's inputs to window_probabilities: (model, window, panel (M, H), query typed alleles)."""
    model = _spin(neighbours=neighbours).eval()
    tokens, typed = _tokens(b=1, r=n_queries + n_panel, m=m)
    window = Window(contig=0, columns=np.arange(m), typed=typed.numpy())
    panel = tokens[0, n_queries:].numpy().T.astype(np.uint8)
    return model, window, panel, tokens[0, :n_queries].numpy()[:, typed.numpy()]


def test_spin_imputes_from_a_panel_smaller_than_its_neighbours():
    """A panel of 6 haplotypes, a model that reads 8: each query reads all 6."""
    model, window, panel, queries = _spin_imputation(neighbours=8, n_queries=3, n_panel=6, m=30)
    cm = _cm(window.typed).numpy()
    p = window_probabilities(model, window, panel, queries, cm, WindowConfig(), torch.device("cpu"))
    assert p.shape == (int((~window.typed).sum()), 3) and np.isfinite(p).all()


def test_spin_imputes_a_query_the_same_whoever_else_is_imputed():
    """Passes hold a fixed number of queries, so a query's P(alt) is byte-identical alone or among others."""
    model, window, panel, queries = _spin_imputation(neighbours=3, n_queries=10, n_panel=20, m=40)
    cm = _cm(window.typed).numpy()
    every = window_probabilities(model, window, panel, queries, cm, WindowConfig(), torch.device("cpu"))
    some = window_probabilities(model, window, panel, queries[[2, 7]], cm, 24, torch.device("cpu"))
    np.testing.assert_array_equal(every[:, [2, 7]], some)


def test_neighbours_is_a_spin_setting():
    with pytest.raises(ValueError, match="msa settings: expected among .*; found neighbours"):
        model_config("msa", neighbours=4)
    with pytest.raises(ValueError, match="spin neighbours: expected at least 0; found -1"):
        SPINConfig(neighbours=-1)


@pytest.mark.parametrize("name,settings,said", [
    ("msa", dict(dim=30, heads=4), "msa heads: expected a divisor of dim 30; found 4"),
    ("spin", dict(dim=16, heads=3), "spin heads: expected a divisor of dim 16; found 3"),
    ("spin", dict(kmer=9), "spin kmer: expected 1 to 8 variants per token; found 9"),
    ("npssm", dict(dim=25), "npssm dim: expected 2 x dim to split into 3 equal scan heads; found 25"),
    ("npssm", dict(heads=2), "npssm settings: expected among dim, layers, ffn_mult, max_columns, evidence, body_rows, local_columns, unsure, "
                                "state; found heads"),
    ("match", dict(rows_per_gap=-1), "match rows_per_gap: expected at least 0; found -1"),
    ("match", dict(layers=0), "match layers: expected at least 1; found 0"),
])
def test_a_backbone_config_refuses_what_its_model_cannot_take(name, settings, said):
    with pytest.raises(ValueError, match=said):
        model_config(name, **settings)


@pytest.mark.parametrize("name", ["msa", "npssm", "spin"])
def test_a_window_wider_than_the_column_embedding_is_refused_with_the_config(name):
    RunConfig(window=WindowConfig(untyped=300, typed=212), model=model_config(name))  # 512 columns: the most
    with pytest.raises(ValueError, match=f"{name} window: expected at most max_columns = 512 columns; "
                                         "found untyped \\+ typed = 300 \\+ 213"):
        RunConfig(window=WindowConfig(untyped=300, typed=213), model=model_config(name))


def test_match_reads_windows_of_any_width_up_to_its_int16_counts():
    RunConfig(window=WindowConfig(untyped=5000, typed=32767), model=MatchConfig())
    with pytest.raises(ValueError, match="match window typed: expected at most 32767"):
        RunConfig(window=WindowConfig(typed=32768), model=MatchConfig())


def test_spin_too_many_columns_is_an_error():
    model = build_model(SPINConfig(dim=8, heads=2, max_columns=10))
    tokens, typed = _tokens(b=1, m=11)
    with pytest.raises(ValueError, match="at most 10"):
        model.encode(tokens[0], typed)


# NPSSM

@pytest.mark.parametrize("length,chunk", [(1, 4), (7, 4), (32, 8), (45, 16), (300, 32)])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_chunked_scan_matches_the_step_by_step_scan(length, chunk, dtype, tol):
    g = torch.Generator().manual_seed(length)
    n, h, p, s = 3, 4, 8, 16
    x = torch.randn(n, length, h, p, generator=g, dtype=dtype)
    dt = torch.rand(n, length, h, generator=g, dtype=dtype) * 0.3 + 1e-3
    a = -torch.rand(h, generator=g, dtype=dtype) * 2
    b, c = (torch.randn(n, length, s, generator=g, dtype=dtype) / s ** 0.5 for _ in range(2))
    expected = reference_scan(x, dt, a, b, c)
    torch.testing.assert_close(chunked_scan(x, dt, a, b, c, chunk=chunk), expected, atol=tol, rtol=tol)


def test_npssm_reads_rows_in_order():
    """Unlike MSA, NPSSM scans along the haplotypes: the context's order
    (nearest first) is information, so reordering it changes the query's output."""
    torch.manual_seed(0)
    model = build_model(_small("npssm", layers=1)).eval()
    tokens, typed = _tokens(b=1, r=6)
    with torch.no_grad():
        out = model.query_logits(tokens, typed)
        reordered = model.query_logits(tokens[:, [0, 5, 4, 3, 2, 1]], typed)
    assert (out - reordered).abs().max() > 1e-4


def _format1_config() -> dict:
    """The committed format-1 directory's config.json: one flat set of model settings for every backbone."""
    return json.loads((DATA / "model_formats" / "format1" / "config.json").read_text())


def _current_config() -> dict:
    return RunConfig(window=WindowConfig(), model=MatchConfig()).to_dict()


def test_a_config_from_before_near_weight_keeps_plain_hamming_context():
    """Model directories written before the weighted nearest-haplotype
    distance keep choosing their context as they were trained to."""
    stored = _format1_config()
    del stored["window"]["near_weight"], stored["window"]["near_sites"]
    window = read_config(stored, 1).window
    assert window.near_weight == 1
    assert read_config(_current_config(), FORMAT).window.near_weight == WindowConfig().near_weight == 6


def test_a_config_from_before_rows_per_gap_scores_every_context_row():
    stored = _format1_config()
    del stored["model"]["rows_per_gap"]
    assert read_config(stored, 1).model.rows_per_gap == 0
    assert read_config(_current_config(), FORMAT).model.rows_per_gap == MatchConfig().rows_per_gap == 24
