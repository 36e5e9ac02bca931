"""Command line: parse options, call the library, print. Nothing imports this."""

from __future__ import annotations

import errno
import logging
import signal
import sys
from pathlib import Path

import click

from genimpute import __version__
from genimpute.config import (
    BENCHMARK_TOOLS,
    BUILT_IN_PHASER,
    CopyingSettings,
    DEFAULT_VALIDATION_FRACTION,
    PHASERS,
    TrainConfig,
)
from genimpute.cli_sections import SectionedCommand
from genimpute.errors import GenimputeError

_TRAIN_DEFAULTS = TrainConfig()
# a flag the chosen backbone does not read is refused (genimpute.models.model_config), so these pass only when given
_BACKBONES_OWN = "[default: the backbone's]"


def _run(fn, *args, **kwargs):
    """Turn library errors into one line on stderr and exit status 1."""
    try:
        return fn(*args, **kwargs)
    except GenimputeError as exc:
        click.echo(f"genimpute: error: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"genimpute: error: {_os_error_line(exc)}", err=True)
        sys.exit(1)
    except KeyboardInterrupt as exc:
        _stopped(exc)
    except SystemError as exc:  # a signal inside a compiled (numba) call surfaces wrapped in one
        interrupt = _interrupt_behind(exc)
        if interrupt is None:
            raise
        _stopped(interrupt)


_OS_ERROR_HINTS = {
    errno.ENOSPC: "free space there, or write elsewhere",
    errno.EDQUOT: "the disk quota is spent: free space there, or write elsewhere",
    errno.EROFS: "the filesystem is read-only: write elsewhere",
    errno.EACCES: "check the permissions, or write elsewhere",
    errno.EPERM: "check the permissions, or write elsewhere",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "check the path",
    errno.EISDIR: "expected a file; found a directory",
}


def _os_error_line(exc: OSError) -> str:
    """One line for a failed read or write: what failed, where, what to do."""
    where = f": {exc.filename}" if exc.filename else ""
    hint = _OS_ERROR_HINTS.get(exc.errno)
    return f"{exc.strerror or exc}{where}" + (f" ({hint})" if hint else "")


def _stopped(exc: KeyboardInterrupt):
    click.echo("genimpute: " + ("terminated" if isinstance(exc, _Terminated) else "interrupted"), err=True)
    sys.exit(143 if isinstance(exc, _Terminated) else 130)


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM an exception was raised from, if any."""
    chain, seen = exc.__cause__ or exc.__context__, set()
    while chain is not None and id(chain) not in seen:
        if isinstance(chain, KeyboardInterrupt):
            return chain
        seen.add(id(chain))
        chain = chain.__cause__ or chain.__context__
    return None


class _Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's kill, a timeout) unwinds like Ctrl-C, so
    temporary outputs are removed on the way out; training installs its own
    handler that stops at the next step and checkpoints."""


def _terminate(signum, _frame):
    raise _Terminated

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="genimpute")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only, no progress bars.")
@click.pass_context
def main(ctx, verbose, quiet):
    """Genotype imputation from a phased reference panel (docs/cli.md)."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    ctx.obj = {"progress": not quiet and sys.stderr.isatty() or verbose > 0}
    signal.signal(signal.SIGTERM, _terminate)
    from genimpute.runtime import single_threaded_blas, skip_final_collection, tune_allocator

    tune_allocator()
    single_threaded_blas()
    skip_final_collection()


def _limit_threads(_ctx, _param, threads):
    if threads is not None:
        from genimpute.runtime import limit_threads

        limit_threads(threads)


def _threads_option(command):
    """--threads, applied before the command runs (a scheduler's job is given N cores)."""
    return click.option("--threads", type=click.IntRange(min=1), default=None, expose_value=False,
                        callback=_limit_threads,
                        help="Threads [default: the usable cores; the output does not depend on it].")(command)


_MODEL_DIR_HELP = "Model directory [default: $GENIMPUTE_MODEL or ~/.local/share/genimpute/model]."
_MAP_HELP = "Genetic map, PLINK (chrom id cM bp) or shapeit4 (pos chr cM) [default: 1 cM per Mb]."
_DEVICE_HELP = "auto, cpu or cuda[:N]: where a learned model runs (the copying engine: the CPU)."


def _alias(old: str, new: str, dest: str):
    """A hidden option with an earlier release's spelling of `new`, read into
    `dest` with a warning, so that scripts written for it keep working."""
    def warn(ctx, _param, value):
        if value is not None:
            click.echo(f"genimpute: warning: {old} is deprecated here; use {new}", err=True)
        return value

    return click.option(old, dest, hidden=True, default=None, callback=warn, expose_value=True)


_TRAIN_SECTIONS = {
    "Inputs": ["ref", "array", "genetic_map", "init", "resume"],
    "Output": ["out"],
    "Backbone": ["backbone", "dim", "layers", "heads", "rows_per_gap", "neighbours", "evidence", "body_rows",
                 "local_columns", "unsure"],
    "Windows": ["untyped", "typed", "context", "min_array_density"],
    "Training": ["steps", "max_minutes", "batch_size", "lr", "maf_weight", "seed", "checkpoint_every",
                 "validate_every"],
    "Performance": ["device", "distributed", "threads"],
}


@main.command(cls=SectionedCommand, sections=_TRAIN_SECTIONS)
@click.option("--ref", required=True, multiple=True, type=click.Path(dir_okay=False),
              help="Phased reference panel VCF/BCF; repeat for several panels.")
@click.option("--array", "array", required=True, multiple=True, type=click.Path(dir_okay=False),
              help="Array sites, 'CHROM POS [REF ALT]' a line; once, or once per --ref.")
@click.option("--map", "genetic_map", type=click.Path(exists=True, dir_okay=False), default=None, help=_MAP_HELP)
@click.option("--init", default=None, help="Start from this model directory's weights ('pretrained': the shipped model).")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help=_MODEL_DIR_HELP)
@click.option("--backbone", default=None, help="match, msa, npssm or spin [default: match].")
@_alias("--model", "--backbone", "old_backbone")
@click.option("--dim", type=int, default=None, help=f"Width of the model's layers {_BACKBONES_OWN}.")
@click.option("--layers", type=int, default=None, help=f"Layers {_BACKBONES_OWN}.")
@click.option("--heads", type=int, default=None, help=f"match, msa, spin: attention or scoring heads {_BACKBONES_OWN}.")
@click.option("--rows-per-gap", type=int, default=None,
              help=f"match: context rows each gap between typed sites votes over (0: all) {_BACKBONES_OWN}.")
