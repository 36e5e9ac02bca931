"""Pipeline integrations: the Snakemake workflow runs for real; the Nextflow
modules, the Dockerfile and the shell scripts are checked statically (no
Nextflow launcher or Docker engine here)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run
from genome_example import make_genome_example
from paths import ARRAY, PANEL, TARGET_PHASED, TARGET_TRUTH
from tools import require, run_tool

ROOT = Path(__file__).parent.parent
SNAKEFILE = ROOT / "workflows" / "snakemake" / "Snakefile"
NEXTFLOW = ROOT / "workflows" / "nextflow"
MAP = ROOT / "examples" / "data" / "plink.chr20_8.9-9.4Mb.GRCh37.map"


def _records(path) -> list[str]:
    return run_tool(["bcftools", "view", "-H", str(path)], check=True, capture_output=True, text=True).stdout.splitlines()


@pytest.mark.slow
def test_snakemake_workflow_trains_scatters_concatenates_and_evaluates(tmp_path):
    require("bcftools", "tabix")  # the workflow joins the chunks with them
    config = tmp_path / "config.yaml"
    config.write_text("\n".join([
        f"panel: {PANEL}", f"array: {ARRAY}", f"targets: {TARGET_PHASED}", f"truth: {TARGET_TRUTH}",
        'model: ""', 'train_args: "--steps 5 --dim 16 --heads 2 --layers 1"', "chunk_size: 30kb", "outdir: out",
    ]) + "\n")
    subprocess.run(["snakemake", "-s", str(SNAKEFILE), "--configfile", str(config), "--directory", str(tmp_path),
                    "--cores", "2", "--quiet"], check=True, capture_output=True, text=True)
    out = tmp_path / "out"
    chunks = (out / "chunks" / "all.txt").read_text().split()
    assert len(chunks) == 4 and all((out / "chunks" / "all" / f"{i}.vcf.gz").exists() for i in range(4))

    single = tmp_path / "single.vcf.gz"
    run(["-q", "impute", str(TARGET_PHASED), "--model", str(out / "model"), "--out", str(single)])
    assert _records(out / "imputed.vcf.gz") == _records(single)
    assert (out / "imputed.vcf.gz.tbi").exists()
    assert "Aggregate r² by MAF bin" in (out / "report" / "all" / "report.md").read_text()
    assert (out / "report" / "all" / "r2_by_maf.png").stat().st_size > 0
    assert (out / "summary.tsv").read_text().splitlines()[1].split("\t") == ["all", str(len(_records(single))),
                                                                             "1186", "10"]


def test_snakemake_workflow_imputes_with_the_pretrained_model_and_no_training(tmp_path):
    """From the panel converted once, with the map's cM: as one run from the VCF and the map."""
    require("bcftools", "tabix")  # the workflow joins the chunks with them
    config = tmp_path / "config.yaml"
    config.write_text("\n".join([
        f"panel: {PANEL}", f"map: {MAP}", f"array: {ARRAY}", f"targets: {TARGET_PHASED}", 'truth: ""',
        "model: pretrained", "chunk_size: 50kb", "outdir: out", "impute_threads: 2",
    ]) + "\n")
    log = subprocess.run(["snakemake", "-s", str(SNAKEFILE), "--configfile", str(config), "--directory",
                          str(tmp_path), "--cores", "2", "--printshellcmds"], check=True, capture_output=True, text=True)
    commands = (log.stdout + log.stderr).splitlines()
    imputes = [line for line in commands if "genimpute -q impute" in line]
    assert imputes and all(" --threads 2 " in line for line in imputes)  # impute_threads reached each chunk
    assert any("genimpute panel" in line and " --threads 2 " in line for line in commands)  # all the cores
    out = tmp_path / "out"
    assert not (out / "model").exists()
    assert (out / "panels" / "all.gpanel").exists()  # converted once, read by every chunk
    single = tmp_path / "single.vcf.gz"
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--map", str(MAP), "--out", str(single)])
    assert _records(out / "imputed.vcf.gz") == _records(single)
    no_map = tmp_path / "no_map.vcf.gz"
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--out", str(no_map)])
    assert _records(no_map) != _records(single)  # the map changes the output: the workflow passed it on


