"""Building blocks shared by the backbones."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genimpute.config import N_TOKENS, BackboneConfig, WindowConfig
from genimpute.models.evidence import MatchEvidence, UnsureCells, unsure_cells


def check_columns(config: BackboneConfig, window: WindowConfig) -> None:
    """A window's columns (U + T at most) against a column embedding of `config.max_columns`."""
    if window.untyped + window.typed > config.max_columns:
        raise ValueError(f"{config.name} window: expected at most max_columns = {config.max_columns} columns; "
                         f"found untyped + typed = {window.untyped} + {window.typed}")


def check_heads(config: BackboneConfig) -> None:
    """Attention splits `dim` into `heads` equal parts."""
    config.require_at_least(heads=1)
    if config.dim % config.heads:
        raise ValueError(f"{config.name} heads: expected a divisor of dim {config.dim}; found {config.heads}")


@dataclass(frozen=True)
class AxialConfig(BackboneConfig):
    """What AxialBackbone reads; each axial backbone's config adds its mixers' settings."""

    ffn_mult: int = 2  # the feed-forward block's width, in multiples of dim
    max_columns: int = 512  # longest window (U + T) the column embedding covers
    # read the match backbone's log-odds of the query and correct them (genimpute.models.evidence)
    evidence: bool = False
    # with evidence: the nearest context rows the layers read (0: all k), where match reads all k
    body_rows: int = 0
    # with evidence: the layers read local windows of this many columns around the query cells match is
    # unsure of, and correct those cells alone (0: the layers read the whole window and correct every cell)
    local_columns: int = 0
    # with local_columns: a cell is unsure where match's P(alt) lies in (unsure, 1 - unsure)
    unsure: float = 0.01

    def __post_init__(self):
        super().__post_init__()
        self.require_at_least(ffn_mult=1, max_columns=1, body_rows=0, local_columns=0)
        for setting in ("body_rows", "local_columns"):
            if getattr(self, setting) and not self.evidence:
                raise ValueError(f"{self.name} {setting}: expected evidence, whose match gives the query's "
                                 f"log-odds; found {setting} {getattr(self, setting)} without it")
        if self.local_columns > self.max_columns:
            raise ValueError(f"{self.name} local_columns: expected at most max_columns = {self.max_columns}; "
                             f"found {self.local_columns}")
        if not 0 < self.unsure < 0.5:
            raise ValueError(f"{self.name} unsure: expected a probability in (0, 0.5); found {self.unsure}")

    def check_window(self, window: WindowConfig) -> None:
        if not self.local_columns:  # local windows are numbered from their own first column
            check_columns(self, window)


