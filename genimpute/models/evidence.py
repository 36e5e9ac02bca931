"""Copying evidence for an axial backbone (MSA, NPSSM): what the `match`
backbone concludes about the query, given to the backbone as an input
channel and as the base its own output corrects.

Why: trained for minutes on two CPU cores, an axial backbone learns less
than the match backbone's copying model knows from the start (BENCHMARKS.md:
MSA 0.9673 on chr20_1kgp1 where match scored 0.98). With evidence, the
query's alt log-odds at its untyped cells are match's, plus the backbone's
correction times a gate that starts at 0: a backbone starts as match, and
its training learns what to change. The backbone also reads match's
log-odds at each untyped query cell, embedded beside the cell's token, so
its layers see where match is unsure. The matcher's weights start from the
shipped pretrained model's when training starts from scratch
(genimpute.run_state).
"""

from __future__ import annotations

import torch
from torch import nn

from genimpute.models.match import HaplotypeMatcher, MatchConfig

# log-odds beyond this say "certain" to the channel: match's reach 15 and more where every row agrees
CHANNEL_SCALE = 4.0


class MatchEvidence(nn.Module):
    """match's alt log-odds at the query's untyped cells, their embedding
    (the channel) and the corrected output."""

    def __init__(self, dim: int, matcher: MatchConfig = MatchConfig()):
        super().__init__()
        self.matcher = HaplotypeMatcher(matcher)
        self.channel = nn.Linear(2, dim)  # from (P(alt), tanh(log-odds / CHANNEL_SCALE))
        self.gate = nn.Parameter(torch.zeros(()))

    def log_odds(self, tokens: torch.Tensor, typed: torch.Tensor, genetic: torch.Tensor | None) -> torch.Tensor:
        """(B, U) match's alt log-odds at the untyped columns of tokens (B, R, M)."""
        if genetic is None:
            raise ValueError("copying evidence: expected the window's cM (genetic); found None")
        return self.matcher.query_logits(tokens, typed, genetic)

    def embedded(self, log_odds: torch.Tensor) -> torch.Tensor:
        """(B, U, D) the channel added to the query's untyped cells."""
        features = torch.stack([torch.sigmoid(log_odds), torch.tanh(log_odds / CHANNEL_SCALE)], -1)
        return self.channel(features)

    def corrected(self, log_odds: torch.Tensor, correction: torch.Tensor) -> torch.Tensor:
        """(B, U) the query's output: match's log-odds plus the gated correction."""
        return log_odds + self.gate * correction
