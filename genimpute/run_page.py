"""The QC page of one imputation run, assembled from the run's own objects
(the panel, the aligned target, the quality of the records written, the
header's provenance and the run's summary) into the tables
of genimpute.run_facts and the page of genimpute.qc_report."""

from __future__ import annotations

import logging
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd

from genimpute import run_facts
from genimpute.io.contigs import normalise_contig
from genimpute.qc_report import RunReport, write_page
from genimpute.runtime import usable_cores

log = logging.getLogger(__name__)


def write_run_page(path: Path, panel, target, aln, samples, quality, meta: dict, summary: dict,
                   region=None) -> None:
    """Write the run's QC page to `path`, and say where; `samples`: the
    run's run_facts.sample_table."""
    started = time.monotonic()
    write_page(path, run_report(panel, target, aln, samples, quality, meta, summary, region))
    log.info("QC page %s written in %.1f s", path, time.monotonic() - started)


def run_report(panel, target, aln, samples, quality, meta: dict, summary: dict, region=None) -> RunReport:
    """The run's RunReport; with a `region`, its target records only (a
    --region run, or a piece of a genome-wide one, reads the whole target)."""
    records = target.records
    inside = _in_region(records, region)
    decisions = [d for d in aln.decisions if inside[d.target_row]]
    frequencies = run_facts.allele_frequencies(aln.haplotypes, panel.alt_freq[aln.panel_rows], panel.n_haplotypes)
    rows = aln.target_rows
    frequencies.insert(0, "pos", records.positions[rows])
    frequencies.insert(0, "contig", [records.contigs[r] for r in rows])
    return RunReport(
        provenance=_provenance(meta, summary),
        decisions=run_facts.decision_table(decisions, records.contigs),
        dropped=run_facts.dropped_records(decisions, target),
        frequencies=frequencies[inside[rows]].reset_index(drop=True),
        samples=samples,
        flagged=run_facts.flagged_samples(samples),
        samples_in_panel=summary["samples_in_panel"],
        possible_duplicates=summary["possible_panel_duplicates"],
        quality=run_facts.quality_by_maf(*quality.arrays()),
        counts={"records_written": summary["records_written"], "imputed_records": summary["imputed_records"]},
        validation=summary["validation"],
    )


def _in_region(records, region) -> np.ndarray:
    """(records,) which target records lie in `region` (all without one)."""
    positions = np.asarray(records.positions)
    if region is None:
        return np.ones(len(positions), dtype=bool)
    names, which = np.unique(np.asarray(records.contigs, dtype=object), return_inverse=True)
    keys = np.array([normalise_contig(n) for n in names], dtype=object)[which.ravel()]
    return region.contains_each(keys, positions)


def combined_report(reports: list, pieces: pd.DataFrame, seconds: float) -> RunReport:
    """One report of a genome-wide run from its pieces' (each a contig, or a
    stretch of one, from one panel): their tables joined, the counts summed,
    the provenance of the first with every panel, and the pieces listed."""
    first = reports[0]
    provenance = {**first.provenance, "panel": ", ".join(p for p in dict.fromkeys(pieces["panel"]) if p != "-"),
                  "wall time (s), before this page": round(seconds, 2)}
    validations = [r.validation for r in reports if r.validation]
    return RunReport(
        provenance=provenance,
        decisions=run_facts.combined_decision_tables([r.decisions for r in reports]),
        dropped=pd.concat([r.dropped for r in reports], ignore_index=True),
        frequencies=pd.concat([r.frequencies for r in reports], ignore_index=True),
        samples=(samples := run_facts.combined_sample_tables([r.samples for r in reports])),
        flagged=run_facts.flagged_samples(samples),
        samples_in_panel=max(r.samples_in_panel for r in reports),
        possible_duplicates=max(r.possible_duplicates for r in reports),
        quality=run_facts.combined_quality([r.quality for r in reports]),
        counts={key: sum(r.counts[key] for r in reports) for key in first.counts},
        validation=_pooled_validation(validations) if validations else None,
        pieces=pieces,
    )


def _pooled_validation(validations: list) -> dict:
    """--validate's estimate over every piece: the pieces' empirical r2 and
    concordance weighted by their hidden sites (each piece's is its own
    contig's: the genotypes are not kept to pool them)."""
    sites = sum(v["masked_sites"] for v in validations)
    weighed = {key: sum(v[key] * v["masked_sites"] for v in validations) / max(sites, 1)
               for key in ("empirical_r2", "concordance")}
    return {**validations[0], "masked_sites": sites, **weighed}


def _provenance(meta: dict, summary: dict) -> dict:
    names = {"source": "genimpute", "genimputeCommand": "command", "genimputeModel": "engine",
             "genimputeReference": "panel", "genimputePhasing": "phasing", "genimputeValidation": "validation"}
    facts = {names.get(key, key): value for key, value in meta.items()}
    facts.update({"threads": usable_cores(), "wall time (s), before this page": summary["seconds"],
                  "peak memory (GB)": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)})
    return facts
