"""The Li and Stephens forward-backward over a target haplotype's
composite states: the switch probability between typed sites, the
forward sweep, and the backward sweep that turns it into posteriors in
place."""

from __future__ import annotations

import numba as nb
import numpy as np


# The sweeps' sums over states may be reordered (vectorised): half the
# forward-backward's time, P(alt) within 0.002 (mean 3e-8) of the strict
# order on the 1,000-sample, 1,000-target job. Not the NaN/inf assumptions:
# NaN marks the typed sites a query does call.
FAST = {"reassoc", "contract", "arcp"}


@nb.njit(cache=True)
def _emission(call, error):
    """(P(call | a state copying the same allele), P(call | one copying the
    other)): both 1 with no call."""
    if call < 0:
        return np.float32(1.0), np.float32(1.0)
    return np.float32(1.0 - error), np.float32(error)


@nb.njit(cache=True, fastmath=FAST)
def _forward(state_alleles, query, jump_rate, error, lo, hi):
    """(hi - lo, K) forward probabilities at typed sites lo .. hi - 1, each
    row in proportion to the normalised ones (the sweep starts at site 0
    and stops there). Each site's step is one loop over the states: it
    divides the last row by its sum as it reads it, in the stay
    probability: with loops of their own to normalise and copy each row,
    and the backward sweep's likewise, the forward-backward took several
    times as long (see docs/results.md)."""
    k = state_alleles.shape[1]
    out = np.empty((hi - lo, k), dtype=np.float32)
    scratch = np.zeros((2, k), dtype=np.float32)  # the rows before lo
    previous, total = scratch[1], np.float32(1.0)
    for i in range(hi):
        match, mismatch = _emission(query[i], error)
        call, alleles = query[i], state_alleles[i]
        stay, jump = (np.float32(0.0), np.float32(1.0 / k)) if i == 0 else \
            (np.float32((1.0 - jump_rate[i - 1]) / total), np.float32(jump_rate[i - 1] / k))
        current = out[i - lo] if i >= lo else scratch[i & 1]
        total = np.float32(0.0)
        for s in range(k):
            current[s] = (stay * previous[s] + jump) * (match if alleles[s] == call else mismatch)
            total += current[s]
        previous = current
    return out


@nb.njit(cache=True, fastmath=FAST)
def _posteriors(state_alleles, query, jump_rate, error, lo, hi):
    """(hi - lo, K) normalised posteriors at typed sites lo .. hi - 1 of a
    forward-backward over all the sites of state_alleles: the backward
    sweep turns the forward probabilities into them in place, in the loop
    that steps it (its own sum folded into the next step's stay
    probability, as _forward's). Those are the sites a segment's core
    reads; its margins only carry the sweeps to it, the forward one's from
    the left, the backward one's from the right, so neither sweeps the far
    margin (the margins are as long as the core at 16,000 samples)."""
    n, k = state_alleles.shape
    posterior = _forward(state_alleles, query, jump_rate, error, lo, hi)
    if hi <= lo:
        return posterior
    backward = np.ones(k, dtype=np.float32)
    for i in range(n - 1, lo - 1, -1):
        # the row is taken on every step, past hi too (unused there): taken in the branches that use it, the
        # sweep took several times as long
        row = posterior[min(i, hi - 1) - lo]
        total = np.float32(0.0)
        if i < n - 1:  # backward to site i from site i + 1
            match, mismatch = _emission(query[i + 1], error)
            call, alleles = query[i + 1], state_alleles[i + 1]
            weighed = np.float32(0.0)
            for s in range(k):
                backward[s] *= match if alleles[s] == call else mismatch
                weighed += backward[s]
            stay, jump = np.float32((1.0 - jump_rate[i]) / weighed), np.float32(jump_rate[i] / k)
            if i < hi:
                for s in range(k):
                    backward[s] = stay * backward[s] + jump
                    row[s] *= backward[s]
                    total += row[s]
            else:
                for s in range(k):
                    backward[s] = stay * backward[s] + jump
        elif i < hi:
            for s in range(k):
                total += row[s]
        if i < hi:
            scale = np.float32(1.0) / total
            for s in range(k):
                row[s] *= scale
    return posterior


@nb.njit(cache=True)
def switch_probabilities(jump_cm, switch_cm):
    """The probability of switching state between neighbouring typed sites
    jump_cm cM apart, the model switching once per switch_cm cM on average
    (config.switch_cm: as Li and Stephens', rarer the more haplotypes the
    panel has to copy from)."""
    return -np.expm1(-jump_cm / switch_cm)
