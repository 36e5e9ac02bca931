#!/usr/bin/env bash
# Targets as labs deliver them, on ../shared/data/chr20_1kgp1 (101 targets on
# Omni2.5), with a model trained on its panel:
#  1. unphased targets: genimpute phases them (Beagle, at the typed sites) and
#     imputes; next to the phased-input run and to Beagle 5.4 on the phased and
#     the unphased targets (Beagle phases them itself); aggregate r2 by MAF bin.
#  2. switch error rate of each phaser genimpute can use, against the true phase.
#  3. missing calls: 2% (dense: nearly every typed record has one) and 0.5%
#     (sparse) of the typed calls set to ./.; in REGION, how often the
#     filled-in genotype is right (genimpute, Beagle), next to the typed calls' own
#     genotype mix.
#
#   bash benchmarks/real_world_targets.sh MODEL_DIR [out dir] [REGION]
#
# Environment: PHASED, a whole-contig genimpute output of the same model on the
# phased targets, to reuse instead of imputing again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
data=$shared/chr20_1kgp1
model=$(cd "$1" && pwd)
out=${2:-$root/benchmarks/out/real_world}
region=${3:-20:9000000-9500000}
map=$shared/maps/plink.chr20.GRCh37.map
mkdir -p "$out"
cd "$out"

timed() {  # timed NAME CMD... : run CMD, report wall seconds and peak RSS
  local name=$1; shift
  /usr/bin/time -f "$name wall_s=%e peak_rss_kb=%M" -o "$name.time" "$@" > "$name.log" 2>&1
  tee -a timings.txt < "$name.time"
}
: > timings.txt

if [ -n "${PHASED:-}" ]; then
  [ "$PHASED" -ef phased.vcf.gz ] || cp "$PHASED" phased.vcf.gz
  tabix -f -p vcf phased.vcf.gz
else
  timed genimpute_phased genimpute -q impute "$data/targets.omni2.5.vcf.gz" --model "$model" --out phased.vcf.gz --force
fi
timed genimpute_unphased genimpute -q impute "$data/targets.omni2.5.unphased.vcf.gz" --model "$model" \
  --out unphased.vcf.gz --force --phaser beagle --map "$map"
timed beagle_phased beagle ref="$data/panel.vcf.gz" gt="$data/targets.omni2.5.vcf.gz" map="$map" out=beagle_phased nthreads=2
timed beagle_unphased beagle ref="$data/panel.vcf.gz" gt="$data/targets.omni2.5.unphased.vcf.gz" map="$map" out=beagle_unphased nthreads=2
genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$data/panel.vcf.gz" \
  --labels genimpute_phased,genimpute_unphased,beagle_phased,beagle_unphased \
  phased.vcf.gz unphased.vcf.gz beagle_phased.vcf.gz beagle_unphased.vcf.gz | tee r2.txt

echo "switch error rate at the typed sites (heterozygous-to-heterozygous transitions):"
python - "$data" "$model" "$map" <<'PY'
import sys
from genimpute.io.vcf_reader import read_target
from genimpute.modeldir import load_model_dir
from genimpute.panel import align_target
from genimpute.phasing import phase_haplotypes, switch_errors

data, model, genetic_map = sys.argv[1:]
panel = load_model_dir(model).panel
unphased = align_target(panel, read_target(f"{data}/targets.omni2.5.unphased.vcf.gz"))
truth = align_target(panel, read_target(f"{data}/targets.omni2.5.vcf.gz")).haplotypes
rows = unphased.panel_rows
for tool in ("beagle", "shapeit4"):
    phased = phase_haplotypes(tool, unphased.haplotypes, panel.haplotypes(rows), panel.contig_names[0], panel.positions[rows],
                              [panel.refs[r] for r in rows], [panel.alts[r] for r in rows],
                              [f"s{i}" for i in range(truth.shape[1] // 2)], panel.samples,
                              genetic_map=genetic_map)
    switches, opportunities = switch_errors(phased, truth)
    print(f"  {tool}: {switches} of {opportunities} ({switches / opportunities:.2%})")
PY

for spec in 0.02:7:missing 0.005:11:missing_sparse; do
IFS=: read -r rate seed name <<< "$spec"
echo "missing calls ($rate of the typed calls) imputed in $region:"
python - "$data/targets.omni2.5.vcf.gz" "$name.vcf" "$rate" "$seed" <<'PY'
import gzip
import sys
import numpy as np

source, dest, rate, seed = sys.argv[1:]
rng = np.random.default_rng(int(seed))
with gzip.open(source, "rt") as src, open(dest, "w") as out:
    for line in src:
        if not line.startswith("#"):
            fields = line.rstrip("\n").split("\t")
            fields[9:] = [".|." if rng.random() < float(rate) else gt for gt in fields[9:]]
            line = "\t".join(fields) + "\n"
        out.write(line)
PY
timed "genimpute_$name" genimpute -q impute "$name.vcf" --model "$model" --region "$region" --out "$name.imputed.vcf.gz" --force
timed "beagle_$name" beagle ref="$data/panel.vcf.gz" gt="$name.vcf" map="$map" out="beagle_$name" nthreads=2
python - "$name.vcf" "$data/targets.omni2.5.vcf.gz" "$region" "genimpute=$name.imputed.vcf.gz" \
  "beagle=beagle_$name.vcf.gz" <<'PY'
import sys
import cyvcf2
import numpy as np

hidden_file, truth_file, region, *outputs = sys.argv[1:]
start, end = (int(x) for x in region.split(":")[1].split("-"))


def key(v):
    return v.POS, v.REF, v.ALT[0]


hidden = {key(v): v.genotype.array()[:, 0] < 0 for v in cyvcf2.VCF(hidden_file) if start <= v.POS <= end}
truth = {key(v): v.genotype.array()[:, :2].sum(axis=1) for v in cyvcf2.VCF(truth_file)}
for label, imputed_file in (o.split("=", 1) for o in outputs):
    right, baseline, dosage, true = 0, 0, [], []
    for v in cyvcf2.VCF(imputed_file):
        if key(v) not in hidden or v.INFO.get("IMP"):  # typed records of the region only
            continue
        mask, genotypes = hidden[key(v)], truth[key(v)]
        best = v.genotype.array()[:, :2].sum(axis=1)
        right += int((best[mask] == genotypes[mask]).sum())
        dosage += list(v.format("DS")[mask, 0])
        true += list(genotypes[mask])
        common = np.bincount(genotypes[~mask], minlength=3).argmax()  # the site's most common observed genotype
        baseline += int((genotypes[mask] == common).sum())
    n = len(true)
    print(f"  {label}: {n} missing calls filled: best-guess genotype right for {right} ({right / n:.1%}); dosage r2 "
          f"{np.corrcoef(dosage, true)[0, 1] ** 2:.3f}; each site's most common observed genotype: {baseline / n:.1%}")
PY
done
