"""genimpute's Python API: what the command line runs, with its defaults.

    import genimpute

    summary = genimpute.impute("target.vcf.gz", ref="panel.vcf.gz", genetic_map="chr20.map")
    provenance = genimpute.train("panel.vcf.gz", "omni2.5.txt", "model", steps=4000)
    evaluation = genimpute.evaluate("truth.vcf.gz", ["target.imputed.vcf.gz"], ref="panel.vcf.gz")

Each reads its inputs, writes its outputs and returns what the command
prints. Bad input raises genimpute.errors.GenimputeError, whose message is
one line for a user. torch and numba are imported on the first call, not
with `import genimpute`.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path

from genimpute.errors import InputError

ENGINES = ("auto", "copying", "model")


def impute(target: str | Path, out: str | Path | None = None, *, ref: str | Path | list | None = None,
           model: str | Path | None = None, engine: str = "auto", genetic_map: str | Path | None = None,
           region: str | None = None, fields: str | None = None, bgen_bits: int | None = None,
           bgen_unphased: bool = False, phaser: str | None = "auto", validate_fraction: float | None = None,
           seed: int = 1, report: str | Path | None = None, ne: float | None = None, batch_samples: int = 1000,
           device: str = "auto", force: bool = False, html: bool = True, progress: bool = False) -> dict:
    """Impute the untyped panel records of the `target` VCF into `out`
    (default `<target name>.imputed.vcf.gz` in the working directory), in
    the format its name ends in: .vcf.gz, .bgen or .pgen, with an info
    file beside it (OUT.info.gz); return the run's summary (records
    written, samples, seconds, ...).

    ref: a panel, or a list of panels and shell patterns of them (one file
    per chromosome); with several, or `{chrom}` in `out` (one output per
    contig), each target contig is imputed from the panel holding it and
    the summary has a row per contig (genimpute.genome).
    engine: "copying" (the copying engine over `ref`, no model), "model"
    (`model`'s backbone, window by window; default model: the pretrained
    one with `ref`, else $GENIMPUTE_MODEL), or "auto": copying when `ref`
    is given without `model`. fields: a VCF's FORMAT fields, e.g. "GT:DS"
    (default GT:DS:GP). bgen_bits: a BGEN's bits per probability (default
    8); bgen_unphased: a BGEN of genotype, not haplotype, probabilities.
    phaser: for an unphased target, "auto", "genimpute" (its own), "beagle", "shapeit4" or None
    (refuse). report: a TSV of every site's harmonisation, and beside it
    each sample's panel-duplicate decision. html: the QC page beside the
    output (one output at a time for now). The other options are the
    `genimpute impute` options of the same names (docs/cli.md)."""
    from genimpute.genome import impute_genome, is_genome_wide
    from genimpute.imputation import impute as run_imputation
    from genimpute.imputation import read_once
    from genimpute.regions import parse_region

    refs = [] if ref is None else [ref] if isinstance(ref, (str, Path)) else list(ref)
    out = out if out is not None else default_output(target)
    options = _imputation_options(refs, model, engine, device, ne)
    options["output"] = _output_settings(out, fields, bgen_bits, bgen_unphased)
    settings = dict(validate_fraction=validate_fraction, seed=seed, phaser=phaser, batch_samples=batch_samples,
                    audit=report, genetic_map=read_once(genetic_map), html=html, **options)
    region = parse_region(region) if region else None
    if is_genome_wide(refs, out):
        return impute_genome(target, refs, str(out), region=region, force=force, progress=progress, **settings)
    return run_imputation(target, out=out, ref=refs[0] if refs else None, region=region, force=force,
                          progress=progress, **settings)


def _output_settings(out, fields: str | None, bgen_bits: int | None, bgen_unphased: bool):
    """The output's settings (genimpute.outputs), each refused where out's
    format has no use for it."""
    from genimpute.io.output_names import output_format
    from genimpute.io.vcf_writer import FormatFields
    from genimpute.outputs import OutputSettings

    kind = output_format(out)
    if fields is not None and kind not in ("vcf", "bcf"):
        raise InputError(f"--format: expected a .vcf.gz or .bcf output (FORMAT fields are VCF's); found {out}")
    if (bgen_bits is not None or bgen_unphased) and kind != "bgen":
        raise InputError(f"--bgen-bits, --bgen-unphased: expected a .bgen output; found {out}")
    if bgen_bits is not None and not 1 <= bgen_bits <= 32:
        raise InputError(f"--bgen-bits: expected 1 to 32 bits per probability; found {bgen_bits}")
    return OutputSettings(FormatFields.parse(fields or "GT:DS:GP"), bgen_bits or 8, not bgen_unphased)


def _imputation_options(refs: list, model, engine: str, device: str, ne: float | None) -> dict:
    """imputation.impute's model directory, device and engine settings for these options."""
    from genimpute.config import CopyingSettings
    from genimpute.modeldir import PRETRAINED_DIR, default_model_dir
    from genimpute.runtime import check_device_name, require_torch

    if engine not in ENGINES:
        raise InputError(f"engine: expected one of {', '.join(ENGINES)}; found {engine}")
    if engine == "auto":
        engine = "copying" if refs and not model else "model"
    check_device_name(device, engine)
    if engine == "model":
        require_torch("imputing with a learned model (--engine model)")
    copying = None
    if engine == "copying":
        copying = CopyingSettings() if ne is None else CopyingSettings(ne=ne)
    model_dir = Path(model) if model else PRETRAINED_DIR if refs else default_model_dir()
    return dict(model_dir=model_dir, device=device, copying=copying)


