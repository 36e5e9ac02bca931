"""genimpute's own phaser (`impute --phaser genimpute`): unphased targets
phased at the typed sites against the panel with the copying engine's
pieces. Each target's two haplotypes copy from one set of composite states
(genimpute.copying.states), chosen from the PBWT neighbours of both, and
each heterozygous call after the first takes the most likely of: the
phase as it is; the two haplotypes exchanged from the call on; the alleles
of the call and of up to MAX_BLOCK - 1 calls after it exchanged, the rest
kept (the first of these within TIE of the most likely: ties keep the
phase). A likelihood is each haplotype's Li and Stephens likelihood over
the states (a switch rate of the engine's form, PhasingSettings' own ne),
their product the pair's.

The first phase orders each heterozygous call against the one before by
the panel's haplotypes: cis if more of them carry the two calls' alleles
both alt or both ref than one of each. Then rounds over every target
(PhasingSettings), each choosing the states again from the phase the last
one left, every other one with its sites in reverse order. The first rounds
draw each change in proportion to its likelihood, from a seeded hash of
the round, target and site: taking the most likely, a target stayed where
only two changes together would have helped. The last rounds copy from
the other targets' haplotypes too, a missing call there the allele the
round before found more probable for it.

In a round the changes are decided from its last site to its first, in
the backward sweep: its values carry the changes after the call, the
forward sweep's the phase before it, which no change in the round moves,
so that each change makes the pair's likelihood no lower. The exchanged
blocks' backward values are swept beside the pair's, each rescaled by its
own factors, whose logs less the pair's are kept to compare them."""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from genimpute.config import PhasingSettings
from genimpute.copying.hmm import FAST, _emission, _forward, switch_probabilities
from genimpute.copying.model import selection_group
from genimpute.copying.pbwt import _sightings, count_ones, pbwt_indexes
from genimpute.copying.states import _composite_states, _packed_by_haplotype, _state_alleles, as_words
from genimpute.runtime import announce_first_compile

JOIN_ROWS = 1024  # rows of the panel unpacked at a time to join columns (_joined)


@nb.njit(cache=True)
def _haplotypes(genotypes, orientation):
    """(t, 2) int8 alleles of one target: homozygous calls on both, a
    heterozygous call's alt on the first where orientation is 1, -1 where
    missing."""
    t = len(genotypes)
    out = np.full((t, 2), -1, dtype=np.int8)
    for j in range(t):
        g = genotypes[j]
        if g == 0 or g == 2:
            out[j, 0] = out[j, 1] = g // 2
        elif g == 1:
            out[j, 0], out[j, 1] = orientation[j], 1 - orientation[j]
    return out


@nb.njit(cache=True)
def _linkage_orientation(genotypes, words, n_haplotypes):
    """(t,) int8 first orientation of one target's heterozygous calls: the
    first 1, each next one as the panel's haplotypes more often carry it
    with the one before (words (t, W) uint64, the panel's alleles at each
    typed site)."""
    t = len(genotypes)
    out = np.zeros(t, dtype=np.int8)
    last, last_alts = -1, 0
    for j in range(t):
        if genotypes[j] != 1:
            continue
        both, alts = 0, 0
        for w in range(words.shape[1]):
            alts += count_ones(words[j, w])
            if last >= 0:
                both += count_ones(words[last, w] & words[j, w])
        if last < 0:
            out[j] = 1
        else:
            cis = n_haplotypes - last_alts - alts + 2 * both
            trans = last_alts + alts - 2 * both
            out[j] = out[last] if cis >= trans else 1 - out[last]
        last, last_alts = j, alts
    return out


# A haplotype's backward values at a site, before the site's emission, are kept as scale * weights + shift: the
# weights are the values at the site after it, after that site's emission, and scale (the switch's stay
# probability over their sum) and shift (its jump probability per state) take them through the switch. So each
# step back is one loop over the states, the values' rescaling folded into the next step, as _forward's.


@nb.njit(cache=True, fastmath=FAST)
def _junction(forward_row, weights, scale, shift, alleles, allele, error, stay, jump):
    """The likelihood, up to a factor of each, of a haplotype whose left
    part ends in forward_row at site j - 1 copying on into site j, where it
    shows `allele` (the states' `alleles`), and on to the right part whose
    backward values at j, before j's emission, are scale * weights +
    shift."""
    match, mismatch = _emission(allele, error)
    inner, f_total, b_total = np.float32(0.0), np.float32(0.0), np.float32(0.0)
    for s in range(len(weights)):
        b = (scale * weights[s] + shift) * (match if alleles[s] == allele else mismatch)
        inner += forward_row[s] * b
        f_total += forward_row[s]
        b_total += b
    return stay * inner + jump * f_total * b_total


