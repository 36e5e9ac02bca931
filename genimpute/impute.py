"""Streaming imputation: one window at a time, all target haplotypes batched
through the model, records written in order as soon as they are known."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from genimpute import __version__
from genimpute.errors import InputError
from genimpute.io.contigs import normalise_contig
from genimpute.io.vcf_reader import TargetData, read_target
from genimpute.io.vcf_writer import VcfWriter, dosage_r2, genotype_columns
from genimpute.modeldir import load_model_dir
from genimpute.panel import Alignment, ReferencePanel, align_target
from genimpute.predict import window_probabilities
from genimpute.regions import Region
from genimpute.validation import validate
from genimpute.windows import plan_windows

log = logging.getLogger(__name__)

# kinds of output record
_TYPED, _IMPUTED, _PASSED = 0, 1, 2


@dataclass
class _Contig:
    key: str
    name: str  # as the target writes it
    panel_index: int | None  # None when the panel lacks this contig


class _RecordFormatter:
    """Builds output lines for typed, imputed and passed-through records."""

    def __init__(self, panel: ReferencePanel, target: TargetData, aln: Alignment):
        self.panel, self.target, self.aln = panel, target, aln

    def _panel_fixed(self, rows, contig_name):
        p = self.panel
        return [[contig_name, str(p.positions[r]), p.ids[r], p.refs[r], p.alts[r]] for r in rows]

    def typed(self, writer, rows, contig_name):
        haps = self.aln.alleles_at(np.asarray(rows)).astype(np.float32)  # (V, 2S)
        af = haps.mean(axis=1)
        info = [f"AF={a:.4g}" for a in af]
        writer.write_records(self._panel_fixed(rows, contig_name), info, "GT:DS:GP", genotype_columns(haps[:, 0::2], haps[:, 1::2]))

    def imputed(self, writer, rows, probs, contig_name):
        af, r2 = dosage_r2(probs)
        info = [f"AF={a:.4g};DR2={d:.3f};IMP" for a, d in zip(af, r2)]
        writer.write_records(self._panel_fixed(rows, contig_name), info, "GT:DS:GP", genotype_columns(probs[:, 0::2], probs[:, 1::2]))

    def passed(self, writer, rows):
        t = self.target
        fixed = [[t.records.contigs[r], str(t.records.positions[r]), t.records.ids[r], t.records.refs[r], t.records.alts[r]] for r in rows]
        alleles = t.alleles[rows].astype(str).astype(object)
        columns = alleles[:, 0::2] + "|" + alleles[:, 1::2]
        writer.write_records(fixed, ["."] * len(rows), "GT", columns)


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


def _write_events(writer, fmt: _RecordFormatter, events, probs_by_row: dict, contig_name: str) -> None:
    """Write a run of events, formatting consecutive records of one kind together."""
    start = 0
    while start < len(events):
        kind = events[start][1]
        end = start
        while end < len(events) and events[end][1] == kind:
            end += 1
        rows = [e[2] for e in events[start:end]]
        if kind == _TYPED:
            fmt.typed(writer, rows, contig_name)
        elif kind == _IMPUTED:
            fmt.imputed(writer, rows, np.stack([probs_by_row[r] for r in rows]), contig_name)
        else:
            fmt.passed(writer, rows)
        start = end


def impute(
    target_path: str | Path,
    model_dir: str | Path,
    out: str | Path,
    device: torch.device,
    batch_size: int = 64,
    force: bool = False,
    progress: bool = True,
    validate_fraction: float | None = None,
    seed: int = 1,
    region: Region | None = None,
) -> dict:
    """Impute every panel record the target does not type; write `out`.

    With `region`, write only the records inside it. Windows are still
    planned over the whole contig, so a region's records get exactly the
    windows, evidence and values of a whole-contig run: chunk outputs
    concatenate into the single-run output, seams included.

    With `validate_fraction`, first estimate accuracy on that fraction of
    the typed sites (of the region), hidden (see genimpute.validation), and
    record it in the log, the summary and the output header."""
    started = time.monotonic()
    loaded = load_model_dir(model_dir)
    model = loaded.model.to(device)
    panel, wcfg = loaded.panel, loaded.config.window
    target = read_target(target_path)
    aln = align_target(panel, target, source=str(target_path))
    typed_mask = np.zeros(len(panel), dtype=bool)
    typed_mask[aln.panel_rows] = True
    fmt = _RecordFormatter(panel, target, aln)
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
    windows_by_contig = {
        c.key: [w for w in plan_windows(panel.contig_index, panel.positions, typed_mask, wcfg.untyped, wcfg.typed,
                                        [c.panel_index]) if in_region[w.predicted].any()]
        for c in contigs if c.panel_index is not None
    }
    n_windows = sum(len(w) for w in windows_by_contig.values())
    log.info("%d target samples, %d typed sites matched, %d windows", len(target.samples), len(aln.panel_rows), n_windows)

    meta = {
        "source": f"genimpute {__version__}",
        "genimputeCommand": " ".join(sys.argv),
        "genimputeModel": f"{Path(model_dir).resolve()} ({loaded.config.model.name}, {loaded.provenance.get('steps')} steps)",
    }
    validation = None
    if validate_fraction is not None:
        validation = validate(model, panel, aln, typed_mask, wcfg, validate_fraction, seed, batch_size, device,
                              eligible=in_region)
        meta["genimputeValidation"] = validation.header_value()
        log.info("validation: %d typed sites hidden and imputed: empirical r2 %.4f, concordance %.4f",
                 validation.masked_sites, validation.empirical_r2, validation.concordance)
    bar = tqdm(total=n_windows, desc="impute", unit="window", disable=not progress, file=sys.stderr)
    log_every = max(1, n_windows // 10)
    n_imputed = n_done = 0
    with VcfWriter(out, force=force) as writer:
        writer.write_header(target.samples, [c.name for c in header_contigs], meta)
        for contig in contigs:
            events = _events(panel, target, aln, contig, typed_mask)
            if region is not None:
                events = [e for e in events if region.contains(contig.key, e[0])]
            position_of_event = {e[2]: i for i, e in enumerate(events) if e[1] != _PASSED}
            done = 0
            for window in windows_by_contig.get(contig.key, []):
                n_done += 1
                haps = panel.haplotypes(window.columns)
                query_typed = aln.alleles_at(window.columns[window.typed]).T
                probs = window_probabilities(model, window, haps, query_typed, wcfg.context, batch_size, device)
                predicted = window.predicted
                written = predicted[in_region[predicted]]  # all of them unless the window straddles a region edge
                upto = position_of_event[int(written[-1])] + 1
                _write_events(writer, fmt, events[done:upto], dict(zip(predicted.tolist(), probs)), contig.name)
                done = upto
                n_imputed += len(written)
                bar.update(1)
                if n_done % log_every == 0:  # progress for logs, where no bar is drawn
                    log.info("imputed %d of %d windows in %.0f s", n_done, n_windows, time.monotonic() - started)
            _write_events(writer, fmt, events[done:], {}, contig.name)
    bar.close()
    summary = {
        "samples": len(target.samples),
        "typed_sites": len(aln.panel_rows),
        "imputed_records": n_imputed,
        "passed_through": len(aln.unmatched_rows),
        "records_written": writer.records,
        "windows": n_windows,
        "seconds": round(time.monotonic() - started, 2),
        "validation": vars(validation) if validation else None,
    }
    log.info("wrote %s: %d records (%d imputed) in %.1f s", out, writer.records, n_imputed, summary["seconds"])
    return summary
