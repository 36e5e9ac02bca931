"""The QC page of one imputation run, assembled from the run's own objects
(the panel, the aligned target, the quality of the records written, the
header's provenance and the run's summary) into the tables
of genimpute.run_facts and the page of genimpute.qc_report."""

from __future__ import annotations

import logging
import resource
import time
from pathlib import Path

from genimpute import run_facts
from genimpute.qc_report import RunReport, write_page
from genimpute.runtime import usable_cores

log = logging.getLogger(__name__)


def write_run_page(path: Path, panel, target, aln, samples, quality, meta: dict, summary: dict) -> None:
    """Write the run's QC page to `path`, and say where; `samples`: the
    run's run_facts.sample_table."""
    started = time.monotonic()
    write_page(path, run_report(panel, target, aln, samples, quality, meta, summary))
    log.info("QC page %s written in %.1f s", path, time.monotonic() - started)


def run_report(panel, target, aln, samples, quality, meta: dict, summary: dict) -> RunReport:
    frequencies = run_facts.allele_frequencies(aln.haplotypes, panel.alt_freq[aln.panel_rows], panel.n_haplotypes)
    rows = aln.target_rows
    frequencies.insert(0, "pos", target.records.positions[rows])
    frequencies.insert(0, "contig", [target.records.contigs[r] for r in rows])
    return RunReport(
        provenance=_provenance(meta, summary),
        decisions=run_facts.decision_table(aln.decisions, target.records.contigs),
        dropped=run_facts.dropped_records(aln.decisions, target),
        frequencies=frequencies,
        samples=samples,
        flagged=run_facts.flagged_samples(samples),
        samples_in_panel=summary["samples_in_panel"],
        possible_duplicates=summary["possible_panel_duplicates"],
        quality=run_facts.quality_by_maf(*quality.arrays()),
        counts={"records_written": summary["records_written"], "imputed_records": summary["imputed_records"]},
        validation=summary["validation"],
    )


def _provenance(meta: dict, summary: dict) -> dict:
    names = {"source": "genimpute", "genimputeCommand": "command", "genimputeModel": "engine",
             "genimputeReference": "panel", "genimputePhasing": "phasing", "genimputeValidation": "validation"}
    facts = {names.get(key, key): value for key, value in meta.items()}
    facts.update({"threads": usable_cores(), "wall time (s), before this page": summary["seconds"],
                  "peak memory (GB)": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)})
    return facts