@nb.njit(cache=True, fastmath=FAST)
def _step_back(weights, scale, shift, alleles, call, error):
    """The backward values at site j before its emission, scale * weights
    + shift, into weights (in place) after j's emission of `call`: their
    sum."""
    match, mismatch = _emission(call, error)
    total = np.float32(0.0)
    for s in range(len(weights)):
        weights[s] = (scale * weights[s] + shift) * (match if alleles[s] == call else mismatch)
        total += weights[s]
    return total


# the most heterozygous calls in a row whose alleles one change exchanges, leaving those on either side
MAX_BLOCK = 4
# a change chosen (not drawn) must beat each one before it (keeping the phase first) by more than this log
# likelihood. Exact ties are common (where every state carries one allele, exchanging a call's alleles
# changes nothing), and the float32 sums settle them as a compile orders them: a run that compiles _rephase
# into _phase_round and one that links its cached copy would phase some samples differently
TIE = 1e-4


@nb.njit(cache=True, fastmath=FAST)
def _change(first_row, second_row, weights, scales, blocks, block_scales, shift, offset, valid, alleles, a, b, error,
            stay, jump, draw):
    """At a heterozygous call whose haplotypes show a and b: -1 to keep the
    phase, 0 to exchange the haplotypes from the call on, n > 0 to
    exchange the alleles of n calls from it on: if draw < 0 the first of
    those within TIE of the most likely, else drawn in proportion to their
    likelihoods with draw, uniform in [0, 1) (first_row, second_row: each
    haplotype's forward values at the site before; weights and scales,
    blocks and block_scales, with shift, each haplotype's backward values
    as _rephase keeps them)."""
    logs = np.full(MAX_BLOCK + 2, -np.inf)  # keep, exchange on, blocks of 1 .. MAX_BLOCK
    logs[0] = np.log(_junction(first_row, weights[0], scales[0], shift, alleles, a, error, stay, jump)) + \
        np.log(_junction(second_row, weights[1], scales[1], shift, alleles, b, error, stay, jump))
    logs[1] = np.log(_junction(first_row, weights[1], scales[1], shift, alleles, b, error, stay, jump)) + \
        np.log(_junction(second_row, weights[0], scales[0], shift, alleles, a, error, stay, jump))
    for p in range(MAX_BLOCK):
        if p > 0 and not valid[p]:
            continue
        rows, row_scales = (weights, scales) if p == 0 else (blocks[p], block_scales[p])
        logs[p + 2] = np.log(_junction(first_row, rows[0], row_scales[0], shift, alleles, b, error, stay, jump)) + \
            np.log(_junction(second_row, rows[1], row_scales[1], shift, alleles, a, error, stay, jump))
        if p > 0:
            logs[p + 2] += offset[p, 0] + offset[p, 1]
    if draw < 0:
        return np.argmax(logs >= logs.max() - TIE) - 1
    weights = np.exp(logs - logs.max())
    cumulative = np.cumsum(weights)
    return np.searchsorted(cumulative, draw * cumulative[-1], side="right") - 1


@nb.njit(cache=True)
def _uniform(seed, a, b):
    """A uniform draw in [0, 1) from three integers (splitmix64's
    finaliser): the same for the same three on any thread."""
    x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(a) * np.uint64(0xBF58476D1CE4E5B9) + \
        np.uint64(b) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True, fastmath=FAST)
def _likelier_allele(forward_row, weights, scale, shift, alleles):
    """The allele (0/1) a haplotype more probably carries at a site where
    its forward values are forward_row and its backward values, before the
    site's emission, scale * weights + shift (the states' `alleles` there):
    ref unless alt is more probable by more than TIE (as _change's ties)."""
    alt, total = np.float32(0.0), np.float32(0.0)
    for s in range(len(weights)):
        p = forward_row[s] * (scale * weights[s] + shift)
        total += p
        if alleles[s] == 1:
            alt += p
    return np.int8(1) if np.log(alt) - np.log(total - alt) > TIE else np.int8(0)


