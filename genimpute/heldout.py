"""Training's validation r2: the held-out panel samples imputed as
imputation would impute them. (impute --validate is genimpute.validation.)"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from genimpute.config import RunConfig
from genimpute.metrics import pooled_r2
from genimpute.predict import window_probabilities
from genimpute.training_set import TrainingSet
from genimpute.windows import Window

MAX_QUERIES = 32  # held-out haplotypes imputed per validation window


class _Case(NamedTuple):
    """One validation window and the held-out haplotypes it imputes."""

    window: Window
    haps: np.ndarray  # (M, H) panel alleles at the window's columns
    query_typed: np.ndarray  # (Q, t) the queries' alleles at the typed columns
    genetic: np.ndarray  # (M,) cM of the columns
    truth: np.ndarray  # (U, Q) the queries' alleles at the predicted columns
    exclude: np.ndarray  # (Q, H) bool, the validation haplotypes: out of every context


class Validator:
    """Fixed held-out windows and queries; r2 of P(alt) on untyped cells,
    computed as imputation computes it, the validation samples out of every
    context."""

    def __init__(self, sets: list[TrainingSet], cfg: RunConfig):
        rng = np.random.default_rng([cfg.train.seed, 11])
        self.window_config = cfg.window
        self.cases: list[_Case] = []
        with_val = [ts for ts in sets if len(ts.val_haps)]
        for i in range(cfg.train.val_windows if with_val else 0):
            ts = with_val[i % len(with_val)]  # the windows taken in turn from each panel
            queries = ts.val_haps[: min(len(ts.val_haps), MAX_QUERIES)]
            exclude = np.broadcast_to(ts.is_val, (len(queries), len(ts.is_val)))
            window = ts.random_window(rng, cfg.window.untyped, cfg.window.typed)
            haps = ts.panel.haplotypes(window.columns)  # (M, H)
            self.cases.append(_Case(window, haps, haps[window.typed][:, queries].T,
                                    ts.panel.centimorgans[window.columns], haps[~window.typed][:, queries], exclude))

    @torch.no_grad()
    def r2(self, model: torch.nn.Module, device: torch.device) -> float:
        """Pooled r2 over every case's cells; nan with no held-out samples."""
        if not self.cases:
            return float("nan")
        model.eval()
        probs = [window_probabilities(model, c.window, c.haps, c.query_typed, c.genetic, self.window_config, device,
                                      c.exclude) for c in self.cases]
        model.train()
        return pooled_r2(np.concatenate(probs, axis=None), np.concatenate([c.truth for c in self.cases], axis=None))
