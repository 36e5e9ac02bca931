"""Window geometry and nearest-haplotype context, on numpy arrays (torch
only computes the nearest haplotypes).

A window is U consecutive untyped panel records plus the T typed records
nearest to them on the same contig; its columns are sorted by record index.
Every untyped record belongs to exactly one window; windows never span
contigs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from genimpute.config import MASKED


@dataclass(frozen=True)
class Window:
    contig: int
    columns: np.ndarray  # (M,) panel record indices, increasing
    typed: np.ndarray  # (M,) bool, column is typed (evidence) rather than predicted

    @property
    def predicted(self) -> np.ndarray:
        """Panel records this window imputes."""
        return self.columns[~self.typed]


def window_for_block(block: np.ndarray, typed_rows: np.ndarray, positions: np.ndarray, n_typed: int, contig: int) -> Window:
    """Window around `block` (consecutive untyped records of one contig) with
    the `n_typed` records of `typed_rows` (typed records of that contig,
    increasing) nearest to the block's span in base pairs. Ties go to the
    lower record index, so the result is deterministic."""
    start, end = positions[block[0]], positions[block[-1]]
    typed_pos = positions[typed_rows]
    lo = np.searchsorted(typed_pos, start, side="left")
    hi = np.searchsorted(typed_pos, end, side="right")
    # the n_typed nearest lie within n_typed records either side of the span;
    # the left edge widens to all records at its position so ties go to the lower index
    left = np.searchsorted(typed_pos, typed_pos[max(0, lo - n_typed)], side="left") if len(typed_pos) else 0
    cand = typed_rows[left: hi + n_typed]
    cand_pos = positions[cand]
    distance = np.maximum(np.maximum(start - cand_pos, cand_pos - end), 0)
    chosen = cand[np.lexsort((cand, distance))[:n_typed]]
    columns = np.concatenate([block, chosen])
    order = np.argsort(columns, kind="stable")
    typed = np.concatenate([np.zeros(len(block), bool), np.ones(len(chosen), bool)])
    return Window(contig, columns[order], typed[order])


def contig_rows(contig_index: np.ndarray, contig: int, typed_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(untyped, typed) record indices of one contig."""
    on_contig = contig_index == contig
    return np.nonzero(on_contig & ~typed_mask)[0], np.nonzero(on_contig & typed_mask)[0]


def plan_windows(
    contig_index: np.ndarray,
    positions: np.ndarray,
    typed_mask: np.ndarray,
    n_untyped: int,
    n_typed: int,
    contigs: list | None = None,
    predict_mask: np.ndarray | None = None,
) -> list[Window]:
    """Tile the records to predict of each contig (all contigs by default)
    into windows of `n_untyped`, in record order. Records to predict are
    those not typed unless `predict_mask` names them; a typed record named
    there is left out of the evidence of the window that predicts it."""
    if contigs is None:
        contigs = list(np.unique(contig_index))
    windows = []
    for contig in contigs:
        untyped, typed = contig_rows(contig_index, contig, typed_mask)
        if predict_mask is not None:
            untyped = np.nonzero((contig_index == contig) & predict_mask)[0]
        if len(untyped) == 0:
            continue
        if len(typed) == 0:
            raise ValueError(f"contig #{contig} has untyped records but no typed record")
        for s in range(0, len(untyped), n_untyped):
            block = untyped[s: s + n_untyped]
            evidence = typed if predict_mask is None else np.setdiff1d(typed, block, assume_unique=True)
            if len(evidence) == 0:
                raise ValueError(f"contig #{contig} has no typed record to predict records {block[:3]}... from")
            windows.append(window_for_block(block, evidence, positions, n_typed, int(contig)))
    return windows


