"""Features of (record, query) pairs from a SegmentContext, in the record's
minor-allele coding: a refiner then learns one problem, "does the query
carry the rarer allele", whichever of REF and ALT that is, and its
correction to the minor allele's log-odds is flipped back for ALT.

Per state (K of them, STATE_FEATURES): its weight at the record (its
posteriors at the typed sites either side interpolated as the engine
interpolates them), the share of that weight on a haplotype carrying the
minor allele, how far its haplotypes match the query outwards from the
gap, their mismatches near it, and whether the state copies one haplotype
across the gap. Per record (RECORD_FEATURES): the engine's log-odds, the
minor allele's frequency, the cM to the typed sites either side, the
weight of the K states and of their carriers, and the two scales that set how
far the engine's states reach: the panel's haplotypes, and the cM across
the record's gap over the cM between the engine's switches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from genimpute.refine.context import NEAR_SITES, SegmentContext

STATE_FEATURES = 8
RECORD_FEATURES = 11
LOGIT_CLIP = 12.0  # log-odds clipped here: the engine's float32 sums resolve P(alt) no closer to 0 or 1


@dataclass
class Pairs:
    """n (record, query) pairs' features."""

    states: np.ndarray  # (n, K, STATE_FEATURES) float32
    record: np.ndarray  # (n, RECORD_FEATURES) float32
    logit: np.ndarray  # (n,) float32 the engine's log-odds of the minor allele
    minor_is_alt: np.ndarray  # (n,) bool


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p.astype(np.float64), 1 / (1 + np.exp(LOGIT_CLIP)), 1 / (1 + np.exp(-LOGIT_CLIP)))
    return np.log(p / (1 - p)).astype(np.float32)


def pair_features(ctx: SegmentContext, rows: np.ndarray, cols: np.ndarray) -> Pairs:
    """Features of the pairs (record rows[i], query cols[i]) of ctx."""
    gap, w = ctx.gap[rows], ctx.weight[rows][:, None]
    hap, post = ctx.hap[cols, gap], ctx.post[cols, gap]  # (n, K, 2)
    minor_is_alt = ctx.alt_freq[rows] <= 0.5
    carries = ctx.alleles[rows[:, None, None], np.maximum(hap, 0)] == minor_is_alt[:, None, None]
    carries &= hap >= 0
    side = np.stack([1 - w, w], -1)  # (n, 1, 2) the engine's interpolation weights
    part = post * side
    weight = part.sum(-1)  # (n, K)
    carrier = (part * carries).sum(-1)
    share = np.where(weight > 0, carrier / np.maximum(weight, 1e-12), 0.0)
    runs = np.log1p(ctx.run[cols, gap].astype(np.float32)) / 4
    near = ctx.mismatch[cols, gap].astype(np.float32) / NEAR_SITES
    states = np.stack([weight, np.log(weight + 1e-6) / 8 + 1, share, runs[..., 0], runs[..., 1], near[..., 0],
                       near[..., 1], (hap[..., 0] == hap[..., 1]) & (hap[..., 0] >= 0)], -1).astype(np.float32)
    p_minor = np.where(minor_is_alt, ctx.p_alt[rows, cols], 1 - ctx.p_alt[rows, cols])
    engine = logit(p_minor)
    maf = np.minimum(ctx.alt_freq[rows], 1 - ctx.alt_freq[rows]).astype(np.float64)
    record = np.stack([engine / LOGIT_CLIP, p_minor, np.log(maf + 1 / ctx.n_haplotypes) / 8 + 1,
                       np.log10(ctx.cm_left[rows] + 1e-5) / 5 + 1, np.log10(ctx.cm_right[rows] + 1e-5) / 5 + 1,
                       w[:, 0], ctx.kept[cols, gap], weight.sum(1), carrier.sum(1),
                       np.full(len(rows), np.log2(ctx.n_haplotypes) / 8 - 1),
                       np.log10((ctx.cm_left[rows] + ctx.cm_right[rows]) / ctx.switch_cm + 1e-4) / 2 + 1],
                      -1).astype(np.float32)
    return Pairs(states, record, engine, minor_is_alt)


def alt_probability(pairs: Pairs, correction: np.ndarray) -> np.ndarray:
    """(n,) P(alt) from the engine's minor log-odds plus a correction."""
    p_minor = 1 / (1 + np.exp(-(pairs.logit.astype(np.float64) + correction)))
    return np.where(pairs.minor_is_alt, p_minor, 1 - p_minor)


def minor_truth(ctx: SegmentContext, truth: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(n,) float32 1 where query cols[i] carries record rows[i]'s minor
    allele (truth (U, Q): the queries' alleles at ctx's records)."""
    minor_is_alt = ctx.alt_freq[rows] <= 0.5
    return (truth[rows, cols] == minor_is_alt).astype(np.float32)
