"""Held-out panel samples against Beagle 5.4, by MAF bin (issue 4). The
panel samples a trained model held out for validation are imputed from
their typed sites twice: by the model (every window, no held-out sample in
any context) and by Beagle, with the rest of the panel as its reference and
the genetic map. Both are scored on the same untyped variants, in bins of
MAF among the training haplotypes. No benchmark target is used, so this is
the comparison with Beagle that settings may be chosen on.

    python benchmarks/experiments/heldout_vs_beagle.py MODEL_DIR PANEL ARRAY MAP [OUT_DIR]

PANEL is the VCF/BCF the model was trained on. Prints a line per tool and
their difference per bin. Beagle's output is kept in OUT_DIR (default
benchmarks/out/heldout) and reused. Needs beagle, bcftools and tabix on PATH.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
from cyvcf2 import VCF
from validation_by_maf import by_bin, held_out_imputation

from genimpute.evaluation import BIN_LABELS
from genimpute.metrics import pooled_r2


def beagle_dosages(run: dict, panel_vcf: str, genetic_map: str, out: Path) -> np.ndarray:
    """(V, samples) Beagle's DS for the held-out samples at run['columns']."""
    panel, held_out = run["panel"], run["held_out"]
    samples = [panel.samples[h // 2] for h in held_out.val_haps[::2]]
    imputed = out / "beagle.vcf.gz"
    if not imputed.exists():
        out.mkdir(parents=True, exist_ok=True)
        (out / "held_out.txt").write_text("\n".join(samples) + "\n")
        typed = held_out.typed_mask
        (out / "typed.tsv").write_text("".join(f"{panel.contig_names[c]}\t{p}\n" for c, p in
                                               zip(panel.contig_index[typed], panel.positions[typed])))
        for args in (["-S", f"^{out / 'held_out.txt'}", "-o", str(out / "ref.vcf.gz")],
                     ["-S", str(out / "held_out.txt"), "-T", str(out / "typed.tsv"), "-o", str(out / "gt.vcf.gz")]):
            subprocess.run(["bcftools", "view", "-Oz", *args, panel_vcf], check=True)
        subprocess.run(["beagle", f"ref={out / 'ref.vcf.gz'}", f"gt={out / 'gt.vcf.gz'}", f"map={genetic_map}",
                        f"out={out / 'beagle'}", "nthreads=2"], check=True, stdout=subprocess.DEVNULL)
    vcf = VCF(str(imputed))
    order = [vcf.samples.index(s) for s in samples]
    ds = {(v.CHROM, v.POS, v.REF, v.ALT[0]): v.format("DS")[order, 0] for v in vcf}
    return np.stack([ds[(panel.contig_names[panel.contig_index[c]], int(panel.positions[c]), panel.refs[c],
                         panel.alts[c])] for c in run["columns"]])


def main(model_dir: str, panel_vcf: str, array: str, genetic_map: str, out: str = "benchmarks/out/heldout") -> None:
    run = held_out_imputation(model_dir, array, stride=1)
    beagle = beagle_dosages(run, panel_vcf, genetic_map, Path(out))
    truth, bins = run["true_dosage"], run["bins"]
    print(f"{len(run['columns'])} untyped variants, {truth.shape[1]} held-out samples")
    print(f"genimpute {by_bin(run['dosage'], truth, bins)}")
    print(f"beagle    {by_bin(beagle, truth, bins)}")
    difference = [pooled_r2(run["dosage"][bins == i], truth[bins == i])
                  - pooled_r2(beagle[bins == i], truth[bins == i]) for i in range(len(BIN_LABELS))]
    print("genimpute - beagle " + " ".join(f"{label} {d:+.4f}" for label, d in zip(BIN_LABELS, difference)))


if __name__ == "__main__":
    main(*sys.argv[1:])
