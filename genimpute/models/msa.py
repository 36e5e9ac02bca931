"""MSA-Transformer backbone (Rao et al., 2021): axial attention over a
matrix of haplotypes (rows) x variants (columns).

Each layer: tied row attention (one attention map over columns shared by all
rows of an example, logits summed over rows and scaled by 1/sqrt(R * d)),
then column attention (rows attend to each other within each column), then a
feed-forward block; all pre-LayerNorm with residuals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genimpute.models.blocks import AxialBackbone, AxialConfig, check_heads


@dataclass(frozen=True)
class MSAConfig(AxialConfig):
    """The `msa` backbone's settings."""

    name = "msa"
    heads: int = 4  # of the row and the column attention

    def __post_init__(self):
        super().__post_init__()
        check_heads(self)


def _small_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v, written out: for the column attention's
    many maps of a few dozen rows and 8 channels, faster on a CPU than
    scaled_dot_product_attention (see docs/results.md)."""
    return torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1) @ v


class _Attention(nn.Module):
    def __init__(self, config: MSAConfig):
        super().__init__()
        self.heads = config.heads
        self.norm = nn.LayerNorm(config.dim)
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.out = nn.Linear(config.dim, config.dim)

    def _split(self, x: torch.Tensor):
        # (..., D) -> 3 x (..., heads, D/heads)
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        shape = (*x.shape[:-1], self.heads, -1)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)


class TiedRowAttention(_Attention):
    def forward(self, x: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
        """(B, R, M, D) -> (B, R, M, D), or (B, R, C, D) for the C `columns`
        alone (they attend to all M columns)."""
        b, r, _, d = x.shape
        q, k, v = self._split(x)  # (B, R, M, H, dh)
        if columns is not None:
            x, q = x[:, :, columns], q[:, :, columns]
        dh = d // self.heads

        # fold rows into the feature axis: one map over columns per (batch, head)
        def fold(t):
            return t.permute(0, 3, 2, 1, 4).reshape(b, self.heads, t.shape[2], r * dh)

        out = F.scaled_dot_product_attention(fold(q), fold(k), fold(v), scale=1.0 / math.sqrt(r * dh))
        out = out.reshape(b, self.heads, -1, r, dh).permute(0, 3, 2, 1, 4).reshape(x.shape)
        return x + self.out(out)


class ColumnAttention(_Attention):
    def forward(self, x: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """(B, R, M, D) -> the same for the `rows` kept (they attend to all R rows)."""
        q, k, v = self._split(x)  # (B, R, M, H, dh)
        x, q = x[:, rows], q[:, rows]

        def by_column(t):
            return t.permute(0, 2, 3, 1, 4)  # (B, M, H, R, dh)

        out = _small_attention(by_column(q), by_column(k), by_column(v))
        return x + self.out(out.permute(0, 3, 1, 2, 4).reshape(x.shape))


class MSATransformer(AxialBackbone):
    def __init__(self, config: MSAConfig):
        super().__init__(config, lambda: TiedRowAttention(config), lambda: ColumnAttention(config))

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        for row_attn, col_attn, ffn in self.layers:
            x = ffn(col_attn(row_attn(x)))
        return x

    def mix_query(self, x: torch.Tensor) -> torch.Tensor:
        """The last layer's column attention and feed-forward for the query row alone."""
        *inner, (row_attn, col_attn, ffn) = self.layers
        for row, col, ff in inner:
            x = ff(col(row(x)))
        return ffn(col_attn(row_attn(x), rows=slice(0, 1)))[:, 0]

    def whole_query_logits(self, tokens: torch.Tensor, typed: torch.Tensor,
                           genetic: torch.Tensor | None) -> torch.Tensor:
        """forward(tokens, typed)[:, 0][:, ~typed], computed for those cells
        alone in the last layer: its row attention for the untyped columns,
        its column attention, feed-forward and head for the query row. With
        two layers it saves a good part of forward's time (see docs/results.md)."""
        x, log_odds = self.embed_cells(tokens, typed, genetic)
        *inner, (row_attn, col_attn, ffn) = self.layers
        for row, col, ff in inner:
            x = ff(col(row(x)))
        x = row_attn(x, columns=~typed)
        return self.query_output(self.head(ffn(col_attn(x, rows=slice(0, 1))))[:, 0], log_odds)
