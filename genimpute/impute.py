"""Streaming imputation: one window (or copying-engine segment) at a time,
the target samples in batches, records written in order as soon as they
are known."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from genimpute import __version__
from genimpute.config import CopyingSettings
from genimpute.copying import ContigModel
from genimpute.errors import InputError
from genimpute.identity import (IDENTITY_CONCORDANCE, MIN_IDENTITY_SPAN_BP, PanelMatches, sample_audit_path,
                                samples_in_panel, write_sample_audit)
from genimpute.io.contigs import normalise_contig
from genimpute.io.genetic_map import CM_PER_BP
from genimpute.io.vcf_reader import ABSENT, MISSING, TargetData, read_target
from genimpute.io.spool import ColumnSpool
from genimpute.io.vcf_writer import ColumnText, DosageSums, FormatFields, VcfWriter, genotype_columns
from genimpute.panel import Alignment, ReferencePanel, align_target, read_reference
from genimpute.regions import Region
from genimpute.windows import plan_windows, typed_record_windows

log = logging.getLogger(__name__)

# kinds of output record
_TYPED, _IMPUTED, _PASSED = 0, 1, 2


@dataclass
class _Contig:
    key: str
    name: str  # as the target writes it
    panel_index: int | None  # None when the panel lacks this contig


@dataclass
class _ModelSource:
    """The model directory's model, loaded on first use: a copying run with
    a reference panel given never needs it, nor torch (1.3 s to import here)."""

    model_dir: Path
    panel: ReferencePanel | None  # None: the directory's own
    device_name: object  # a torch.device, or a name for runtime.pick_device
    device: object = None  # the torch.device, once loaded
    _loaded: object = None

    def loaded(self):
        if self._loaded is None:
            from genimpute.modeldir import load_model_dir
            from genimpute.runtime import pick_device

            self._loaded = load_model_dir(self.model_dir, self.panel)
            device = pick_device(self.device_name) if isinstance(self.device_name, str) else self.device_name
            self._loaded.model.to(device)
            self.device = device
        return self._loaded

    def model(self):
        """(model on its device, window settings, device)."""
        loaded = self.loaded()
        return loaded.model, loaded.config.window, self.device


@dataclass(frozen=True)
class _Chunk:
    """A run of output records formatted together: panel records (typed and
    imputed) or passed-through target records, never both."""

    rows: np.ndarray  # (E,) panel records, or target records if passed
    typed: np.ndarray | None  # (E,) bool of panel records; None for passed-through target records

    @property
    def passed(self) -> bool:
        return self.typed is None


@dataclass(frozen=True)
class _Part:
    """A chunk's output for one batch of samples: their columns and their
    share of the INFO sums (None for passed-through records)."""

    columns: ColumnText | None  # None once spooled
    sums: DosageSums | None = None
    missing_calls: np.ndarray | None = None  # (E,) typed calls without a call in the target, filled in

    def __add__(self, other: _Part) -> _Part:
        """The INFO sums of both; the columns of neither (they are spooled)."""
        if self.sums is None:
            return self
        return _Part(self.columns, self.sums + other.sums, self.missing_calls + other.missing_calls)


# about this many calls are formatted at once, whatever the cohort size
_CALLS_PER_CHUNK = 1_000_000


def _chunks(events: list, n_samples: int) -> list[_Chunk]:
    """The events in runs of panel and of passed-through records, each of at most _CALLS_PER_CHUNK calls."""
    limit = max(1, _CALLS_PER_CHUNK // max(1, n_samples))
    chunks, start = [], 0
    while start < len(events):
        passed = events[start][1] == _PASSED
        end = start + 1
        while end < len(events) and end - start < limit and (events[end][1] == _PASSED) == passed:
            end += 1
        run = events[start:end]
        rows = np.array([e[2] for e in run], dtype=np.int64)
        chunks.append(_Chunk(rows, None if passed else np.array([e[1] == _TYPED for e in run])))
        start = end
    return chunks


class _RecordFormatter:
    """Builds the output of chunks of records for one batch of target
    samples. `filled`: P(alt) of every target haplotype at typed records
    with missing calls, by panel record; `fields`: the FORMAT of panel records."""

    def __init__(self, panel: ReferencePanel, target: TargetData, aln: Alignment, filled: dict, samples: slice,
                 fields: FormatFields):
        self.panel, self.target, self.aln, self.filled, self.fields = panel, target, aln, filled, fields
        self.haplotypes = slice(2 * samples.start, 2 * samples.stop)
        haploid = aln.haploid()[:, samples]
        self.haploid = haploid.copy() if haploid.any() else None  # a view would keep every sample's alive
        self.typed_positions = panel.positions[aln.panel_rows]
        self.typed_contigs = panel.contig_index[aln.panel_rows]

    def part(self, chunk: _Chunk, probs: np.ndarray | None, index_of_row: dict) -> _Part:
        """The batch's output for `chunk`; probs (U, 2B) P(alt) at untyped
        records, the row of each in index_of_row."""
        return self._passed(chunk.rows) if chunk.passed else self._panel_records(chunk, probs, index_of_row)

    def _panel_records(self, chunk: _Chunk, probs, index_of_row: dict) -> _Part:
        rows, typed = chunk.rows, chunk.typed
        n_haplotypes = self.haplotypes.stop - self.haplotypes.start
        p = np.empty((len(rows), n_haplotypes), dtype=np.float32)
        haploid = np.zeros((len(rows), n_haplotypes // 2), dtype=bool)
        missing_calls = np.zeros(len(rows), dtype=np.int64)
        if typed.any():
            alleles = self.aln.alleles_at(rows[typed])[:, self.haplotypes]  # (V, 2B)
            calls = alleles.astype(np.float32)
            missing = alleles == MISSING
            for i in np.nonzero(missing.any(axis=1))[0]:
                calls[i, missing[i]] = self.filled[rows[typed][i]][self.haplotypes][missing[i]]
            p[typed], haploid[typed] = calls, alleles[:, 1::2] == ABSENT
            missing_calls[typed] = _missing_calls(alleles)
        if not typed.all():
            p[~typed] = probs[[index_of_row[r] for r in rows[~typed].tolist()]]
            near = self._haploid_near(rows[~typed])
            if near is not None:
                haploid[~typed] = near
        present = None
        if haploid.any():  # a haploid call has its first haplotype alone
            present = np.ones(p.shape, dtype=bool)
            present[:, 1::2] = ~haploid
        return _Part(genotype_columns(p[:, 0::2], p[:, 1::2], haploid if present is not None else None, self.fields),
                     DosageSums.of(p, present), missing_calls)

    def _haploid_near(self, rows: np.ndarray) -> np.ndarray | None:
        """(V, B) ploidy of each sample at untyped records: as at the nearest
        typed record of the contig (so chrX follows the pseudo-autosomal
        boundaries of the target's own calls); None when every call is diploid."""
        if self.haploid is None:
            return None
        right = np.clip(np.searchsorted(self.aln.panel_rows, rows), 0, len(self.aln.panel_rows) - 1)
        left = np.clip(right - 1, 0, None)

        def distance(i):
            d = np.abs(self.typed_positions[i] - self.panel.positions[rows]).astype(np.float64)
            return np.where(self.typed_contigs[i] == self.panel.contig_index[rows], d, np.inf)

        nearest = np.where(distance(left) <= distance(right), left, right)
        return self.haploid[nearest]

    def _passed(self, rows: np.ndarray) -> _Part:
        t = self.target
        alleles = t.alleles[rows][:, self.haplotypes]
        text = np.where(alleles == MISSING, ".", alleles.astype(str)).astype(object)
        separator = np.where(t.phased[rows], "|", "/").astype(object)[:, None]
        columns = np.where(alleles[:, 1::2] == ABSENT, text[:, 0::2], text[:, 0::2] + separator + text[:, 1::2])
        return _Part(ColumnText.from_rows(["\t".join(row) for row in columns.tolist()]))


def _fixed_columns(panel: ReferencePanel, target: TargetData, chunk: _Chunk, contig_name: str) -> list:
    """Per record of the chunk, [CHROM, POS, ID, REF, ALT]."""
    if chunk.passed:
        r = target.records
        return [[r.contigs[i], str(r.positions[i]), r.ids[i], r.refs[i], r.alts[i]] for i in chunk.rows.tolist()]
    return [[contig_name, str(panel.positions[i]), panel.ids[i], panel.refs[i], panel.alts[i]]
            for i in chunk.rows.tolist()]


def _info(chunk: _Chunk, total: _Part) -> list[str]:
    """INFO of each record of the chunk from its sums over every sample."""
    if chunk.passed:
        return ["."] * len(chunk.rows)
    af, r2 = total.sums.af(), total.sums.r2()
    return [f"AF={a:.4g}" + (f";IMPMISS={n}" if n else "") if typed else f"AF={a:.4g};DR2={d:.3f};IMP"
            for a, d, n, typed in zip(af.tolist(), r2.tolist(), total.missing_calls.tolist(), chunk.typed.tolist())]


def _write_chunks(writer: VcfWriter, spool: ColumnSpool | None, formatters: list, chunks: list, probabilities,
                  index_of_row: dict, fixed) -> None:
    """Write the records of `chunks`, each batch of samples formatted by
    its formatter from probabilities(batch) (U, 2B) at untyped records (not
    called when the chunks hold none); with several batches, their columns
    wait in the spool until the last is done. fixed(chunk): the chunk's
    records' fixed columns."""
    wanted = any(not c.passed and not c.typed.all() for c in chunks)
    totals: list = [None] * len(chunks)
    for b, formatter in enumerate(formatters):
        probs = probabilities(formatter.haplotypes) if wanted else None
        for c, chunk in enumerate(chunks):
            part = formatter.part(chunk, probs, index_of_row)
            if spool is None:  # one batch: written at once
                _write_chunk(writer, chunk, part, part.columns, fixed, formatter.fields)
                continue
            spool.put(part.columns)
            part = dataclasses.replace(part, columns=None)
            totals[c] = part if b == 0 else totals[c] + part
        del probs  # before the next batch's are made
    if spool is not None:
        for c, columns in enumerate(spool.joined(len(formatters))):
            _write_chunk(writer, chunks[c], totals[c], columns, fixed, formatters[0].fields)


def _write_chunk(writer: VcfWriter, chunk: _Chunk, total: _Part, columns: ColumnText, fixed,
                 fields: FormatFields) -> None:
    writer.write_records(fixed(chunk), _info(chunk, total), "GT" if chunk.passed else str(fields), columns)


def _missing_calls(alleles: np.ndarray) -> np.ndarray:
    """(V,) missing calls (samples with a missing allele) at each record of
    alleles (V, 2S)."""
    missing = alleles == MISSING
    return (missing[:, 0::2] | missing[:, 1::2]).sum(axis=1)


def _with_missing_calls(panel: ReferencePanel, aln: Alignment) -> np.ndarray:
    """(M,) bool: the panel records typed by the target where some call is missing."""
    has_missing = np.zeros(len(panel), dtype=bool)
    has_missing[aln.panel_rows[(aln.haplotypes == MISSING).any(axis=1)]] = True
    return has_missing


def _contigs_in_target_order(panel: ReferencePanel, target: TargetData, aln: Alignment) -> list[_Contig]:
    covered = {panel.contig_key(c): c for c in aln.contigs}
    contigs, seen = [], set()
    for name in target.records.contigs:
        key = normalise_contig(name)
        if key not in seen:
            seen.add(key)
            contigs.append(_Contig(key, name, covered.get(key)))
    return contigs


def _events(panel, target, aln, contig: _Contig, typed_mask) -> list[tuple[int, int, int]]:
    """(position, kind, row) of every output record on one contig, sorted;
    panel records come before passed-through target records at a position."""
    events = []
    if contig.panel_index is not None:
        rows = np.nonzero(panel.contig_index == contig.panel_index)[0]
        events += [(int(panel.positions[r]), _TYPED if typed_mask[r] else _IMPUTED, int(r)) for r in rows]
    events += [
        (int(target.records.positions[r]), _PASSED, int(r))
        for r in aln.unmatched_rows
        if normalise_contig(target.records.contigs[r]) == contig.key
    ]
    events.sort(key=lambda e: (e[0], e[1] == _PASSED))
    return events


def _phase(aln: Alignment, panel: ReferencePanel, target: TargetData, phaser: str | None, genetic_map, source,
           contigs: list, in_panel: np.ndarray) -> Alignment:
    """Phase an unphased target's matched records on `contigs` (panel contig
    indices: those to be written) against the panel with an external phaser
    (see genimpute.phasing), contig by contig. Panel samples that are target
    samples (`in_panel`) are left out of the reference, which would hand them
    their true phase. Records on other contigs stay as they are: nothing of
    them is written."""
    from genimpute.phasing import find_phaser, phase_haplotypes

    if phaser is None:
        raise InputError(f"{source}: expected phased genotypes; found unphased heterozygous calls "
                         "(phase first, or let genimpute phase with --phaser auto|beagle|shapeit4)")
    tool = find_phaser(phaser)
    phased = aln.haplotypes.copy()
    reference = np.ones(panel.n_haplotypes, dtype=bool)
    reference[2 * in_panel[in_panel >= 0, None] + [0, 1]] = False
    ref_samples = [name for i, name in enumerate(panel.samples) if reference[2 * i]]
    if not ref_samples:
        raise InputError(f"{source}: every panel sample is a target sample, so none is left to phase against")
    contig_of = panel.contig_index[aln.panel_rows]
    log.info("%s is unphased: phasing %d records against %d panel samples with %s", source,
             int(np.isin(contig_of, contigs).sum()), len(ref_samples), tool)
    for contig in np.intersect1d(contig_of, contigs):
        on_contig = contig_of == contig
        rows = aln.panel_rows[on_contig]
        phased[on_contig] = phase_haplotypes(
            tool, aln.haplotypes[on_contig], panel.haplotypes(rows)[:, reference], panel.contig_names[contig],
            panel.positions[rows], [panel.refs[r] for r in rows], [panel.alts[r] for r in rows], target.samples,
            ref_samples, genetic_map=genetic_map)
    return dataclasses.replace(aln, haplotypes=phased, phased=True)


def _samples_in_panel(panel: ReferencePanel, aln: Alignment, target: TargetData, audit) -> PanelMatches:
    """The target samples found in the panel, whose own haplotypes would hand
    them their truth (they are left out of their context), logged; with
    `audit`, each sample's decision goes to its samples file."""
    matches = samples_in_panel(panel, aln, target.samples)
    in_panel = matches.in_panel
    shared = [f"{target.samples[s]} (= panel {panel.samples[p]})" for s, p in enumerate(in_panel) if p >= 0]
    if shared:
        log.warning("%d target samples are in the reference panel: %s; their own panel haplotypes are left out of "
                    "their context", len(shared), _first_few(shared))
    possible = [f"{target.samples[s]} (~ panel {panel.samples[matches.closest[s]]})"
                for s in np.nonzero(matches.possible_duplicates)[0]]
    if possible:
        log.warning("%d target samples have the genotypes of a panel sample at >= %.0f%% of the typed sites where "
                    "either carries an alt allele: %s; over %.1f Mb of typed sites (less than %d Mb) a relative "
                    "sharing the region agrees as well, so they are kept as templates", len(possible),
                    100 * IDENTITY_CONCORDANCE, _first_few(possible), matches.span_bp / 1e6,
                    MIN_IDENTITY_SPAN_BP // 1_000_000)
    if audit is not None:
        write_sample_audit(sample_audit_path(audit), matches, panel.samples, target.samples)
    return matches


def _first_few(names: list) -> str:
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def _exclusion_matrix(in_panel: np.ndarray, n_haplotypes: int) -> np.ndarray | None:
    """(2S, H) bool: the panel haplotypes of each target haplotype's own
    sample (the model's windows read exclusions so); None when there are none."""
    if not (in_panel >= 0).any():
        return None
    exclude = np.zeros((2 * len(in_panel), n_haplotypes), dtype=bool)
    for s, p in enumerate(in_panel):
        if p >= 0:
            exclude[2 * s: 2 * s + 2, 2 * p: 2 * p + 2] = True
    return exclude


def _fill_missing(source: _ModelSource, panel, aln, typed_mask, exclude, eligible) -> dict:
    """P(alt) (2S,) of every target haplotype at each typed record (among
    `eligible` ones) where some call is missing, by panel record: imputed
    like an untyped record, from the other typed records around it.

    Windows are planned over the whole of each contig with eligible records
    and only those predicting an eligible record are run, so a region's
    filled calls equal a whole-contig run's."""
    has_missing = _with_missing_calls(panel, aln)
    has_missing &= np.isin(panel.contig_index, np.unique(panel.contig_index[eligible]))
    n_wanted = int((has_missing & eligible).sum())
    if not n_wanted:
        return {}
    from genimpute.predict import target_window_probabilities

    model, wcfg, device = source.model()
    # Blocks of 20 records interleaved by 5 (defaults) keep most of a record's
    # nearest typed neighbours as evidence (measured, BENCHMARKS.md: 97.4% of
    # filled calls right, 96.7% with contiguous blocks, at about as many windows)
    block = max(1, min(wcfg.typed // 10, int(typed_mask.sum()) // 2))
    try:
        windows = typed_record_windows(panel.contig_index, panel.positions, typed_mask, has_missing, block,
                                       wcfg.typed, stride=max(1, wcfg.typed // (2 * block)))
    except ValueError as exc:
        raise InputError(f"missing calls: expected other typed records to impute them from; {exc}") from exc
    windows = [w for w in windows if eligible[w.predicted].any()]
    log.info("%d typed records have missing calls: imputing them in %d windows", n_wanted, len(windows))
    filled = {}
    for window in windows:
        probs = target_window_probabilities(model, window, panel, aln, wcfg, device, exclude)
        filled.update((r, p) for r, p in zip(window.predicted.tolist(), probs) if eligible[r])
    return filled


def _model_windows(source: _ModelSource, panel, aln, typed_mask, contigs, in_region, exclude):
    """({contig key: windows}, (window, haplotypes) -> (U, len(haplotypes))
    P(alt) of those target haplotypes) of the model's windows."""
    from genimpute.predict import target_window_probabilities

    model, wcfg, device = source.model()
    windows = {
        c.key: [w for w in plan_windows(panel.contig_index, panel.positions, typed_mask, wcfg.untyped, wcfg.typed,
                                        [c.panel_index]) if in_region[w.predicted].any()]
        for c in contigs if c.panel_index is not None
    }

    def probabilities(window, haplotypes: slice) -> np.ndarray:
        batch = dataclasses.replace(aln, haplotypes=aln.haplotypes[:, haplotypes])
        return target_window_probabilities(model, window, panel, batch, wcfg, device,
                                           None if exclude is None else exclude[haplotypes])

    return windows, probabilities


class _CopyingEngine:
    """The region-wide copying model (genimpute.copying) on the target's
    typed sites, contig by contig: untyped records, missing calls and
    --validate's hidden sites alike."""

    def __init__(self, panel: ReferencePanel, aln: Alignment, typed_mask: np.ndarray, settings: CopyingSettings,
                 in_panel: np.ndarray):
        self.panel, self.aln, self.typed_mask, self.settings = panel, aln, typed_mask, settings
        self.models: dict[int, ContigModel] = {}
        self._queries_of: tuple = (None, None)  # (contig, its _queries)
        self.excluded = np.repeat(in_panel, 2).astype(np.int64)  # the panel sample each haplotype may not copy
        if (in_panel >= 0).any() and panel.n_haplotypes <= 2:  # a window of neighbours always holds another one
            raise InputError("the reference panel's only sample is a target sample; expected other haplotypes to "
                             "copy from")

    def model(self, contig: int) -> ContigModel:
        if contig not in self.models:
            self.models[contig] = ContigModel(self.panel, contig, self.typed_mask, self.settings)
        return self.models[contig]

    def segments(self, contigs: list, in_region: np.ndarray) -> dict:
        """{contig key: segments with records in the region}."""
        return {c.key: [s for s in self.model(c.panel_index).segments() if in_region[s.predicted].any()]
                for c in contigs if c.panel_index is not None}

    def probabilities(self, segment, haplotypes: slice) -> np.ndarray:
        """(U, len(haplotypes)) P(alt) of those target haplotypes at the segment's untyped records."""
        queries = self._queries(segment.contig)[:, haplotypes]
        return self.model(segment.contig).probabilities(segment, queries, self.excluded[haplotypes])[0]

    def _queries(self, contig: int) -> np.ndarray:
        """(t, 2S) int8 the target's alleles at the contig's typed sites, read once for all its segments."""
        if self._queries_of[0] != contig:
            self._queries_of = contig, np.ascontiguousarray(self.aln.alleles_at(self.model(contig).typed_rows))
        return self._queries_of[1]

    def _at_sites(self, contig: int, wanted: np.ndarray, hide: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(records, P(alt), observed alleles), each (u, 2S) but records
        (u,): the typed records of `contig` that `wanted` (M,) marks, P(alt)
        at their missing calls (at all their calls if `hide`, as if those
        were missing too; NaN at the others)."""
        model = self.model(contig)
        observed = self._queries(contig)
        wanted = wanted[model.typed_rows]
        queries = observed.copy()
        if hide:
            queries[wanted] = MISSING
        probs = model.typed_probabilities(queries, self.excluded, wanted)
        return model.typed_rows[wanted], probs[wanted], observed[wanted]

    def fill_missing(self, eligible: np.ndarray) -> dict:
        """P(alt) (2S,) of every target haplotype at each typed record (among
        `eligible` ones) where some call is missing, by panel record (as
        _fill_missing; NaN where the call is there)."""
        has_missing = _with_missing_calls(self.panel, self.aln) & eligible
        filled = {}
        for contig in np.unique(self.panel.contig_index[has_missing]):
            rows, probs, _ = self._at_sites(int(contig), has_missing, hide=False)
            filled.update(zip(rows.tolist(), probs))
        if filled:
            log.info("%d typed records have missing calls: imputed by the copying model", len(filled))
        return filled

    def validate(self, fraction: float, seed: int, eligible: np.ndarray):
        """genimpute.validation's estimate, the hidden sites imputed by the copying model."""
        from genimpute.validation import masked_sites, score

        masked = masked_sites(self.panel, self.typed_mask, fraction, seed, eligible)
        predictions = (self._at_sites(int(c), masked, hide=True)[1:] for c in np.unique(self.panel.contig_index[masked]))
        return score(predictions, fraction, seed, int(masked.sum()))


def _sample_batches(n_samples: int, batch_samples: int) -> list[slice]:
    """Consecutive batches of target samples, each imputed and formatted on
    its own: the memory of a run is that of one batch, whatever the cohort."""
    return [slice(start, min(n_samples, start + batch_samples)) for start in range(0, max(n_samples, 1), batch_samples)]


def _write_contigs(writer: VcfWriter, formatters: list, panel, target, aln, typed_mask, contigs: list, region,
                   in_region: np.ndarray, windows_by_contig: dict, window_probabilities, progress: bool,
                   started: float) -> int:
    """Write every output record of `contigs` (within `region`; in_region
    (M,) its panel records), window by window, each batch of samples
    imputed by window_probabilities(window, haplotypes); return the number
    of imputed records written."""
    n_windows = sum(len(w) for w in windows_by_contig.values())
    bar = tqdm(total=n_windows, desc="impute", unit="window", disable=not progress, file=sys.stderr)
    log_every = max(1, n_windows // 10)
    n_imputed = n_done = 0
    spool = ColumnSpool(writer.path.parent) if len(formatters) > 1 else None
    try:
        for contig in contigs:
            events = _events(panel, target, aln, contig, typed_mask)
            if region is not None:
                events = [e for e in events if region.contains(contig.key, e[0])]
            position_of_event = {e[2]: i for i, e in enumerate(events) if e[1] != _PASSED}
            fixed = partial(_fixed_columns, panel, target, contig_name=contig.name)
            done = 0
            for window in windows_by_contig.get(contig.key, []):
                predicted = window.predicted
                written = predicted[in_region[predicted]]  # all of them unless the window straddles a region edge
                upto = position_of_event[int(written[-1])] + 1
                _write_chunks(writer, spool, formatters, _chunks(events[done:upto], len(target.samples)),
                              partial(window_probabilities, window), {r: i for i, r in enumerate(predicted.tolist())},
                              fixed)
                done = upto
                n_imputed += len(written)
                n_done += 1
                bar.update(1)
                if n_done % log_every == 0:  # progress for logs, where no bar is drawn
                    log.info("imputed %d of %d windows in %.0f s", n_done, n_windows, time.monotonic() - started)
            _write_chunks(writer, spool, formatters, _chunks(events[done:], len(target.samples)), None, {}, fixed)
    finally:
        bar.close()
        if spool is not None:
            spool.close()
    return n_imputed


def impute(
    target_path: str | Path,
    model_dir: str | Path,
    out: str | Path,
    device,  # a torch.device, or a name for runtime.pick_device: 'auto', 'cpu', 'cuda:N'
    force: bool = False,
    progress: bool = True,
    validate_fraction: float | None = None,
    seed: int = 1,
    region: Region | None = None,
    phaser: str | None = "auto",
    genetic_map: str | Path | None = None,
    audit: str | Path | None = None,
    ref: str | Path | None = None,
    copying: CopyingSettings | None = None,
    batch_samples: int = 1000,
    fields: FormatFields = FormatFields(),
) -> dict:
    """Impute every panel record the target does not type; write `out`.

    Target alleles are harmonised to the panel's (swaps, strand flips; see
    genimpute.harmonise; `audit` gets a TSV of every site's decision); an
    unphased target is phased first with `phaser` (None: refuse), using
    `genetic_map` if given (default 1 cM per Mb); the match backbone's
    copying model reads the map too, else the cM the model directory's panel
    was trained with (train --map), else 1 cM per Mb; missing
    calls at typed records are imputed too; target samples found in the
    panel do not see their own haplotypes as context.

    With `region`, write only the records inside it. Windows are still
    planned over the whole contig, so a region's records get exactly the
    windows, evidence and values of a whole-contig run: chunk outputs
    concatenate into the single-run output, seams included.

    With `validate_fraction`, first estimate accuracy on that fraction of
    the typed sites (of the region), hidden (see genimpute.validation), and
    record it in the log, the summary and the output header.

    With `ref`, impute from that reference panel instead of the model
    directory's own (the pretrained model has none).

    With `copying`, untyped records are imputed by the region-wide copying
    model (genimpute.copying) with those settings instead of the model's
    windows, missing calls and --validate's hidden sites included: the
    model directory is then read only for its panel when `ref` is None.

    Target samples are imputed in batches of `batch_samples`, their columns
    spooled to a temporary file and joined (genimpute.io.spool), so memory
    does not grow with the cohort; the output does not depend on the batch
    size.

    `fields`: the FORMAT fields of panel records (GT:DS:GP by default)."""
    started = time.monotonic()
    if batch_samples < 1:
        raise InputError(f"--batch-samples: expected a positive number of samples; found {batch_samples}")
    for report in ([audit, sample_audit_path(audit)] if audit is not None else []):
        if Path(report).exists() and not force:
            raise InputError(f"--report: {report} exists; use --force to overwrite it")
    reference = read_reference(ref) if ref is not None else None
    source = _ModelSource(Path(model_dir), reference, device)
    panel = reference if reference is not None else source.loaded().panel
    if genetic_map is not None:
        panel = panel.with_genetic_map(genetic_map)
    elif ref is not None and copying is None and source.loaded().provenance.get("genetic_map"):
        log.warning("the model was trained with a genetic map and none was given (--map): taking 1 cM per Mb")
    elif copying is not None and np.array_equal(panel.centimorgans, panel.positions * CM_PER_BP):
        log.warning("no genetic map (--map, or `genimpute panel --map`): the copying engine takes 1 cM per Mb, "
                    "which costs accuracy where the recombination rate varies")
    target = read_target(target_path)
    aln = align_target(panel, target, source=str(target_path), audit=audit)
    matches = _samples_in_panel(panel, aln, target, audit)  # by name or genotype: phase plays no part
    in_panel = matches.in_panel
    typed_mask = np.zeros(len(panel), dtype=bool)
    typed_mask[aln.panel_rows] = True
    header_contigs = contigs = _contigs_in_target_order(panel, target, aln)
    in_region = np.ones(len(panel), dtype=bool)
    if region is not None:
        contigs = [c for c in contigs if c.key == region.key]
        if not contigs:
            raise InputError(f"--region {region}: expected a contig of the target ({', '.join(c.name for c in header_contigs)}); "
                             f"found {region.contig}")
        keys = np.array([panel.contig_key(c) for c in range(len(panel.contig_names))])
        in_region = (keys[panel.contig_index] == region.key) & (panel.positions >= region.start)
        if region.end is not None:
            in_region &= panel.positions <= region.end
    if not aln.phased:
        aln = _phase(aln, panel, target, phaser, genetic_map, target_path,
                     [c.panel_index for c in contigs if c.panel_index is not None], in_panel)
    if copying is None:
        exclude = _exclusion_matrix(in_panel, panel.n_haplotypes)
        windows_by_contig, window_probabilities = _model_windows(source, panel, aln, typed_mask, contigs, in_region,
                                                                 exclude)
        engine = f"{Path(model_dir).resolve()} ({source.loaded().config.model.name}, " \
                 f"{source.loaded().provenance.get('steps')} steps)"
    else:
        copying_engine = _CopyingEngine(panel, aln, typed_mask, copying, in_panel)
        windows_by_contig, window_probabilities = copying_engine.segments(contigs, in_region), \
            copying_engine.probabilities
        engine = f"copying engine ({', '.join(f'{k}={v}' for k, v in dataclasses.asdict(copying).items())})"
    n_windows = sum(len(w) for w in windows_by_contig.values())
    log.info("%d target samples, %d typed sites matched, %d windows", len(target.samples), len(aln.panel_rows), n_windows)

    meta = {
        "source": f"genimpute {__version__}",
        "genimputeCommand": " ".join(sys.argv),
        "genimputeModel": engine,
    }
    if ref is not None:
        meta["genimputeReference"] = str(Path(ref).resolve())
    validation = None
    if validate_fraction is not None:
        if copying is None:
            from genimpute.validation import validate

            model, wcfg, device = source.model()
            validation = validate(model, panel, aln, typed_mask, wcfg, validate_fraction, seed, device,
                                  eligible=in_region, exclude=exclude)
        else:
            validation = copying_engine.validate(validate_fraction, seed, in_region)
        meta["genimputeValidation"] = validation.header_value()
        log.info("validation: %d typed sites hidden and imputed: empirical r2 %.4f, concordance %.4f",
                 validation.masked_sites, validation.empirical_r2, validation.concordance)
    filled = _fill_missing(source, panel, aln, typed_mask, exclude, in_region) if copying is None \
        else copying_engine.fill_missing(in_region)
    formatters = [_RecordFormatter(panel, target, aln, filled, batch, fields)
                  for batch in _sample_batches(len(target.samples), batch_samples)]
    if len(formatters) > 1:
        log.info("%d target samples in %d batches of up to %d", len(target.samples), len(formatters), batch_samples)
    with VcfWriter(out, force=force) as writer:
        writer.write_header(target.samples, [c.name for c in header_contigs], meta, fields)
        n_imputed = _write_contigs(writer, formatters, panel, target, aln, typed_mask, contigs, region, in_region,
                                   windows_by_contig, window_probabilities, progress, started)
    summary = {
        "samples": len(target.samples),
        "typed_sites": len(aln.panel_rows),
        "imputed_records": n_imputed,
        "passed_through": len(aln.unmatched_rows),
        "missing_calls_imputed": int(_missing_calls(aln.alleles_at(np.array(sorted(filled), dtype=np.int64))).sum()),
        "samples_in_panel": int((in_panel >= 0).sum()),
        "possible_panel_duplicates": int(matches.possible_duplicates.sum()),
        "records_written": writer.records,
        "windows": n_windows,
        "seconds": round(time.monotonic() - started, 2),
        "validation": vars(validation) if validation else None,
    }
    log.info("wrote %s: %d records (%d imputed) in %.1f s", out, writer.records, n_imputed, summary["seconds"])
    return summary
