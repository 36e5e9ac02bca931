"""Allele harmonisation: which panel record each target record is, and how
its allele codes translate into the panel's.

Array data comes on either strand and with either allele as REF. A target
record at a panel record's position is matched when its alleles equal the
panel's (`match`), are swapped (`swap`: codes 0 and 1 exchanged), are the
complement (`flip`) or both (`flip+swap`). A/T and C/G SNPs look the same
on both strands, so for them the allele frequencies decide whether the codes
are exchanged, and a site too close to 50% to tell is dropped
(`palindromic-ambiguous`; also when the target has too few samples to
tell), unless the target's other SNPs show it is on the
panel's strand: then they are read as written. Each ALT of a multi-allelic
target record matches the panel's split record with the same REF and that
ALT, as written (`split`). Records at positions the panel lacks are
`not-in-panel`; records at a panel position whose alleles cannot be
reconciled are `allele-mismatch`; a second target record for a panel record
already matched is `duplicate`. Only matched records serve as evidence; the
others are passed through to the output unchanged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genimpute.io.contigs import normalise_contig
from genimpute.io.tsv import report_rows

MATCH, SWAP, FLIP, FLIP_SWAP = "match", "swap", "flip", "flip+swap"
PALINDROMIC_KEEP, PALINDROMIC_SWAP, PALINDROMIC_AMBIGUOUS = "palindromic-keep", "palindromic-swap", "palindromic-ambiguous"
SPLIT = "split"
NOT_IN_PANEL, ALLELE_MISMATCH, DUPLICATE = "not-in-panel", "allele-mismatch", "duplicate"
SWAPPED = {SWAP, FLIP_SWAP, PALINDROMIC_SWAP}  # decisions that exchange allele codes 0 and 1
USED = {MATCH, SWAP, FLIP, FLIP_SWAP, PALINDROMIC_KEEP, PALINDROMIC_SWAP, SPLIT}  # the record is evidence

# A/T or C/G SNPs with a panel minor allele frequency above this are too
# close to 50% for the target's frequency to tell the strand
PALINDROMIC_MAX_MAF = 0.4
PALINDROMIC_MIN_ODDS = 1000  # and one reading at least this many times likelier than the other
# a target whose other SNPs needed no strand flip (up to this share, for a
# few odd sites) is on the panel's strand, and its palindromes are read as written
MAX_FLIPPED_SHARE = 0.001
_MIN_SNPS_FOR_STRAND = 20

_COMPLEMENT = str.maketrans("ACGT", "TGCA")
_NUCLEOTIDES = set("ACGT")


def _is_snp(*alleles: str) -> bool:
    return all(len(a) == 1 and a in _NUCLEOTIDES for a in alleles)


def _complement(allele: str) -> str:
    return allele.translate(_COMPLEMENT)


def classify(ref: str, alt: str, panel_ref: str, panel_alt: str) -> str | None:
    """How target alleles (ref, alt) relate to a panel record's; alt "." (a
    site monomorphic in the target) matches any ALT. None when they cannot
    be reconciled. Palindromic SNPs come back as PALINDROMIC_AMBIGUOUS, for
    the caller to decide by allele frequency."""
    ref, alt, pref, palt = ref.upper(), alt.upper(), panel_ref.upper(), panel_alt.upper()
    if _is_snp(pref, palt) and _complement(pref) == palt:
        if {ref, alt} <= {pref, palt, "."} and ref != alt:
            return PALINDROMIC_AMBIGUOUS
        return None

    def same(a, b):
        return a == b or a == "."

    if ref == pref and same(alt, palt):
        return MATCH
    if ref == palt and same(alt, pref):
        return SWAP
    if _is_snp(ref, pref, palt) and (alt == "." or _is_snp(alt)):
        ref_c, alt_c = _complement(ref), _complement(alt) if alt != "." else "."
        if ref_c == pref and same(alt_c, palt):
            return FLIP
        if ref_c == palt and same(alt_c, pref):
            return FLIP_SWAP
    return None


def palindromic_decision(target_alt_freq: float, n_alleles: int, panel_alt_freq: float) -> str:
    """Keep or exchange the codes of an A/T or C/G SNP: whichever makes the
    target's `n_alleles` called alleles likelier under the panel's allele
    frequency, when one is at least PALINDROMIC_MIN_ODDS times likelier."""
    f = min(max(panel_alt_freq, 1e-3), 1 - 1e-3)
    if min(f, 1 - f) > PALINDROMIC_MAX_MAF or n_alleles == 0:
        return PALINDROMIC_AMBIGUOUS
    # log-likelihood ratio of "codes as the panel's" over "codes exchanged"
    alt = target_alt_freq * n_alleles
    llr = (alt - (n_alleles - alt)) * (np.log(f) - np.log(1 - f))
    if abs(llr) < np.log(PALINDROMIC_MIN_ODDS):
        return PALINDROMIC_AMBIGUOUS
    return PALINDROMIC_KEEP if llr > 0 else PALINDROMIC_SWAP


@dataclass(frozen=True)
class SiteDecision:
    target_row: int
    panel_row: int  # the panel record it was compared with; -1 when none
    decision: str
    alt_index: int  # target allele index that is the panel's ALT, unless the decision swaps codes
    detail: str = ""

    @property
    def used(self) -> bool:
        return self.decision in USED


def _alt_freq(alleles: np.ndarray) -> tuple[float, int]:
    """Alt allele frequency among the called alleles, and their number."""
    called = alleles[alleles >= 0]
    return (float((called > 0).mean()) if len(called) else float("nan")), len(called)


def harmonise(panel, target) -> list[SiteDecision]:
    """One or more decisions per target record (one per ALT of a multi-allelic
    record), in target order; panel: genimpute.panel.ReferencePanel,
    target: genimpute.io.vcf_reader.TargetData."""
    decisions = []
    recs = target.records
    for t, (candidates, ref, alts) in enumerate(zip(_panel_rows_at(panel, recs), recs.refs, recs.alts)):
        if not candidates:
            decisions.append(SiteDecision(t, -1, NOT_IN_PANEL, 0))
            continue
        alt_list = alts.split(",")
        found = []
        if len(alt_list) == 1:
            found = _biallelic(t, ref, alt_list[0], candidates, panel)
        else:
            # as written only: an A/T or C/G ALT is as plain a match here as any other
            for i, alt in enumerate(alt_list, start=1):
                found += [SiteDecision(t, p, SPLIT, i) for p in candidates
                          if (ref.upper(), alt.upper()) == (panel.refs[p].upper(), panel.alts[p].upper())]
        if not found:
            seen = ", ".join(f"{panel.refs[p]}>{panel.alts[p]}" for p in candidates)
            decisions.append(SiteDecision(t, -1, ALLELE_MISMATCH, 0, f"panel has {seen}"))
        decisions += found
    return _mark_duplicates(_resolve_palindromes(decisions, panel, target))


def _panel_rows_at(panel, records) -> list[list[int]]:
    """Per target record, the panel records at its contig and position, in
    panel order: searched in each contig's sorted positions, where a table
    of every panel record's position took most of a chromosome's harmonising."""
    keys = np.array([normalise_contig(c) for c in panel.contig_names], dtype=object)
    target_keys = np.array([normalise_contig(c) for c in records.contigs], dtype=object)
    found: list[list[int]] = [[] for _ in range(len(records))]
    for key in set(target_keys.tolist()) & set(keys.tolist()):
        rows = np.flatnonzero(np.isin(panel.contig_index, np.flatnonzero(keys == key)))
        rows = rows[np.argsort(panel.positions[rows], kind="stable")]
        positions = panel.positions[rows]
        mine = np.flatnonzero(target_keys == key)
        low = np.searchsorted(positions, records.positions[mine], side="left")
        high = np.searchsorted(positions, records.positions[mine], side="right")
        for t, lo, hi in zip(mine.tolist(), low.tolist(), high.tolist()):
            found[t] = rows[lo:hi].tolist()
    return found


def recode_rows(alleles: np.ndarray, rows: np.ndarray, decisions: list[SiteDecision], block: int = 4096) -> np.ndarray:
    """(len(rows), 2S) int8: target rows `rows` of alleles (M, 2S), allele
    indices -> panel codes 0/1 by each one's decision; negative codes
    (missing, absent) stay as they are. A block of rows at a time: a
    cohort's (M, 2S) is not copied whole by each step."""
    out = np.empty((len(rows), alleles.shape[1]), dtype=np.int8)
    swapped = np.array([d.decision in SWAPPED for d in decisions], dtype=bool)  # the target's REF is the panel's ALT
    alt_index = np.array([d.alt_index for d in decisions], dtype=np.int16)
    for start in range(0, len(rows), block):
        part, at = alleles[rows[start:start + block]], slice(start, start + block)
        panel_alt = np.where(swapped[at, None], part == 0, part == alt_index[at, None])
        out[at] = np.where(part >= 0, panel_alt, part)
    return out


