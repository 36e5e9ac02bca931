"""Which target samples are panel samples: by name, or by genotypes that
agree as a duplicate's would over a span long enough to tell a duplicate from
a relative sharing a region. Such samples must not copy their own panel
haplotypes, which would hand them their truth."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from genimpute.io.tsv import report_rows
from genimpute.panel import Alignment, ReferencePanel

log = logging.getLogger(__name__)


# A target sample whose genotypes agree with a panel sample's at this share
# of the typed sites where either carries an alt allele, over at least
# _MIN_SITES_FOR_IDENTITY such sites, may be the same person. Unrelated
# samples agree at far lower shares (see docs/results.md); over fewer sites,
# haplotypes shared in LD make strangers look alike.
IDENTITY_CONCORDANCE = 0.98
_MIN_SITES_FOR_IDENTITY = 100
# It is decided to be the same person only when the typed sites span at least
# this much (summed over contigs): a relative, or in a large panel a stranger,
# who shares both haplotypes over a region agrees there as well as the same
# person does (in the simulated series some targets agreed so with another
# panel sample over a short region; see docs/results.md). Over a whole chromosome such
# agreement means a duplicate, not a relative's shared segment; over less,
# the sample is only reported, and the panel sample kept as its template.
MIN_IDENTITY_SPAN_BP = 20_000_000

# Genotypes are compared in blocks of this many typed sites, 2 bits a site in
# a uint32 code; a sample agreeing at >= 98% of its sites differs in at most
# 2% of them, so it shares the codes of most of the blocks (with 16 sites a
# block, of at least two in three).
_BLOCK_SITES = 16
_LOW_BITS = 0x55555555  # the low bit of each site's two
_NEAREST = 32  # the samples sharing most blocks also compared site by site, for the closest of a non-duplicate
# A block whose code more than this share of the panel carries (the all-REF
# code of a block of rare sites) is not counted, once enough blocks are: it
# tells little of who the sample is, and at 100,000 panel samples the few
# commonest codes were most of the samples met, and of the search's time.
_COMMON_CODE_SHARE = 1 / 64
_CODE_CHUNK = 64  # blocks of panel sites, or target samples, coded at a time
_SEARCH_GROUP = 64  # target samples one thread searches the panel for, reusing its counts


@dataclass(frozen=True)
class PanelMatches:
    """What was found of S target samples in the panel: by name, and the
    closest panel sample by genotypes at the typed sites (-1: none with
    _MIN_SITES_FOR_IDENTITY informative sites), its informative sites and
    the share of them where the two agree. The closest is exact whenever it
    agrees as a duplicate's would; otherwise it is the closest of the
    samples sharing the most blocks of genotypes (_closest_by_blocks)."""

    by_name: np.ndarray  # (S,) int64 panel sample of the same name, -1 none
    closest: np.ndarray  # (S,) int64
    informative: np.ndarray  # (S,) int64 sites where either carries an alt allele
    concordance: np.ndarray  # (S,) float64
    span_bp: int  # the typed sites' span, summed over contigs

    @property
    def identical(self) -> np.ndarray:
        """(S,) bool: genotypes agree with the closest panel sample's as a duplicate's would."""
        return (self.closest >= 0) & (self.concordance >= IDENTITY_CONCORDANCE)

    @property
    def decidable(self) -> bool:
        return self.span_bp >= MIN_IDENTITY_SPAN_BP

    @property
    def in_panel(self) -> np.ndarray:
        """(S,) the panel sample each target sample is, -1 for none: by name,
        else by identical genotypes when the typed sites span enough."""
        by_genotypes = np.where(self.identical & self.decidable, self.closest, -1)
        return np.where(self.by_name >= 0, self.by_name, by_genotypes)

    @property
    def possible_duplicates(self) -> np.ndarray:
        """(S,) bool: identical genotypes over too short a span to call them the same sample."""
        return (self.by_name < 0) & self.identical & (not self.decidable)

    def decision(self, s: int) -> str:
        if self.by_name[s] >= 0:
            return "same name"
        if self.identical[s]:
            return "identical genotypes" if self.decidable else "identical genotypes, span too short: kept"
        return "not in panel"


def samples_in_panel(panel: ReferencePanel, aln: Alignment, target_samples: list) -> PanelMatches:
    """Each target sample's panel sample of the same name and its closest
    panel sample by genotypes at the typed sites. The panel's genotypes are
    coded in blocks of _BLOCK_SITES sites and sorted block by block, so a
    target sample meets only the samples that share its blocks, not all N
    (comparing every pair cost (S x T) by (T x N) products, the one cost per
    target that grew with the panel)."""
    by_name = {name: i for i, name in enumerate(panel.samples)}
    codes_by_block = _panel_codes(panel, aln.panel_rows)  # (blocks, N)
    order, sorted_codes = _sorted_by_code(codes_by_block)  # each block's samples by code
    codes = np.ascontiguousarray(codes_by_block.T)  # (N, blocks)
    target_codes, target_called = _target_codes(aln.haplotypes)
    all_called = _pack_blocks(np.ones((len(aln.panel_rows), 1), dtype=np.uint8))[:, 0]
    closest, informative, agree = _closest_by_blocks(target_codes, target_called, all_called, codes, sorted_codes,
                                                     order, 1.0 - IDENTITY_CONCORDANCE, _MIN_SITES_FOR_IDENTITY,
                                                     _NEAREST)
    return PanelMatches(by_name=np.array([by_name.get(name, -1) for name in target_samples], dtype=np.int64),
                        closest=closest, informative=informative,
                        concordance=agree / np.maximum(informative, 1), span_bp=_typed_span(panel, aln))


def sample_audit_path(audit: str | Path) -> Path:
    """Where --report AUDIT's per-sample decisions go: AUDIT.tsv -> AUDIT.samples.tsv."""
    audit = Path(audit)
    stem = audit.name[:-len(".tsv")] if audit.name.endswith(".tsv") else audit.name
    return audit.with_name(f"{stem}.samples.tsv")


