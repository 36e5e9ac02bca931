"""A small genome-wide example made from the committed slices: the panel
again as chromosome 21 (same haplotypes, contig renamed), and a target on
chromosomes 20, 21 and Y (Y held by no panel). Needs bcftools."""

import shutil
from pathlib import Path

from paths import PANEL, TARGET_PHASED
from tools import run_tool


def bcftools(*args) -> None:
    run_tool(["bcftools", *map(str, args)], check=True, capture_output=True)


def renamed(source: Path, contig: str, dest: Path, region: str | None = None) -> Path:
    """`source` with contig 20 called `contig` (only `region` of it), indexed."""
    names = dest.with_suffix(".names")
    names.write_text(f"20 {contig}\n")
    view = ["-r", f"20:{region}"] if region else []
    bcftools("view", *view, "-Oz", "-o", dest.with_suffix(".tmp.gz"), source)
    bcftools("annotate", "--rename-chrs", names, "-Oz", "-o", dest, dest.with_suffix(".tmp.gz"))
    bcftools("index", "-t", dest)
    dest.with_suffix(".tmp.gz").unlink()
    names.unlink()
    return dest


def make_genome_example(directory: Path) -> Path:
    """panel.chr20.vcf.gz, panel.chr21.vcf.gz and target.vcf.gz (with
    target20/21/Y.vcf.gz, each contig alone) in `directory`."""
    shutil.copy(PANEL, directory / "panel.chr20.vcf.gz")
    shutil.copy(f"{PANEL}.tbi", directory / "panel.chr20.vcf.gz.tbi")
    renamed(PANEL, "21", directory / "panel.chr21.vcf.gz")
    parts = [renamed(TARGET_PHASED, c, directory / f"target{c}.vcf.gz") for c in ("20", "21", "Y")]
    bcftools("concat", "-Oz", "-o", directory / "target.vcf.gz", *parts)
    bcftools("index", "-t", directory / "target.vcf.gz")
    return directory