def _mark_duplicates(decisions: list) -> list[SiteDecision]:
    """A panel record serves as evidence once: for the first target record matched to it."""
    used, marked = set(), []
    for d in decisions:
        if d.used and d.panel_row in used:
            d = SiteDecision(d.target_row, d.panel_row, DUPLICATE, 0, "an earlier target record matched this panel record")
        elif d.used:
            used.add(d.panel_row)
        marked.append(d)
    return marked


def _biallelic(t, ref, alt, candidates, panel) -> list[SiteDecision]:
    """The decision for a biallelic target record against the best candidate
    panel record (exact before swapped before flipped); palindromes are left
    PALINDROMIC_AMBIGUOUS until the target's strand is known."""
    order = (MATCH, SWAP, FLIP, FLIP_SWAP, PALINDROMIC_AMBIGUOUS)
    ranked = sorted((order.index(c), p, c) for p in candidates
                    if (c := classify(ref, alt, panel.refs[p], panel.alts[p])) is not None)
    if not ranked:
        return []
    _, p, decision = ranked[0]
    return [SiteDecision(t, p, decision, 1)]


def _resolve_palindromes(decisions: list, panel, target) -> list[SiteDecision]:
    """A/T and C/G SNPs: read as written when the target's other SNPs show
    it is on the panel's strand (at least 20 of them, at most 0.1% needing a
    flip); otherwise keep or swap codes by allele frequency, and drop those
    too close to 50%."""
    def snp(d):  # indels never flip, so they say nothing of the strand
        return len(panel.refs[d.panel_row]) == 1 and len(panel.alts[d.panel_row]) == 1

    direct = sum(d.decision in (MATCH, SWAP) and snp(d) for d in decisions)
    flipped = sum(d.decision in (FLIP, FLIP_SWAP) for d in decisions)
    same_strand = direct >= _MIN_SNPS_FOR_STRAND and flipped <= MAX_FLIPPED_SHARE * (direct + flipped)
    resolved = []
    for d in decisions:
        if d.decision == PALINDROMIC_AMBIGUOUS:
            t, p = d.target_row, d.panel_row
            target_af, n_alleles = _alt_freq(target.alleles[t])
            detail = f"target alt freq {target_af:.3f} of {n_alleles} alleles, panel alt freq {panel.alt_freq[p]:.3f}"
            if same_strand:
                as_written = target.records.refs[t].upper() == panel.refs[p].upper()
                decision = PALINDROMIC_KEEP if as_written else PALINDROMIC_SWAP
                detail += f"; read as written: no strand flip among the target's {direct + flipped} other SNPs"
            else:
                decision = palindromic_decision(target_af, n_alleles, float(panel.alt_freq[p]))
            d = SiteDecision(t, p, decision, d.alt_index, detail)
        resolved.append(d)
    return resolved


def summarise(decisions: list[SiteDecision]) -> Counter:
    return Counter(d.decision for d in decisions)


def write_audit(path: str | Path, decisions: list[SiteDecision], panel, target) -> None:
    """Per-site audit TSV: one line per decision."""
    recs = target.records
    header = ["chrom", "pos", "target_ref", "target_alt", "panel_id", "panel_ref", "panel_alt", "decision", "detail"]
    with report_rows(path, header) as out:
        for d in decisions:
            t, p = d.target_row, d.panel_row
            panel_cols = [panel.ids[p], panel.refs[p], panel.alts[p]] if p >= 0 else [".", ".", "."]
            out.writerow([recs.contigs[t], int(recs.positions[t]), recs.refs[t], recs.alts[t], *panel_cols, d.decision, d.detail])
