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
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        click.echo(f"genimpute: error: {exc.strerror}{where}", err=True)
        sys.exit(1)
    except KeyboardInterrupt as exc:
        _stopped(exc)
    except SystemError as exc:  # a signal inside a compiled (numba) call surfaces wrapped in one
        interrupt = _interrupt_behind(exc)
        if interrupt is None:
            raise
        _stopped(interrupt)


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
    """Genotype imputation with neural non-parametric models."""
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
                        callback=_limit_threads, help="Threads to run on [default: the cores this process may use; "
                        "the output does not depend on it].")(command)


_MODEL_DIR_HELP = "Model directory [default: $GENIMPUTE_MODEL or ~/.local/share/genimpute/model]."


@main.command()
@click.option("--ref", required=True, multiple=True, type=click.Path(dir_okay=False),
              help="Phased reference panel VCF/BCF (biallelic); repeat to train on several panels.")
@click.option("--array", "array", required=True, multiple=True, type=click.Path(dir_okay=False),
              help="Array sites: 'CHROM POS [REF ALT]' per line; once for every panel, or once per --ref in order.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help=_MODEL_DIR_HELP)
@click.option("--model", "model_name", default="match", show_default=True,
              help="Backbone: match, msa, npssm or spin (spin learns to impute across windows only with --neighbours; "
                   "BENCHMARKS.md compares them).")
@click.option("--steps", type=int, default=_TRAIN_DEFAULTS.steps, show_default=True, help="Training steps.")
@click.option("--max-minutes", type=float, default=_TRAIN_DEFAULTS.max_minutes, show_default=True, help="Wall-clock budget; stops at steps or minutes, whichever comes first.")
@click.option("--batch-size", type=int, default=_TRAIN_DEFAULTS.batch_size, show_default=True, help="Query haplotypes per step.")
@click.option("--lr", type=float, default=_TRAIN_DEFAULTS.lr, show_default=True)
@click.option("--untyped", type=int, default=None,
              help="U: untyped variants per window [default: the backbone's, 300 for match, 100 for the others].")
@click.option("--typed", type=int, default=None,
              help="T: typed variants per window [default: the backbone's, 300 for match, 200 for the others].")
@click.option("--context", type=int, default=None,
              help="k: nearest panel haplotypes per query [default: the backbone's, 128 for match, 24 for the others].")
@click.option("--dim", type=int, default=None, help=f"Width of the model's layers {_BACKBONES_OWN}.")
@click.option("--layers", type=int, default=None, help=f"Layers {_BACKBONES_OWN}.")
@click.option("--heads", type=int, default=None, help=f"match, msa, spin: attention or scoring heads {_BACKBONES_OWN}.")
@click.option("--rows-per-gap", type=int, default=None,
              help="match: context rows each gap between typed sites votes over, those matching the query best "
                   f"around it (0: all k) {_BACKBONES_OWN}.")
@click.option("--neighbours", type=int, default=None,
              help=f"spin: nearest panel haplotypes each query reads, token by token (0: the paper's SPIN) {_BACKBONES_OWN}.")
@click.option("--evidence", is_flag=True, default=None,
              help="msa, npssm, spin (with --neighbours): read the match backbone's log-odds of the query (starting "
                   "from the pretrained model's weights) and learn a correction to them, which starts at none.")
@click.option("--body-rows", type=int, default=None,
              help=f"msa, npssm with --evidence: the nearest context rows the layers read, where match reads all "
                   f"--context (0: all) {_BACKBONES_OWN}.")
@click.option("--local-columns", type=int, default=None,
              help="msa, npssm with --evidence: the layers read windows of this many columns around the query cells "
                   f"match is unsure of, and correct those alone (0: every cell) {_BACKBONES_OWN}.")
@click.option("--unsure", type=float, default=None,
              help="msa, npssm with --local-columns: a cell is unsure where match's P(alt) lies in (x, 1 - x) "
                   f"{_BACKBONES_OWN}.")
@click.option("--maf-weight", type=float, default=_TRAIN_DEFAULTS.maf_weight, show_default=True,
              help="Weight the query's untyped variants by MAF^-x in the loss (0: equal weights; match, msa and npssm).")
@click.option("--map", "genetic_map", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Genetic map, PLINK (chrom id cM bp) or shapeit4 (pos chr cM) format: where the match backbone's "
                   "copying model expects recombination [default: 1 cM per Mb].")
@click.option("--min-array-density", type=float, default=_TRAIN_DEFAULTS.min_array_density, show_default=True,
              help="Each step keeps a random share in [x, 1] of the array's sites typed and imputes the rest, "
                   "to train for sparser arrays too (1: the array as given).")
@click.option("--seed", type=int, default=_TRAIN_DEFAULTS.seed, show_default=True)
@click.option("--checkpoint-every", type=int, default=_TRAIN_DEFAULTS.checkpoint_every, show_default=True, help="Steps between checkpoints.")
@click.option("--validate-every", type=int, default=_TRAIN_DEFAULTS.validate_every, show_default=True, help="Steps between validation r2 reports.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.option("--init", default=None,
              help="Start from the weights of this model directory ('pretrained': the model shipped with genimpute); "
                   "its backbone and model size replace --model, --dim, --layers, --heads, --rows-per-gap and --neighbours.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda[:N].")
@click.option("--distributed", is_flag=True, help="Data-parallel over the processes of a torchrun launch (one per GPU); implied under torchrun.")
@_threads_option
@click.pass_context
def train(ctx, ref, array, out, model_name, steps, max_minutes, batch_size, lr, untyped, typed, context, dim,
          layers, heads, rows_per_gap, neighbours, evidence, body_rows, local_columns, unsure, maf_weight, genetic_map,
          min_array_density, seed, checkpoint_every, validate_every, resume, init, device, distributed):
    """Train a model on a reference panel for an array."""
    from genimpute import distributed as ddp
    from genimpute.api import train as run_train
    from genimpute.modeldir import default_model_dir

    out = Path(out) if out else default_model_dir()
    settings = dict(steps=steps, max_minutes=max_minutes, batch_size=batch_size, lr=lr, seed=seed,
                    checkpoint_every=checkpoint_every, validate_every=validate_every, maf_weight=maf_weight,
                    min_array_density=min_array_density)
    given = {"untyped": untyped, "typed": typed, "context": context, "dim": dim, "layers": layers, "heads": heads,
             "rows_per_gap": rows_per_gap, "neighbours": neighbours, "evidence": evidence, "body_rows": body_rows,
             "local_columns": local_columns, "unsure": unsure}
    settings.update({name: v for name, v in given.items() if v is not None})
    dist = _run(ddp.start, distributed)
    if not dist.is_main:
        logging.getLogger().setLevel(logging.WARNING)  # one process reports progress
    try:
        prov = _run(run_train, ref, array, out, model=model_name, init=init, resume=resume, genetic_map=genetic_map,
                    device=device, dist=dist, progress=ctx.obj["progress"], **settings)
    finally:
        ddp.stop(dist)
    if dist.is_main:
        last = prov["history"][-1]["val_r2"] if prov["history"] else float("nan")
        click.echo(f"model written to {out}: {prov['steps']} steps in {prov['minutes']} min, validation r2 {last:.4f}")


@main.command()
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--ref", type=click.Path(dir_okay=False), default=None,
              help="Reference panel VCF/BCF or compact panel to impute from, instead of the model's own; without "
                   "--model the copying engine imputes from it (--engine auto), with --engine model the "
                   "pretrained model shipped with genimpute.")