@nb.njit(cache=True, fastmath=FAST)
def _rephase(state_alleles, haplotypes, genotypes, orientation, fills, jump_rate, error, seed):
    """Change orientation (in place) at the heterozygous calls after the
    first, right to left, each to the most likely of (seed >= 0: drawn in
    proportion to their likelihoods from) as it is; the two haplotypes
    exchanged from the call on; the alleles of the call and the next
    0 .. MAX_BLOCK - 1 heterozygous calls exchanged. Each missing call's
    two likelier alleles, as the round leaves the phase, into fills (one
    row a missing call, in site order). The changes made."""
    t, k = state_alleles.shape
    first = _forward(state_alleles, haplotypes[:, 0].copy(), jump_rate, error, 0, t)
    second = _forward(state_alleles, haplotypes[:, 1].copy(), jump_rate, error, 0, t)
    # each haplotype's backward values: scales * weights + shift, shift the same for all (ones at the last site)
    weights, scales, shift = np.ones((2, k), dtype=np.float32), np.ones(2, dtype=np.float32), np.float32(0.0)
    blocks, block_scales, offset, valid = _no_blocks(k)
    exchange_on = np.zeros(t, dtype=np.bool_)
    block_at = np.zeros(t, dtype=np.int64)  # calls exchanged from here
    hets = np.nonzero(genotypes == 1)[0]
    first_het = hets[0] if len(hets) else t
    missing = len(fills)
    for j in range(t - 1, 0, -1):
        a, b = haplotypes[j, 0], haplotypes[j, 1]
        stay, jump = np.float32(1.0 - jump_rate[j - 1]), np.float32(jump_rate[j - 1] / k)
        alleles = state_alleles[j]
        het = genotypes[j] == 1
        if het and j > first_het:
            draw = _uniform(seed, j, 0) if seed >= 0 else -1.0
            choice = _change(first[j - 1], second[j - 1], weights, scales, blocks, block_scales, shift, offset, valid,
                             alleles, a, b, error, stay, jump, draw)
            if choice >= 0:  # either change exchanges the call's alleles
                _take_change(choice, j, weights, scales, blocks, block_scales, offset, valid, exchange_on, block_at)
                a, b = b, a
        if het and MAX_BLOCK > 1:  # a block begins at every heterozygous call
            _begin_block(weights, scales, blocks, block_scales, offset, valid)
        if genotypes[j] < 0:  # before the changes to its left, which the toggles below carry
            missing -= 1
            fills[missing, 0] = _likelier_allele(first[j], weights[0], scales[0], shift, alleles)
            fills[missing, 1] = _likelier_allele(second[j], weights[1], scales[1], shift, alleles)
        first_call, second_call = (b, a) if het else (a, b)  # the blocks' alleles here
        main_first = _step_back(weights[0], scales[0], shift, alleles, a, error)
        main_second = _step_back(weights[1], scales[1], shift, alleles, b, error)
        for p in range(1, MAX_BLOCK):
            if valid[p]:
                block_first = _step_back(blocks[p, 0], block_scales[p, 0], shift, alleles, first_call, error)
                block_second = _step_back(blocks[p, 1], block_scales[p, 1], shift, alleles, second_call, error)
                offset[p, 0] += np.log(block_first) - np.log(main_first)
                offset[p, 1] += np.log(block_second) - np.log(main_second)
                block_scales[p, 0], block_scales[p, 1] = stay / block_first, stay / block_second
        scales[0], scales[1] = stay / main_first, stay / main_second
        shift = jump
    if missing:  # site 0
        fills[0, 0] = _likelier_allele(first[0], weights[0], scales[0], shift, state_alleles[0])
        fills[0, 1] = _likelier_allele(second[0], weights[1], scales[1], shift, state_alleles[0])
    _toggle(genotypes, hets, exchange_on, block_at, orientation, fills)
    return exchange_on.sum() + (block_at > 0).sum()


@nb.njit(cache=True, fastmath=FAST)
def _no_blocks(k):
    """(blocks, block_scales, offset, valid) of _rephase before any block
    has begun, over k states. blocks[p]: the backward values with the p
    calls passed since it began (and the call it is read at) exchanged,
    the rest as the haplotypes'; blocks[0] would be those themselves. Each
    is rescaled as it goes, by other factors than the haplotypes': their
    logs less those of the haplotypes' are kept in `offset`. valid[p]:
    whether blocks[p] holds one (none does after a block is exchanged)."""
    blocks = np.empty((MAX_BLOCK, 2, k), dtype=np.float32)
    block_scales = np.ones((MAX_BLOCK, 2), dtype=np.float32)
    offset = np.zeros((MAX_BLOCK, 2))
    valid = np.zeros(MAX_BLOCK, dtype=np.bool_)
    return blocks, block_scales, offset, valid


