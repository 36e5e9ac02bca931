"""The output records of an imputation, in order: each contig's panel
records (typed and imputed) and the target's records the panel lacks,
passed through (those the output's format takes); each batch of target
samples given its columns on its own by the output (genimpute.outputs),
their columns joined record by record (genimpute.io.spool), and the INFO
of the whole cohort."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from dataclasses import dataclass
from functools import partial

import numba as nb
import numpy as np
from tqdm import tqdm

from genimpute.ahead import computed_ahead
from genimpute.io.contigs import normalise_contig
from genimpute.io.spool import ColumnSpool
from genimpute.io.vcf_reader import ABSENT, MISSING, TargetData
from genimpute.io.vcf_writer import DosageSums
from genimpute.panel import Alignment, ReferencePanel

log = logging.getLogger(__name__)

# kinds of output record
_TYPED, _IMPUTED, _PASSED = 0, 1, 2
TILE = 64  # haplotypes per column of _gather_rows


@nb.njit(cache=True, parallel=True, nogil=True)
def _gather_rows(probs, sources, destinations, out):
    """out[destinations[i]] = probs[sources[i]], each thread a column of
    TILE haplotypes. The copying engine's probs (U, Q) are a transposed
    view, each haplotype's records contiguous: a record gathered whole read
    each value from another cache line. A column reads TILE haplotypes'
    records in order (tiles of 64 records by 64 haplotypes, row by row on
    one thread, were several times slower)."""
    n, q = len(sources), probs.shape[1]
    for column in nb.prange((q + TILE - 1) // TILE):
        for i in range(n):
            for j in range(column * TILE, min((column + 1) * TILE, q)):
                out[destinations[i], j] = probs[sources[i], j]


@dataclass
class Contig:
    key: str
    name: str  # as the target writes it
    panel_index: int | None  # None when the panel lacks this contig


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
    """A chunk's output for one batch of samples: their columns (the
    output format's) and their share of the INFO sums."""

    columns: object  # None once spooled
    sums: DosageSums
    missing_calls: np.ndarray | None = None  # (E,) typed calls without a call in the target, filled in; None if passed

    def __add__(self, other: _Part) -> _Part:
        """The INFO sums of both; the columns of neither (they are spooled)."""
        missing = None if self.missing_calls is None else self.missing_calls + other.missing_calls
        return _Part(self.columns, self.sums + other.sums, missing)


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
    with missing calls, by panel record; `output`: the run's output
    (genimpute.outputs), which makes the columns."""

    def __init__(self, panel: ReferencePanel, target: TargetData, aln: Alignment, filled: dict, samples: slice,
                 output):
        self.panel, self.target, self.aln, self.filled, self.output = panel, target, aln, filled, output
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
        n_missing = np.zeros(len(rows), dtype=np.int64)
        if typed.any():
            alleles = self.aln.alleles_at(rows[typed])[:, self.haplotypes]  # (V, 2B)
            calls = alleles.astype(np.float32)
            missing = alleles == MISSING
            for i in np.nonzero(missing.any(axis=1))[0]:
                calls[i, missing[i]] = self.filled[rows[typed][i]][self.haplotypes][missing[i]]
            p[typed], haploid[typed] = calls, alleles[:, 1::2] == ABSENT
            n_missing[typed] = missing_calls(alleles)
        if not typed.all():
            sources = np.array([index_of_row[r] for r in rows[~typed].tolist()], dtype=np.int64)
            _gather_rows(probs, sources, np.flatnonzero(~typed), p)
            near = self._haploid_near(rows[~typed])
            if near is not None:
                haploid[~typed] = near
        present = None
        if haploid.any():  # a haploid call has its first haplotype alone
            present = np.ones(p.shape, dtype=bool)
            present[:, 1::2] = ~haploid
        return _Part(self.output.columns(p, haploid if present is not None else None), DosageSums.of(p, present),
                     n_missing)

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
        """Passed-through records' columns, and the sums of their called
        alleles (for the info file's ALT_Frq)."""
        alleles = self.target.alleles[rows][:, self.haplotypes]
        return _Part(self.output.passed_columns(alleles, self.target.phased[rows]),
                     DosageSums.of((alleles == 1).astype(np.float32), alleles >= 0))


def _fixed_columns(panel: ReferencePanel, target: TargetData, chunk: _Chunk, contig_name: str) -> list:
    """Per record of the chunk, [CHROM, POS, ID, REF, ALT]."""
    if chunk.passed:
        r = target.records
        return [[r.contigs[i], str(r.positions[i]), r.ids[i], r.refs[i], r.alts[i]] for i in chunk.rows.tolist()]
    return [[contig_name, str(panel.positions[i]), panel.ids[i], panel.refs[i], panel.alts[i]]
            for i in chunk.rows.tolist()]


def _write_chunks(output, spool: ColumnSpool | None, formatters: list, chunks: list, probabilities,
                  index_of_row: dict, fixed, batch_done=None, quality: WrittenQuality | None = None) -> None:
    """Write the records of `chunks`, each batch of samples formatted by
    its formatter from probabilities(batch) (U, 2B) at untyped records (not
    called when the chunks hold none); with several batches, their columns
    wait in the spool until the last is done. fixed(chunk): the chunk's
    records' fixed columns; batch_done() is called as each batch is."""
    wanted = any(not c.passed and not c.typed.all() for c in chunks)
    totals: list = [None] * len(chunks)
    for b, formatter in enumerate(formatters):
        probs = probabilities(formatter.haplotypes) if wanted else None
        for c, chunk in enumerate(chunks):
            part = formatter.part(chunk, probs, index_of_row)
            if spool is None:  # one batch: written at once
                _write_chunk(output, chunk, part, part.columns, fixed, quality)
                continue
            spool.put(part.columns)
            part = dataclasses.replace(part, columns=None)
            totals[c] = part if b == 0 else totals[c] + part
        del probs  # before the next batch's are made
        if batch_done is not None:
            batch_done()
    if spool is not None:
        for c, columns in enumerate(spool.joined(len(formatters))):
            _write_chunk(output, chunks[c], totals[c], columns, fixed, quality)


def _write_chunk(output, chunk: _Chunk, total: _Part, columns, fixed, quality: WrittenQuality | None = None) -> None:
    """Write a chunk's records, with INFO and info lines from their sums
    over every sample (and the AF and DR2 written to `quality`)."""
    if chunk.passed:
        output.write_passed(fixed(chunk), columns, total.sums)
        return
    af, dr2 = output.write_panel(fixed(chunk), columns, total.sums, total.missing_calls, chunk.typed,
                                 chunk.rows)
    if quality is not None:
        quality.add(af, dr2, ~chunk.typed)


class WrittenQuality:
    """The AF and DR2 of every panel record written, and whether it was
    imputed (not typed): what a run's report summarises by MAF bin."""

    def __init__(self):
        self.parts: list = []

    def add(self, af: np.ndarray, dr2: np.ndarray, imputed: np.ndarray) -> None:
        self.parts.append((np.asarray(af, np.float32), np.asarray(dr2, np.float32), np.asarray(imputed, bool)))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(AF, DR2, imputed) of the records in the order written."""
        if not self.parts:
            return np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0, bool)
        return tuple(np.concatenate(column) for column in zip(*self.parts))


def missing_calls(alleles: np.ndarray) -> np.ndarray:
    """(V,) missing calls (samples with a missing allele) at each record of
    alleles (V, 2S)."""
    missing = alleles == MISSING
    return (missing[:, 0::2] | missing[:, 1::2]).sum(axis=1)


def contigs_in_target_order(panel: ReferencePanel, target: TargetData, aln: Alignment) -> list[Contig]:
    covered = {panel.contig_key(c): c for c in aln.contigs}
    contigs, seen = [], set()
    for name in target.records.contigs:
        key = normalise_contig(name)
        if key not in seen:
            seen.add(key)
            contigs.append(Contig(key, name, covered.get(key)))
    return contigs


def _events(panel, target, contig: Contig, typed_mask, passed: list[int]) -> list[tuple[int, int, int]]:
    """(position, kind, row) of every output record on one contig, sorted:
    its panel records and the target records `passed`; panel records come
    before passed-through target records at a position."""
    events = []
    if contig.panel_index is not None:
        rows = np.nonzero(panel.contig_index == contig.panel_index)[0]
        events += [(int(panel.positions[r]), _TYPED if typed_mask[r] else _IMPUTED, int(r)) for r in rows]
    events += [(int(target.records.positions[r]), _PASSED, r) for r in passed]
    events.sort(key=lambda e: (e[0], e[1] == _PASSED))
    return events


# A batch's P(alt) at a window's untyped records, 4 bytes per haplotype and
# record, is held whole while the window's records are formatted, and the
# next batch's is computed meanwhile (genimpute.ahead): the two together at
# most this much, so that a window dense in untyped records (a sequenced
# panel of many rare variants, a long segment) shrinks the batch, not the
# run's memory.
BATCH_OUTPUT_BYTES = 500_000_000
_BATCHES_ALIVE = 2


def samples_per_batch(batch_samples: int, windows_by_contig: dict) -> int:
    """batch_samples, or fewer where two batches' output over the window
    of most untyped records would pass BATCH_OUTPUT_BYTES."""
    most = max((len(w.predicted) for windows in windows_by_contig.values() for w in windows), default=0)
    fitting = max(1, BATCH_OUTPUT_BYTES // (_BATCHES_ALIVE * 2 * 4 * max(most, 1)))
    if fitting < batch_samples:
        log.info("batches of %d samples, not %d: a window has %d untyped records (%.2f GB of output for %d samples)",
                 fitting, batch_samples, most, 8 * most * batch_samples / 1e9, batch_samples)
    return min(batch_samples, fitting)


def sample_batches(n_samples: int, batch_samples: int) -> list[slice]:
    """Consecutive batches of target samples, each imputed and formatted on
    its own: the memory of a run is that of one batch, whatever the cohort."""
    return [slice(start, min(n_samples, start + batch_samples)) for start in range(0, max(n_samples, 1), batch_samples)]


class _Progress:
    """A bar over the windows, each batch of samples in each a step of its
    own, so that a cohort of thousands in one window shows its progress;
    for logs, where no bar is drawn, a line every tenth of the steps and
    at the last."""

    def __init__(self, n_windows: int, n_batches: int, shown: bool, started: float):
        self.total, self.started, self.done = n_windows * n_batches, started, 0
        self.steps = "windows" if n_batches == 1 else \
            f"steps ({n_windows} window{'s' * (n_windows != 1)} x {n_batches} batches of samples)"
        self.bar = tqdm(total=self.total, desc="impute", unit="window" if n_batches == 1 else "batch",
                        disable=not shown, file=sys.stderr)
        self.every = max(1, self.total // 10)

    def step(self) -> None:
        self.done += 1
        self.bar.update(1)
        if self.done % self.every == 0 or self.done == self.total:
            log.info("imputed %d of %d %s in %.0f s", self.done, self.total, self.steps,
                     time.monotonic() - self.started)


class CohortRecords:
    """Writes the output records of a run, the target samples in batches of
    `batch_samples`: `filled`, P(alt) of every target haplotype at typed
    records with missing calls, by panel record; `output`, the run's output
    (genimpute.outputs), not yet opened."""

    def __init__(self, panel: ReferencePanel, target: TargetData, aln: Alignment, typed_mask: np.ndarray,
                 filled: dict, output, batch_samples: int):
        self.panel, self.target, self.aln, self.typed_mask, self.output = panel, target, aln, typed_mask, output
        self.quality = WrittenQuality()
        self.formatters = [_RecordFormatter(panel, target, aln, filled, batch, output)
                           for batch in sample_batches(len(target.samples), batch_samples)]
        if len(self.formatters) > 1:
            log.info("%d target samples in %d batches of up to %d", len(target.samples), len(self.formatters),
                     batch_samples)

    def _passed_rows(self, contig: Contig, region) -> tuple[list[int], list[int]]:
        """(the target records of `contig` within `region` that the panel
        lacks and the output takes, those it does not)."""
        r = self.target.records
        rows = [i for i in self.aln.unmatched_rows.tolist() if normalise_contig(r.contigs[i]) == contig.key
                and (region is None or region.contains(contig.key, int(r.positions[i])))]
        taken = [i for i in rows if self.output.takes(r.alts[i])]
        return taken, [i for i in rows if not self.output.takes(r.alts[i])]

    def count(self, contigs: list, region, in_region: np.ndarray) -> int:
        """How many records write() will write (a PGEN is told before its
        first); the target records the output leaves out are named in a warning."""
        n_records, left_out = 0, []
        for contig in contigs:
            if contig.panel_index is not None:
                n_records += int((in_region & (self.panel.contig_index == contig.panel_index)).sum())
            taken, left = self._passed_rows(contig, region)
            n_records += len(taken)
            left_out += left
        if left_out:
            r, first = self.target.records, left_out[0]
            log.warning("%s: %d target records the panel lacks are not biallelic and are left out (first: %s:%d "
                        "%s>%s); a .vcf.gz output keeps them", self.output.path, len(left_out), r.contigs[first],
                        r.positions[first], r.refs[first], r.alts[first])
        return n_records

    def write(self, header_contigs: list[str], meta: dict, contigs: list, region, in_region: np.ndarray,
              windows_by_contig: dict, probabilities, progress: bool, started: float) -> int:
        """Open the output (header_contigs, meta: its header's contig names
        and provenance) and write every output record of `contigs` (within
        `region`; in_region (M,) its panel records), window by window, each
        batch of samples imputed by probabilities(window, haplotypes); return
        the number of imputed records written."""
        n_records = self.count(contigs, region, in_region)
        progress = _Progress(sum(len(w) for w in windows_by_contig.values()), len(self.formatters), progress, started)
        spool = ColumnSpool(self.output.path.parent) if len(self.formatters) > 1 else None
        planned = [(window, f.haplotypes) for c in contigs for window in windows_by_contig.get(c.key, [])
                   for f in self.formatters]  # the order _write_contig asks for them
        try:
            with self.output.open(self.target.samples, header_contigs, meta, n_records), \
                    computed_ahead(probabilities, planned) as computed:
                return sum(self._write_contig(spool, contig, region, in_region, windows_by_contig.get(contig.key, []),
                                              computed, progress)
                           for contig in contigs)
        finally:
            progress.bar.close()
            if spool is not None:
                spool.close()

    def _write_contig(self, spool, contig: Contig, region, in_region, windows: list, probabilities,
                      progress: _Progress) -> int:
        events = _events(self.panel, self.target, contig, self.typed_mask, self._passed_rows(contig, region)[0])
        if region is not None:
            events = [e for e in events if region.contains(contig.key, e[0])]
        position_of_event = {e[2]: i for i, e in enumerate(events) if e[1] != _PASSED}
        fixed = partial(_fixed_columns, self.panel, self.target, contig_name=contig.name)
        n_samples, output = len(self.target.samples), self.output
        done = n_imputed = 0
        for window in windows:
            predicted = window.predicted
            written = predicted[in_region[predicted]]  # all of them unless the window straddles a region edge
            upto = position_of_event[int(written[-1])] + 1
            _write_chunks(output, spool, self.formatters, _chunks(events[done:upto], n_samples),
                          partial(probabilities, window), {r: i for i, r in enumerate(predicted.tolist())}, fixed,
                          progress.step, self.quality)
            done = upto
            n_imputed += len(written)
        _write_chunks(output, spool, self.formatters, _chunks(events[done:], n_samples), None, {}, fixed,
                      quality=self.quality)
        return n_imputed