@click.option("--model", "model_dir", type=click.Path(file_okay=False), default=None,
              help="Model directory [default: the pretrained model with --ref; else $GENIMPUTE_MODEL or "
                   "~/.local/share/genimpute/model]; given with --ref, --engine auto runs this model.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Output .vcf.gz [default: <target>.imputed.vcf.gz in the current directory].")
@click.option("--force", is_flag=True, help="Overwrite an existing output.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda[:N].")
@click.option("--validate", is_flag=True, help="Estimate accuracy without truth: hide a fraction of the typed sites, impute them, report the empirical r2 (log and VCF header).")
@click.option("--validate-fraction", type=float, default=DEFAULT_VALIDATION_FRACTION, show_default=True, help="Fraction of typed sites hidden by --validate.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed choosing the sites --validate hides.")
@click.option("--region", default=None, help="Write only CHR, CHR:START-END or CHR:START- (1-based, inclusive); see `genimpute chunks`.")
@click.option("--phaser", type=click.Choice(["auto", *PHASERS, BUILT_IN_PHASER, "none"]), default="auto",
              show_default=True,
              help="Phaser for an unphased TARGET (auto: the first of beagle, shapeit4 on PATH, else genimpute's own; "
                   "genimpute: its own, at the typed sites against the panel and the cohort; none: refuse unphased "
                   "input).")
@click.option("--map", "genetic_map", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Genetic map, PLINK (chrom id cM bp) or shapeit4 (pos chr cM) format, for the phaser, the copying engine "
                   "and the match backbone's copying model [default: the model's panel's, from train --map; else 1 cM per Mb].")
