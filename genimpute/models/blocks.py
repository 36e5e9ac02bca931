"""Building blocks shared by the backbones."""

from __future__ import annotations

import torch
from torch import nn

from genimpute.config import N_TOKENS, ModelConfig


class CellEmbedding(nn.Module):
    """Token + column position + typed-column flag + query-row flag.
    No embedding of row position: context rows are an unordered set."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.token = nn.Embedding(N_TOKENS, config.dim)
        self.column = nn.Embedding(config.max_columns, config.dim)
        self.typed = nn.Embedding(2, config.dim)
        self.query = nn.Parameter(torch.zeros(config.dim))
        self.max_columns = config.max_columns

    def forward(self, tokens: torch.Tensor, typed: torch.Tensor) -> torch.Tensor:
        # tokens (B, R, M) long, typed (M,) bool -> (B, R, M, D)
        n_col = tokens.shape[-1]
        if n_col > self.max_columns:
            raise ValueError(f"window has {n_col} columns; the model covers at most {self.max_columns}")
        cols = torch.arange(n_col, device=tokens.device)
        x = self.token(tokens) + (self.column(cols) + self.typed(typed.long()))
        x[:, 0] = x[:, 0] + self.query
        return x


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(config.dim),
            nn.Linear(config.dim, config.ffn_mult * config.dim),
            nn.GELU(),
            nn.Linear(config.ffn_mult * config.dim, config.dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class AlleleHead(nn.Module):
    """One logit per cell: log-odds of the alt allele."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.dim)
        self.out = nn.Linear(config.dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(x)).squeeze(-1)
