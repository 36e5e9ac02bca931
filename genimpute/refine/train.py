"""Training a refiner on (record, query) pairs of held-out panel samples:
the binary cross-entropy of whether the query carries the minor allele,
from the engine's log-odds plus the refiner's correction, the epoch kept
the one of least loss on pairs of other held-out samples."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from genimpute.refine.attention import StateAttentionRefiner
from genimpute.refine.features import Pairs
from genimpute.refine.models import AffineRefiner, SummaryRefiner
from genimpute.refine.reweight import ReweightRefiner

BACKBONES = {"affine": AffineRefiner, "mlp": SummaryRefiner, "reweight": ReweightRefiner,
             "attention": StateAttentionRefiner}


@dataclass
class Examples:
    """Pairs' features and whether each query carries the minor allele, as tensors."""

    record: torch.Tensor
    states: torch.Tensor
    logit: torch.Tensor
    target: torch.Tensor

    @classmethod
    def of(cls, pairs: Pairs, target: np.ndarray | None = None) -> Examples:
        target = np.zeros(len(pairs.logit), np.float32) if target is None else target
        return cls(*(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
                     for x in (pairs.record, pairs.states, pairs.logit, target)))

    def __len__(self) -> int:
        return len(self.logit)

    def batch(self, index: torch.Tensor) -> tuple:
        return self.record[index], self.states[index], self.logit[index], self.target[index]


def build(backbone: str, seed: int, **settings) -> nn.Module:
    """A backbone's refiner, its weights drawn with `seed`."""
    torch.manual_seed(seed)
    return BACKBONES[backbone](**settings)


def parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def corrections(model: nn.Module, examples: Examples, batch: int = 8192) -> np.ndarray:
    """(n,) the model's corrections to the examples' minor log-odds."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(examples), batch):
            index = torch.arange(start, min(start + batch, len(examples)))
            record, states, _, _ = examples.batch(index)
            out.append(model(record, states))
    return torch.cat(out).numpy() if out else np.zeros(0, np.float32)


def loss_of(model: nn.Module, examples: Examples, batch: int = 8192) -> float:
    """Mean binary cross-entropy of the corrected log-odds."""
    fixed = torch.from_numpy(corrections(model, examples, batch)) + examples.logit
    return float(nn.functional.binary_cross_entropy_with_logits(fixed, examples.target))


def fit(model: nn.Module, train: Examples, valid: Examples, epochs: int = 8, batch: int = 512, lr: float = 1e-3,
        seed: int = 0, log=print) -> nn.Module:
    """The model trained on `train`, as it was after the epoch of least
    loss on `valid` (or as it came, if no epoch lowered it)."""
    torch.manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    best, best_state = loss_of(model, valid), copy.deepcopy(model.state_dict())
    log(f"  start: valid loss {best:.5f}")
    for epoch in range(epochs):
        model.train()
        started = time.monotonic()
        for index in torch.randperm(len(train)).split(batch):
            record, states, engine, target = train.batch(index)
            loss = nn.functional.binary_cross_entropy_with_logits(engine + model(record, states), target)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        valid_loss = loss_of(model, valid)
        log(f"  epoch {epoch + 1}: valid loss {valid_loss:.5f} ({time.monotonic() - started:.0f} s)")
        if valid_loss < best:
            best, best_state = valid_loss, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    return model
