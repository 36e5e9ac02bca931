"""Held-out panel samples of a large panel, imputed by Beagle 5.4, by the
pretrained model's windows (`impute --ref --engine model`) and by the
copying engine (genimpute.copying, with the settings asked for), side by
side by MAF bin, with each one's wall time.

N samples of PANEL are held out (a seeded draw), typed at ARRAY's sites,
and imputed with the rest of PANEL as the reference and MAP as the genetic
map. No target of the scale series is used, so settings may be chosen here.

    python benchmarks/heldout_large_panel.py PANEL ARRAY MAP OUT_DIR [--held-out 100] [--tools beagle,model,copying]
        [--copying ne=3e5,neighbours=8 [--copying ...]]

Each --copying adds the copying engine with those settings (`copying` in
--tools: the defaults). Errors (1 - aggregate r2) are printed by bin, and
for every tool after the first, 90% bootstrap intervals of its error less
the first tool's, over the bin's variants and over the samples
(benchmarks/paired_errors.py).

Needs beagle, bcftools and tabix on PATH. OUT_DIR keeps every file: a tool's
output already there is reused (delete it to rerun), genimpute's only if
the same code made it (code_version.py). OUT_DIR serves one draw of one
panel, array and map: asked for another, the script stops rather than
score samples that its reference holds, or keep outputs made with another
map.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from cyvcf2 import VCF

from code_version import code_version
from genimpute.config import CopyingSettings
from genimpute.evaluation import BIN_LABELS, maf_bin, variant_key
from paired_errors import bin_errors, common_variants, dosages, report


_COPYING = """
import logging; logging.basicConfig(level=logging.INFO)
from genimpute.config import CopyingSettings
from genimpute.imputation import impute
from genimpute.modeldir import PRETRAINED_DIR
impute('{gt}', PRETRAINED_DIR, '{out}', 'cpu', progress=False, genetic_map='{map}', ref='{ref}',
       copying=CopyingSettings(**{settings}))
