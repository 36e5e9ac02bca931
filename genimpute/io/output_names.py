"""An imputed output's format, told by its name's ending as plink2 and
bcftools users expect, and the files written under its stem beside it."""

from __future__ import annotations

from pathlib import Path

from genimpute.errors import InputError

# each format's ending, and the endings of the files that make it up
FORMATS = {"vcf": (".vcf.gz", ".vcf.gz.tbi"), "bcf": (".bcf", ".bcf.csi"), "bgen": (".bgen", ".sample", ".bgen.bgi"),
           "pgen": (".pgen", ".pvar", ".psam")}


def output_format(path: str | Path) -> str:
    """vcf, bcf, bgen or pgen, by the name's ending; one line refusing any other."""
    name = Path(path).name
    for kind, (ending, *_) in FORMATS.items():
        if name.endswith(ending) and len(name) > len(ending):
            return kind
    raise InputError(f"--out: expected an output ending in .vcf.gz, .bcf, .bgen or .pgen; found {path}")


def output_stem(path: str | Path) -> Path:
    """The output's path without its format's ending (x.bgen -> x)."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(FORMATS[output_format(path)][0]))


def output_files(path: str | Path) -> list[Path]:
    """The files an output is: the one named, its index, samples or variants."""
    stem = output_stem(path)
    return [stem.with_name(stem.name + ending) for ending in FORMATS[output_format(path)]]


def info_path(path: str | Path) -> Path:
    """The info file beside an output: x.vcf.gz, x.bcf, x.bgen or x.pgen -> x.info.gz."""
    stem = output_stem(path)
    return stem.with_name(f"{stem.name}.info.gz")
