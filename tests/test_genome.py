"""A genome-wide run: several panels (one per chromosome, or a chrX in
three files), one output per contig or one in all; each contig's records
are a single-contig run's, a contig no panel holds is passed through, and a
failing contig leaves no output behind."""

import gzip
import shutil
import subprocess
import sys

import pytest
from paths import PANEL, TARGET_PHASED
from genome_example import make_genome_example, renamed
from tools import require, run_tool

SPLIT_AT = (9_030_000, 9_060_000)  # within the slice's 9.0-9.1 Mb


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    """Panels of chromosomes 20 and 21, and a target on 20, 21 and Y."""
    require("bcftools")
    return make_genome_example(tmp_path_factory.mktemp("genome"))


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "genimpute", "-q", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def _body(path) -> str:
    return run_tool(["bcftools", "view", "-H", str(path)], check=True, capture_output=True, text=True).stdout


def test_each_contig_is_a_single_contig_run(genome):
    result = _cli("impute", "target.vcf.gz", "--ref", "panel.chr*.vcf.gz", "--out", "imp.chr{chrom}.vcf.gz", cwd=genome)
    assert result.returncode == 0, result.stderr
    assert "1 target contigs held by no panel, passed through unimputed: Y" in result.stderr
    for contig in ("20", "21"):
        single = _cli("impute", f"target{contig}.vcf.gz", "--ref", f"panel.chr{contig}.vcf.gz", "--out",
                      f"single{contig}.vcf.gz", cwd=genome)
        assert single.returncode == 0, single.stderr
        assert _body(genome / f"imp.chr{contig}.vcf.gz") == _body(genome / f"single{contig}.vcf.gz")
    query = ["bcftools", "query", "-f", "%POS %REF %ALT [%GT ]\\n"]
    passed = [run_tool([*query, str(genome / name)], check=True, capture_output=True, text=True).stdout
              for name in ("imp.chrY.vcf.gz", "targetY.vcf.gz")]
    assert passed[0] == passed[1] and passed[0]
    one = _cli("impute", "target.vcf.gz", "--ref", "panel.chr20.vcf.gz", "--ref", "panel.chr21.vcf.gz",
               "--out", "all.vcf.gz", cwd=genome)
    assert one.returncode == 0, one.stderr
    assert _body(genome / "all.vcf.gz") == "".join(_body(genome / f"imp.chr{c}.vcf.gz") for c in ("20", "21", "Y"))
    regions = run_tool(["tabix", "-l", str(genome / "all.vcf.gz")], check=True, capture_output=True, text=True)
    assert regions.stdout.split() == ["20", "21", "Y"]
    info = {name: gzip.open(genome / f"{name}.info.gz", "rt").read().splitlines()
            for name in ("imp.chr20", "imp.chr21", "imp.chrY", "single20", "all")}
    assert info["imp.chr20"] == info["single20"]  # the info file of a single-contig run
    assert info["all"] == info["imp.chr20"] + info["imp.chr21"][1:] + info["imp.chrY"][1:]
    assert len(info["all"]) == 1 + _body(genome / "all.vcf.gz").count("\n")


def test_a_contig_split_across_panel_files_is_imputed_whole(genome):
    whole = renamed(PANEL, "X", genome / "panelX.vcf.gz")
    cuts = [f"1-{SPLIT_AT[0]}", f"{SPLIT_AT[0] + 1}-{SPLIT_AT[1]}", f"{SPLIT_AT[1] + 1}-"]
    parts = [renamed(PANEL, "X", genome / f"panelX.part{i}.vcf.gz", cut) for i, cut in enumerate(cuts)]
    target = renamed(TARGET_PHASED, "X", genome / "targetX.vcf.gz")
    split = _cli("impute", target, *[a for p in parts for a in ("--ref", p)], "--out", "splitX.vcf.gz", cwd=genome)
    one = _cli("impute", target, "--ref", whole, "--out", "wholeX.vcf.gz", cwd=genome)
    assert split.returncode == 0 and one.returncode == 0, split.stderr + one.stderr
    columns = [[line.split("\t")[:5] for line in _body(genome / f).splitlines()] for f in ("splitX.vcf.gz", "wholeX.vcf.gz")]
    assert columns[0] == columns[1]


def test_a_failing_contig_is_named_and_leaves_no_output(genome, tmp_path):
    for name in ("target.vcf.gz", "panel.chr20.vcf.gz", "panel.chr20.vcf.gz.tbi"):
        shutil.copy(genome / name, tmp_path / name)
    with gzip.open(genome / "panel.chr21.vcf.gz", "rt") as handle:
        lines = handle.read().splitlines()
    het = next(i for i, line in enumerate(lines) if not line.startswith("#") and "\t0|1" in line)
    lines[het] = lines[het].replace("\t0|1", "\t0/1", 1)  # one unphased call: the panel is refused when read
    (tmp_path / "panel.chr21.vcf").write_text("\n".join(lines) + "\n")
    result = _cli("impute", "target.vcf.gz", "--ref", "panel.chr*", "--out", "imp.chr{chrom}.vcf.gz", cwd=tmp_path)
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("genimpute: error: contig 21: ") and "panel.chr21.vcf" in error, result.stderr
    assert not list(tmp_path.glob("imp.*")) and not list(tmp_path.glob(".genimpute-*"))


def test_existing_outputs_and_an_audit_are_refused_before_any_work(genome, tmp_path):
    (tmp_path / "imp.chr21.vcf.gz").write_text("keep me")
    args = ["impute", genome / "target.vcf.gz", "--ref", genome / "panel.chr*.vcf.gz"]
    taken = _cli(*args, "--out", "imp.chr{chrom}.vcf.gz", cwd=tmp_path)
    assert taken.returncode == 1 and "imp.chr21.vcf.gz: exists" in taken.stderr
    assert (tmp_path / "imp.chr21.vcf.gz").read_text() == "keep me"
    audit = _cli(*args, "--out", "x.vcf.gz", "--audit", "a.tsv", cwd=tmp_path)
    assert audit.returncode == 1 and "--audit" in audit.stderr