@click.option("--neighbours", type=int, default=None,
              help=f"spin: nearest panel haplotypes each query reads (0: the paper's SPIN) {_BACKBONES_OWN}.")
@click.option("--evidence", is_flag=True, default=None, help="msa, npssm, spin: learn a correction to match's log-odds.")
@click.option("--body-rows", type=int, default=None,
              help=f"msa, npssm with --evidence: nearest context rows the layers read (0: all) {_BACKBONES_OWN}.")
@click.option("--local-columns", type=int, default=None,
              help=f"msa, npssm with --evidence: columns around each unsure cell (0: all) {_BACKBONES_OWN}.")
@click.option("--unsure", type=float, default=None,
              help=f"With --local-columns: unsure where match's P(alt) is in (x, 1-x) {_BACKBONES_OWN}.")
@click.option("--untyped", type=int, default=None, help="Untyped variants per window [default: 300 for match, 100 for the others].")
@click.option("--typed", type=int, default=None, help="Typed variants per window [default: 300 for match, 200 for the others].")
@click.option("--context", type=int, default=None, help="Nearest panel haplotypes per query [default: 128 for match, 24 for the others].")
@click.option("--min-array-density", type=float, default=_TRAIN_DEFAULTS.min_array_density, show_default=True,
              help="Each step keeps a random share in [x, 1] of the array's sites typed.")