def write_sample_audit(path: Path, matches: PanelMatches, panel_samples: list, target_samples: list) -> None:
    """Per-sample TSV: what was decided of each target sample being a panel
    sample, with the closest panel sample by genotypes and the evidence."""
    header = ["sample", "decision", "panel_sample", "closest_by_genotypes", "informative_sites", "concordance",
              "typed_span_mb"]
    with report_rows(path, header) as out:
        in_panel = matches.in_panel
        for s, name in enumerate(target_samples):
            closest = matches.closest[s]
            out.writerow([name, matches.decision(s), panel_samples[in_panel[s]] if in_panel[s] >= 0 else ".",
                          panel_samples[closest] if closest >= 0 else ".", int(matches.informative[s]),
                          f"{matches.concordance[s]:.4f}", f"{matches.span_bp / 1e6:.2f}"])


def _panel_codes(panel: ReferencePanel, rows: np.ndarray) -> np.ndarray:
    """(blocks, N) uint32: each panel sample's alt allele counts at the
    typed sites, read _CODE_CHUNK blocks of sites at a time from the packed
    panel and coded from its bytes (_code_packed; unpacking the haplotypes
    and packing the codes in numpy took many times as long in a large
    panel)."""
    n_blocks = -(-len(rows) // _BLOCK_SITES)
    codes = np.zeros((n_blocks, panel.n_haplotypes // 2), dtype=np.uint32)
    for first in range(0, n_blocks, _CODE_CHUNK):
        sites = rows[first * _BLOCK_SITES:(first + _CODE_CHUNK) * _BLOCK_SITES]
        _code_packed(np.ascontiguousarray(panel.packed[sites]), codes[first:first + _CODE_CHUNK])
    return codes


# the alt allele counts of the four samples a byte of packed haplotypes holds (np.packbits' order: the first highest)
_COUNTS_IN_BYTE = np.array([[(value >> (7 - 2 * m) & 1) + (value >> (6 - 2 * m) & 1) for m in range(4)]
                            for value in range(256)], dtype=np.uint32)


@nb.njit(cache=True, parallel=True)
def _code_packed(packed, out):
    """out (blocks, N) |= the codes of packed (sites, W) records, haplotypes
    2s and 2s + 1 sample s's: its alt allele count at site j in bits
    2 (j % _BLOCK_SITES) of block j // _BLOCK_SITES. A thread takes a block."""
    n_samples = out.shape[1]
    for b in nb.prange(out.shape[0]):
        for j in range(_BLOCK_SITES * b, min(len(packed), _BLOCK_SITES * (b + 1))):
            shift = np.uint32(2 * (j - _BLOCK_SITES * b))
            for i in range(packed.shape[1]):
                value = packed[j, i]
                for m in range(min(4, n_samples - 4 * i)):
                    out[b, 4 * i + m] |= _COUNTS_IN_BYTE[value, m] << shift


def _sorted_by_code(codes_by_block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, sorted codes) (blocks, N): each block's samples stably sorted
    by their code (int32), and their codes in that order (_radix_sort)."""
    order = np.empty(codes_by_block.shape, dtype=np.int32)
    sorted_codes = np.empty_like(codes_by_block)
    _radix_sort(codes_by_block, order, sorted_codes)
    return order, sorted_codes


@nb.njit(cache=True, parallel=True)
def _radix_sort(codes_by_block, order, sorted_codes):
    """Each block's row of codes sorted stably by two passes of a radix
    sort, on their low 16 bits then their high ones: order[b] the samples,
    sorted_codes[b] their codes. numpy's stable argsort of uint32 (a merge
    sort) was slower in a large panel, and its int64 result takes twice the
    codes' bytes. A thread takes a block."""
    n = codes_by_block.shape[1]
    for b in nb.prange(codes_by_block.shape[0]):
        codes, by_low = codes_by_block[b], np.empty(n, dtype=np.int32)
        starts = _bucket_starts(codes, 0)
        for i in range(n):
            k = codes[i] & 0xFFFF
            by_low[starts[k]] = i
            starts[k] += 1
        starts = _bucket_starts(codes, 16)
        for i in range(n):
            sample = by_low[i]
            k = codes[sample] >> 16
            order[b, starts[k]] = sample
            sorted_codes[b, starts[k]] = codes[sample]
            starts[k] += 1


@nb.njit(cache=True)
def _bucket_starts(codes, shift):
    """(65,536,) where each value of the 16 bits of codes from `shift` up starts, its codes sorted by them."""
    starts = np.zeros(1 << 16, dtype=np.int64)
    for code in codes:
        starts[(code >> shift) & 0xFFFF] += 1
    total = 0
    for k in range(1 << 16):
        starts[k], total = total, total + starts[k]
    return starts


def _target_codes(haplotypes: np.ndarray) -> tuple:
    """(S, blocks) uint32 codes of each target sample's alt allele counts at
    the typed sites (0 where not called), and of which sites are called
    (the low bit of each site's two); _CODE_CHUNK samples at a time, so a
    cohort's (T, S) intermediates are never held whole."""
    n_samples = haplotypes.shape[1] // 2
    codes, called_codes = (np.zeros((n_samples, -(-len(haplotypes) // _BLOCK_SITES)), dtype=np.uint32)
                           for _ in range(2))
    for first in range(0, n_samples, _CODE_CHUNK):
        chunk = haplotypes[:, 2 * first:2 * (first + _CODE_CHUNK)]
        called = (chunk[:, 0::2] >= 0) & (chunk[:, 1::2] >= 0)  # diploid calls
        codes[first:first + _CODE_CHUNK] = _pack_blocks(np.where(called, _dosage(chunk), 0)).T
        called_codes[first:first + _CODE_CHUNK] = _pack_blocks(called.astype(np.uint8)).T
    return codes, called_codes


def _dosage(haplotypes: np.ndarray) -> np.ndarray:
    """(T, 2S) alleles -> (T, S) uint8 alt allele counts (meaningless where not called)."""
    return (haplotypes[:, 0::2] + haplotypes[:, 1::2]).astype(np.uint8)


def _pack_blocks(values: np.ndarray) -> np.ndarray:
    """(T, X) values of 0-3 -> (ceil(T / _BLOCK_SITES), X) uint32, two bits
    a site; the sites past the last are 0."""
    codes = np.zeros((-(-len(values) // _BLOCK_SITES), values.shape[1]), dtype=np.uint32)
    for k in range(_BLOCK_SITES):
        site_k = values[k::_BLOCK_SITES]  # the k-th site of each block
        codes[:len(site_k)] |= site_k.astype(np.uint32) << np.uint32(2 * k)
    return codes


@nb.njit(cache=True, inline="always")
def _nonzero_sites(x) -> int:
    """How many of the 2-bit sites of code x are nonzero."""
    x = np.uint64(x)
    x = (x | (x >> np.uint64(1))) & np.uint64(_LOW_BITS)
    x = (x & np.uint64(0x33333333)) + ((x >> np.uint64(2)) & np.uint64(0x33333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F)
    return int((x * np.uint64(0x01010101)) >> np.uint64(24)) & 0xFF


@nb.njit(cache=True)
def _agreement(target: np.ndarray, called: np.ndarray, panel: np.ndarray) -> tuple:
    """Over the called sites: those where either carries an alt allele, and
    those where both carry the same number of them."""
    informative = 0
    differ = 0
    for j in range(len(target)):
        mask = np.uint64(called[j]) * np.uint64(3)
        informative += _nonzero_sites((np.uint64(target[j]) | np.uint64(panel[j])) & mask)
        differ += _nonzero_sites((np.uint64(target[j]) ^ np.uint64(panel[j])) & mask)
    return informative, informative - differ


@nb.njit(cache=True, parallel=True)
def _closest_by_blocks(target_codes, target_called, all_called, codes, sorted_codes, order, max_discordance,
                       min_sites, nearest):
    """For each target sample: the panel sample whose genotypes agree with
    its own at the largest share of at least min_sites informative sites
    (either carries an alt allele; -1: none), those sites and the agreeing
    ones. A sample agreeing at >= 1 - max_discordance of them differs in at
    most that share of the called sites, so it shares the codes of all but
    that many of the target's fully called blocks (all_called: each block's
    code with every site called) that are counted (_share_blocks): only
    such samples, and the `nearest` sharing the most, are compared site by
    site (every sample when fewer share a block). Exact for any sample that
    agrees as a duplicate's would; for the others, the closest of those
    compared. Groups of target samples run in parallel, each with its own
    counts: no sample's answer depends on another's."""
    n_targets = target_codes.shape[0]
    n_panel = codes.shape[0]
    closest = np.full(n_targets, -1, dtype=np.int64)
    informative = np.zeros(n_targets, dtype=np.int64)
    agree = np.zeros(n_targets, dtype=np.int64)
    for group in nb.prange((n_targets + _SEARCH_GROUP - 1) // _SEARCH_GROUP):
        shared = np.zeros(n_panel, dtype=np.int32)  # blocks shared with the target sample
        touched = np.empty(n_panel, dtype=np.int64)  # the samples sharing any, in the order first met
        for s in range(group * _SEARCH_GROUP, min(n_targets, (group + 1) * _SEARCH_GROUP)):
            closest[s], informative[s], agree[s] = _closest_one(
                target_codes[s], target_called[s], all_called, codes, sorted_codes, order, max_discordance,
                min_sites, nearest, shared, touched)
    return closest, informative, agree


@nb.njit(cache=True)
def _closest_one(target, called, all_called, codes, sorted_codes, order, max_discordance, min_sites, nearest,
                 shared, touched) -> tuple:
    """_closest_by_blocks for one target sample: (closest, informative
    sites, agreeing sites); shared (all 0) and touched are scratch, left so."""
    n_blocks, n_panel = len(target), codes.shape[0]
    called_sites = 0
    for j in range(n_blocks):
        called_sites += _nonzero_sites(called[j])
    differing = int(max_discordance * called_sites)  # at most this many blocks a duplicate does not share
    n_touched, counted = _share_blocks(target, called, all_called, sorted_codes, order, 2 * (differing + 1),
                                       max(nearest, int(_COMMON_CODE_SHARE * n_panel)), nearest, shared, touched)
    least_shared = min(counted - differing - 1, _fewest_shared_by_nearest(shared, touched[:n_touched], n_blocks,
                                                                          nearest))
    # too few whole blocks to rule any sample out, or too few samples sharing any: compare every sample
    everyone = least_shared <= 0 or n_touched < nearest
    best_share, closest, best_sites, best_agreeing = -1.0, -1, 0, 0
    for i in range(n_panel if everyone else n_touched):
        p = i if everyone else touched[i]
        if everyone or shared[p] >= least_shared:
            sites, agreeing = _agreement(target, called, codes[p])
            share = agreeing / max(sites, 1)
            if sites >= min_sites and (share > best_share or (share == best_share and p < closest)):
                best_share, closest, best_sites, best_agreeing = share, p, sites, agreeing
    shared[touched[:n_touched]] = 0
    return closest, best_sites, best_agreeing


@nb.njit(cache=True)
def _share_blocks(target, called, all_called, sorted_codes, order, fewest_blocks, common, nearest, shared,
                  touched) -> tuple:
    """Counts in `shared` the blocks each panel sample shares with the
    target (found by binary search of each block's sorted codes) among the
    target's fully called blocks, the rarest codes first: every block whose
    code at most `common` panel samples carry, and commoner ones only until
    `fewest_blocks` are counted and `nearest` samples met. A duplicate
    differing in d blocks shares all but at most d of those counted, as of
    all. Lists in `touched` the samples sharing any; returns how many those
    are, and how many blocks were counted."""
    n_blocks = len(target)
    first = np.zeros(n_blocks, dtype=np.int64)
    sharers = np.full(n_blocks, np.iinfo(np.int64).max)  # blocks not fully called last, never counted
    whole = 0
    for j in range(n_blocks):
        if called[j] == all_called[j]:
            first[j] = np.searchsorted(sorted_codes[j], target[j], side="left")
            sharers[j] = np.searchsorted(sorted_codes[j], target[j], side="right") - first[j]
            whole += 1
    n_touched, counted = 0, 0
    for j in np.argsort(sharers, kind="mergesort")[:whole]:
        if sharers[j] > common and counted >= fewest_blocks and n_touched >= nearest:
            break
        counted += 1
        for i in range(first[j], first[j] + sharers[j]):
            p = order[j, i]
            if shared[p] == 0:
                touched[n_touched] = p
                n_touched += 1
            shared[p] += 1
    return n_touched, counted


@nb.njit(cache=True)
def _fewest_shared_by_nearest(shared, touched, n_blocks, nearest) -> int:
    """The most blocks that at least `nearest` of the touched samples share
    (1 when fewer are touched)."""
    at_least = np.zeros(n_blocks + 2, dtype=np.int64)
    for p in touched:
        at_least[shared[p]] += 1
    blocks = n_blocks + 1
    while blocks > 1 and at_least[blocks] < nearest:
        at_least[blocks - 1] += at_least[blocks]
        blocks -= 1
    return blocks


def _typed_span(panel: ReferencePanel, aln: Alignment) -> int:
    """Base pairs from the first to the last typed site of each contig, summed."""
    contig = panel.contig_index[aln.panel_rows]
    positions = panel.positions[aln.panel_rows].astype(np.int64)
    return int(sum(positions[contig == c].max() - positions[contig == c].min() for c in np.unique(contig)))


def report_samples_in_panel(panel: ReferencePanel, aln: Alignment, target_samples: list, audit) -> PanelMatches:
    """The target samples found in the panel, whose own haplotypes would hand
    them their truth (they are left out of their context), logged; with
    `audit`, each sample's decision goes to its samples file."""
    matches = samples_in_panel(panel, aln, target_samples)
    in_panel = matches.in_panel
    shared = [f"{target_samples[s]} (= panel {panel.samples[p]})" for s, p in enumerate(in_panel) if p >= 0]
    if shared:
        log.warning("%d target samples are in the reference panel: %s; their own panel haplotypes are left out of "
                    "their context", len(shared), _first_few(shared))
    possible = [f"{target_samples[s]} (~ panel {panel.samples[matches.closest[s]]})"
                for s in np.nonzero(matches.possible_duplicates)[0]]
    if possible:
        log.warning("%d target samples have the genotypes of a panel sample at >= %.0f%% of the typed sites where "
                    "either carries an alt allele: %s; over %.1f Mb of typed sites (less than %d Mb) a relative "
                    "sharing the region agrees as well, so they are kept as templates", len(possible),
                    100 * IDENTITY_CONCORDANCE, _first_few(possible), matches.span_bp / 1e6,
                    MIN_IDENTITY_SPAN_BP // 1_000_000)
    if audit is not None:
        write_sample_audit(sample_audit_path(audit), matches, panel.samples, target_samples)
    return matches


def _first_few(names: list) -> str:
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
