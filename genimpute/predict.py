"""A trained model's P(alt) for query haplotypes in one window."""

from __future__ import annotations

import numpy as np
import torch

from genimpute.config import WindowConfig
from genimpute.windows import Window, assemble_rows, block_site_weights, nearest_haplotypes, query_rows

# Every forward pass holds exactly this many queries, the last pass padded, so
# the kernels see the same shapes whatever the number of targets: a query's
# P(alt) depends only on the query, and outputs are byte-identical for any
# number of targets or threads. On a GPU passes are large; on the CPU each
# backbone says how many queries pay off (`queries_per_cpu_pass`): few for a
# full pass per query, many when the per-query work is small (BENCHMARKS.md).
CUDA_QUERIES_PER_PASS = 256


def window_centimorgans(genetic: np.ndarray) -> torch.Tensor:
    """(M,) float32 cM of a window's columns from the first: differences
    stay exact in float32 far along a chromosome."""
    return torch.from_numpy((genetic - genetic[0]).astype(np.float32))


def queries_per_pass(device: torch.device, model: torch.nn.Module) -> int:
    return CUDA_QUERIES_PER_PASS if device.type == "cuda" else model.queries_per_cpu_pass


def _passes(n_queries: int, per_pass: int):
    """(query indices, number of real ones) of each pass, padded to
    `per_pass` with copies of the pass's first query."""
    for start in range(0, n_queries, per_pass):
        part = np.arange(start, start + per_pass)
        n_real = min(per_pass, n_queries - start)
        part[n_real:] = start
        yield part, n_real


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
    queries = np.zeros((len(query_typed), len(window.typed)), dtype=np.int8)
    queries[:, window.typed] = query_typed
    typed = torch.from_numpy(window.typed).to(device)
    out = np.empty((int((~window.typed).sum()), len(queries)), dtype=np.float32)
    per_pass = queries_per_pass(device, model)
    if model.shares_context:
        # one encoding of the panel per distinct exclusion (one when no target is in the panel)
        exclusions, which = (np.zeros((1, window_haps.shape[1]), bool), np.zeros(len(queries), int)) \
            if exclude is None else np.unique(exclude, axis=0, return_inverse=True)
        rows = query_rows(queries, window.typed)
        for e, excluded in enumerate(exclusions):
            members = np.nonzero(which.ravel() == e)[0]
            context_haps = window_haps[:, ~excluded].T  # (R, M)
            memory = model.encode(torch.from_numpy(context_haps.astype(np.int64)).to(device), typed)
            context_typed = context_haps[:, window.typed]  # (R, t), for the neighbours of every pass
            for part, n_real in _passes(len(members), per_pass):
                neighbours = None
                if model.neighbours:  # the rows it reads: nearest in the context, by index
                    neighbours = torch.from_numpy(nearest_haplotypes(
                        query_typed[members[part]], context_typed, min(model.neighbours, len(context_haps)))).to(device)
                log_odds = model.query_log_odds(memory, torch.from_numpy(rows[members[part]]).to(device), typed,
                                                neighbours)
                out[:, members[part[:n_real]]] = torch.sigmoid(log_odds[:n_real].float()).T.cpu().numpy()
        return out
    typed_haps = window_haps[window.typed].T  # (H, t)
    centimorgans = window_centimorgans(genetic).to(device)
    k = min(wcfg.context, typed_haps.shape[0] - (0 if exclude is None else int(exclude.sum(axis=1).max())))
    weights = block_site_weights(window.typed, wcfg.near_sites, wcfg.near_weight)
    for part, n_real in _passes(len(queries), per_pass):
        context = nearest_haplotypes(query_typed[part], typed_haps, k, None if exclude is None else exclude[part],
                                     weights)
        tokens = torch.from_numpy(assemble_rows(window_haps, queries[part], context, window.typed)).to(device)
        logits = model.query_logits(tokens, typed, centimorgans)[:n_real]  # (B, U)
        out[:, part[:n_real]] = torch.sigmoid(logits.float()).T.cpu().numpy()
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
