"""The reweighting refiner: each of the K states' weight is multiplied by
exp(f(its features, the record's)), f a small MLP shared by all states
(a Deep Sets model over the states), and the correction to the engine's
log-odds of the minor allele is how far that moves the K states' own
log-odds (their carriers' weight against the others'). It can only say
"trust this state more than the engine did", which is what a match run
or a mismatch near the record might tell: a narrow model, cheap (one
small MLP per state, no attention between them), and at f = 0 (its last
layer starts at zero) it leaves the engine's P(alt) as it is."""

from __future__ import annotations

import torch
from torch import nn

from genimpute.refine.features import RECORD_FEATURES, STATE_FEATURES

SHARE = 2  # the state feature holding the share of its weight on minor-allele carriers
FLOOR = 1e-6  # weight added to both sides of the log-odds: K states with no carrier say "rare", not "never"


class ReweightRefiner(nn.Module):
    """correction (n,) to the minor allele's log-odds from record features
    (n, RECORD_FEATURES) and state features (n, K, STATE_FEATURES)."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(STATE_FEATURES + RECORD_FEATURES, hidden), nn.GELU(),
                                  nn.Linear(hidden, hidden), nn.GELU())
        self.out = nn.Linear(hidden, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, record: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        beside = record[:, None].expand(-1, states.shape[1], -1)
        scale = self.out(self.body(torch.cat([states, beside], -1)))[..., 0].clamp(-8, 8).exp()
        weight, share = states[..., 0], states[..., SHARE]
        return _log_odds(weight * scale, share) - _log_odds(weight, share)


def _log_odds(weight: torch.Tensor, share: torch.Tensor) -> torch.Tensor:
    """(n,) log of the carriers' weight over the others' ((n, K) each state's weight and carrier share)."""
    return torch.log((weight * share).sum(1) + FLOOR) - torch.log((weight * (1 - share)).sum(1) + FLOOR)