"""


def copying_settings(text: str) -> dict:
    """CopyingSettings fields from 'ne=3e5,neighbours=8' (empty: none), checked by building them."""
    pairs = (x.split("=") for x in text.split(",") if x)
    settings = {k: float(v) if "." in v or "e" in v else int(v) for k, v in pairs}
    CopyingSettings(**settings)
    return settings


def _copying_command(gt: Path, ref: Path, genetic_map: str, settings: str, out: Path) -> tuple[list, Path]:
    """The copying engine with `settings` (as copying_settings reads them), run in a process of its own."""
    script = _COPYING.format(gt=gt, ref=ref, map=genetic_map, settings=repr(copying_settings(settings)), out=out)
    return [sys.executable, "-c", script], out


def _run(command: list, out: Path, made_by: str) -> float:
    """Wall seconds of a command; its output already present is reused (0
    s) if `made_by` made it (out's .made_by file, written when it ends),
    and removed before the command runs if not (genimpute keeps an
    existing output)."""
    stamp = out.with_name(out.name + ".made_by")
    if out.exists() and stamp.exists() and stamp.read_text() == made_by:
        return 0.0
    for stale in (stamp, out, out.with_name(out.name + ".tbi")):
        stale.unlink(missing_ok=True)
    started = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"making {out} failed (exit status {done.returncode}):\n{done.stderr[-3000:]}")
    stamp.write_text(made_by)
    return time.monotonic() - started


def make_inputs(panel: str, array: str, genetic_map: str, out: Path, n_held_out: int,
                seed: int) -> tuple[Path, Path, list]:
    """(reference VCF, held-out VCF at the array's sites, held-out samples)."""
    out.mkdir(parents=True, exist_ok=True)
    _claim(out, {"panel": str(Path(panel).resolve()), "array": str(Path(array).resolve()),
                 "map": str(Path(genetic_map).resolve()), "held_out": n_held_out, "seed": seed})
    samples = subprocess.run(["bcftools", "query", "-l", panel], check=True, capture_output=True,
                             text=True).stdout.split()
    held_out = sorted(np.random.default_rng(seed).choice(samples, n_held_out, replace=False).tolist())
    (out / "held_out.txt").write_text("\n".join(held_out) + "\n")
    ref, gt = out / "ref.vcf.gz", out / "gt.vcf.gz"
    if not ref.exists():
        subprocess.run(["bcftools", "view", "-Oz", "-o", str(ref), "-S", f"^{out / 'held_out.txt'}", panel], check=True)
        subprocess.run(["tabix", "-f", str(ref)], check=True)
    if not gt.exists():
        subprocess.run(["bcftools", "view", "-Oz", "-o", str(gt), "-S", str(out / "held_out.txt"), "-T", array, panel],
                       check=True)
        subprocess.run(["tabix", "-f", str(gt)], check=True)
    return ref, gt, held_out


def _claim(out: Path, inputs: dict) -> None:
    """Record in out/inputs.json the draw whose files out holds, or stop if
    it holds another's: its reference would hold the new draw's held-out
    samples. A directory with a reference but no record predates the
    record and is not trusted either."""
    record = out / "inputs.json"
    found = json.loads(record.read_text()) if record.exists() else None
    if found is None and (out / "ref.vcf.gz").exists():
        sys.exit(f"{out} holds a reference drawn before inputs.json was kept; expected {inputs}: give another OUT_DIR")
    if found is not None and found != inputs:
        sys.exit(f"{out} holds the files of {found}; expected {inputs}: give another OUT_DIR")
    record.write_text(json.dumps(inputs, indent=1) + "\n")


def truth_and_bins(panel: str, held_out: list, keys: list) -> tuple[np.ndarray, np.ndarray]:
    """(V, N) true dosages of the held-out samples, (V,) MAF bins among the other samples."""
    vcf = VCF(panel)
    held = np.isin(vcf.samples, held_out)
    order = [vcf.samples.index(s) for s in held_out]
    wanted = {k: i for i, k in enumerate(keys)}
    truth, bins = np.zeros((len(keys), len(held_out))), np.zeros(len(keys), dtype=int)
    for v in vcf:
        i = wanted.get(variant_key(v))
        if i is None:
            continue
        gt = v.genotype.array()[:, :2].astype(np.float64)
        truth[i] = gt[order].sum(1)
        freq = gt[~held].mean()
        bins[i] = maf_bin(np.array([min(freq, 1 - freq)]))[0]
    return truth, bins


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("panel"), parser.add_argument("array"), parser.add_argument("map"), parser.add_argument("out")
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tools", default="beagle,model,copying")
    parser.add_argument("--copying", action="append", default=[],
                        help="copying engine settings (CopyingSettings), as ne=3e5,neighbours=8; repeat for more")
    args = parser.parse_args()
    out = Path(args.out)
    ref, gt, held_out = make_inputs(args.panel, args.array, args.map, out, args.held_out, args.seed)
    commands = tool_commands(args, ref, gt, out)
    genimpute_code = f"genimpute {code_version()}"
    seconds = {tool: _run(*command, "beagle" if tool == "beagle" else genimpute_code)
               for tool, command in commands.items()}
    found = {tool: dosages(command[1], held_out) for tool, command in commands.items()}
    keys = common_variants(found)
    truth, bins = truth_and_bins(args.panel, held_out, keys)
    print(f"{len(keys)} untyped variants, {len(held_out)} held-out samples; "
          f"error (1 - r2) in bins {' '.join(BIN_LABELS)}")
    found = {tool: np.stack([found[tool][k] for k in keys]) for tool in commands}
    report(found, truth, bins, seconds)
    record_errors(out / "errors.json", found, truth, bins)


def record_errors(path: Path, found: dict, truth: np.ndarray, bins: np.ndarray) -> None:
    """Each tool's error by bin in path ({tool: [error of each bin]}; tools of earlier runs in the same
    directory kept), for heldout_seeds.py to compare over seeds."""
    errors = json.loads(path.read_text()) if path.exists() else {}
    errors.update({tool: bin_errors(dosage, truth, bins)[1] for tool, dosage in found.items()})
    path.write_text(json.dumps(errors, indent=1) + "\n")


def tool_commands(args, ref: Path, gt: Path, out: Path) -> dict:
    """{tool: (command, its output)} in the order asked for, each --copying's settings after --tools'."""
    commands = {
        "beagle": (["beagle", f"ref={ref}", f"gt={gt}", f"map={args.map}", f"out={out / 'beagle'}", "nthreads=2"],
                   out / "beagle.vcf.gz"),
        "model": (["genimpute", "-q", "impute", str(gt), "--ref", str(ref), "--map", args.map, "--engine", "model",
                   "--out", str(out / "model.vcf.gz")], out / "model.vcf.gz"),
        "copying": _copying_command(gt, ref, args.map, "", out / "copying.vcf.gz"),
    }
    asked = {tool: commands[tool] for tool in args.tools.split(",") if tool}
    for settings in args.copying:
        name = "copying" + settings.replace("=", "").replace(",", "_")
        asked[name] = _copying_command(gt, ref, args.map, settings, out / f"{name}.vcf.gz")
    return asked


if __name__ == "__main__":
    main()