class CellEmbedding(nn.Module):
    """Token + column position + typed-column flag + query-row flag.
    No embedding of row position: context rows are an unordered set."""

    def __init__(self, config: AxialConfig):
        super().__init__()
        self.token = nn.Embedding(N_TOKENS, config.dim)
        self.column = nn.Embedding(config.max_columns, config.dim)
        self.typed = nn.Embedding(2, config.dim)
        self.query = nn.Parameter(torch.zeros(config.dim))
        self.max_columns = config.max_columns

    def forward(self, tokens: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        # tokens (B, R, M) integer, typed (M,) bool or (B, M) each example's -> (B, R, M, D)
        n_col = tokens.shape[-1]
        if n_col > self.max_columns:
            raise ValueError(f"window has {n_col} columns; the model covers at most {self.max_columns}")
        cols = torch.arange(n_col, device=tokens.device)
        flags = self.typed(typed.long())
        x = self.token(tokens.long()) + (self.column(cols) + (flags[:, None] if typed.dim() == 2 else flags))
        x[:, 0] = x[:, 0] + self.query
        return x


class FeedForward(nn.Module):
    """Pre-LayerNorm MLP with a residual."""

    def __init__(self, dim: int, mult: int):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, mult * dim), nn.GELU(), nn.Linear(mult * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class AlleleHead(nn.Module):
    """One logit per cell: log-odds of the alt allele."""

    def __init__(self, config: BackboneConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.dim)
        self.out = nn.Linear(config.dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(x)).squeeze(-1)


class CrossAttentionBlock(nn.Module):
    """x attends to y (pre-LayerNorm, residual), then a feed-forward block:
    (N, Lx, D), (N, Ly, D) -> (N, Lx, D). With y = x it is self-attention."""

    def __init__(self, dim: int, heads: int, ffn_mult: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.heads = heads
        self.norm_x, self.norm_y = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.kv = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)
        self.ffn = FeedForward(dim, ffn_mult)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.attend(x, *self.keys_values(y))

    def keys_values(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(..., D) tokens attended to -> their keys and values (..., D) each:
        computed once where many x attend to the same tokens."""
        return self.kv(self.norm_y(y)).chunk(2, dim=-1)

    def attend(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """forward(x, y) from y's keys_values (N, Ly, D)."""
        def by_head(t):  # (N, L, D) -> (N, H, L, D/H)
            return t.reshape(*t.shape[:2], self.heads, -1).transpose(1, 2)

        out = F.scaled_dot_product_attention(by_head(self.q(self.norm_x(x))), by_head(keys), by_head(values))
        return self.ffn(x + self.out(out.transpose(1, 2).reshape(x.shape)))

    def attend_each(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """x (N, L, D), keys and values (N, n, L, D) -> (N, L, D): token l of
        x attends to its own n tokens, keys[:, :, l]. Written as two einsums
        over that layout, faster on a CPU than attention over (N L, n)
        copies (see docs/results.md)."""
        (n_rows, length, dim), n_heads = x.shape, self.heads
        q = self.q(self.norm_x(x)).view(n_rows, length, n_heads, -1)
        keys, values = (t.reshape(n_rows, -1, length, n_heads, dim // n_heads) for t in (keys, values))
        weights = torch.softmax(torch.einsum("blhd,bnlhd->bnlh", q, keys) * q.shape[-1] ** -0.5, dim=1)
        out = torch.einsum("bnlh,bnlhd->blhd", weights, values).reshape(x.shape)
        return self.ffn(x + self.out(out))


class AxialBackbone(nn.Module):
    """A nearest-context backbone's frame: cell embedding, `layers` of
    (mixing along variants, mixing along haplotypes, feed-forward), allele head.
    Subclasses say how the two mixers are built and applied (`mix`)."""

    shares_context = False  # each query has its own nearest-haplotype context
    reconstructs_context = True  # training also predicts span-masked context cells
    default_window = WindowConfig(untyped=100, typed=200, context=24)  # a full pass costs about k times one row
    queries_per_cpu_pass = 16  # a full pass over (1 + k) x M cells per query: larger passes gain nothing on a CPU

    def __init__(self, config: AxialConfig, along_variants, along_haplotypes):
        super().__init__()
        self.config = config
        self.embed = CellEmbedding(config)
        self.layers = nn.ModuleList(
            nn.ModuleList([along_variants(), along_haplotypes(), FeedForward(config.dim, config.ffn_mult)])
            for _ in range(config.layers)
        )
        self.head = AlleleHead(config)
        self.evidence = MatchEvidence(config.dim) if config.evidence else None
        # match reads context rows as the panel has them (a hidden cell is no allele to copy), and with
        # evidence the backbone's task is the query's correction: no hidden context cells to reconstruct
        self.reconstructs_context = not config.evidence
        if config.local_columns:  # a pass is match's, and the layers' fixed cost per pass is paid less often
            self.queries_per_cpu_pass = self.evidence.matcher.queries_per_cpu_pass

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        """(B, R, M, D) cells through every layer."""
        raise NotImplementedError

    def mix_query(self, x: torch.Tensor) -> torch.Tensor:
        """(B, M, D) the query row of mix(x), computing only what it needs."""
        return self.mix(x)[:, 0]

    def forward(self, tokens: torch.Tensor, typed: torch.Tensor, genetic: torch.Tensor | None = None) -> torch.Tensor:
        # tokens (B, R, M) integer, typed (M,) bool -> logits (B, R, M); genetic (M,) cM, read with evidence only
        if self.config.local_columns:
            return self.query_row(self.local_query_logits(tokens, typed, genetic), typed, tokens.shape[1])
        x, log_odds = self.embed_cells(tokens, typed, genetic)
        return self.with_query_output(self.head(self.mix(x)), typed, log_odds, tokens.shape[1])

    def query_logits(self, tokens: torch.Tensor, typed: torch.Tensor,
                     genetic: torch.Tensor | None = None) -> torch.Tensor:
        """forward(tokens, typed, genetic)[:, 0][:, ~typed], computing only what those cells need."""
        if self.config.local_columns:
            return self.local_query_logits(tokens, typed, genetic)
        return self.whole_query_logits(tokens, typed, genetic)

    def whole_query_logits(self, tokens: torch.Tensor, typed: torch.Tensor,
                           genetic: torch.Tensor | None) -> torch.Tensor:
        """query_logits when the layers read the whole window."""
        return self.forward(tokens, typed, genetic)[:, 0][:, ~typed]

    def local_query_logits(self, tokens: torch.Tensor, typed: torch.Tensor,
                           genetic: torch.Tensor | None) -> torch.Tensor:
        """(B, U) match's log-odds of the query, corrected at the cells it is
        unsure of by the layers' pass over local windows around them."""
        log_odds = self.evidence.log_odds(tokens, typed, genetic)
        untyped = torch.nonzero(~typed).squeeze(1)
        cells = unsure_cells(log_odds, untyped, tokens.shape[2], self.config.local_columns, self.config.unsure)
        if not len(cells.query):
            return log_odds
        correction = self.head(self.mix_query(self.embed_local(tokens, typed, log_odds, cells)))
        return log_odds.index_put((cells.query, cells.untyped), self.evidence.corrected(
            log_odds[cells.query, cells.untyped], correction[cells.window, cells.offset]))

    def embed_local(self, tokens: torch.Tensor, typed: torch.Tensor, log_odds: torch.Tensor,
                    cells: UnsureCells) -> torch.Tensor:
        """(w, rows, width, D) the local windows' cells: the body rows of
        their query's tokens at their columns, the evidence channel added
        at the query's untyped cells."""
        columns = cells.columns()  # (w, width)
        rows = torch.arange(self.layer_rows(tokens.shape[1]), device=tokens.device)
        local_typed = typed[columns]
        x = self.embed(tokens[cells.window_query[:, None, None], rows[None, :, None], columns[:, None, :]],
                       local_typed)
        whole = log_odds.new_zeros((tokens.shape[0], tokens.shape[2]))  # the query's log-odds by column
        whole[:, ~typed] = log_odds
        channel = self.evidence.embedded(whole[cells.window_query[:, None], columns, None])
        x[:, 0] = x[:, 0] + channel * ~local_typed[..., None]
        return x

    def layer_rows(self, rows: int) -> int:
        """How many of a window's `rows` (the query first) the layers read: the query and its body rows."""
        return 1 + self.config.body_rows if self.config.body_rows else rows

    def query_row(self, query: torch.Tensor, typed: torch.Tensor, rows: int) -> torch.Tensor:
        """(B, rows, M) logits: the query's (B, U) at its untyped cells, 0 elsewhere."""
        out = query.new_zeros((query.shape[0], rows, typed.shape[0]))
        out[:, 0, torch.nonzero(~typed).squeeze(1)] = query
        return out

    def embed_cells(self, tokens: torch.Tensor, typed: torch.Tensor,
                    genetic: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(cells (B, R, M, D), match's log-odds (B, U) at the query's
        untyped cells, or None without evidence): the embedding, with the
        evidence channel added at those cells."""
        if self.evidence is None:
            return self.embed(tokens, typed), None
        x = self.embed(tokens[:, :self.layer_rows(tokens.shape[1])], typed)
        log_odds = self.evidence.log_odds(tokens, typed, genetic)
        untyped = torch.nonzero(~typed).squeeze(1)
        x[:, 0, untyped] = x[:, 0, untyped] + self.evidence.embedded(log_odds[..., None])
        return x, log_odds

    def query_output(self, logits: torch.Tensor, log_odds: torch.Tensor | None) -> torch.Tensor:
        """The query's logits (B, U) at its untyped cells from the head's
        there: themselves without evidence, else match's corrected by them."""
        return logits if log_odds is None else self.evidence.corrected(log_odds, logits)

    def with_query_output(self, logits: torch.Tensor, typed: torch.Tensor, log_odds: torch.Tensor | None,
                          rows: int) -> torch.Tensor:
        """(B, rows, M) logits from the head's: without evidence, the head's;
        with it, the query row's, its untyped cells' through query_output,
        and 0 for the context rows (there is no context to reconstruct)."""
        if log_odds is None:
            return logits
        out = self.query_row(self.query_output(logits[:, 0, ~typed], log_odds), typed, rows)
        out[:, 0, typed] = logits[:, 0, typed]
        return out