@click.option("--steps", type=int, default=_TRAIN_DEFAULTS.steps, show_default=True, help="Training steps.")
@click.option("--max-minutes", type=float, default=_TRAIN_DEFAULTS.max_minutes, show_default=True,
              help="Wall-clock budget: stops at --steps or this, whichever comes first.")
@click.option("--batch-size", type=int, default=_TRAIN_DEFAULTS.batch_size, show_default=True, help="Query haplotypes per step.")
@click.option("--lr", type=float, default=_TRAIN_DEFAULTS.lr, show_default=True, help="Learning rate.")
@click.option("--maf-weight", type=float, default=_TRAIN_DEFAULTS.maf_weight, show_default=True,
              help="Weight untyped variants by MAF^-x in the loss (0: equal).")
@click.option("--seed", type=int, default=_TRAIN_DEFAULTS.seed, show_default=True, help="Random seed.")
@click.option("--checkpoint-every", type=int, default=_TRAIN_DEFAULTS.checkpoint_every, show_default=True, help="Steps between checkpoints.")
@click.option("--validate-every", type=int, default=_TRAIN_DEFAULTS.validate_every, show_default=True, help="Steps between validation r2 reports.")
@click.option("--device", default="auto", show_default=True, help=_DEVICE_HELP)
@click.option("--distributed", is_flag=True, help="Data-parallel over a torchrun launch's processes (implied under torchrun).")
@_threads_option
@click.pass_context
def train(ctx, ref, array, genetic_map, init, resume, out, backbone, old_backbone, device, distributed, **settings):
    """Train a learned model on reference panels for an array's sites.

    A multi-allelic panel record is split into biallelic ones. With several
    --ref, each step draws its window from one panel in proportion to their
    untyped records. --init's model brings its backbone and size (--backbone,
    --dim, --layers, --heads, --rows-per-gap, --neighbours). A flag the
    chosen backbone does not read is refused. Needs the learned extra
    (pip install 'genimpute[learned]')."""
    from genimpute.runtime import require_torch

    _run(require_torch, "training (genimpute train)")
    from genimpute import distributed as ddp
    from genimpute.api import train as run_train
    from genimpute.modeldir import default_model_dir

    out = Path(out) if out else default_model_dir()
    settings = {name: value for name, value in settings.items() if value is not None}
    dist = _run(ddp.start, distributed)
    if not dist.is_main:
        logging.getLogger().setLevel(logging.WARNING)  # one process reports progress
    try:
        prov = _run(run_train, ref, array, out, model=backbone or old_backbone or "match", init=init, resume=resume,
                    genetic_map=genetic_map, device=device, dist=dist, progress=ctx.obj["progress"], **settings)
    finally:
        ddp.stop(dist)
    if dist.is_main:
        last = prov["history"][-1]["val_r2"] if prov["history"] else float("nan")
        click.echo(f"model written to {out}: {prov['steps']} steps in {prov['minutes']} min, validation r2 {last:.4f}")


_IMPUTE_SECTIONS = {
    "Inputs": ["ref", "model_dir", "genetic_map", "region"],
    "Outputs": ["out", "fields", "bgen_bits", "bgen_unphased", "audit", "no_html", "force"],
    "Engine": ["engine", "ne", "phaser", "validate", "validate_fraction", "seed"],
    "Performance": ["batch_samples", "threads", "device"],
}


@main.command(cls=SectionedCommand, sections=_IMPUTE_SECTIONS)
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--ref", multiple=True, default=(),
              help="Reference panel: phased VCF/BCF or compact; repeat, or a quoted pattern, for one per chromosome.")
