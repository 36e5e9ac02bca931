"""SPIN backbone (Rastogi et al., ICLR 2024: semi-parametric inducing point
networks) on K-mer tokens.

A window's panel haplotypes are the dataset. Each haplotype (row) is cut into
K-mer tokens of its untyped (target) and typed (attribute) variants.
- XABA: F' learned latent attributes attend to a row's tokens, so a row is
  summarised as F' x E numbers (linear in the number of tokens).
- XABD: h learned inducing points attend to all rows' summaries, flattened to
  F'E (linear in the number of haplotypes); `layers` of them.
- Predictor: a query row's summary attends to the inducing points; its
  target tokens then attend to that summary and to its own tokens, and a
  linear head gives the 2^K allele classes of each target token.

The encoder (`encode`) never sees a query, so imputation runs it once per
window and reuses its inducing points for every target (`predict`).
"""

from __future__ import annotations

import torch
from torch import nn

from genimpute.config import ModelConfig
from genimpute.models.blocks import CrossAttentionBlock
from genimpute.models.kmers import alt_log_odds, group_columns, input_codes

_ATTRIBUTE, _TARGET = 0, 1


class SPIN(nn.Module):
    shares_context = True  # the context is the window's panel, not each query's nearest haplotypes

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        k, e = config.kmer, config.dim
        if not 1 <= k <= 8:
            raise ValueError(f"kmer must be between 1 and 8; found {k}")
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

    def target_groups(self, typed: torch.Tensor) -> torch.Tensor:
        """(Gt, K) untyped column indices of each target token (-1: padding)."""
        return group_columns(torch.nonzero(~typed).squeeze(1), self.config.kmer)

    def _tokens(self, rows: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """(N, M) cell tokens -> (N, G, E) embedded K-mer tokens, the Gt target tokens first."""
        if rows.shape[-1] > self.config.max_columns:
            raise ValueError(f"window has {rows.shape[-1]} columns; the model covers at most {self.config.max_columns}")
        targets = self.target_groups(typed)
        groups = torch.cat([targets, group_columns(torch.nonzero(typed).squeeze(1), self.config.kmer)])
        kind = torch.full((len(groups),), _ATTRIBUTE, device=rows.device)
        kind[: len(targets)] = _TARGET
        return self.token(input_codes(rows, groups)) + self.column(groups[:, 0]) + self.kind(kind)

    def _summarise(self, tokens: torch.Tensor) -> torch.Tensor:
        # XABA: (N, G, E) -> (N, F', E)
        return self.xaba(self.latents.expand(len(tokens), -1, -1), tokens)

    def encode(self, context: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """(R, M) cell tokens of the window's panel haplotypes -> (h, F'E) inducing points."""
        rows = self._summarise(self._tokens(context, typed)).flatten(1)[None]  # (1, R, F'E)
        points = self.inducing[None]
        for layer in self.xabd:
            points = layer(points, rows)
        return points[0]

    def predict(self, memory: torch.Tensor, rows: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """(B, M) query rows (untyped cells MASKED) -> (B, Gt, 2^K) class logits of their target tokens."""
        tokens = self._tokens(rows, typed)  # (B, G, E)
        summary = self._summarise(tokens)  # (B, F', E)
        b, f, e = summary.shape
        summary = self.predictor(summary.reshape(b, 1, f * e), memory.expand(b, -1, -1)).reshape(b, f, e)
        n_targets = len(self.target_groups(typed))
        out = self.decoder(tokens[:, :n_targets], torch.cat([summary, tokens], dim=1))
        return self.head(out)

    def forward(self, context: torch.Tensor, rows: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """Training's pass: encode `context` (R, M), predict `rows` (B, M) -> (B, Gt, 2^K)."""
        return self.predict(self.encode(context, typed), rows, typed)

    def query_log_odds(self, memory: torch.Tensor, rows: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        """(B, U) log-odds of the alt allele at the untyped columns, the K-mer classes marginalised."""
        return alt_log_odds(self.predict(memory, rows, typed), self.target_groups(typed))