def typed_record_windows(
    contig_index: np.ndarray,
    positions: np.ndarray,
    typed_mask: np.ndarray,
    predict_mask: np.ndarray,
    max_block: int,
    n_typed: int,
    stride: int = 1,
) -> list[Window]:
    """Windows predicting the typed records named in `predict_mask` (such as
    those with missing calls) from the other typed records of their contig.

    A block is taken out of its own evidence, so it is kept local and thin:
    its records share a residue of their rank among the contig's typed records
    modulo `stride` (each keeps all but one in `stride` of its typed
    neighbours), there are at most `max_block` of them, and they lie within
    n_typed // 2 typed records of the block's first, however sparse they are."""
    windows = []
    span_limit = max(1, n_typed // 2)
    for contig in np.unique(contig_index[predict_mask]):
        _, typed = contig_rows(contig_index, contig, typed_mask)
        rows = np.nonzero((contig_index == contig) & predict_mask)[0]
        rank = np.searchsorted(typed, rows)  # each row's index among the contig's typed records
        for residue in range(stride):
            members = np.nonzero(rank % stride == residue)[0]
            start = 0
            while start < len(members):
                stop = start + 1
                while (stop < len(members) and stop - start < max_block
                       and rank[members[stop]] - rank[members[start]] < span_limit):
                    stop += 1
                block = rows[members[start:stop]]
                evidence = np.setdiff1d(typed, block, assume_unique=True)
                if len(evidence) == 0:
                    raise ValueError(f"contig #{contig} has no typed record to predict records {block[:3]}... from")
                windows.append(window_for_block(block, evidence, positions, n_typed, int(contig)))
                start = stop
    return windows


def block_site_weights(typed: np.ndarray, near_sites: int, near_weight: int) -> np.ndarray:
    """(t,) int weight of each of a window's typed sites in the nearest-haplotype
    distance: `near_weight` at the typed sites within the span of the window's
    predicted columns and the `near_sites` nearest on either side of it, 1 elsewhere."""
    sites_before = np.cumsum(typed)[~typed]  # typed sites left of each predicted column
    index = np.arange(int(typed.sum()))
    near = (index >= sites_before.min() - near_sites) & (index < sites_before.max() + near_sites)
    return np.where(near, near_weight, 1)


def nearest_haplotypes(queries: np.ndarray, panel: np.ndarray, k: int, exclude: np.ndarray | None = None,
                       weights: np.ndarray | None = None) -> np.ndarray:
    """(B, k) indices of the k panel haplotypes nearest to each query by L1
    (Hamming) distance, nearest first, ties to the lower index.

    queries: (B, t) 0/1 alleles at the window's typed sites; negative codes
             (missing calls) are left out of that query's distances
    panel:   (H, t) 0/1 alleles of the panel haplotypes at the same sites
    exclude: (B, H) bool, haplotypes a query may not use (its own sample)
    weights: (t,) positive integers, each site's count in the distance (default 1)
    """
    import torch  # here alone: the copying engine plans no window context and need not import it

    n_hap = len(panel)
    if len(queries) == 0:
        return np.empty((0, k), dtype=np.int64)
    available = n_hap - (0 if exclude is None else int(exclude.sum(axis=1).max()))
    if not 1 <= k <= available:
        raise ValueError(f"context size k={k} must be between 1 and the {available} haplotypes available")
    # for +-1 codes (0 where the query has no call) weighted by w, q.h = sum(w observed) - 2 * weighted
    # hamming; float32 matmul is exact at these sizes. In torch, not numpy: its matmul and top-k use
    # torch's threads, and take about half the time of numpy's single-threaded BLAS and argpartition here.
    w = torch.ones(queries.shape[1]) if weights is None else torch.from_numpy(weights.astype(np.float32))
    observed = torch.from_numpy(queries >= 0)
    q = torch.where(observed, torch.from_numpy(queries).float() * 2 - 1, 0) * w
    h = torch.from_numpy(panel).float() * 2 - 1
    hamming = (((observed * w).sum(1, keepdim=True) - q @ h.T) / 2).round().long()  # (B, H)
    key = hamming * n_hap + torch.arange(n_hap)  # unique keys make the order total
    if exclude is not None:
        key[torch.from_numpy(exclude)] = torch.iinfo(torch.int64).max
    return key.topk(k, dim=1, largest=False, sorted=True).indices.numpy()


def assemble_rows(window_haps: np.ndarray, queries: np.ndarray, context: np.ndarray, typed: np.ndarray) -> np.ndarray:
    """(B, 1 + k, M) int8 cell tokens: row 0 the query with its untyped
    cells and missing calls MASKED, rows 1..k its context haplotypes. Int8,
    because with a large k this array is most of a window's memory traffic.

    window_haps: (M, H) panel alleles of the window's columns
    queries:     (B, M) query alleles, negative for missing calls (untyped cells may hold anything)
    context:     (B, k) panel haplotype indices
    """
    rows = np.empty((len(queries), 1 + context.shape[1], len(typed)), dtype=np.int8)
    rows[:, 0] = query_rows(queries, typed)
    rows[:, 1:] = np.ascontiguousarray(window_haps.T)[context]  # whole rows: faster than a strided gather
    return rows


def query_rows(queries: np.ndarray, typed: np.ndarray) -> np.ndarray:
    """(B, M) int64 cell tokens of queries (B, M): their untyped cells and missing calls MASKED."""
    return np.where(typed & (queries >= 0), queries, MASKED).astype(np.int64)