def _genome_config(tmp_path: Path, example: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text("\n".join([
        f"panel: {example}/panel.chr{{chrom}}.vcf.gz", f"targets: {example}/target.vcf.gz", 'truth: ""',
        "model: pretrained", "chunk_size: 40kb", "outdir: out",
    ]) + "\n")
    return config


def _snakemake(config: Path, directory: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["snakemake", "-s", str(SNAKEFILE), "--configfile", str(config), "--directory",
                           str(directory), *extra], capture_output=True, text=True)


def test_snakemake_workflow_runs_a_panel_per_chromosome(tmp_path):
    """chromosome x chunk jobs, an output per chromosome, each a genome-wide impute run's."""
    require("bcftools", "tabix")
    example = make_genome_example(tmp_path)
    result = _snakemake(_genome_config(tmp_path, example), tmp_path, "--cores", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    run(["-q", "impute", str(example / "target.vcf.gz"), "--ref", str(example / "panel.chr*.vcf.gz"),
         "--out", str(tmp_path / "one.chr{chrom}.vcf.gz")])
    out = tmp_path / "out"
    for chrom in ("20", "21"):
        assert len((out / "chunks" / f"{chrom}.txt").read_text().split()) == 3
        assert _records(out / f"imputed.{chrom}.vcf.gz") == _records(tmp_path / f"one.chr{chrom}.vcf.gz")
    rows = [line.split("\t") for line in (out / "summary.tsv").read_text().splitlines()]
    assert rows == [["chromosome", "records", "imputed", "samples"], ["20", "1258", "1186", "10"],
                    ["21", "1258", "1186", "10"]]


@pytest.mark.slow
def test_snakemake_workflow_runs_on_a_slurm_cluster(tmp_path):
    """Every job submitted to a real (single-node) SLURM cluster, each chunk
    a job of its own, the outputs byte for byte the local run's."""
    require("bcftools", "tabix", "slurmctld", "slurmd", "munged")
    if os.geteuid() != 0:
        if os.environ.get("GENIMPUTE_CI"):
            pytest.fail("under CI the tests run as root, which starting SLURM's daemons needs")
        pytest.skip("starting SLURM's daemons needs root")
    example = make_genome_example(tmp_path)
    config = _genome_config(tmp_path, example)
    cluster = tmp_path / "slurm"
    started = subprocess.run(["bash", str(ROOT / "scripts" / "slurm-local.sh"), "start", str(cluster)],
                             capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    try:
        env = {**os.environ, "SLURM_CONF": str(cluster / "slurm.conf")}
        on_slurm = tmp_path / "on_slurm"
        result = subprocess.run(["snakemake", "-s", str(SNAKEFILE), "--configfile", str(config), "--directory",
                                 str(on_slurm), "--executor", "slurm", "--jobs", "4", "--cores", "2", "--latency-wait", "10",
                                 "--slurm-status-command", "squeue",  # no accounting database for sacct
                                 "--slurm-keep-successful-logs",  # each job's log names its SLURM job
                                 "--slurm-init-seconds-before-status-checks", "1",
                                 "--seconds-between-status-checks", "2",
                                 "--default-resources", "slurm_partition=local", "mem_mb=1000", "runtime=10"],
                                capture_output=True, text=True, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        subprocess.run(["bash", str(ROOT / "scripts" / "slurm-local.sh"), "stop", str(cluster)], check=False)
    local = tmp_path / "local"
    assert _snakemake(config, local, "--cores", "2").returncode == 0
    for chrom in ("20", "21"):
        assert _records(on_slurm / "out" / f"imputed.{chrom}.vcf.gz") == _records(local / "out" / f"imputed.{chrom}.vcf.gz")
    completed = set(re.findall(r"JobId=(\d+) .*JobState=COMPLETED", (cluster / "jobcomp.txt").read_text()))
    chunk_jobs = {m for log in (on_slurm / ".snakemake" / "slurm_logs" / "rule_impute_chunk").rglob("*.log")
                  for m in re.findall(r"(\d+)\.log$", log.name)}
    assert len(chunk_jobs) == 6 and chunk_jobs <= completed


def _help_options(command: str) -> set:
    text = run([command, "--help"]).output
    return set(re.findall(r"(--[a-z][a-z-]*)", text))


def _genimpute_calls(path: Path) -> list[tuple[str, set]]:
    """(subcommand, options) of every `genimpute <subcommand> ...` line in a script."""
    calls = []
    for line in path.read_text().splitlines():
        match = re.search(r"\bgenimpute\s+(?:-q\s+)?(train|impute|chunks|evaluate|benchmark|panel)\b(.*)", line)
        if match:
            calls.append((match[1], set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", match[2]))))
    return calls


@pytest.mark.parametrize("script", sorted(NEXTFLOW.rglob("*.nf")) + [SNAKEFILE], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_option_a_workflow_passes_exists(script):
    calls = _genimpute_calls(script)
    if script.name == "main.nf" and script.parent == NEXTFLOW:
        assert calls == []  # the pipeline only calls modules
        return
    assert calls, f"no genimpute call found in {script}"
    for command, options in calls:
        assert options <= _help_options(command), (command, options - _help_options(command))


def test_nextflow_pipeline_includes_existing_modules():
    pipeline = (NEXTFLOW / "main.nf").read_text()
    includes = re.findall(r"include \{ (\w+)\s*\} from '\./(.+?)'", pipeline)
    assert {name for name, _ in includes} == {"GENIMPUTE_PANEL", "GENIMPUTE_TRAIN", "GENIMPUTE_CHUNKS",
                                              "GENIMPUTE_IMPUTE"}
    for name, module in includes:
        text = (NEXTFLOW / f"{module}.nf").read_text()
        assert f"process {name} {{" in text
        assert 'path "versions.yml"' in text and "stub:" in text
        assert (NEXTFLOW / module).with_name("meta.yml").exists()


def _readme_constraints() -> str:
    """The constraints file the README's pinned install names."""
    found = re.findall(r"pip install -c (\S+)", (ROOT / "README.md").read_text())
    assert len(found) == 1, found
    return found[0]


def test_dockerfile_installs_as_the_readme_says_and_runs_unprivileged():
    dockerfile = (ROOT / "Dockerfile").read_text()
    # the README's CPU install and the image's both take torch's CPU build through the same constraints file
    constraints = _readme_constraints()
    assert constraints == "constraints-cpu.txt" and (ROOT / constraints).exists()
    assert f"pip install -c {constraints}" in dockerfile
    for package in ("bcftools", "tabix", "beagle", "minimac4"):
        assert re.search(rf"apt-get install .*\b{package}\b", dockerfile), package
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["genimpute"\]', dockerfile, re.MULTILINE)
    for line in re.findall(r"^COPY (.+)$", dockerfile, re.MULTILINE):
        for source in shlex.split(line)[:-1]:
            assert (ROOT / source).exists(), source


def test_shell_scripts_pass_shellcheck():
    require("shellcheck")
    scripts = [*ROOT.glob("examples/*.sh"), *ROOT.glob("benchmarks/*.sh"), *ROOT.glob("tests/data/*.sh"), *ROOT.glob("scripts/*.sh"),
               ROOT / ".ci" / "run"]
    result = subprocess.run(["shellcheck", *map(str, scripts)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