@nb.njit(cache=True, fastmath=FAST)
def _take_change(choice, j, weights, scales, blocks, block_scales, offset, valid, exchange_on, block_at):
    """Make _change's `choice` (0 or n > 0) at the heterozygous call j:
    record it in exchange_on or block_at, and carry on from the backward
    values it leaves (in place): the haplotypes' exchanged, each block's
    with them, for 0; block n's, no block begun any longer, for n."""
    if choice == 0:
        exchange_on[j] = True
        _swap_rows(weights)
        scales[0], scales[1] = scales[1], scales[0]
        for p in range(MAX_BLOCK):
            _swap_rows(blocks[p])
            block_scales[p, 0], block_scales[p, 1] = block_scales[p, 1], block_scales[p, 0]
            offset[p, 0], offset[p, 1] = offset[p, 1], offset[p, 0]
    else:
        block_at[j] = choice
        if choice > 1:
            weights[:] = blocks[choice - 1]
            scales[:] = block_scales[choice - 1]
        valid[:] = False


@nb.njit(cache=True, fastmath=FAST)
def _begin_block(weights, scales, blocks, block_scales, offset, valid):
    """At a heterozygous call, in place: each block passes the call with
    its alleles exchanged (block p becomes block p + 1, the last dropped),
    and a new one begins at it from the haplotypes' backward values."""
    for p in range(MAX_BLOCK - 1, 1, -1):
        blocks[p] = blocks[p - 1]
        block_scales[p] = block_scales[p - 1]
        offset[p] = offset[p - 1]
        valid[p] = valid[p - 1]
    blocks[1] = weights
    block_scales[1] = scales
    offset[1] = 0.0
    valid[1] = True


@nb.njit(cache=True)
def _toggle(genotypes, hets, exchange_on, block_at, orientation, fills):
    """Apply a round's changes to orientation and to the missing calls'
    fills, whose two alleles go with the heterozygous calls before them.
    Each change is relative to the phase the changes to its right left, so
    they add up: exchanges from a call on and exchanged blocks alike."""
    toggled = np.zeros(len(hets) + 1, dtype=np.int64)  # differences: toggled[i] flips calls hets[i:]
    for i in range(len(hets)):
        j = hets[i]
        if exchange_on[j]:
            toggled[i] += 1
        if block_at[j]:
            toggled[i] += 1
            toggled[min(len(hets), i + block_at[j])] += 1
    parity, i, m = 0, 0, 0
    for j in range(len(genotypes)):
        if i < len(hets) and hets[i] == j:
            parity += toggled[i]
            if parity % 2:
                orientation[j] = 1 - orientation[j]
            i += 1
        elif genotypes[j] < 0:
            if parity % 2:
                fills[m, 0], fills[m, 1] = fills[m, 1], fills[m, 0]
            m += 1


@nb.njit(cache=True, inline="always")
def _swap_rows(pair):
    """Exchange the two rows of pair (2, K) in place."""
    for s in range(pair.shape[1]):
        pair[0, s], pair[1, s] = pair[1, s], pair[0, s]


