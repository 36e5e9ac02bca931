"""A trained model's P(alt) for query haplotypes in one window."""

from __future__ import annotations

import numpy as np
import torch

from genimpute.batches import batch_family, window_centimorgans
from genimpute.config import WindowConfig
from genimpute.windows import Window

__all__ = ["CUDA_QUERIES_PER_PASS", "queries_per_pass", "target_window_probabilities", "window_centimorgans",
           "window_probabilities"]

# Every forward pass holds exactly this many queries, the last pass padded, so
# the kernels see the same shapes whatever the number of targets: a query's
# P(alt) depends only on the query, and outputs are byte-identical for any
# number of targets or threads. On a GPU passes are large; on the CPU each
# backbone says how many queries pay off (`queries_per_cpu_pass`): few for a
# full pass per query, many when the per-query work is small (see docs/results.md).
CUDA_QUERIES_PER_PASS = 256


def queries_per_pass(device: torch.device, model: torch.nn.Module) -> int:
    return CUDA_QUERIES_PER_PASS if device.type == "cuda" else model.queries_per_cpu_pass


@torch.no_grad()
def window_probabilities(
    model: torch.nn.Module,
    window: Window,
    window_haps: np.ndarray,
    query_typed: np.ndarray,
    genetic: np.ndarray,
    wcfg: WindowConfig,
    device: torch.device,
    exclude: np.ndarray | None = None,
) -> np.ndarray:
    """(U, Q) P(alt) at the window's predicted records for Q query haplotypes.

    window_haps: (M, H) panel alleles at the window's columns
    query_typed: (Q, t) query alleles at the window's typed columns, negative for missing calls
    genetic:     (M,) cM of the window's columns (ReferencePanel.centimorgans)
    wcfg:        the context size k and nearest-haplotype distance of nearest-context backbones
    exclude:     (Q, H) bool, panel haplotypes a query may not have as context
    """
    out = np.empty((int((~window.typed).sum()), len(query_typed)), dtype=np.float32)
    passes = batch_family(model).log_odds_by_pass(model, window, window_haps, query_typed, genetic, wcfg, device,
                                                  exclude, queries_per_pass(device, model))
    for queries, log_odds in passes:
        out[:, queries] = torch.sigmoid(log_odds.float()).T.cpu().numpy()
    return out


def target_window_probabilities(model, window: Window, panel, aln, wcfg: WindowConfig, device: torch.device,
                                exclude: np.ndarray | None = None) -> np.ndarray:
    """(U, 2S) P(alt) at the window's predicted records for every target
    haplotype, from its alleles at the window's typed records.
    panel: genimpute.panel.ReferencePanel; aln: its genimpute.panel.Alignment."""
    haps = panel.haplotypes(window.columns)
    query_typed = aln.alleles_at(window.columns[window.typed]).T
    return window_probabilities(model, window, haps, query_typed, panel.centimorgans[window.columns], wcfg, device,
                                exclude)
