"""genimpute merge: a cohort imputed in two sample halves, merged, is the
run over the whole cohort (records, AF and DR2 exactly, and the info
file); two --region chunks merged are the whole run's records; inputs that
are neither batches nor chunks of one cohort are refused."""

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from paths import PANEL, TARGET_PHASED
from tools import require, run_tool

SPLIT_AT = 9_050_000  # within the slice's 9.0-9.1 Mb


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "genimpute", "-q", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def _impute(target: Path, out: Path, *args) -> Path:
    done = _cli("impute", target, "--ref", PANEL, "--out", out, "--no-html", *args)
    assert done.returncode == 0, done.stderr
    return out


def _body(path: Path) -> str:
    return run_tool(["bcftools", "view", "-H", str(path)], check=True, capture_output=True, text=True).stdout


def _samples(path: Path) -> list[str]:
    return run_tool(["bcftools", "query", "-l", str(path)], check=True, capture_output=True, text=True).stdout.split()


def _info(path: Path) -> str:
    return gzip.open(str(path).replace(".vcf.gz", ".info.gz"), "rt").read()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The whole cohort's run, its two sample halves', two --region chunks' and the second half's second chunk."""
    require("bcftools")
    d = tmp_path_factory.mktemp("merge")
    samples = _samples(TARGET_PHASED)
    halves = [samples[:4], samples[4:]]
    out = {"whole": _impute(TARGET_PHASED, d / "whole.vcf.gz")}
    for n, names in enumerate(halves):
        target = d / f"target{n}.vcf.gz"
        run_tool(["bcftools", "view", "-s", ",".join(names), "-Oz", "-o", str(target), str(TARGET_PHASED)], check=True)
        out[f"half{n}"] = _impute(target, d / f"half{n}.vcf.gz")
    out["half1_second"] = _impute(target, d / "half1_second.vcf.gz", "--region", f"20:{SPLIT_AT + 1}-")
    out["first"] = _impute(TARGET_PHASED, d / "first.vcf.gz", "--region", f"20:1-{SPLIT_AT}")
    out["second"] = _impute(TARGET_PHASED, d / "second.vcf.gz", "--region", f"20:{SPLIT_AT + 1}-")
    out["dir"] = d
    return out


def test_sample_halves_merge_to_the_whole_run(runs):
    merged = runs["dir"] / "merged.vcf.gz"
    done = _cli("merge", "--out", merged, runs["half0"], runs["half1"])
    assert done.returncode == 0, done.stderr
    assert _samples(merged) == _samples(runs["whole"])
    assert _body(merged) == _body(runs["whole"])  # AF, DR2 and IMPMISS exactly, every sample column
    assert _info(merged) == _info(runs["whole"])
    assert (runs["dir"] / "merged.vcf.gz.tbi").exists()


def test_region_chunks_merge_to_the_whole_run(runs):
    merged = runs["dir"] / "chunks.vcf.gz"
    done = _cli("merge", "--out", merged, runs["first"], runs["second"])
    assert done.returncode == 0, done.stderr
    assert _body(merged) == _body(runs["whole"])
    assert _info(merged) == _info(runs["whole"])
    for twisted in ((runs["second"], runs["first"]), (runs["first"], runs["first"])):
        assert "expected chunks of one cohort in order" in _refused("--out", runs["dir"] / "twisted.vcf.gz", *twisted)


def _refused(*args) -> str:
    done = _cli("merge", *map(str, args))
    assert done.returncode == 1, done.stderr
    return done.stderr


def test_inputs_that_are_not_of_one_cohort_are_refused(runs, tmp_path):
    out = tmp_path / "out.vcf.gz"
    assert "none in common" in _refused("--out", out, runs["half0"], runs["whole"])
    stderr = _refused("--out", out, runs["half0"], runs["half1_second"])  # other samples and other records
    assert "expected the records of" in stderr and "found 20:" in stderr
    (tmp_path / "lone.vcf.gz").write_bytes(runs["half1"].read_bytes())
    assert "lone.info.gz" in _refused("--out", out, runs["half0"], tmp_path / "lone.vcf.gz")
    (tmp_path / "x.bgen").write_bytes(b"")
    assert "expected VCF outputs" in _refused("--out", out, runs["half0"], tmp_path / "x.bgen")
    assert "exists; pass --force" in _refused("--out", runs["whole"], runs["half0"], runs["half1"])
    assert list(tmp_path.glob("out*")) == [] and list(tmp_path.glob(".*")) == []  # no output, no temporary


def test_a_chunk_cut_short_leaves_neither_output_nor_info_file(runs, tmp_path):
    cut = tmp_path / "cut.vcf.gz"
    cut.write_bytes(runs["second"].read_bytes()[:-28])  # without BGZF's end-of-file block
    (tmp_path / "cut.info.gz").write_bytes(Path(str(runs["second"]).replace(".vcf.gz", ".info.gz")).read_bytes())
    out = tmp_path / "joined.vcf.gz"
    assert "cut.vcf.gz" in _refused("--out", out, runs["first"], cut)
    assert not out.exists() and not (tmp_path / "joined.info.gz").exists()
