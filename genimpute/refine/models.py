"""The summary refiner: a small MLP on the record's features and a
summary of its states (the weighted means of the state features, and the
top state's), whose output corrects the engine's log-odds of the minor
allele. Its last layer starts at zero, so an untrained refiner leaves the
engine's P(alt) as it is."""

from __future__ import annotations

import torch
from torch import nn

from genimpute.refine.features import RECORD_FEATURES, STATE_FEATURES


def state_summary(states: torch.Tensor) -> torch.Tensor:
    """(n, 2 STATE_FEATURES) the states' features (n, K, F) weighted by
    their weight (feature 0), and the features of the heaviest state."""
    weight = states[..., 0:1]
    mean = (states * weight).sum(1) / weight.sum(1).clamp_min(1e-6)
    return torch.cat([mean, states[:, 0]], -1)  # the states come heaviest first (context._gap_states)


class SummaryRefiner(nn.Module):
    """correction (n,) to the minor allele's log-odds from record features
    (n, RECORD_FEATURES) and state features (n, K, STATE_FEATURES)."""

    def __init__(self, hidden: int = 64, layers: int = 2):
        super().__init__()
        blocks, width = [], RECORD_FEATURES + 2 * STATE_FEATURES
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.GELU()]
            width = hidden
        self.body = nn.Sequential(*blocks)
        self.out = nn.Linear(width, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, record: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(torch.cat([record, state_summary(states)], -1)))[:, 0]


class AffineRefiner(nn.Module):
    """The baseline a refiner has to beat: a recalibration of the engine's
    log-odds, linear in them and in the minor allele's log frequency,
    starting at none. What the other refiners gain beyond it is what they
    read in the states."""

    def __init__(self):
        super().__init__()
        self.out = nn.Linear(2, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, record: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        return self.out(record[:, [0, 2]])[:, 0]  # the log-odds and the minor allele's log frequency
