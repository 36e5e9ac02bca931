"""SPIN backbone (Rastogi et al., ICLR 2024: semi-parametric inducing point
networks) on K-mer tokens.

A window's panel haplotypes are the dataset. Each haplotype (row) is cut into
K-mer tokens of its untyped (target) and typed (attribute) variants.
- XABA: F' learned latent attributes attend to a row's tokens, so a row is
  summarised as F' x E numbers (linear in the number of tokens).
- XABD: h learned inducing points attend to all rows' summaries, flattened to
  F'E (linear in the number of haplotypes); `layers` of them.
- Predictor: a query row's summary attends to the inducing points; its
  target tokens then attend to that summary and to their own tokens, and a
  linear head gives the 2^K allele classes of each target token.
- Neighbour reader (not in the paper; `neighbours` > 0): each row's tokens
  are also encoded by self-attention along the row, and before the decoder
  each of the query's target tokens attends to the same token of its n
  nearest panel haplotypes. It gives the model the retrieval that the
  inducing points alone do not learn across windows (see docs/results.md).
- Copying evidence (not in the paper; `evidence`, with the neighbour
  reader): a `match` backbone reads the query and its k nearest panel
  haplotypes (the window's context size; the reader reads the nearest
  `neighbours` of them), chosen as the nearest-context backbones choose
  them, and gives the alt log-odds of the query's untyped cells
  (genimpute.models.evidence). They are embedded into the query's target
  tokens, and the output's class log-probabilities are theirs (the variants
  of a token taken as independent) plus the head's, times a gate that
  starts at 0: the model starts as `match`.

The encoder (`encode`) never sees a query, so imputation runs it once per
window and reuses its inducing points, and the reader's keys and values of
its encoded rows, for every target (`predict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from genimpute.config import BackboneConfig, WindowConfig
from genimpute.models.blocks import CrossAttentionBlock, check_columns, check_heads
from genimpute.models.evidence import MatchEvidence
from genimpute.models.kmers import alt_log_odds, grouped_log_odds, groups_of, independent_class_log_probs, input_codes

_ATTRIBUTE, _TARGET = 0, 1


@dataclass(frozen=True)
class SPINConfig(BackboneConfig):
    """The `spin` backbone's settings."""

    name = "spin"
    heads: int = 4  # of every attention block
    ffn_mult: int = 2  # the feed-forward blocks' width, in multiples of their input's
    max_columns: int = 512  # longest window (U + T) the column embedding covers
    kmer: int = 5  # K: consecutive untyped (or typed) variants per token, 2^K classes
    latents: int = 8  # F': latent attributes each haplotype is summarised into
    inducing: int = 64  # h: inducing points summarising a window's panel haplotypes
    # nearest panel haplotypes (L1 on typed sites) whose target tokens each
    # query reads, column by column; 0 is the paper's SPIN
    neighbours: int = 0
    # read the match backbone's log-odds of the query from its nearest rows (context_rows) and correct them
    evidence: bool = False

    def __post_init__(self):
        super().__post_init__()
        self.require_at_least(ffn_mult=1, max_columns=1, latents=1, inducing=1, neighbours=0)
        if self.evidence and not self.neighbours:
            raise ValueError("spin evidence: expected neighbours, the rows its match reads; found neighbours 0")
        check_heads(self)  # the blocks over latents x dim then split evenly too
        if not 1 <= self.kmer <= 8:  # 3^K input codes: 8 is already 6,561 embeddings
            raise ValueError(f"spin kmer: expected 1 to 8 variants per token; found {self.kmer}")

    def check_window(self, window: WindowConfig) -> None:
        check_columns(self, window)

    def context_rows(self, window: WindowConfig) -> int:
        """The nearest context rows each predicted row is given: the reader's
        `neighbours`, and with evidence the k of `window` its match reads if more."""
        return max(self.neighbours, window.context) if self.evidence else self.neighbours


class Memory(NamedTuple):
    """A window's encoding, shared by every query."""

    points: torch.Tensor  # (h, F'E) inducing points
    # (R, Gt, E) each: the reader's keys and values of every context row's encoded
    # target tokens (neighbour reader), else None; computed once, read by many queries
    keys: torch.Tensor | None
    values: torch.Tensor | None
    cells: torch.Tensor | None  # (R, M) int8, the context's cell tokens (for the evidence's match), else None


