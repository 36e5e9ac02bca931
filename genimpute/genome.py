"""A genome-wide run: the target's contigs imputed from a panel shipped as
one file per chromosome (or several files of any contigs), into one output
per contig (`--out 'x.chr{chrom}.vcf.gz'`) or one output in the target's
contig order.

Each panel file is read once and each target contig it holds is imputed
from it as a single-panel run of that contig would be (imputation.impute
with the contig as --region), so a contig's records are exactly a
single-contig run's. A contig no panel holds (chrY, MT, unplaced ones) is
passed through as the target has it, with a warning. A contig split across
files (a chrX shipped as PAR1, non-PAR and PAR2) is imputed from each file
over the stretch between that file's first record and the next file's.
Every piece is written to a scratch directory beside the output, with
its info file, and the outputs and theirs are published only once every
contig has succeeded. Outputs are VCF: BCF, BGEN and PGEN are written by
per-chromosome runs. The run has one QC page (x.chr{chrom}.vcf.gz gives
x.html), its pieces' reports joined.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import re
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from genimpute.errors import GenimputeError, InputError
from genimpute.imputation import OpenPanel, impute, open_reference
from genimpute.io import info_file
from genimpute.io.contigs import normalise_contig
from genimpute.io.output_names import info_path, output_format
from genimpute.io.scratch import publish, remove_stale_scratch, scratch_directory
from genimpute.io.vcf_concat import concatenate
from genimpute.io.vcf_reader import contig_spans as target_contig_spans
from genimpute.io.vcf_writer import check_output_directory
from genimpute.panel import contig_names, contig_spans
from genimpute.qc_report import page_path, write_page
from genimpute.regions import Region
from genimpute.run_page import combined_report

log = logging.getLogger(__name__)

CHROM_FIELD = "{chrom}"
GENOME_SCRATCH = ".genimpute-genome"
INDEX_SUFFIXES = (".tbi", ".csi")


@dataclass(frozen=True)
class Piece:
    """One single-panel run: the target contig `contig` (as the target
    names it) within `region`, from `panel` (None: no panel holds it)."""

    contig: str
    panel: str | None
    region: Region


def is_genome_wide(refs: list, out: str) -> bool:
    """Several panels, a pattern of panels, or one output per contig."""
    return len(refs) > 1 or any(glob.has_magic(str(r)) for r in refs) or CHROM_FIELD in str(out)


def expand_panels(refs: list) -> list[str]:
    """--ref's files, a shell pattern ('panels/chr*.vcf.gz', quoted) expanded
    in sorted order, its panels' index files left out; each file once."""
    panels: list[str] = []
    for ref in map(str, refs):
        found = sorted(p for p in glob.glob(ref) if not p.endswith(INDEX_SUFFIXES)) if glob.has_magic(ref) else [ref]
        if not found:
            raise InputError(f"--ref {ref}: expected panel files matching the pattern; found none")
        for path in found:
            if not Path(path).is_file():
                raise InputError(f"--ref {path}: no such file")
            if path not in panels:
                panels.append(path)
    return panels


def plan_pieces(target_contigs: list, panels: list, region: Region | None = None) -> list[Piece]:
    """The runs that cover every target contig (in the target's order), each
    from the panel holding it; a contig two panels hold is tiled between
    them by their first records."""
    holders: dict = {}
    for path in panels:
        for name in contig_names(path):
            holders.setdefault(normalise_contig(name), []).append(path)
    pieces = []
    for contig in target_contigs:
        key = normalise_contig(contig)
        if region is not None and key != region.key:
            continue
        pieces += _tiles(contig, holders.get(key, []), region)
    return pieces


def _tiles(contig: str, panels: list, region: Region | None) -> list[Piece]:
    """The pieces of one target contig: one per panel holding it, each from
    its first record to the next panel's (clipped to `region`)."""
    whole = region or Region(contig)
    if len(panels) <= 1:
        return [Piece(contig, panels[0] if panels else None, Region(contig, whole.start, whole.end))]
    starts = sorted((_span(path, contig)[0], path) for path in panels)
    pieces = []
    for i, (first, path) in enumerate(starts):
        start = max(1 if i == 0 else first, whole.start)
        ends = [e for e in (starts[i + 1][0] - 1 if i + 1 < len(starts) else None, whole.end) if e is not None]
        end = min(ends) if ends else None
        if end is None or start <= end:
            pieces.append(Piece(contig, path, Region(contig, start, end)))
    return pieces


def _span(path: str, contig: str) -> tuple[int, int]:
    key = normalise_contig(contig)
    return next(span for name, span in contig_spans(path).items() if normalise_contig(name) == key)


def output_names(out: str, target_contigs: list) -> dict:
    """{target contig: its output}: out with {chrom} as the target names the
    contig, or the one output for every contig."""
    return {contig: str(out).replace(CHROM_FIELD, contig) for contig in target_contigs}