def default_output(target: str | Path) -> str:
    """`<target name>.imputed.vcf.gz`, in the working directory."""
    stem = Path(target).name
    for suffix in (".gz", ".bgz", ".vcf", ".bcf"):
        stem = stem.removesuffix(suffix)
    return f"{stem}.imputed.vcf.gz"


def train(ref: str | Path | list, array: str | Path | list, out: str | Path | None = None, *,
          model: str = "match", init: str | Path | None = None, resume: bool = False,
          genetic_map: str | Path | None = None, device: str = "auto", dist=None, progress: bool = False,
          **settings) -> dict:
    """Train a backbone (`model`: match, msa, npssm or spin) on the panels
    `ref` for the `array` sites and write its model directory to `out`
    (default $GENIMPUTE_MODEL); return its provenance.

    settings: any field of genimpute.config's WindowConfig (untyped, typed,
    context), of the backbone's own config (genimpute.models: dim, layers,
    heads, rows_per_gap for match, neighbours for spin, ...) or of
    TrainConfig (steps, max_minutes, batch_size, lr, seed, maf_weight,
    min_array_density, checkpoint_every, validate_every, ...); the window
    defaults are the backbone's. init: a model directory to start from
    ("pretrained": the shipped model), whose backbone and size then apply.
    dist: a genimpute.distributed.Distributed under torchrun."""
    from genimpute.runtime import pick_device, require_torch

    require_torch("training (genimpute train)")
    from genimpute.distributed import SINGLE
    from genimpute.modeldir import PRETRAINED_DIR, default_model_dir
    from genimpute.training import train as run_training

    init = PRETRAINED_DIR if init == "pretrained" else init
    config = run_config(model, init, resume, settings)
    dist = dist or SINGLE
    return run_training(ref, array, Path(out) if out else default_model_dir(), config,
                        dist.device(pick_device(device)), resume=resume, progress=progress, dist=dist, init=init,
                        genetic_map=genetic_map)


def run_config(model: str, init, resume: bool, settings: dict):
    """The RunConfig of a training run: the defaults, the backbone's window,
    then `settings` by field name; one clear error for an unknown name, a
    model setting the backbone does not read, or a value the settings
    refuse (a window the backbone cannot read included), before any panel
    is read. With `init`, its model's settings replace the model's."""
    from genimpute.config import RunConfig, TrainConfig
    from genimpute.modeldir import read_settings
    from genimpute.models import REGISTRY, default_window, model_config

    # --init's model brings its own backbone and size, and so its window defaults
    start = read_settings(init)[0].model if init is not None and not resume else None
    name = model if start is None else start.name
    parts = {"window": default_window(name), "train": TrainConfig()}
    names = {part: {f.name for f in dataclass_fields(value)} for part, value in parts.items()}
    names["model"] = {f.name for entry in REGISTRY.values() for f in dataclass_fields(entry.config)}
    unknown = set(settings) - set().union(*names.values())
    if unknown:
        raise InputError(f"expected training settings among {', '.join(sorted(set().union(*names.values())))}; "
                         f"found {', '.join(sorted(unknown))}")
    chosen = {part: {k: v for k, v in settings.items() if k in names[part]} for part in names}
    try:
        backbone = model_config(name, **chosen["model"])  # checked even where --init's replaces it
        return RunConfig(window=replace(parts["window"], **chosen["window"]),
                         model=backbone if start is None else start, train=replace(parts["train"], **chosen["train"]))
    except ValueError as exc:
        raise InputError(str(exc)) from exc


def evaluate(truth: str | Path, imputed: str | Path | list, *, labels: list | None = None,
             ref: str | Path | None = None, samples: str | Path | None = None):
    """Score imputed VCFs (genimpute's, Beagle's, Minimac4's) against the
    `truth` VCF: r2 by MAF bin (of `ref`'s panel if given), concordance,
    the quality score's calibration and its error by MAF bin, and by
    population with a `samples` table (columns sample, population).
    Returns a genimpute.evaluation.Evaluation."""
    from genimpute.evaluation import evaluate as run_evaluation

    return run_evaluation(truth, [imputed] if isinstance(imputed, (str, Path)) else list(imputed), labels, ref, samples)
