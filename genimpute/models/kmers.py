"""K-mer tokens (SPIN, Rastogi et al. 2024): K consecutive variants of one
kind (untyped, or typed) make one token.

As input a token is coded from its cells' values {REF, ALT, MASKED} in base 3
(3^K codes), so a token may be partly masked (a missing call). As output a
target token is one of 2^K allele classes; `alt_log_odds` marginalises the
classes back to per-variant P(alt). The last group of a kind is padded with
-1 columns, which read as MASKED and count as REF in classes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genimpute.config import MASKED

# a padding column's log-odds where the cells of a group are given as such: REF, beyond doubt
PADDED_LOG_ODDS = 30.0


def group_columns(columns: torch.Tensor, k: int) -> torch.Tensor:
    """(G, K) column indices: `columns` (increasing) in runs of `k`, the last padded with -1."""
    n_groups = -(-len(columns) // k)
    groups = torch.full((n_groups * k,), -1, dtype=torch.long, device=columns.device)
    groups[: len(columns)] = columns
    return groups.reshape(n_groups, k)


def groups_of(mask: torch.Tensor, k: int) -> torch.Tensor:
    """(G, K) groups of the columns where the (M,) bool `mask` is set: a window's target tokens
    for mask = ~typed, its attribute tokens for mask = typed."""
    return group_columns(torch.nonzero(mask).squeeze(1), k)


def _cells(values: torch.Tensor, groups: torch.Tensor, pad: int) -> torch.Tensor:
    # values (..., M) -> (..., G, K), pad where a group has no column
    cells = values[..., groups.clamp(min=0)]
    return cells.masked_fill(groups < 0, pad)


def input_codes(tokens: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(..., G) codes in [0, 3^K) of cell tokens (..., M) in {REF, ALT, MASKED}."""
    k = groups.shape[1]
    weights = 3 ** torch.arange(k, device=tokens.device)
    return (_cells(tokens, groups, MASKED) * weights).sum(-1)


def allele_classes(alleles: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(..., G) classes in [0, 2^K) of 0/1 alleles (..., M): bit j is the group's j-th variant."""
    k = groups.shape[1]
    weights = 2 ** torch.arange(k, device=alleles.device)
    return (_cells(alleles.long(), groups, 0) * weights).sum(-1)


def class_bits(k: int, device=None) -> torch.Tensor:
    """(2^K, K) bool: bit j of each class."""
    classes = torch.arange(2 ** k, device=device)
    return (classes[:, None] >> torch.arange(k, device=device)) & 1 == 1


def alt_log_odds(class_logits: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(..., G, 2^K) class logits -> (..., N) log P(alt) / P(ref) of each of
    the N real (unpadded) grouped columns, in group order."""
    k = groups.shape[1]
    lead = class_logits.shape[:-1]
    per_bit = []
    for j in range(k):
        # class c = (high, bit j, low): its bit j is the middle axis of this view
        split = class_logits.reshape(*lead, 2 ** (k - 1 - j), 2, 2 ** j)
        ref, alt = torch.logsumexp(split, dim=-1).logsumexp(dim=-2).unbind(-1)
        per_bit.append(alt - ref)
    return torch.stack(per_bit, -1).flatten(-2)[..., (groups >= 0).flatten()]


def grouped_log_odds(log_odds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(..., U) log-odds of the untyped columns, in group order -> (..., G, K),
    padding -PADDED_LOG_ODDS (REF, as in classes)."""
    flat = torch.full((*log_odds.shape[:-1], groups.numel()), -PADDED_LOG_ODDS, dtype=log_odds.dtype,
                      device=log_odds.device)
    flat[..., (groups >= 0).flatten()] = log_odds
    return flat.reshape(*log_odds.shape[:-1], *groups.shape)


def independent_class_log_probs(log_odds: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(..., U) per-variant log-odds -> (..., G, 2^K) log-probabilities of the
    classes were the variants of a group independent: alt_log_odds' inverse."""
    grouped = grouped_log_odds(log_odds, groups)[..., None, :]  # (..., G, 1, K)
    bits = class_bits(groups.shape[1], log_odds.device)  # (2^K, K)
    return torch.where(bits, F.logsigmoid(grouped), F.logsigmoid(-grouped)).sum(-1)