def impute_genome(target: str | Path, refs: list, out: str, region: Region | None = None, force: bool = False,
                  progress: bool = False, **options) -> dict:
    """Impute `target` from the panels `refs` (files or patterns) into
    `out` (with {chrom}: one file per contig); `options`: imputation.impute's.
    Returns {"contigs": a summary row per piece, "outputs": the files written}."""
    if options.get("audit") is not None:
        raise InputError("--audit: expected one panel; with several, run impute per panel for its audit")
    if output_format(out) != "vcf":
        raise InputError(f"--out: expected a .vcf.gz output for a genome-wide run (several --ref, a pattern, "
                         f"or {CHROM_FIELD}); found {out} (for BCF, BGEN or PGEN, run impute per chromosome)")
    started, panels = time.monotonic(), expand_panels(refs)
    contigs = list(target_contig_spans(target))
    outputs = output_names(out, contigs)
    page = genome_page_path(out) if options.pop("html", True) else None
    for path in set(outputs.values()):
        check_output_directory(path)
        for written in (Path(path), info_path(path), page):
            if written is not None and written.exists() and not force:
                raise InputError(f"output {written}: exists; pass --force to overwrite" +
                                 (" (or --no-html)" if written == page else ""))
    pieces = plan_pieces(contigs, panels, region)
    _warn_unheld(pieces)
    directory = Path(next(iter(outputs.values()))).parent
    remove_stale_scratch(directory, GENOME_SCRATCH)  # a killed run's pieces
    reports = None if page is None else [None] * len(pieces)
    with _each_warning_once(), scratch_directory(directory, GENOME_SCRATCH) as scratch:
        rows = _run_pieces(target, pieces, scratch, progress, options, reports)
        written = _assemble(pieces, scratch, outputs, force, panels)
    if page is not None:
        write_page(page, combined_report(reports, pd.DataFrame(rows), time.monotonic() - started))
        log.info("QC page of the genome-wide run: %s", page)
    return {"contigs": rows, "outputs": written}


def genome_page_path(out: str) -> Path:
    """The QC page of a genome-wide run: beside its output (or outputs,
    x.chr{chrom}.vcf.gz giving x.html)."""
    path = Path(out)
    name = re.sub(r"[._-]?(chr)?" + re.escape(CHROM_FIELD), "", path.name)
    return page_path(path.with_name(name if not name.startswith(".") else "genome" + name))


class _SeenWarnings(logging.Filter):
    def __init__(self):
        super().__init__()
        self.seen: set = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        message = record.getMessage()
        fresh = message not in self.seen
        self.seen.add(message)
        return fresh


@contextlib.contextmanager
def _each_warning_once():
    """Each contig's run warns as a single run would (no map, say): said
    once, not once per contig."""
    handlers, seen = logging.getLogger().handlers, _SeenWarnings()
    for handler in handlers:
        handler.addFilter(seen)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(seen)


def _warn_unheld(pieces: list) -> None:
    unheld = [p.contig for p in pieces if p.panel is None]
    if unheld:
        log.warning("%d target contigs held by no panel, passed through unimputed: %s", len(unheld),
                    ", ".join(unheld))


def _run_pieces(target, pieces: list, scratch: Path, progress: bool, options: dict,
                reports: list | None) -> list[dict]:
    """Each piece imputed into scratch/N.vcf.gz, each panel read once (and
    the contigs no panel holds passed through while the first is open);
    each piece's QC report put in reports[i], unless reports is None."""
    order = list(dict.fromkeys(p.panel for p in pieces if p.panel is not None))
    rows: list = [None] * len(pieces)
    for n, path in enumerate(order or [None]):
        with contextlib.ExitStack() as stack:
            try:
                opened = _open(path, scratch, stack, progress)
            except GenimputeError as exc:
                held = sorted({p.contig for p in pieces if p.panel == path})
                raise type(exc)(f"contig {', '.join(held)}: {exc}") from exc
            for i, piece in enumerate(pieces):
                if piece.panel == path or (n == 0 and piece.panel is None):
                    sink = [] if reports is not None else None
                    rows[i] = _run_piece(target, piece, opened, scratch / f"{i}.vcf.gz", progress,
                                         {**options, "page_reports": sink})
                    if sink:
                        reports[i] = sink[0]
    return rows


def _open(path: str | None, scratch: Path, stack: contextlib.ExitStack, progress: bool) -> OpenPanel:
    if path is None:
        raise InputError("--ref: expected at least one panel holding a contig of the target; found none")
    log.info("reading panel %s", path)
    return OpenPanel(path, open_reference(path, scratch, stack, progress))


def _run_piece(target, piece: Piece, opened: OpenPanel, out: Path, progress: bool, options: dict) -> dict:
    started = time.monotonic()
    held = piece.panel is not None
    settings = {**options, "html": False, **({} if held else {"validate_fraction": None})}
    try:
        summary = impute(target, out=out, ref=opened, region=piece.region, progress=progress, **settings)
    except GenimputeError as exc:
        raise type(exc)(f"contig {piece.contig}: {exc}") from exc
    return {"contig": piece.contig, "panel": piece.panel or "-", "typed_sites": summary["typed_sites"] if held else 0,
            "records": summary["records_written"], "imputed": summary["imputed_records"],
            "samples": summary["samples"], "seconds": round(time.monotonic() - started, 1),
            "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)}


def _assemble(pieces: list, scratch: Path, outputs: dict, force: bool, panels: list) -> list[str]:
    """Publish each output and its info file from its pieces' files in
    `scratch` (renamed where one piece makes it, else joined in the
    target's contig order)."""
    by_output: dict = {}
    for i, piece in enumerate(pieces):
        by_output.setdefault(outputs[piece.contig], []).append(scratch / f"{i}.vcf.gz")
    for path, parts in by_output.items():
        if len(parts) == 1:
            publish(parts[0], path, force)
            publish(Path(f"{parts[0]}.tbi"), f"{path}.tbi", True)
            publish(info_path(parts[0]), info_path(path), True)
        else:
            concatenate(parts, Path(path), force,
                        {"genimputeReference": ",".join(str(Path(p).resolve()) for p in panels)})
            info_file.concatenate([info_path(part) for part in parts], info_path(path), True)
    return list(by_output)