@nb.njit(cache=True, parallel=True)
def _phase_round(genotypes, orientation, fills, missing_at, forward_index, backward_index, haplotype_words,
                 jump_rate, error, neighbours, max_states, every, size, reverse, own_sample, seed):
    """One round over every target (genotypes (t, T) int8, orientation (t,
    T) int8, changed in place; the fills of target q's missing calls, rows
    missing_at[q]:missing_at[q + 1] of fills, written), target q copying
    no haplotype of sample own_sample[q] (-1: none), its sites in reverse
    order if `reverse`, drawing its changes if seed >= 0 (seed + q a
    target's); the changes made per target."""
    t, n_targets = genotypes.shape
    n_haplotypes = haplotype_words.shape[0]
    changes = np.zeros(n_targets, dtype=np.int64)
    reversed_rate = jump_rate[::-1].copy()  # the same for every target of a reversed round
    for group in nb.prange((n_targets + size - 1) // size):
        start, stop = group * size, min(n_targets, (group + 1) * size)
        queries = np.empty((t, 2 * (stop - start)), dtype=np.int8)
        excluded = np.empty(2 * (stop - start), dtype=np.int64)
        for q in range(start, stop):
            g = 2 * (q - start)
            queries[:, g:g + 2] = _haplotypes(genotypes[:, q], orientation[:, q])
            excluded[g] = excluded[g + 1] = own_sample[q]
        columns = np.arange(queries.shape[1])
        sightings = _sightings(forward_index, backward_index, queries, columns, neighbours, every, excluded)
        slot_of = np.full(n_haplotypes, -1, dtype=np.int32)
        capacity = 2 * sightings[0].size + max_states
        segment_buffer, heap = np.empty((4, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64)
        for q in range(start, stop):
            g = 2 * (q - start)
            both = np.concatenate((sightings[g], sightings[g + 1]), axis=1)
            segments, n_states = _composite_states(both, every, t, max_states, slot_of, segment_buffer, heap)
            state_alleles = _state_alleles(haplotype_words, segments, n_states, t)
            target_fills = fills[missing_at[q]:missing_at[q + 1]]
            if reverse:  # copies in reverse order; forwards the states' table is not copied
                column, reversed_fills = orientation[::-1, q].copy(), np.empty_like(target_fills)
                changes[q] = _rephase(state_alleles[::-1].copy(), queries[::-1, g:g + 2].copy(),
                                      genotypes[::-1, q].copy(), column, reversed_fills, reversed_rate, error,
                                      -1 if seed < 0 else seed + q)
                orientation[:, q] = column[::-1]
                target_fills[:] = reversed_fills[::-1]
            else:
                column = orientation[:, q].copy()
                changes[q] = _rephase(state_alleles, queries[:, g:g + 2].copy(), genotypes[:, q].copy(), column,
                                      target_fills, jump_rate, error, -1 if seed < 0 else seed + q)
                orientation[:, q] = column
    return changes


def phase_targets(haps: np.ndarray, packed: np.ndarray, n_haplotypes: int, kept: np.ndarray | None,
                  centimorgans: np.ndarray, settings: PhasingSettings = PhasingSettings(), progress=None) -> np.ndarray:
    """(T, 2S) int8 target alleles at T typed sites of one contig, each
    sample's heterozygous calls phased against the panel; every other cell
    (homozygous, missing, half-missing, haploid) as given.

    haps: (T, 2S) int8, haplotype h of sample s at column 2 s + h: 0/1,
    negative where missing or absent; the order of a heterozygous call's
    alleles is ignored. packed: (T, ceil(H / 8)) uint8 the panel's
    haplotypes at those sites (np.packbits' order), H = n_haplotypes, of
    which the columns `kept` ((H,) bool; None: all) are the reference.
    centimorgans: (T,) the sites' map positions. progress: called with a
    line per round."""
    haps = np.asarray(haps)
    first, second = haps[:, 0::2], haps[:, 1::2]
    genotypes = np.where((first >= 0) & (second >= 0), first + second, -1).astype(np.int8)
    if len(haps) < 2 or not ((genotypes == 1).sum(axis=0) >= 2).any():
        return haps.astype(np.int8, copy=True)
    reference, n_reference = _kept_columns(packed, n_haplotypes, kept)
    if n_reference == 0:
        raise ValueError("expected a reference of at least one haplotype; found none kept")
    announce_first_compile(_phase_round, "genimpute's phaser", 25)
    cm = np.maximum.accumulate(np.asarray(centimorgans, dtype=np.float64))
    site_cm = (cm[-1] - cm[0]) / (len(cm) - 1)
    orientation = _orientation(genotypes, reference, n_reference, np.diff(cm), settings.switch_cm(n_reference, site_cm),
                               settings, progress)
    het = genotypes == 1
    out = haps.astype(np.int8, copy=True)
    out[:, 0::2] = np.where(het, orientation, first)
    out[:, 1::2] = np.where(het, 1 - orientation, second)
    return out


def _kept_columns(packed: np.ndarray, n_haplotypes: int, kept: np.ndarray | None) -> tuple[np.ndarray, int]:
    """(packed rows of the `kept` haplotypes only, their number)."""
    if kept is None or kept.all():
        return np.ascontiguousarray(packed), n_haplotypes
    return _joined(packed, n_haplotypes, kept, None), int(kept.sum())


def _joined(packed: np.ndarray, n_haplotypes: int, kept: np.ndarray | None, extra: np.ndarray | None) -> np.ndarray:
    """Packed rows of packed's `kept` haplotypes (None: all), then extra's
    (T, E) 0/1 columns, unpacked a block of rows at a time: whole, a large
    panel's alleles over a dense array's sites, a byte each, would take
    more memory than the machine has."""
    blocks = []
    for start in range(0, len(packed), JOIN_ROWS):
        alleles = np.unpackbits(packed[start:start + JOIN_ROWS], axis=1, count=n_haplotypes)
        if kept is not None:
            alleles = alleles[:, kept]
        if extra is not None:
            alleles = np.concatenate((alleles, extra[start:start + JOIN_ROWS]), axis=1)
        blocks.append(np.packbits(alleles, axis=1))
    return np.concatenate(blocks)


def _orientation(genotypes: np.ndarray, reference: np.ndarray, n_reference: int, jump_cm: np.ndarray,
                 switch_cm: float, settings: PhasingSettings, progress) -> np.ndarray:
    """(t, T) int8 orientation of T targets' calls (genotypes (t, T) int8
    alt counts, -1 missing; 1 at a heterozygous call: its alt on the first
    haplotype) against the packed reference (t, ceil(n_reference / 8));
    jump_cm (t - 1,) the cM between neighbouring sites."""
    genotypes = np.ascontiguousarray(genotypes, dtype=np.int8)
    t, n_targets = genotypes.shape
    words = as_words(reference)[1]
    orientation = np.empty_like(genotypes)
    for q in range(n_targets):
        orientation[:, q] = _linkage_orientation(genotypes[:, q], words, n_reference)
    missing_at = np.concatenate(([0], np.cumsum((genotypes < 0).sum(axis=0))))
    fills = np.zeros((missing_at[-1], 2), dtype=np.int8)  # each missing call's likelier alleles, by target
    jump_rate = switch_probabilities(np.asarray(jump_cm, dtype=np.float64), switch_cm)
    size = max(1, selection_group(2 * n_targets, t, settings.neighbours, nb.get_num_threads()) // 2)
    for r in range(settings.rounds):
        started = time.monotonic()
        with_cohort = r >= settings.rounds - settings.cohort_rounds
        if with_cohort or r == 0:
            indexes = _indexes(reference, n_reference, _all_haplotypes(genotypes, orientation, fills, missing_at)
                               if with_cohort else None, settings.sight_every)
        own = n_reference // 2 + np.arange(n_targets, dtype=np.int64) if with_cohort \
            else np.full(n_targets, -1, dtype=np.int64)
        seed = (settings.seed * settings.rounds + r) * n_targets if r < settings.sampled_rounds else -1
        changes = _phase_round(genotypes, orientation, fills, missing_at, *indexes, jump_rate,
                               np.float32(settings.error), settings.neighbours, settings.states, settings.sight_every,
                               size, r % 2 == 1, own, seed)
        if progress:
            progress(f"phasing round {r + 1} of {settings.rounds}: {int(changes.sum())} changes, "
                     f"{time.monotonic() - started:.1f} s")
    return orientation


def _indexes(reference: np.ndarray, n_reference: int, cohort: np.ndarray | None, every: int) -> tuple:
    """(forward PBWT index, backward index, alleles by haplotype) of the
    packed reference, and of the cohort's (t, 2T) 0/1 haplotypes after it
    (None: the reference alone)."""
    if cohort is None:
        return *pbwt_indexes(reference, n_reference, every), _packed_by_haplotype(reference, n_reference)
    packed = _joined(reference, n_reference, None, cohort)
    total = n_reference + cohort.shape[1]
    return *pbwt_indexes(packed, total, every), _packed_by_haplotype(packed, total)


def _all_haplotypes(genotypes: np.ndarray, orientation: np.ndarray, fills: np.ndarray,
                    missing_at: np.ndarray) -> np.ndarray:
    """(t, 2T) uint8 the targets' haplotypes, each missing call's alleles
    its fills."""
    out = np.empty((genotypes.shape[0], 2 * genotypes.shape[1]), dtype=np.uint8)
    for q in range(genotypes.shape[1]):
        haplotypes = _haplotypes(genotypes[:, q], orientation[:, q])
        haplotypes[genotypes[:, q] < 0] = fills[missing_at[q]:missing_at[q + 1]]
        out[:, 2 * q:2 * q + 2] = haplotypes
    return out