class SPIN(nn.Module):
    shares_context = True  # the context is the window's panel, not each query's nearest haplotypes
    reconstructs_context = True  # training also predicts the untyped cells of hidden context rows
    # k is unused: the context is the whole panel (see `neighbours`)
    default_window = WindowConfig(untyped=100, typed=200, context=24)
    queries_per_cpu_pass = 256  # per-query work is small kernels: 256 per pass run twice as fast as 16

    def __init__(self, config: SPINConfig):
        super().__init__()
        self.config = config
        k, e = config.kmer, config.dim
        self.token = nn.Embedding(3 ** k, e)
        self.column = nn.Embedding(config.max_columns, e)  # of the token's first variant
        self.kind = nn.Embedding(2, e)
        self.latents = nn.Parameter(torch.randn(config.latents, e) * 0.02)
        self.xaba = CrossAttentionBlock(e, config.heads, config.ffn_mult)
        d = config.latents * e
        self.inducing = nn.Parameter(torch.randn(config.inducing, d) * 0.02)
        self.xabd = nn.ModuleList(CrossAttentionBlock(d, config.heads, config.ffn_mult) for _ in range(config.layers))
        self.predictor = CrossAttentionBlock(d, config.heads, config.ffn_mult)
        self.decoder = CrossAttentionBlock(e, config.heads, config.ffn_mult)
        self.head = nn.Sequential(nn.LayerNorm(e), nn.Linear(e, 2 ** k))
        self.neighbours = config.neighbours
        if self.neighbours:
            self.row_encoder = CrossAttentionBlock(e, config.heads, config.ffn_mult)
            self.reader = CrossAttentionBlock(e, config.heads, config.ffn_mult)
        self.evidence = MatchEvidence(e, cells=k) if config.evidence else None
        if config.evidence:  # its match's votes, the larger part of a pass, run fastest in passes of match's size
            self.queries_per_cpu_pass = self.evidence.matcher.queries_per_cpu_pass
        # with evidence the task is the query's correction, and match cannot copy a hidden context cell
        self.reconstructs_context = not config.evidence

    def target_groups(self, typed: torch.Tensor) -> torch.Tensor:
        """(Gt, K) untyped column indices of each target token (-1: padding)."""
        return groups_of(~typed, self.config.kmer)

    def _codes(self, rows: torch.Tensor, typed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(N, M) cell tokens -> (N, G) K-mer input codes, their (G, K) groups and Gt, the target tokens first."""
        if rows.shape[-1] > self.config.max_columns:
            raise ValueError(f"window has {rows.shape[-1]} columns; the model covers at most {self.config.max_columns}")
        targets = self.target_groups(typed)
        groups = torch.cat([targets, groups_of(typed, self.config.kmer)])
        return input_codes(rows, groups), groups, len(targets)

    def _embedded(self, codes: torch.Tensor, positions: torch.Tensor, groups: torch.Tensor,
                  n_targets: int) -> torch.Tensor:
        """(..., E) tokens of `codes` at token `positions` (indices into `groups`)."""
        kind = torch.where(positions < n_targets, _TARGET, _ATTRIBUTE)
        return self.token(codes) + self.column(groups[positions, 0]) + self.kind(kind)

    def _tokens(self, rows: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """(N, M) cell tokens -> (N, G, E) embedded K-mer tokens, the Gt target tokens first."""
        codes, groups, n_targets = self._codes(rows, typed)
        return self._embedded(codes, torch.arange(len(groups), device=rows.device), groups, n_targets)

    def _summarise(self, tokens: torch.Tensor) -> torch.Tensor:
        # XABA: (N, G, E) -> (N, F', E)
        return self.xaba(self.latents.expand(len(tokens), -1, -1), tokens)

    def encode(self, context: torch.Tensor, typed: torch.Tensor) -> Memory:
        """(R, M) cell tokens of the window's panel haplotypes -> their Memory."""
        codes, groups, n_targets = self._codes(context, typed)
        n_codes = 3 ** self.config.kmer
        # the panel's rows share most of their K-mers: the work on each token alone (its embedding, the norm
        # and projections of the tokens attended to) is done once per distinct (position, code), then gathered
        distinct, index = torch.unique(codes + n_codes * torch.arange(len(groups), device=codes.device),
                                       return_inverse=True)  # index: (R, G)
        tokens = self._embedded(distinct % n_codes, distinct // n_codes, groups, n_targets)  # (D, E)
        of_tokens = [t[index] for t in self.xaba.keys_values(tokens)]
        rows = self.xaba.attend(self.latents.expand(len(context), -1, -1), *of_tokens)  # XABA: (R, F', E)
        points = self.inducing[None]
        for layer in self.xabd:
            points = layer(points, rows.flatten(1)[None])  # over the (1, R, F'E) row summaries
        keys = values = None
        if self.neighbours:  # the reader reads target tokens alone: only they attend along the row
            along_row = [t[index] for t in self.row_encoder.keys_values(tokens)]
            keys, values = self.reader.keys_values(self.row_encoder.attend(tokens[index[:, :n_targets]], *along_row))
        return Memory(points[0], keys, values, context.to(torch.int8) if self.evidence is not None else None)

    def predict(self, memory: Memory, rows: torch.Tensor, typed: torch.Tensor,
                neighbours: torch.Tensor | None = None, genetic: torch.Tensor | None = None) -> torch.Tensor:
        """(B, M) query rows (untyped cells MASKED) -> (B, Gt, 2^K) class logits of their target tokens.
        neighbours: (B, n) each row's nearest context rows, nearest first, when the model reads them
        (config.context_rows: the reader reads the first `neighbours`, the evidence's match all n);
        genetic (M,) the columns' cM, read with evidence only."""
        tokens = self._tokens(rows, typed)  # (B, G, E)
        groups = self.target_groups(typed)
        # n is at most `neighbours`; fewer where the panel has fewer haplotypes
        if self.neighbours and (neighbours is None or neighbours.ndim != 2 or len(neighbours) != len(rows)):
            raise ValueError(f"expected ({len(rows)}, n) neighbour indices")
        if self.evidence is not None:
            cells = torch.cat([rows[:, None].to(torch.int8), memory.cells[neighbours]], 1)  # int8: (B, 1 + n, M)
            log_odds = self.evidence.log_odds(cells, typed, genetic)
            channel = self.evidence.embedded(grouped_log_odds(log_odds, groups))  # (B, Gt, E)
            tokens = torch.cat([tokens[:, :len(groups)] + channel, tokens[:, len(groups):]], dim=1)
        summary = self._summarise(tokens)  # (B, F', E)
        b, f, e = summary.shape
        # each row's summary is one token attending to the same points: one batch of b tokens
        summary = self.predictor(summary.reshape(1, b, f * e), memory.points[None]).reshape(b, f, e)
        n_targets = len(groups)
        targets = tokens[:, :n_targets]
        if self.neighbours:
            own = self.row_encoder(targets, tokens)  # (B, Gt, E)
            read = neighbours[:, :self.neighbours]  # (B, n): each target token reads the same token of these
            targets = self.reader.attend_each(own, memory.keys[read], memory.values[read])
        logits = self.head(self.decoder(targets, torch.cat([summary, tokens], dim=1)))
        if self.evidence is None:
            return logits
        return self.evidence.corrected(independent_class_log_probs(log_odds, groups), logits)

    def forward(self, context: torch.Tensor, rows: torch.Tensor, typed: torch.Tensor,
                neighbours: torch.Tensor | None = None, genetic: torch.Tensor | None = None) -> torch.Tensor:
        """Training's pass: encode `context` (R, M), predict `rows` (B, M) -> (B, Gt, 2^K)."""
        return self.predict(self.encode(context, typed), rows, typed, neighbours, genetic)

    def query_log_odds(self, memory: Memory, rows: torch.Tensor, typed: torch.Tensor,
                       neighbours: torch.Tensor | None = None, genetic: torch.Tensor | None = None) -> torch.Tensor:
        """(B, U) log-odds of the alt allele at the untyped columns, the K-mer classes marginalised."""
        return alt_log_odds(self.predict(memory, rows, typed, neighbours, genetic), self.target_groups(typed))
