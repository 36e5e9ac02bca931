"""A trained model's P(alt) for query haplotypes in one window."""

from __future__ import annotations

import numpy as np
import torch

from genimpute.windows import Window, assemble_rows, nearest_haplotypes

# Every forward pass holds exactly this many queries, the last pass padded, so
# the kernels see the same shapes whatever the number of targets: a query's
# P(alt) depends only on the query, and outputs are byte-identical for any
# number of targets or threads. Larger passes only pay off on a GPU.
QUERIES_PER_PASS = {"cpu": 16, "cuda": 256}


def queries_per_pass(device: torch.device) -> int:
    return QUERIES_PER_PASS.get(device.type, QUERIES_PER_PASS["cpu"])


@torch.no_grad()
def window_probabilities(
    model: torch.nn.Module,
    window: Window,
    window_haps: np.ndarray,
    query_typed: np.ndarray,
    k: int,
    device: torch.device,
    exclude: np.ndarray | None = None,
) -> np.ndarray:
    """(U, Q) P(alt) at the window's predicted records for Q query haplotypes.

    window_haps: (M, H) panel alleles at the window's columns
    query_typed: (Q, t) query alleles at the window's typed columns, negative for missing calls
    exclude:     (Q, H) bool, panel haplotypes a query may not have as context
    """
    typed_haps = window_haps[window.typed].T  # (H, t)
    k = min(k, typed_haps.shape[0] - (0 if exclude is None else int(exclude.sum(axis=1).max())))
    queries = np.zeros((len(query_typed), len(window.typed)), dtype=np.int8)
    queries[:, window.typed] = query_typed
    typed = torch.from_numpy(window.typed).to(device)
    out = np.empty((int((~window.typed).sum()), len(queries)), dtype=np.float32)
    per_pass = queries_per_pass(device)
    for start in range(0, len(queries), per_pass):
        part = np.arange(start, start + per_pass)
        n_real = min(per_pass, len(queries) - start)
        part[n_real:] = start  # padding: copies of the pass's first query
        context = nearest_haplotypes(query_typed[part], typed_haps, k, None if exclude is None else exclude[part])
        tokens = torch.from_numpy(assemble_rows(window_haps, queries[part], context, window.typed)).to(device)
        logits = model.query_logits(tokens, typed)[:n_real]  # (B, U)
        out[:, start: start + n_real] = torch.sigmoid(logits.float()).T.cpu().numpy()
    return out


def target_window_probabilities(model, window: Window, panel, aln, k: int, device: torch.device,
                                exclude: np.ndarray | None = None) -> np.ndarray:
    """(U, 2S) P(alt) at the window's predicted records for every target
    haplotype, from its alleles at the window's typed records.
    panel: genimpute.panel.ReferencePanel; aln: its genimpute.panel.Alignment."""
    haps = panel.haplotypes(window.columns)
    query_typed = aln.alleles_at(window.columns[window.typed]).T
    return window_probabilities(model, window, haps, query_typed, k, device, exclude)
