"""genimpute merge: a cohort imputed in two sample halves, merged, is the
run over the whole cohort (records, AF and DR2 exactly, and the info
file); two --region chunks merged are the whole run's records; the info
files of two halves imputed to BGEN with --validate, merged, are the
whole run's (LooRsq too); inputs
that are neither batches nor chunks of one cohort are refused."""

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


@pytest.fixture(scope="module")
def bgen_runs(runs):
    """The whole cohort and its two sample halves imputed to BGEN, with --validate (LooRsq)."""
    d = runs["dir"]
    return {"whole": _impute(TARGET_PHASED, d / "whole_bgen.bgen", "--validate"),
            **{f"half{n}": _impute(d / f"target{n}.vcf.gz", d / f"half{n}_bgen.bgen", "--validate") for n in (0, 1)}}


def _without_loo(text: str) -> list:
    """The info lines' fields but LooRsq and LooSums."""
    return [[f for i, f in enumerate(line.split("\t")) if i not in (8, 10)] for line in text.splitlines()]


def _info_file(path: Path) -> Path:
    return path.with_name(path.name.replace(".bgen", ".info.gz").replace(".vcf.gz", ".info.gz"))


def test_info_files_of_bgen_sample_halves_merge_to_the_whole_run_s(runs, bgen_runs):
    merged = runs["dir"] / "merged_bgen.info.gz"
    done = _cli("merge", "--out", merged, *(_info_file(bgen_runs[half]) for half in ("half0", "half1")))
    assert done.returncode == 0, done.stderr
    assert "info files of sample batches" in done.stdout
    whole = gzip.decompress(_info_file(bgen_runs["whole"]).read_bytes())
    assert gzip.decompress(merged.read_bytes()) == whole  # ALT_Frq, MAF, AvgCall, Rsq, LooRsq and sums exactly
    # the records of the VCF, which has no multi-allelic one here (and was not run with --validate)
    assert _without_loo(whole.decode()) == _without_loo(_info(runs["whole"]))
    assert whole.count(b"\tImputed\t") > 1000 and whole.count(b"\tGenotyped\t") > 10
    hidden = [line.split("\t") for line in whole.decode().splitlines()[1:] if not line.endswith("\t-")]
    assert len(hidden) > 1 and {f[7] for f in hidden} == {"Genotyped"}
    assert all(float(f[8]) >= 0 for f in hidden if f[8] != "-")


def test_info_files_not_of_one_cohort_s_sample_batches_are_refused(runs, bgen_runs, tmp_path):
    out = tmp_path / "out.info.gz"
    half0, half1 = _info_file(bgen_runs["half0"]), _info_file(bgen_runs["half1"])
    stderr = _refused("--out", out, half0, _info_file(runs["half1_second"]))
    assert "expected the records of" in stderr and "found 20:" in stderr
    stderr = _refused("--out", out, half0, _info_file(runs["first"]))  # the first chunk's records, then none
    assert "expected the records of every info file in each" in stderr and "first.info.gz ends before" in stderr
    assert "expected info files (.info.gz) only" in _refused("--out", out, half0, runs["half1"])
    assert "expected info files (.info.gz) only" in _refused("--out", tmp_path / "out.vcf.gz", half0, half1)
    stderr = _refused("--out", tmp_path / "out.vcf.gz", bgen_runs["half0"], bgen_runs["half1"])
    assert "expected VCF outputs (.vcf.gz) or info files (.info.gz); found BGEN" in stderr
    assert "exists; pass --force" in _refused("--out", _info_file(runs["whole"]), half0, half1)
    assert list(tmp_path.iterdir()) == []  # no output, no temporary
