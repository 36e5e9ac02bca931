"""Copying evidence for an axial backbone (MSA, NPSSM): what the `match`
backbone concludes about the query, given to the backbone as an input
channel and as the base its own output corrects.

Why: trained for minutes on two CPU cores, an axial backbone learns less
than the match backbone's copying model knows from the start (see
docs/results.md). With evidence, the
query's alt log-odds at its untyped cells are match's, plus the backbone's
correction times a gate that starts at 0: a backbone starts as match, and
its training learns what to change. The backbone also reads match's
log-odds at each untyped query cell, embedded beside the cell's token, so
its layers see where match is unsure. The matcher's weights start from the
shipped pretrained model's when training starts from scratch
(genimpute.run_state).

Where match is sure, a backbone has little to correct, and most cells are
sure (few untyped query cells have P(alt) far from 0 and 1; see
docs/results.md). With `local_columns` the backbone reads only
small windows around the unsure cells (`unsure_cells`), at a fraction of a
whole-window pass, and corrects those cells alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from genimpute.models.match import HaplotypeMatcher, MatchConfig

# log-odds beyond this say "certain" to the channel: match's reach 15 and more where every row agrees
CHANNEL_SCALE = 4.0


class MatchEvidence(nn.Module):
    """match's alt log-odds at the query's untyped cells, their embedding
    (the channel) and the corrected output."""

    def __init__(self, dim: int, cells: int = 1, matcher: MatchConfig = MatchConfig()):
        super().__init__()
        self.matcher = HaplotypeMatcher(matcher)
        # from (P(alt), tanh(log-odds / CHANNEL_SCALE)) of each of the `cells` of one token
        self.channel = nn.Linear(2 * cells, dim)
        self.gate = nn.Parameter(torch.zeros(()))

    def log_odds(self, tokens: torch.Tensor, typed: torch.Tensor, genetic: torch.Tensor | None) -> torch.Tensor:
        """(B, U) match's alt log-odds at the untyped columns of tokens (B, R, M)."""
        if genetic is None:
            raise ValueError("copying evidence: expected the window's cM (genetic); found None")
        return self.matcher.query_logits(tokens, typed, genetic)

    def embedded(self, log_odds: torch.Tensor) -> torch.Tensor:
        """(..., D) the channel added to a token from the log-odds (..., cells) of its cells."""
        features = torch.stack([torch.sigmoid(log_odds), torch.tanh(log_odds / CHANNEL_SCALE)], -1)
        return self.channel(features.flatten(-2))

    def corrected(self, log_odds: torch.Tensor, correction: torch.Tensor) -> torch.Tensor:
        """(B, U) the query's output: match's log-odds plus the gated correction."""
        return log_odds + self.gate * correction


@dataclass(frozen=True)
class UnsureCells:
    """The query cells match is unsure of, and the local windows that read
    them: n cells, w windows of `width` consecutive columns each."""

    query: torch.Tensor  # (n,) each cell's query (batch index)
    untyped: torch.Tensor  # (n,) its index among the window's untyped columns
    window: torch.Tensor  # (n,) the local window that reads it
    offset: torch.Tensor  # (n,) its column within that window
    window_query: torch.Tensor  # (w,) each local window's query
    start: torch.Tensor  # (w,) its first column
    width: int

    def columns(self) -> torch.Tensor:
        """(w, width) the columns each local window reads."""
        return self.start[:, None] + torch.arange(self.width, device=self.start.device)


def unsure_cells(log_odds: torch.Tensor, untyped: torch.Tensor, n_columns: int, width: int,
                 margin: float) -> UnsureCells:
    """The cells of log_odds (B, U) whose P(alt) lies in (margin, 1 -
    margin), untyped (U,) being the window's untyped columns of n_columns.
    Each cell is read by the local window of `width` columns whose start is
    the multiple of width / 2 nearest to the cell's column less width / 2:
    a cell lies in the middle half of its window (but at the window's
    edges), and a query's unsure cells close together share one window."""
    width = min(width, n_columns)
    stride = max(1, width // 2)
    query, index = torch.nonzero(log_odds.detach().abs() < math.log((1 - margin) / margin), as_tuple=True)
    column = untyped[index]
    start = torch.div(column - width // 2 + stride // 2, stride, rounding_mode="floor") * stride
    start = start.clamp(0, n_columns - width)
    keys, window = torch.unique(query * n_columns + start, return_inverse=True)
    return UnsureCells(query, index, window, column - start, keys // n_columns, keys % n_columns, width)
