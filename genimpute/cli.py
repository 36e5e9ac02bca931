"""Command line: parse options, call the library, print. Nothing imports this."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import replace
from pathlib import Path

import click

from genimpute import __version__
from genimpute.config import (
    ImputeConfig,
    RunConfig,
    WindowConfig,
)
from genimpute.errors import GenimputeError

_DEFAULTS = RunConfig()


def _run(fn, *args, **kwargs):
    """Turn library errors into one line on stderr and exit status 1."""
    try:
        return fn(*args, **kwargs)
    except GenimputeError as exc:
        click.echo(f"genimpute: error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("genimpute: interrupted", err=True)
        sys.exit(130)


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
    from genimpute.runtime import tune_allocator

    tune_allocator()


_MODEL_DIR_HELP = "Model directory [default: $GENIMPUTE_MODEL or ~/.local/share/genimpute/model]."


@main.command()
@click.option("--ref", required=True, type=click.Path(dir_okay=False), help="Phased reference panel VCF/BCF (biallelic).")
@click.option("--array", "array", required=True, type=click.Path(dir_okay=False), help="Array sites: 'CHROM POS [REF ALT]' per line.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help=_MODEL_DIR_HELP)
@click.option("--model", "model_name", default=_DEFAULTS.model.name, show_default=True, help="Backbone.")
@click.option("--steps", type=int, default=_DEFAULTS.train.steps, show_default=True, help="Training steps.")
@click.option("--max-minutes", type=float, default=_DEFAULTS.train.max_minutes, show_default=True, help="Wall-clock budget; stops at steps or minutes, whichever comes first.")
@click.option("--batch-size", type=int, default=_DEFAULTS.train.batch_size, show_default=True, help="Query haplotypes per step.")
@click.option("--lr", type=float, default=_DEFAULTS.train.lr, show_default=True)
@click.option("--untyped", type=int, default=_DEFAULTS.window.untyped, show_default=True, help="U: untyped variants per window.")
@click.option("--typed", type=int, default=_DEFAULTS.window.typed, show_default=True, help="T: typed variants per window.")
@click.option("--context", type=int, default=_DEFAULTS.window.context, show_default=True, help="k: nearest panel haplotypes per query.")
@click.option("--dim", type=int, default=_DEFAULTS.model.dim, show_default=True)
@click.option("--layers", type=int, default=_DEFAULTS.model.layers, show_default=True)
@click.option("--heads", type=int, default=_DEFAULTS.model.heads, show_default=True)
@click.option("--seed", type=int, default=_DEFAULTS.train.seed, show_default=True)
@click.option("--checkpoint-every", type=int, default=_DEFAULTS.train.checkpoint_every, show_default=True, help="Steps between checkpoints.")
@click.option("--validate-every", type=int, default=_DEFAULTS.train.validate_every, show_default=True, help="Steps between validation r2 reports.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda[:N].")
@click.pass_context
def train(ctx, ref, array, out, model_name, steps, max_minutes, batch_size, lr, untyped, typed, context, dim,
          layers, heads, seed, checkpoint_every, validate_every, resume, device):
    """Train a model on a reference panel for an array."""
    from genimpute.modeldir import default_model_dir
    from genimpute.runtime import pick_device
    from genimpute.train import train as run_train

    def build():
        return RunConfig(
            window=WindowConfig(untyped=untyped, typed=typed, context=context),
            model=replace(_DEFAULTS.model, name=model_name, dim=dim, layers=layers, heads=heads),
            train=replace(_DEFAULTS.train, steps=steps, max_minutes=max_minutes, batch_size=batch_size, lr=lr,
                          seed=seed, checkpoint_every=checkpoint_every, validate_every=validate_every),
        )

    config = _run(_checked_config, build)
    out = Path(out) if out else default_model_dir()
    prov = _run(run_train, ref, array, out, config, _run(pick_device, device), resume=resume, progress=ctx.obj["progress"])
    last = prov["history"][-1]["val_r2"] if prov["history"] else float("nan")
    click.echo(f"model written to {out}: {prov['steps']} steps in {prov['minutes']} min, validation r2 {last:.4f}")


def _checked_config(build) -> RunConfig:
    from genimpute.models import build_model

    try:
        config = build()
    except ValueError as exc:
        raise GenimputeError(str(exc)) from exc
    build_model(config.model)  # unknown backbone names fail here, before reading the panel
    return config


@main.command()
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--model", "model_dir", type=click.Path(file_okay=False), default=None, help=_MODEL_DIR_HELP)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Output .vcf.gz [default: <target>.imputed.vcf.gz in the current directory].")
@click.option("--batch-size", type=int, default=ImputeConfig().batch_size, show_default=True, help="Query haplotypes per forward pass.")
@click.option("--force", is_flag=True, help="Overwrite an existing output.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda[:N].")
@click.pass_context
def impute(ctx, target, model_dir, out, batch_size, force, device):
    """Impute the untyped panel variants of a phased TARGET VCF."""
    from genimpute.impute import impute as run_impute
    from genimpute.modeldir import default_model_dir
    from genimpute.runtime import pick_device

    model_dir = Path(model_dir) if model_dir else default_model_dir()
    if out is None:
        stem = Path(target).name
        for suffix in (".gz", ".bgz", ".vcf", ".bcf"):
            stem = stem.removesuffix(suffix)
        out = f"{stem}.imputed.vcf.gz"
    summary = _run(run_impute, target, model_dir, out, _run(pick_device, device), batch_size=batch_size,
                   force=force, progress=ctx.obj["progress"])
    click.echo(f"wrote {out}: {summary['records_written']} records, {summary['imputed_records']} imputed, "
               f"{summary['samples']} samples, {summary['seconds']} s")


@main.command()
@click.argument("imputed", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--truth", required=True, type=click.Path(dir_okay=False), help="VCF with the true genotypes.")
@click.option("--ref", type=click.Path(dir_okay=False), default=None, help="Reference panel for MAF bins [default: truth MAF].")
@click.option("--labels", default=None, help="Comma-separated names for the imputed files.")
@click.option("--json", "as_json", is_flag=True, help="Print the full table as JSON.")
def evaluate(imputed, truth, ref, labels, as_json):
    """Aggregate r2 by MAF bin of IMPUTED VCFs (genimpute, Beagle, Minimac4) against TRUTH."""
    from genimpute.evaluate import evaluate as run_evaluate
    from genimpute.evaluate import side_by_side

    table = _run(run_evaluate, truth, list(imputed), labels.split(",") if labels else None, ref)
    if as_json:
        click.echo(json.dumps(table.to_dict(orient="records"), indent=2))
        return
    click.echo("Aggregate r2 by MAF bin" + (" (reference panel MAF)" if ref else " (truth MAF)"))
    click.echo(side_by_side(table).to_string(float_format=lambda v: f"{v:.4f}"))
    overall = table[table["maf_bin"] == "all imputed"].set_index("tool")
    click.echo("\n" + overall[["variants", "mean_variant_r2", "concordance"]].to_string(float_format=lambda v: f"{v:.4f}"))