@click.option("--report", "audit", type=click.Path(dir_okay=False), default=None,
              help="Write a TSV with the harmonisation decision for every target record (match, swap, flip, ...), "
                   "and beside it FILE.samples.tsv (audit.tsv: audit.samples.tsv) with each sample's decision as "
                   "a possible panel duplicate.")
@click.option("--engine", type=click.Choice(["auto", "copying", "model"]), default="auto", show_default=True,
              help="copying: one copying-model pass per target haplotype along each contig, over states chosen by "
                   "PBWTs of the panel; model: the model directory's backbone, window by window; auto: copying with "
                   "--ref and no --model, else model.")
@click.option("--ne", type=float, default=CopyingSettings.ne, show_default=True,
              help="Effective population size in the copying engine's switch rate.")
@click.option("--batch-samples", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Target samples imputed at most at once; a larger cohort goes through in batches (memory as one "
                   "batch's, output the same). Fewer where a batch's output over a window would pass 0.5 GB.")
@click.option("--format", "fields", default="GT:DS:GP", show_default=True,
              help="FORMAT fields of imputed and typed records: GT and any of DS, HDS (each haplotype's dosage) and "
                   "GP, written in that order. GT:DS is half the text of GT:DS:GP, and a large cohort's run the faster.")
@_threads_option
@click.pass_context
def impute(ctx, target, ref, model_dir, out, force, device, validate, validate_fraction, seed, region, phaser, genetic_map,
           audit, engine, ne, batch_samples, fields):
    """Impute the untyped panel variants of a TARGET VCF (phased, or phased
    here first)."""
    from genimpute.api import default_output
    from genimpute.api import impute as run_impute

    if validate and not 0 < validate_fraction <= 0.5:
        raise click.BadParameter(f"expected a fraction in (0, 0.5]; found {validate_fraction}", param_hint="--validate-fraction")
    if not ne > 0:
        raise click.BadParameter(f"expected a positive effective population size; found {ne}", param_hint="--ne")
    out = out or default_output(target)
    summary = _run(run_impute, target, out, ref=ref, model=model_dir, engine=engine, genetic_map=genetic_map,
                   region=region, fields=fields, phaser=None if phaser == "none" else phaser,
                   validate_fraction=validate_fraction if validate else None, seed=seed, report=audit, ne=ne,
                   batch_samples=batch_samples, device=device, force=force, progress=ctx.obj["progress"])
    possible = summary["possible_panel_duplicates"]
    in_panel = f" ({summary['samples_in_panel']} found in the panel" + \
        (f", {possible} with a panel sample's genotypes over too short a span to tell)" if possible else ")")
    click.echo(f"wrote {out}: {summary['records_written']} records, {summary['imputed_records']} imputed, "
               f"{summary['samples']} samples{in_panel}, {summary['seconds']} s")
    if summary["validation"]:
        v = summary["validation"]
        click.echo(f"validation: {v['masked_sites']} typed sites hidden and imputed: empirical r2 {v['empirical_r2']:.4f}, "
                   f"concordance {v['concordance']:.4f}")


@main.command()
@click.argument("ref", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Compact panel file to write.")
@click.option("--map", "genetic_map", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Genetic map placing the records in cM (PLINK or shapeit4 format) [default: 1 cM per Mb].")
@click.option("--force", is_flag=True, help="Overwrite an existing output.")
@_threads_option
@click.pass_context
def panel(ctx, ref, out, genetic_map, force):
    """Convert a reference panel VCF/BCF into a compact file (records,
    genetic positions, and each record's haplotypes bit-packed or, for a
    rare one, as its carriers' list) that `impute --ref` and `train --ref`
    read without parsing VCF."""
    import os
    import time

    from genimpute.panel import convert_to_compact

    started = time.monotonic()
    reference = _run(convert_to_compact, ref, out, genetic_map, force, ctx.obj["progress"])
    listed = (reference.packed.whole_at < 0).mean() if len(reference) else 0.0
    click.echo(f"wrote {out}: {len(reference)} records ({listed:.1%} kept as carriers' lists), "
               f"{len(reference.samples)} samples, {os.path.getsize(out) / 1e6:.1f} MB, "
               f"{time.monotonic() - started:.1f} s")


@main.command()
@click.option("--ref", required=True, type=click.Path(dir_okay=False),
              help="Reference panel whose contigs are split: VCF/BCF, or compact (`genimpute panel`; read at once).")
@click.option("--size", default="5Mb", show_default=True, help="Chunk length: 5Mb, 250kb, 100000.")
@click.option("--out", type=click.Path(dir_okay=False), default="-", show_default=True, help="Chunk list file (- for stdout).")
def chunks(ref, size, out):
    """Split the panel's contigs into regions for `impute --region`, one per
    line. Chunks tile each contig from 1, the last open-ended, so every
    record falls in exactly one; no buffer is needed, because impute plans
    windows over the whole contig whatever the region."""
    from genimpute.panel import contig_spans
    from genimpute.regions import parse_size, plan_chunks

    regions = _run(plan_chunks, _run(contig_spans, ref), _run(parse_size, size, "--size"))
    with click.open_file(out, "w", atomic=out != "-") as f:
        f.write("".join(f"{r}\n" for r in regions))


@main.command()
@click.argument("imputed", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--truth", required=True, type=click.Path(dir_okay=False), help="VCF with the true genotypes.")
@click.option("--ref", type=click.Path(dir_okay=False), default=None, help="Reference panel (VCF/BCF or compact) for MAF bins [default: INFO/AF of the first imputed file, else truth MAF].")
@click.option("--labels", default=None, help="Comma-separated names for the imputed files.")
@click.option("--samples", type=click.Path(dir_okay=False), default=None, help="Tab-separated table with columns 'sample' and 'population': scores per population too.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, help="Write report.md, report.json and PNG plots into this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the full tables as JSON.")
def evaluate(imputed, truth, ref, labels, samples, out_dir, as_json):
    """r2 by MAF bin, concordance and quality-score calibration of IMPUTED
    VCFs (genimpute, Beagle, Minimac4) against TRUTH."""
    from genimpute.api import evaluate as run_evaluate

    result = _run(run_evaluate, truth, list(imputed), labels=labels.split(",") if labels else None, ref=ref,
                  samples=samples)
    if out_dir is not None:
        _write_report(result, out_dir, {"truth": truth, **dict(zip(result.overall().index, imputed))})
    if as_json:
        from genimpute.report import to_json

        click.echo(to_json({"maf_source": result.maf_source, "accuracy": result.accuracy.to_dict(orient="records"),
                            "calibration": result.calibration.to_dict(orient="records"),
                            "quality": result.quality.to_dict(orient="records")}))
    else:
        _print_evaluation(result)


@main.command()
@click.option("--ref", required=True, type=click.Path(dir_okay=False), help="Phased reference panel VCF/BCF.")
@click.option("--array", "array", required=True, type=click.Path(dir_okay=False), help="Array sites: the truth is masked to these to make the targets.")
@click.option("--truth", required=True, type=click.Path(dir_okay=False), help="Phased VCF with the true genotypes of the target samples.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="genimpute_benchmark", show_default=True, help="Directory for outputs, logs and the report.")
@click.option("--tools", default=",".join(BENCHMARK_TOOLS), show_default=True, help="Comma-separated tools to run; those not on PATH are skipped with a warning.")
@click.option("--model", "model_dir", type=click.Path(file_okay=False), default=None,
              help="Impute with this trained genimpute model [default: the copying engine over the panel, converted "
                   "first, as `impute --ref`].")
@click.option("--train", is_flag=True, help="Train a genimpute model into OUT/model first, and impute with it.")
@click.option("--steps", type=int, default=None, help="Training steps, with --train [default: as genimpute train].")
@click.option("--max-minutes", type=float, default=None,
              help="Training wall-clock budget, with --train [default: as genimpute train].")
@click.option("--map", "genetic_map", type=click.Path(dir_okay=False), default=None,
              help="PLINK genetic map, passed to Beagle and to genimpute's panel, train and impute.")
@click.option("--samples", type=click.Path(dir_okay=False), default=None, help="Samples table ('sample', 'population') for per-population scores.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads for every tool [default: the cores this process may use].")
@click.option("--force", is_flag=True, help="Replace an existing report in OUT.")
def benchmark(ref, array, truth, out_dir, tools, model_dir, train, steps, max_minutes, genetic_map, samples, threads,
              force):
    """Mask TRUTH to the ARRAY, impute with genimpute, Beagle and Minimac4,
    time each, and report their accuracy side by side."""
    from genimpute.benchmark import run_benchmark

    train_args = [*(["--steps", str(steps)] if steps is not None else []),
                  *(["--max-minutes", str(max_minutes)] if max_minutes is not None else [])]
    result, timings, inputs = _run(run_benchmark, ref, array, truth, out_dir, tools.split(","), model_dir, train,
                                   train_args, genetic_map, samples, threads, force)
    _write_report(result, out_dir, inputs, timings)
    _print_evaluation(result)
    click.echo("\nWall time and peak memory")
    click.echo(timings.to_string(index=False))


def _write_report(result, out_dir, inputs, timings=None) -> None:
    from genimpute.report import write_report

    path = write_report(result, out_dir, inputs, timings)
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
