"""Imputation of a target VCF, as a short run of named steps: read and
harmonise the inputs, phase them if need be, choose the engine (the copying
model, genimpute.copying_engine, or a model directory's backbone,
genimpute.model_engine), and write every output record (genimpute.records)
in the output's format (genimpute.outputs)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from genimpute import __version__
from genimpute.config import BUILT_IN_PHASER, CopyingSettings
from genimpute.copying_engine import CopyingEngine, announce_compile
from genimpute.errors import InputError
from genimpute.identity import PanelMatches, report_samples_in_panel, sample_audit_path
from genimpute.io.genetic_map import CM_PER_BP, GeneticMap
from genimpute.io.output_names import info_path, output_files
from genimpute.io.scratch import PHASE_SCRATCH, remove_stale_scratch
from genimpute.io.vcf_reader import TargetData, read_target
from genimpute.io.vcf_writer import check_output_directory
from genimpute.model_engine import ModelEngine, ModelSource
from genimpute.outputs import OutputSettings, run_output
from genimpute.panel import Alignment, ReferencePanel, ShownSpool, align_target, is_compact, read_reference
from genimpute.qc_report import page_path
from genimpute.records import CohortRecords, contigs_in_target_order, missing_calls, samples_per_batch
from genimpute.regions import Region
from genimpute.run_facts import sample_table
from genimpute.run_page import run_report, write_run_page

log = logging.getLogger(__name__)


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
    output: OutputSettings = OutputSettings(),
    html: bool = True,
    page_reports: list | None = None,
) -> dict:
    """Impute every panel record the target does not type into `out`; return the run's summary.

    The target is harmonised to the panel (genimpute.harmonise; `audit`: a TSV of every site's decision),
    phased first with `phaser` if unphased (None: refuse), its samples found in the panel kept from copying
    themselves (genimpute.identity). `copying`: the copying engine with those settings, else the model
    directory's backbone; `ref`: the panel, else the model directory's. `region`: write only its records,
    with the values of a whole-contig run. `validate_fraction`: first estimate accuracy on that share of the
    typed sites, hidden. Samples go in batches of at most `batch_samples` (the output does not depend on
    it); `output`: the settings of out's format (.vcf.gz, .bgen or .pgen, with an info file beside it);
    `html`: the QC page beside the output (genimpute.qc_report); `page_reports`: _page's."""
    started = time.monotonic()
    written = _checked_output(out, output, batch_samples, audit, force, page_path(out) if html else None)
    if copying is not None:
        announce_compile()
    genetic_map = read_once(genetic_map)
    with contextlib.ExitStack() as stack:  # holds a VCF panel's spooled records to the end of the run
        source = ModelSource(Path(model_dir), open_reference(ref, Path(out).parent, stack, progress), device)
        panel = _panel_with_map(source, genetic_map, copying)
        target, aln, matches, samples = _harmonised_target(panel, target_path, audit)
        header_contigs = contigs_in_target_order(panel, target, aln)
        contigs, in_region = _contigs_to_write(panel, header_contigs, region)
        aln, phased_by = _phased(aln, panel, target, phaser, genetic_map, target_path, contigs, matches.in_panel,
                                 Path(out).parent)
        engine = _engine(source, panel, aln, copying, matches.in_panel)
        windows, n_windows = _windows(engine, contigs, in_region, target, aln)
        meta = _header_meta(engine, ref, phased_by)
        validation, written.hidden = _validation(engine, validate_fraction, seed, in_region, meta)
        filled = engine.fill_missing(in_region)
        records = CohortRecords(panel, target, aln, engine.typed_mask, filled, written,
                                samples_per_batch(batch_samples, windows))
        n_imputed = records.write([c.name for c in header_contigs], meta, contigs, region, in_region, windows,
                                  engine.probabilities, progress, started)
        summary = _summary(target, aln, matches, filled, written.records, n_imputed, n_windows, validation, started)
        _page(out, html, page_reports, region, panel, target, aln, samples, records.quality, meta, summary)
        log.info("wrote %s: %d records (%d imputed) in %.1f s", out, written.records, n_imputed, summary["seconds"])
        return summary


def _page(out, html: bool, page_reports: list | None, region, *facts) -> None:
    """The run's QC page beside `out`; or, given `page_reports`, the page's
    report appended to it (a genome-wide run's one page joins its pieces');
    facts: run_page.run_report's."""
    if page_reports is not None:
        page_reports.append(run_report(*facts, region))
    elif html:
        write_run_page(page_path(out), *facts, region)


def _windows(engine, contigs: list, in_region: np.ndarray, target: TargetData, aln: Alignment) -> tuple[dict, int]:
    """The engine's windows over the contigs to write, and how many."""
    windows = engine.windows(contigs, in_region)
    n_windows = sum(len(w) for w in windows.values())
    log.info("%d target samples, %d typed sites matched, %d windows", len(target.samples), len(aln.panel_rows),
             n_windows)
    return windows, n_windows


def _harmonised_target(panel: ReferencePanel, target_path,
                       audit) -> tuple[TargetData, Alignment, PanelMatches, pd.DataFrame]:
    """(the target, its alignment to the panel, its samples found in the
    panel, each sample's calls at the matched sites: run_facts.sample_table,
    which phasing leaves as they are), each decision reported to `audit`
    if given."""
    target = read_target(target_path)
    aln = align_target(panel, target, source=str(target_path), audit=audit)
    samples = sample_table(aln.haplotypes, target.samples)
    _warn_uncalled_samples(samples, target_path)
    # by name or genotype: phase plays no part
    matches = report_samples_in_panel(panel, aln, target.samples, audit)
    return target, aln, matches, samples


def _warn_uncalled_samples(samples: pd.DataFrame, source) -> None:
    """A sample with no call at any matched site is imputed from the panel's
    frequencies alone, which is rarely what its owner meant."""
    uncalled = samples.loc[samples["alleles_called"] == 0, "sample"]
    if len(uncalled):
        log.warning("%s: %d samples have no call at any typed site matched to the panel (first: %s); their "
                    "genotypes are the panel's frequencies alone", source, len(uncalled), uncalled.iloc[0])


def _phased(aln: Alignment, panel: ReferencePanel, target: TargetData, phaser: str | None, genetic_map, source,
            contigs: list, in_panel: np.ndarray, workdir: Path) -> tuple[Alignment, str | None]:
    """(the alignment, how it was phased: None where the target came
    phased), an unphased target phased on the contigs to be written
    `contigs` (see _phase; an external phaser's files in `workdir`)."""
    if aln.phased:
        return aln, None
    return _phase(aln, panel, target, phaser, genetic_map, source,
                  [c.panel_index for c in contigs if c.panel_index is not None], in_panel, workdir)


def _engine(source: ModelSource, panel: ReferencePanel, aln: Alignment, copying: CopyingSettings | None,
            in_panel: np.ndarray):
    """The copying engine with `copying`'s settings, else the model
    directory's backbone, for the panel records the aligned target types."""
    typed_mask = aln.typed_records(len(panel))
    if copying is None:
        return ModelEngine(source, panel, aln, typed_mask, in_panel)
    return CopyingEngine(panel, aln, typed_mask, copying, in_panel)


def read_once(genetic_map) -> GeneticMap | None:
    """The map read once for the panel and the phaser (and, in a genome-wide
    run, every contig): a path is read, a GeneticMap taken as it is."""
    if genetic_map is None or isinstance(genetic_map, GeneticMap):
        return genetic_map
    return GeneticMap(genetic_map)


@dataclasses.dataclass(frozen=True)
class OpenPanel:
    """A reference panel already read (`panel`) from the file `path`: a
    genome-wide run imputes each of its contigs without reading it again."""

    path: str
    panel: ReferencePanel


def open_reference(ref, directory: Path, stack: contextlib.ExitStack, progress: bool) -> ReferencePanel | None:
    """--ref's panel, if given (an OpenPanel's as it is). A VCF/BCF's packed
    records are spooled to unnamed temporary files in `directory` (the
    output's), open until `stack` closes, and the copying engine reads a
    segment's records from there as from a compact panel: in memory they
    would take twice the packed panel. Reading a large one takes minutes:
    `progress` shows a bar of the records read."""
    if ref is None:
        return None
    if isinstance(ref, OpenPanel):
        return ref.panel
    spool = None if is_compact(ref) else stack.enter_context(ShownSpool(directory, progress))
    return read_reference(ref, spool)


def _header_meta(engine, ref, phased_by: str | None) -> dict:
    """The header's lines of provenance: genimpute's version, the command, the engine, the panel and, for
    an unphased target, how it was phased."""
    meta = {"source": f"genimpute {__version__}", "genimputeCommand": " ".join(sys.argv),
            "genimputeModel": engine.description}
    if ref is not None:
        meta["genimputeReference"] = str(Path(ref.path if isinstance(ref, OpenPanel) else ref).resolve())
    if phased_by is not None:
        meta["genimputePhasing"] = phased_by
    return meta


def _summary(target: TargetData, aln: Alignment, matches, filled: dict, records_written: int, n_imputed: int,
             n_windows: int, validation, started: float) -> dict:
    return {
        "samples": len(target.samples),
        "typed_sites": len(aln.panel_rows),
        "imputed_records": n_imputed,
        "passed_through": len(aln.unmatched_rows),
        "missing_calls_imputed": int(missing_calls(aln.alleles_at(np.array(sorted(filled), dtype=np.int64))).sum()),
        "samples_in_panel": int((matches.in_panel >= 0).sum()),
        "possible_panel_duplicates": int(matches.possible_duplicates.sum()),
        "records_written": records_written,
        "windows": n_windows,
        "seconds": round(time.monotonic() - started, 2),
        "validation": vars(validation) if validation else None,
    }


def _checked_output(out, settings: OutputSettings, batch_samples: int, audit, force: bool, page: Path | None):
    """The run's output (genimpute.outputs), having stopped on what would
    fail only after the inputs are read."""
    written = run_output(out, settings, force)
    check_output_directory(out)  # before the panel is read: its records are spooled there
    for path in [*output_files(out), info_path(out)]:
        if path.exists() and not force:
            raise InputError(f"output {path}: exists; pass --force to overwrite")
    remove_stale_scratch(Path(out).parent, PHASE_SCRATCH)
    if batch_samples < 1:
        raise InputError(f"--batch-samples: expected a positive number of samples; found {batch_samples}")
    for report in ([audit, sample_audit_path(audit)] if audit is not None else []):
        if Path(report).exists() and not force:
            raise InputError(f"--audit: {report} exists; use --force to overwrite it")
    if page is not None and page.exists() and not force:
        raise InputError(f"{page} (the run's QC page) exists; use --force to overwrite it, or --no-html")
    return written


def _panel_with_map(source: ModelSource, genetic_map, copying: CopyingSettings | None) -> ReferencePanel:
    """The reference panel (--ref, else the model directory's), with the
    genetic map's positions when one is given; a warning where the absence
    of a map costs accuracy."""
    panel = source.panel if source.panel is not None else source.loaded().panel
    if genetic_map is not None:
        return panel.with_genetic_map(genetic_map)
    if source.panel is not None and copying is None and source.loaded().provenance.genetic_map:
        log.warning("the model was trained with a genetic map and none was given (--map): taking 1 cM per Mb")
    elif copying is not None and np.array_equal(panel.centimorgans, panel.positions * CM_PER_BP):
        log.warning("no genetic map (--map, or `genimpute panel --map`): the copying engine takes 1 cM per Mb, "
                    "which costs accuracy where the recombination rate varies")
    return panel


def _panel_map(panel: ReferencePanel, rows: np.ndarray) -> tuple | None:
    """(bp, cM) of the panel's records `rows` (one contig's), one per
    position, for an external phaser where the panel was placed on a map
    (`genimpute panel --map`, `train --map`) and `impute` has no --map;
    None where it takes 1 cM per Mb as the phasers would."""
    bp, first = np.unique(panel.positions[rows], return_index=True)
    cm = np.maximum.accumulate(panel.centimorgans[rows][first])
    return None if np.array_equal(cm, bp * CM_PER_BP) else (bp, cm)


def _contigs_to_write(panel: ReferencePanel, header_contigs: list, region: Region | None) -> tuple[list, np.ndarray]:
    """(the contigs whose records are written, (M,) bool the panel records in `region`)."""
    in_region = np.ones(len(panel), dtype=bool)
    if region is None:
        return header_contigs, in_region
    contigs = [c for c in header_contigs if c.key == region.key]
    if not contigs:
        raise InputError(f"--region {region}: expected a contig of the target "
                         f"({', '.join(c.name for c in header_contigs)}); found {region.contig}")
    keys = np.array([panel.contig_key(c) for c in range(len(panel.contig_names))])
    in_region = region.contains_each(keys[panel.contig_index], panel.positions)
    if contigs[0].panel_index is None:
        log.info("--region %s: contig %s is not in the panel; its target records are passed through", region,
                 region.contig)
    elif not in_region.any():
        log.warning("--region %s holds no panel record: the output has none", region)
    return contigs, in_region


def _validation(engine, fraction: float | None, seed: int, in_region: np.ndarray, meta: dict):
    """With `fraction`, the engine's estimate of its accuracy on that
    fraction of the typed sites, hidden, logged and put in the header
    `meta`, and the hidden records' sums (genimpute.validation.score);
    (None, None) without."""
    if fraction is None:
        return None, None
    validation, hidden = engine.validate(fraction, seed, in_region)
    meta["genimputeValidation"] = validation.header_value()
    log.info("validation: %d typed sites hidden and imputed: empirical r2 %.4f, concordance %.4f",
             validation.masked_sites, validation.empirical_r2, validation.concordance)
    return validation, hidden


def _phase(aln: Alignment, panel: ReferencePanel, target: TargetData, phaser: str | None, genetic_map, source,
           contigs: list, in_panel: np.ndarray, workdir: Path) -> tuple[Alignment, str]:
    """(the alignment phased, how: phaser_description) of an unphased
    target's matched records on `contigs` (panel contig indices: those to be
    written), phased against the panel with an external phaser (see
    genimpute.phasing; on `genetic_map`, else on the panel's cM where it
    was placed on a map) or genimpute's own (genimpute.copying.phaser, on
    the panel's cM, with its default PhasingSettings), contig by contig.
    Panel samples that are target samples (`in_panel`) are left out of the
    reference, which would hand them their true phase. Records on other
    contigs stay as they are: nothing of them is written."""
    from genimpute.copying.phaser import phase_targets
    from genimpute.phasing import PackedHaplotypes, find_phaser, phase_haplotypes, phaser_description

    if phaser is None:
        raise InputError(f"{source}: expected phased genotypes; found unphased heterozygous calls "
                         f"(phase first, or let genimpute phase with --phaser auto|{BUILT_IN_PHASER}|beagle|shapeit4)")
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
        kept = None if reference.all() else reference
        if tool == BUILT_IN_PHASER:
            phased[on_contig] = phase_targets(aln.haplotypes[on_contig], np.asarray(panel.packed[rows]),
                                              panel.n_haplotypes, kept, panel.centimorgans[rows],
                                              progress=log.info)
            continue
        ref_haps = PackedHaplotypes(np.asarray(panel.packed[rows]), panel.n_haplotypes, kept)
        phased[on_contig] = phase_haplotypes(
            tool, aln.haplotypes[on_contig], ref_haps, panel.contig_names[contig],
            panel.positions[rows], [panel.refs[r] for r in rows], [panel.alts[r] for r in rows], target.samples,
            ref_samples, genetic_map=genetic_map if genetic_map is not None else _panel_map(panel, rows),
            workdir=workdir)
    return dataclasses.replace(aln, haplotypes=phased, phased=True), phaser_description(tool, len(ref_samples))
