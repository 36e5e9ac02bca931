"""genimpute against the imputation tools a user has today, on the user's data.

The truth VCF is masked to the array's sites to make the targets; genimpute
(trained here, or a given model), Beagle 5.4 and Minimac4 impute them, each
run as a child process timed for wall time and peak memory; then every
output is scored against the truth into one report.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pysam
from cyvcf2 import Writer

from genimpute.config import BENCHMARK_TOOLS
from genimpute.errors import GenimputeError, InputError
from genimpute.evaluation import Evaluation, evaluate
from genimpute.external import run_tied
from genimpute.io.array_list import read_array_list
from genimpute.io.contigs import normalise_contig
from genimpute.io.vcf_reader import open_vcf
from genimpute.runtime import usable_cores

log = logging.getLogger(__name__)

INSTALL_HINT = {"beagle": "Debian: apt-get install beagle", "minimac4": "Debian: apt-get install minimac4"}


class ToolError(GenimputeError):
    """A tool run by the benchmark failed."""


@dataclass
class Step:
    tool: str
    step: str
    wall_s: float
    peak_rss_gb: float


# The kernel's peak-memory figure of a child forked from this process starts
# at this process's own resident set (hundreds of MB with torch and pandas
# loaded), so each tool runs under a small launcher that reports the peak of
# its one child instead.
_LAUNCHER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code if code >= 0 else 128 - code)\n"
)


def run_timed(tool: str, step: str, cmd: list, log_path: Path, stdout_path: Path | None = None) -> Step:
    """Run `cmd` with its output in `log_path` (stdout in `stdout_path` when
    given); wall time and peak resident memory."""
    log.info("%s: %s", tool, " ".join(map(str, cmd)))
    peak_file = log_path.with_suffix(".peak_kib")
    try:
        with open(log_path, "wb") as err, open(stdout_path, "wb") if stdout_path else err as out:
            started = time.monotonic()
            code = run_tied([sys.executable, "-c", _LAUNCHER, peak_file, *cmd], stdout=out, stderr=err)
            wall = time.monotonic() - started
        if code != 0:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
            raise ToolError(f"{tool} {step} failed (exit {code}); last lines of {log_path}:\n" + "\n".join(tail))
        peak_kib = int(peak_file.read_text())  # ru_maxrss is in KiB on Linux
    finally:
        peak_file.unlink(missing_ok=True)
    return Step(tool, step, round(wall, 2), round(peak_kib / 1024**2, 3))


def mask_to_array(truth: str | Path, array: str | Path, out: Path) -> int:
    """Write the truth records the array types (same matching as `train`) to
    bgzipped, indexed `out`; return how many."""
    sites = read_array_list(array)
    vcf = open_vcf(truth)
    writer = Writer(str(out), vcf, mode="wz")
    kept = 0
    for rec in vcf:
        if len(rec.ALT) == 1 and sites.types(normalise_contig(rec.CHROM), rec.POS, rec.REF, rec.ALT[0]):
            writer.write_record(rec)
            kept += 1
    writer.close()
    vcf.close()
    if not kept:
        out.unlink()
        raise InputError(f"{array}: expected sites shared with the truth file {truth}; found none (wrong genome build or contig?)")
    pysam.tabix_index(str(out), preset="vcf", force=True)
    return kept


def available_tools(requested: list) -> list:
    """The requested tools that can run here; the others are skipped with a warning."""
    unknown = sorted(set(requested) - set(BENCHMARK_TOOLS))
    if unknown:
        raise InputError(f"--tools: expected names from {', '.join(BENCHMARK_TOOLS)}; found {', '.join(unknown)}")
    found = []
    for tool in requested:
        if tool == "genimpute" or shutil.which(tool):
            found.append(tool)
        else:
            log.warning("%s not found on PATH: skipped (%s)", tool, INSTALL_HINT[tool])
    return found


def _genimpute(args: list) -> list:
    return [sys.executable, "-m", "genimpute", "-q", *args]


@dataclass(frozen=True)
class _Plan:
    """What every tool's run needs: the panel, the array, the masked truth
    (the targets), where outputs and logs go, and genimpute's model (trained
    into `model` first when `train`; None: the copying engine over the
    panel, as `impute --ref` runs by default)."""

    ref: str | Path
    array: str | Path
    targets: Path
    out_dir: Path
    threads: int
    genetic_map: str | Path | None
    model: str | Path | None
    train: bool
    train_args: list

    @property
    def logs(self) -> Path:
        return self.out_dir / "logs"


def _run_genimpute(plan: _Plan) -> tuple[list, Path]:
    """(steps, output) of genimpute: with a model (trained first when
    asked), impute with it; without, the copying engine from the panel
    converted once (`genimpute panel`: a step of its own, as Minimac4's
    compression is, for it is done once for every later run)."""
    with_map = [] if plan.genetic_map is None else ["--map", plan.genetic_map]  # genimpute gets the map Beagle gets
    steps = []
    if plan.model is None:
        compact = plan.out_dir / "panel.gpanel"
        steps.append(run_timed("genimpute", "convert reference", _genimpute(
            ["panel", plan.ref, "--out", compact, "--force", "--threads", plan.threads, *with_map]),
            plan.logs / "genimpute_panel.log"))
        source = ["--ref", compact]
    else:
        if plan.train:
            shutil.rmtree(plan.model, ignore_errors=True)
            steps.append(run_timed("genimpute", "train", _genimpute(
                ["train", "--ref", plan.ref, "--array", plan.array, "--out", plan.model, "--threads", plan.threads,
                 *with_map, *plan.train_args]),
                plan.logs / "genimpute_train.log"))
        source = ["--model", plan.model]
    output = plan.out_dir / "genimpute.vcf.gz"
    steps.append(run_timed("genimpute", "impute", _genimpute(
        ["impute", plan.targets, *source, "--threads", plan.threads, *with_map, "--out", output, "--force"]),
        plan.logs / "genimpute_impute.log"))
    return steps, output


def _run_beagle(plan: _Plan) -> tuple[list, Path]:
    """(steps, output) of Beagle, its output tabix-indexed."""
    cmd = ["beagle", f"ref={plan.ref}", f"gt={plan.targets}", f"out={plan.out_dir / 'beagle'}",
           f"nthreads={plan.threads}"]
    if plan.genetic_map is not None:
        cmd.append(f"map={plan.genetic_map}")
    step = run_timed("beagle", "impute", cmd, plan.logs / "beagle.log")
    output = plan.out_dir / "beagle.vcf.gz"
    pysam.tabix_index(str(output), preset="vcf", force=True)
    return [step], output


def _run_minimac4(plan: _Plan) -> tuple[list, Path]:
    """(steps, output) of Minimac4: compress the panel to its own format, then impute."""
    msav = plan.out_dir / "panel.msav"
    compress = run_timed("minimac4", "compress reference", ["minimac4", "--compress-reference", plan.ref],
                         plan.logs / "minimac4_compress.log", stdout_path=msav)
    output = plan.out_dir / "minimac4.vcf.gz"
    impute = run_timed("minimac4", "impute", ["minimac4", "-t", plan.threads, "-f", "GT,DS", "-O", "vcf.gz",
                                              "-o", output, msav, plan.targets], plan.logs / "minimac4.log")
    return [compress, impute], output


# run, scored and listed in this order
_RUNNERS = {"genimpute": _run_genimpute, "beagle": _run_beagle, "minimac4": _run_minimac4}


def _check_inputs(out_dir: Path, force: bool, paths: list) -> None:
    """Refuse to replace a report unless forced, and name a missing input
    before anything runs."""
    if (out_dir / "report.md").exists() and not force:
        raise InputError(f"{out_dir} already holds a benchmark report; use --force to replace it")
    for path in paths:
        if path is not None and not Path(path).exists():
            raise InputError(f"{path}: no such file or directory")


def _timings(steps: list) -> pd.DataFrame:
    """One row per step; when Beagle imputed, each step's wall time relative to Beagle's imputation too."""
    timings = pd.DataFrame([vars(s) for s in steps])
    imputations = timings[timings["step"] == "impute"].set_index("tool")["wall_s"]
    if "beagle" in imputations:
        timings["wall_vs_beagle_impute"] = (timings["wall_s"] / imputations["beagle"]).round(2)
    return timings


def run_benchmark(
    ref: str | Path,
    array: str | Path,
    truth: str | Path,
    out_dir: str | Path,
    tools: list = BENCHMARK_TOOLS,
    model: str | Path | None = None,
    train: bool = False,
    train_args: list = (),
    genetic_map: str | Path | None = None,
    samples: str | Path | None = None,
    threads: int | None = None,
    force: bool = False,
) -> tuple[Evaluation, pd.DataFrame, dict]:
    """Run every available tool on the masked truth and score them.
    genimpute: `model`, or one trained first (`train`, with `train_args`),
    else the copying engine. Returns (evaluation, timings, inputs for the
    report)."""
    out_dir = Path(out_dir)
    if train and model is not None:
        raise InputError("--train and --model: expected one of them (train a model, or use one)")
    if train_args and not train:
        raise InputError(f"{' '.join(map(str, train_args))}: training options, expected with --train")
    _check_inputs(out_dir, force, [ref, array, truth, genetic_map, samples, model])
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    threads = threads or usable_cores()
    tools = available_tools(list(tools))
    if not tools:
        raise InputError("expected at least one tool to run; found none")

    targets = out_dir / "targets.vcf.gz"
    n_sites = mask_to_array(truth, array, targets)
    log.info("targets: %d truth records typed by the array -> %s", n_sites, targets)
    train = train and "genimpute" in tools
    plan = _Plan(ref, array, targets, out_dir, threads, genetic_map, out_dir / "model" if train else model, train,
                 train_args)
    steps, outputs = [], {}
    for tool, runner in _RUNNERS.items():
        if tool in tools:
            tool_steps, outputs[tool] = runner(plan)
            steps += tool_steps

    evaluation = evaluate(truth, list(outputs.values()), list(outputs), ref, samples)
    timings = _timings(steps)
    inputs = {"reference panel": ref, "array": array, "truth": truth,
              "targets (truth at array sites)": f"{targets} ({n_sites} records)",
              "genimpute model": (plan.model or "the copying engine (impute --ref)") if "genimpute" in tools else None,
              "threads": threads, **{f"{tool} output": path for tool, path in outputs.items()}}
    return evaluation, timings, {k: str(v) for k, v in inputs.items() if v is not None}
