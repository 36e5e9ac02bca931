"""The attention refiner: row attention across the K states of a record
(NPT's and the MSA-Transformer's attention between context haplotypes),
with the record's own features as one more token whose output corrects the
engine's log-odds of the minor allele. Each state's token is its features
beside the record's, so attention can weigh a state by how it matches the
query there; its last layer starts at zero, so an untrained refiner leaves
the engine's P(alt) as it is."""

from __future__ import annotations

import torch
from torch import nn

from genimpute.refine.features import RECORD_FEATURES, STATE_FEATURES


class StateAttentionRefiner(nn.Module):
    """correction (n,) to the minor allele's log-odds from record features
    (n, RECORD_FEATURES) and state features (n, K, STATE_FEATURES)."""

    def __init__(self, dim: int = 32, layers: int = 2, heads: int = 4):
        super().__init__()
        self.state_in = nn.Linear(STATE_FEATURES + RECORD_FEATURES, dim)
        self.record_in = nn.Linear(RECORD_FEATURES, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, record: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        beside = record[:, None].expand(-1, states.shape[1], -1)
        tokens = torch.cat([self.record_in(record)[:, None], self.state_in(torch.cat([states, beside], -1))], 1)
        return self.out(self.norm(self.layers(tokens)[:, 0]))[:, 0]
