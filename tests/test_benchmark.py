"""genimpute.benchmark and the `genimpute benchmark` command."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from cli_helpers import run
from paths import ARRAY, PANEL, TARGET_TRUTH
from tools import require, run_tool

from genimpute import benchmark
from genimpute.benchmark import ToolError, available_tools, mask_to_array, run_timed
from genimpute.config import BENCHMARK_TOOLS
from genimpute.errors import InputError
from genimpute.evaluation import ALL, BIN_LABELS, EVERYONE


def _sites(path) -> list[tuple]:
    """(contig, pos, ref, alt) of every record, read by bcftools."""
    out = run_tool(["bcftools", "query", "-f", "%CHROM\t%POS\t%REF\t%ALT\n", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return [(c, int(p), r, a) for c, p, r, a in (line.split("\t") for line in out.splitlines())]


def _contig(name: str) -> str:
    return name[3:] if name.lower().startswith("chr") else name


def _expected_targets(array: Path) -> list[tuple]:
    """Truth records the array types, by the rule of the array-list format:
    a position listed with alleles types the record with those alleles only;
    a bare position types the biallelic SNPs there."""
    bare, with_alleles = set(), set()
    for line in array.read_text().splitlines():
        fields = line.split()
        if len(fields) == 2:
            bare.add((_contig(fields[0]), int(fields[1])))
        elif len(fields) == 4:
            with_alleles.add((_contig(fields[0]), int(fields[1]), fields[2].upper(), fields[3].upper()))
    allele_positions = {(c, p) for c, p, _, _ in with_alleles}
    kept = []
    for contig, pos, ref, alt in _sites(TARGET_TRUTH):
        site = (_contig(contig), pos)
        if "," in alt:
            continue
        if site in allele_positions:
            if (*site, ref, alt) in with_alleles:
                kept.append((contig, pos, ref, alt))
        elif site in bare and len(ref) == 1 and len(alt) == 1:
            kept.append((contig, pos, ref, alt))
    return kept


# --- mask_to_array -----------------------------------------------------------

def test_mask_to_array_keeps_the_typed_truth_records(tmp_path):
    out = tmp_path / "targets.vcf.gz"
    expected = _expected_targets(ARRAY)
    assert len(expected) > 50  # the slice's array types most of its 75 positions
    kept = mask_to_array(TARGET_TRUTH, ARRAY, out)
    assert kept == len(expected)
    assert _sites(out) == expected
    assert (tmp_path / "targets.vcf.gz.tbi").is_file()
    # the index is usable: a region query returns the records inside it
    pos = expected[len(expected) // 2][1]
    region = run_tool(["bcftools", "view", "-H", "-r", f"20:{pos}-{pos}", str(out)],
                            check=True, capture_output=True, text=True).stdout
    assert region.count("\n") == 1 and f"\t{pos}\t" in region
    # genotypes are the truth's, samples unchanged
    header = run_tool(["bcftools", "query", "-l", str(out)], check=True, capture_output=True, text=True).stdout
    truth_header = run_tool(["bcftools", "query", "-l", str(TARGET_TRUTH)], check=True, capture_output=True,
                                  text=True).stdout
    assert header == truth_header


def test_mask_to_array_alleles_and_indels(tmp_path):
    """Listed alleles type only that record (indels too); bare positions type SNPs only."""
    truth = _sites(TARGET_TRUTH)
    bare = [line for line in ARRAY.read_text().splitlines() if line.strip()]
    bare_sites = {tuple(b.split()) for b in bare}
    snps = [s for s in truth if len(s[2]) == len(s[3]) == 1 and (s[0], str(s[1])) in bare_sites]
    indels = [s for s in truth if len(s[2]) != len(s[3])]
    assert len(snps) >= 2 and len(indels) >= 2
    right, swapped = snps[0], snps[1]
    lines = [b for b in bare if b.split()[1] not in (str(right[1]), str(swapped[1]))]
    lines += [
        f"chr20\t{right[1]}\t{right[2].lower()}\t{right[3]}",  # alleles as in the truth (case and contig style differ)
        f"20\t{swapped[1]}\t{swapped[3]}\t{swapped[2]}",  # REF and ALT swapped: types nothing
        f"20\t{indels[0][1]}\t{indels[0][2]}\t{indels[0][3]}",  # an indel with its alleles: typed
        f"20\t{indels[1][1]}",  # an indel position without alleles: not typed
    ]
    array = tmp_path / "array.txt"
    array.write_text("\n".join(lines) + "\n")
    out = tmp_path / "targets.vcf.gz"
    kept = mask_to_array(TARGET_TRUTH, array, out)
    got = _sites(out)
    assert got == _expected_targets(array)
    assert kept == len(got) == len(_expected_targets(ARRAY))  # one SNP (swapped alleles) lost, one indel gained
    assert right in got and indels[0] in got
    assert swapped not in got and indels[1] not in got


def test_mask_to_array_without_shared_sites(tmp_path):
    array = tmp_path / "chr21.txt"
    array.write_text("".join(f"21\t{line.split()[1]}\n" for line in ARRAY.read_text().splitlines() if line.strip()))
    with pytest.raises(InputError, match="found none"):
        mask_to_array(TARGET_TRUTH, array, tmp_path / "targets.vcf.gz")
    assert not (tmp_path / "targets.vcf.gz").exists() and not (tmp_path / "targets.vcf.gz.tbi").exists()


# --- run_timed ---------------------------------------------------------------

ALLOCATE_100MB = "b = bytearray(100 * 2**20); b[::4096] = b'x' * len(b[::4096])"


def _own_rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024**2
    raise AssertionError("no VmRSS in /proc/self/status")


def test_run_timed_reports_the_tools_peak_memory_not_ours(tmp_path):
    import torch  # noqa: F401  (makes this process large, as the CLI is)

    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    assert _own_rss_gb() > 0.4  # a figure inherited from this process would be far above 0.2
    step = run_timed("child", "allocate", [sys.executable, "-c", ALLOCATE_100MB], tmp_path / "child.log")
    assert (step.tool, step.step) == ("child", "allocate")
    assert 0.09 < step.peak_rss_gb < 0.2  # 100 MiB = 0.098 GiB, plus the interpreter
    assert step.wall_s > 0
    assert not (tmp_path / "child.peak_kib").exists()  # the launcher's scratch file is cleaned up
    del ballast


def test_run_timed_small_child_is_small(tmp_path):
    step = run_timed("child", "nothing", [sys.executable, "-c", "pass"], tmp_path / "child.log")
    assert 0 < step.peak_rss_gb < 0.09  # no 100 MB here: the figure follows the child


def test_run_timed_failure_names_exit_code_and_log_tail(tmp_path):
    code = "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"
    with pytest.raises(ToolError) as info:
        run_timed("child", "fail", [sys.executable, "-c", code], tmp_path / "child.log")
    message = str(info.value)
    assert "exit 3" in message
    assert "boom" in message
    assert "child fail" in message
    assert str(tmp_path / "child.log") in message


def test_run_timed_missing_program_is_a_tool_error(tmp_path):
    with pytest.raises(ToolError, match="failed"):
        run_timed("ghost", "impute", [str(tmp_path / "no-such-program")], tmp_path / "ghost.log")


def test_run_timed_stdout_goes_to_its_own_file(tmp_path):
    code = "import sys; print('to stdout'); sys.stderr.write('to stderr\\n')"
    log, out = tmp_path / "step.log", tmp_path / "step.out"
    run_timed("child", "print", [sys.executable, "-c", code], log, stdout_path=out)
    assert out.read_text() == "to stdout\n"
    assert log.read_text() == "to stderr\n"
    # without stdout_path both land in the log
    both = tmp_path / "both.log"
    run_timed("child", "print", [sys.executable, "-c", code], both)
    assert sorted(both.read_text().splitlines()) == ["to stderr", "to stdout"]


def test_genimpute_trains_and_imputes_on_the_threads_the_other_tools_get(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(benchmark, "run_timed", lambda tool, step, cmd, log_path: commands.append(cmd))
    plan = benchmark._Plan(ref=PANEL, array=ARRAY, targets=tmp_path / "targets.vcf.gz", out_dir=tmp_path, threads=3,
                           genetic_map=None, model=tmp_path / "model", train=True, train_args=[])
    benchmark._run_genimpute(plan)
    assert [cmd[cmd.index("-q") + 1] for cmd in commands] == ["train", "impute"]
    assert all(cmd[cmd.index("--threads") + 1] == 3 for cmd in commands)
    assert run(["benchmark", "--ref", str(PANEL), "--array", str(ARRAY), "--truth", str(TARGET_TRUTH),
                "--threads", "0"], ok=False).exit_code == 2


def test_genimpute_without_a_model_imputes_with_the_copying_engine_from_the_panel_converted_once(tmp_path,
                                                                                               monkeypatch):
    commands = []
    monkeypatch.setattr(benchmark, "run_timed", lambda tool, step, cmd, log_path: commands.append((step, cmd)))
    plan = benchmark._Plan(ref=PANEL, array=ARRAY, targets=tmp_path / "targets.vcf.gz", out_dir=tmp_path, threads=2,
                           genetic_map="chr20.map", model=None, train=False, train_args=[])
    benchmark._run_genimpute(plan)
    (convert, panel), (impute, imputation) = commands
    assert (convert, impute) == ("convert reference", "impute")
    assert panel[panel.index("-q") + 1:panel.index("-q") + 3] == ["panel", PANEL]
    compact = panel[panel.index("--out") + 1]
    assert imputation[imputation.index("--ref") + 1] == compact and "--model" not in imputation
    assert all(cmd[cmd.index("--map") + 1] == "chr20.map" for cmd in (panel, imputation))


@pytest.mark.parametrize("extra, refused", [(["--steps", "5"], "expected with --train"),
                                            (["--train", "--model", "m"], "expected one of them")])
def test_benchmark_refuses_training_options_it_would_not_use(extra, refused, tmp_path):
    result = run(["benchmark", "--ref", str(PANEL), "--array", str(ARRAY), "--truth", str(TARGET_TRUTH),
                  "--out", str(tmp_path / "bench"), *extra], ok=False)
    assert result.exit_code == 1 and refused in result.output
    assert not (tmp_path / "bench").exists()


# --- available_tools ---------------------------------------------------------

def test_available_tools_unknown_name():
    with pytest.raises(InputError) as info:
        available_tools(["genimpute", "impute5"])
    message = str(info.value)
    assert "impute5" in message
    for tool in BENCHMARK_TOOLS:
        assert tool in message


def test_available_tools_skips_tools_missing_from_path(tmp_path, monkeypatch, caplog):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with caplog.at_level(logging.WARNING, logger="genimpute.benchmark"):
        assert available_tools(["beagle", "genimpute", "minimac4"]) == ["genimpute"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2
    assert "beagle" in warned[0] and "not found" in warned[0] and "apt-get install beagle" in warned[0]
    assert "minimac4" in warned[1] and "apt-get install minimac4" in warned[1]


def test_available_tools_finds_tools_on_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "minimac4"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert available_tools(["minimac4", "beagle", "genimpute"]) == ["minimac4", "genimpute"]


# --- genimpute benchmark, end to end ---------------------------------------

@pytest.mark.slow
def test_benchmark_command_end_to_end(tmp_path):
    require("beagle", "minimac4")
    out = tmp_path / "bench"
    args = ["benchmark", "--ref", str(PANEL), "--array", str(ARRAY), "--truth", str(TARGET_TRUTH),
            "--out", str(out), "--threads", "2"]
    result = run(args)
    assert "Wall time and peak memory" in result.output
    for name in ("report.md", "report.json", "r2_by_maf.png", "calibration.png"):
        assert (out / name).is_file(), name

    document = json.loads((out / "report.json").read_text())
    steps = {(t["tool"], t["step"]): t for t in document["timings"]}
    assert set(steps) == {("genimpute", "convert reference"), ("genimpute", "impute"), ("beagle", "impute"),
                          ("minimac4", "compress reference"), ("minimac4", "impute")}
    for key, t in steps.items():
        assert t["wall_s"] > 0, key
        assert t["peak_rss_gb"] > 0, key

    overall = {r["tool"]: r for r in document["accuracy"] if r["population"] == EVERYONE and r["maf_bin"] == ALL}
    assert set(overall) == set(BENCHMARK_TOOLS)
    n = {tool: r["variants"] for tool, r in overall.items()}
    # imputed and scored: the panel records also in the truth, less those the array types
    shared = set(_sites(PANEL)) & set(_sites(TARGET_TRUTH))
    assert n["genimpute"] == n["beagle"] == n["minimac4"] == len(shared) - len(_expected_targets(ARRAY))
    assert all(overall[tool]["aggregate_r2"] > 0.9 for tool in BENCHMARK_TOOLS)
    assert {r["tool"]: r["field"] for r in document["calibration"]} == {
        "genimpute": "DR2", "beagle": "DR2", "minimac4": "R2"}
    assert {(r["tool"], r["maf_bin"]) for r in document["quality"]} == {
        (tool, label) for tool in BENCHMARK_TOOLS for label in [*BIN_LABELS, ALL]}
    md = (out / "report.md").read_text()
    assert md.startswith("# genimpute benchmark\n") and "## Wall time and peak memory" in md
    assert "- genimpute model: `the copying engine (impute --ref)`" in md

    # a second run refuses to replace the report ...
    again = run(args, ok=False)
    assert again.exit_code == 1, again.output
    errors = [line for line in again.output.splitlines() if line.startswith("genimpute: error:")]
    assert len(errors) == 1 and "--force" in errors[0], again.output
    assert json.loads((out / "report.json").read_text()) == document  # untouched
    # ... unless told to (Minimac4 alone, to keep the test short)
    run([*args, "--tools", "minimac4", "--force"])
    replaced = json.loads((out / "report.json").read_text())
    assert {t["tool"] for t in replaced["timings"]} == {"minimac4"}
    assert "genimpute model" not in (out / "report.md").read_text()
    assert {r["tool"] for r in replaced["accuracy"]} == {"minimac4"}
    # genimpute alone, a model trained first
    run([*args, "--tools", "genimpute", "--train", "--steps", "5", "--force"])
    trained = json.loads((out / "report.json").read_text())
    assert [(t["tool"], t["step"]) for t in trained["timings"]] == [("genimpute", "train"), ("genimpute", "impute")]
    assert (out / "model" / "model.pt").is_file()