@click.option("--model", "model_dir", type=click.Path(file_okay=False), default=None,
              help="Learned model directory [default: the pretrained one with --ref; else $GENIMPUTE_MODEL].")
@click.option("--map", "genetic_map", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Genetic map, PLINK or shapeit4 format [default: the model's, else 1 cM per Mb].")
@click.option("--region", default=None, help="Write only CHR, CHR:START-END or CHR:START- (1-based; see chunks).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Output .vcf.gz, .bcf, .bgen or .pgen; {chrom}: a VCF per contig [default: <target>.imputed.vcf.gz].")
@click.option("--format", "fields", default=None,
              help="VCF FORMAT fields: GT and any of DS, HDS, GP, in that order [default: GT:DS:GP].")
@click.option("--bgen-bits", type=click.IntRange(1, 32), default=None, metavar="BITS",
              help="Bits per probability in a .bgen output [default: 8].")
@click.option("--bgen-unphased", is_flag=True, help="A .bgen output of genotype, not haplotype, probabilities.")
@click.option("--audit", type=click.Path(dir_okay=False), default=None,
              help="TSV of each target record's harmonisation (match, swap, flip, ...), and FILE.samples.tsv.")
@_alias("--report", "--audit", "old_audit")
@click.option("--force", is_flag=True, help="Overwrite existing outputs.")
@click.option("--no-html", "no_html", is_flag=True, help="Skip the QC page written beside the output (OUT.html).")
@click.option("--engine", type=click.Choice(["auto", "copying", "model"]), default="auto", show_default=True,
              help="copying engine, or a learned model; auto: copying with --ref and no --model.")
@click.option("--ne", type=float, default=CopyingSettings.ne, show_default=True,
              help="Effective population size in the copying engine's switch rate.")
@click.option("--phaser", type=click.Choice(["auto", *PHASERS, BUILT_IN_PHASER, "none"]), default="auto",
              show_default=True, help="For an unphased TARGET; auto: beagle, shapeit4, else genimpute's own.")
@click.option("--validate", is_flag=True,
              help="Hide a share of typed sites, impute them, report empirical r2 (and LooRsq in the info file).")
@click.option("--validate-fraction", type=float, default=DEFAULT_VALIDATION_FRACTION, show_default=True,
              help="Share of typed sites --validate hides.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed choosing the sites --validate hides.")
@click.option("--batch-samples", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Target samples imputed at once (memory; the output does not depend on it).")
@click.option("--device", default="auto", show_default=True, help=_DEVICE_HELP)
@_threads_option
@click.pass_context
def impute(ctx, target, ref, model_dir, genetic_map, region, out, fields, bgen_bits, bgen_unphased, audit, old_audit,
           no_html, force, engine, ne, phaser, validate, validate_fraction, seed, batch_samples, device):
    """Impute the untyped panel variants of a TARGET VCF.

    TARGET's records are matched to the panel (swapped or strand-flipped
    alleles recoded, palindromic and mismatched ones dropped and listed by
    --audit); an unphased TARGET is phased first (--phaser). The output
    holds every panel record on TARGET's contigs, in the format its name
    ends in: an indexed bgzipped VCF with INFO AF, DR2 and IMP (.vcf.gz),
    BGEN v1.2 with .sample and .bgi (.bgen), or PLINK 2's .pgen, .pvar and
    .psam (.pgen). Beside it go an info file (OUT.info.gz: AF, AvgCall and
    DR2 of each record, and with --validate the hidden records' LooRsq, as
    Minimac4 writes) and a QC page (OUT.html:
    inputs, allele frequencies against the panel, samples, DR2 by MAF bin).
    An output that another run wrote meanwhile is never replaced without
    --force."""
    from genimpute.api import default_output
    from genimpute.api import impute as run_impute

    if validate and not 0 < validate_fraction <= 0.5:
        raise click.BadParameter(f"expected a fraction in (0, 0.5]; found {validate_fraction}", param_hint="--validate-fraction")
    if not ne > 0:
        raise click.BadParameter(f"expected a positive effective population size; found {ne}", param_hint="--ne")
    out = out or default_output(target)
    summary = _run(run_impute, target, out, ref=list(ref) or None, model=model_dir, engine=engine, genetic_map=genetic_map,
                   region=region, fields=fields, bgen_bits=bgen_bits, bgen_unphased=bgen_unphased,
                   phaser=None if phaser == "none" else phaser,
                   validate_fraction=validate_fraction if validate else None, seed=seed, report=audit or old_audit,
                   ne=ne, batch_samples=batch_samples, device=device, force=force, html=not no_html,
                   progress=ctx.obj["progress"])
    if "contigs" in summary:
        _print_genome(summary)
    else:
        _print_imputed(out, summary)


def _print_genome(summary: dict) -> None:
    import pandas as pd

    table = pd.DataFrame(summary["contigs"])
    click.echo(table.to_string(index=False))
    click.echo(f"wrote {', '.join(summary['outputs'])}: {int(table['records'].sum())} records, "
               f"{int(table['imputed'].sum())} imputed, {len(table)} contig pieces, {table['seconds'].sum():.1f} s")


def _print_imputed(out, summary: dict) -> None:
    possible = summary["possible_panel_duplicates"]
    in_panel = f" ({summary['samples_in_panel']} found in the panel" + \
        (f", {possible} with a panel sample's genotypes over too short a span to tell)" if possible else ")")
    click.echo(f"wrote {out}: {summary['records_written']} records, {summary['imputed_records']} imputed, "
               f"{summary['samples']} samples{in_panel}, {summary['seconds']} s")
    if summary["validation"]:
        v = summary["validation"]
        click.echo(f"validation: {v['masked_sites']} typed sites hidden and imputed: empirical r2 {v['empirical_r2']:.4f}, "
                   f"concordance {v['concordance']:.4f}")


@main.command(cls=SectionedCommand, sections={"Inputs": ["ref", "genetic_map"], "Output": ["out", "force"]})
@click.argument("ref", type=click.Path(exists=True, dir_okay=False))
@click.option("--map", "genetic_map", type=click.Path(exists=True, dir_okay=False), default=None, help=_MAP_HELP)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Compact panel file to write.")
@click.option("--force", is_flag=True, help="Overwrite an existing output.")
@_threads_option
@click.pass_context
def panel(ctx, ref, genetic_map, out, force):
    """Convert a reference panel VCF/BCF into a compact file.

    The compact file holds the records, their genetic positions (--map) and
    each record's haplotypes bit-packed or, for a rare one, as its carriers'
    list; impute --ref and train --ref read it without parsing VCF."""
    import os
    import time

    from genimpute.panel import convert_to_compact

    started = time.monotonic()
    reference = _run(convert_to_compact, ref, out, genetic_map, force, ctx.obj["progress"])
    listed = (reference.packed.whole_at < 0).mean() if len(reference) else 0.0
    click.echo(f"wrote {out}: {len(reference)} records ({listed:.1%} kept as carriers' lists), "
               f"{len(reference.samples)} samples, {os.path.getsize(out) / 1e6:.1f} MB, "
               f"{time.monotonic() - started:.1f} s")


@main.command(cls=SectionedCommand, sections={"Inputs": ["ref", "size"], "Output": ["out"]})
@click.option("--ref", required=True, type=click.Path(dir_okay=False),
              help="Reference panel whose contigs are split: VCF/BCF or compact.")
@click.option("--size", default="5Mb", show_default=True, help="Chunk length: 5Mb, 250kb, 100000.")
@click.option("--out", type=click.Path(dir_okay=False), default="-", show_default=True, help="Chunk list file (- for stdout).")
def chunks(ref, size, out):
    """Split the panel's contigs into regions for impute --region.

    One region a line. Chunks tile each contig from 1, the last open-ended,
    so every record falls in exactly one; no buffer is needed, because
    impute plans its windows over the whole contig whatever the region."""
    from genimpute.panel import contig_spans
    from genimpute.regions import parse_size, plan_chunks

    regions = _run(plan_chunks, _run(contig_spans, ref), _run(parse_size, size, "--size"))
    _run(_write_lines, out, [f"{r}\n" for r in regions])


@main.command(cls=SectionedCommand, sections={"Output": ["out", "force"]})
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Merged output .vcf.gz, or .info.gz where the inputs are info files.")
@click.option("--force", is_flag=True, help="Overwrite existing outputs.")
def merge(inputs, out, force):
    """Join imputed VCF outputs, or info files, of one cohort into one.

    VCF outputs: sample batches (the same records, other samples) go side
    by side, INFO AF and DR2 recomputed from the sums in their info files:
    exactly those of one run over every sample. Chunks (the same samples,
    other records: contigs, --region runs) go one after another, in the
    order given. The merged info file is written beside OUT.

    Info files (x.info.gz, beside every output: merge those of BCF, BGEN or
    PGEN outputs): those of sample batches, the same records in the same
    order, are joined into one whose ALT_Frq, MAF, AvgCall, Rsq, LooRsq and
    sums are those of one run over every sample."""
    from genimpute.merge import merge as run_merge

    kind, records = _run(run_merge, list(inputs), out, force)
    joined = {"samples": "sample batches side by side", "records": "chunks one after another",
              "info": "info files of sample batches"}[kind]
    click.echo(f"wrote {out}: {records} records, {len(inputs)} {joined}")


def _write_lines(out: str, lines: list) -> None:
    """Lines to `out` (- for stdout), whole or not at all."""
    from genimpute.io.scratch import write_whole
    from genimpute.io.vcf_writer import check_output_directory

    if out == "-":
        click.echo("".join(lines), nl=False)
        return
    check_output_directory(out)
    write_whole(out, lambda tmp: tmp.write_text("".join(lines)))


@main.command(cls=SectionedCommand, sections={"Inputs": ["truth", "ref", "labels", "populations"],
                                              "Outputs": ["out_dir", "as_json"]})
@click.argument("imputed", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--truth", required=True, type=click.Path(dir_okay=False), help="VCF with the true genotypes.")
@click.option("--ref", type=click.Path(dir_okay=False), default=None,
              help="Reference panel for MAF bins [default: the first file's INFO/AF, else truth's MAF].")
@click.option("--labels", default=None, help="Comma-separated names of the imputed files.")
@click.option("--populations", type=click.Path(dir_okay=False), default=None,
              help="TSV with columns sample and population: scores per population too.")
@_alias("--samples", "--populations", "old_populations")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for report.md, report.json and the figures.")
@click.option("--json", "as_json", is_flag=True, help="Print the full tables as JSON.")
def evaluate(imputed, truth, ref, labels, populations, old_populations, out_dir, as_json):
    """Score IMPUTED VCFs (genimpute, Beagle, Minimac4) against TRUTH.

    Aggregate r2 by MAF bin, concordance, and each quality score's (DR2,
    R2) calibration against the true per-variant r2."""
    from genimpute.api import evaluate as run_evaluate

    result = _run(run_evaluate, truth, list(imputed), labels=labels.split(",") if labels else None, ref=ref,
                  samples=populations or old_populations)
    if out_dir is not None:
        _write_report(result, out_dir, {"truth": truth, **dict(zip(result.overall().index, imputed))})
    if as_json:
        from genimpute.report import to_json

        click.echo(to_json({"maf_source": result.maf_source, "accuracy": result.accuracy.to_dict(orient="records"),
                            "calibration": result.calibration.to_dict(orient="records"),
                            "quality": result.quality.to_dict(orient="records")}))
    else:
        _print_evaluation(result)


_BENCHMARK_SECTIONS = {
    "Inputs": ["ref", "array", "truth", "genetic_map", "populations"],
    "Output": ["out_dir", "force"],
    "Tools": ["tools", "model_dir", "train", "steps", "max_minutes"],
    "Performance": ["threads"],
}


@main.command(cls=SectionedCommand, sections=_BENCHMARK_SECTIONS)
@click.option("--ref", required=True, type=click.Path(dir_okay=False), help="Phased reference panel VCF/BCF.")
@click.option("--array", "array", required=True, type=click.Path(dir_okay=False), help="Array sites: the truth masked to them makes the targets.")
@click.option("--truth", required=True, type=click.Path(dir_okay=False), help="Phased VCF of the target samples' true genotypes.")
@click.option("--map", "genetic_map", type=click.Path(dir_okay=False), default=None,
              help="PLINK genetic map, given to every tool.")
@click.option("--populations", type=click.Path(dir_okay=False), default=None,
              help="TSV with columns sample and population: scores per population too.")
@_alias("--samples", "--populations", "old_populations")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="genimpute_benchmark", show_default=True,
              help="Directory for outputs, logs and the report.")
@click.option("--force", is_flag=True, help="Replace an existing report in --out.")
@click.option("--tools", default=",".join(BENCHMARK_TOOLS), show_default=True, help="Comma-separated tools; those not on PATH are skipped.")
@click.option("--model", "model_dir", type=click.Path(file_okay=False), default=None,
              help="Impute with this learned model directory [default: the copying engine].")
@click.option("--train", is_flag=True, help="Train a learned model into OUT/model first, and impute with it.")
@click.option("--steps", type=int, default=None, help="Training steps, with --train [default: as train].")
@click.option("--max-minutes", type=float, default=None, help="Training budget, with --train [default: as train].")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Threads for every tool [default: the usable cores].")
def benchmark(ref, array, truth, genetic_map, populations, old_populations, out_dir, force, tools, model_dir, train,
              steps, max_minutes, threads):
    """Time and score genimpute, Beagle and Minimac4 on one job.

    TRUTH masked to the ARRAY's sites makes the targets; each tool imputes
    them from the panel, and their accuracy is reported side by side."""
    from genimpute.benchmark import run_benchmark

    train_args = [*(["--steps", str(steps)] if steps is not None else []),
                  *(["--max-minutes", str(max_minutes)] if max_minutes is not None else [])]
    result, timings, inputs = _run(run_benchmark, ref, array, truth, out_dir, tools.split(","), model_dir, train,
                                   train_args, genetic_map, populations or old_populations, threads, force)
    _write_report(result, out_dir, inputs, timings)
    _print_evaluation(result)
    click.echo("\nWall time and peak memory")
    click.echo(timings.to_string(index=False))


def _write_report(result, out_dir, inputs, timings=None) -> None:
    from genimpute.report import write_report

    path = _run(write_report, result, out_dir, inputs, timings)
    click.echo(f"report written to {path}", err=True)


def _print_evaluation(result) -> None:
    from genimpute.evaluation import by_population, side_by_side
    from genimpute.report import calibration_side_by_side, quality_side_by_side

    def show(frame):
        click.echo(frame.to_string(float_format=lambda v: f"{v:.4f}"))

    click.echo(f"Aggregate r2 by MAF bin (MAF from the {result.maf_source})")
    show(side_by_side(result.accuracy))
    click.echo("")
    show(result.overall())
    if result.accuracy["population"].nunique() > 1:
        click.echo("\nAggregate r2 by population, all imputed variants")
        show(by_population(result.accuracy))
    if len(result.calibration):
        click.echo("\nCalibration: mean true r2 by bin of each tool's estimated r2")
        show(calibration_side_by_side(result.calibration))
    if len(result.quality):
        click.echo("\nThe quality score less the true r2 by MAF bin (mean, mean absolute) and their correlation")
        show(quality_side_by_side(result.quality))
