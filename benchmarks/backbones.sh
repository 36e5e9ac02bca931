#!/usr/bin/env bash
# The three backbones side by side (issue 3): each trained with the same
# wall-clock budget on chr20_1kgp1 (Omni2.5 sites), then imputing the 101
# Omni2.5 targets, next to Beagle 5.4 and Minimac4 from the same run.
# Prints, per backbone: parameters, steps reached, seconds per training step,
# imputation wall time and peak RSS; and the aggregate r2 table by MAF bin.
#
# Imputation and scoring are limited to REGION (default 20:10000000-10199999,
# a tenth of the panel's 2 Mb): NPSSM's imputation costs about 8x MSA's,
# which is 13 min for the whole panel. Beagle and Minimac4 impute the whole
# panel (seconds) and are scored on REGION too.
#
#   bash benchmarks/backbones.sh [out dir]
# Run again on the same out dir, it keeps the steps an earlier (killed) run
# finished and does the rest; start from an empty dir for a fresh run.
#   env: TRAIN_MINUTES (default 30), BACKBONES (default "spin msa npssm"; also
#        spin-nb: SPIN with --neighbours 24; msa-ev, npssm-ev: with match's
#        evidence, their layers reading 24 of match's 128 rows; match), REGION,
#        TRAIN_MAP (default none: a genetic map for training, as the runs
#        before issue 27 trained without one; Beagle always has the map)
#
# Needs: genimpute installed; beagle, minimac4, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
out=${1:-$root/benchmarks/out/backbones}
train_minutes=${TRAIN_MINUTES:-30}
backbones=${BACKBONES:-spin msa npssm}
region=${REGION:-20:10000000-10199999}
data=$shared/chr20_1kgp1
panel=$data/panel.vcf.gz
targets=$data/targets.omni2.5.vcf.gz
mkdir -p "$out"
cd "$out"
source "$root/benchmarks/lib.sh"

# SPIN learns faster at a higher rate (held-out panel haplotypes, one window: r2 0.72 vs 0.64 after 300 steps)
lr_for() { case $1 in spin*) echo 3e-3 ;; *) echo 1e-3 ;; esac; }
model_flags() {
  case $1 in
    spin-nb) echo "--model spin --neighbours 24" ;;
    *-ev) echo "--model ${1%-ev} --evidence --body-rows 24 --untyped 200 --typed 300 --context 128" ;;
    *) echo "--model $1" ;;
  esac
}
map_flags=()
if [[ -n ${TRAIN_MAP:-} ]]; then map_flags=(--map "$TRAIN_MAP"); fi

echo "training, $train_minutes min each:"
for b in $backbones; do
  kept "train_$b" && continue
  rm -rf "model_$b"
  # steps far beyond the budget: the budget stops training, the learning rate stays near its peak
  # shellcheck disable=SC2046  # the flags are meant to split into words
  timed "train_$b" genimpute -v train --ref "$panel" --array "$shared/arrays/omni2.5_chr20_b37.txt" $(model_flags "$b") \
    "${map_flags[@]}" \
    --lr "$(lr_for "$b")" --steps 1000000 --max-minutes "$train_minutes" --out "model_$b"
done
echo "imputing $region:"
for b in $backbones; do
  kept "impute_$b" || timed "impute_$b" genimpute -q impute "$targets" --model "model_$b" --region "$region" --out "$b.vcf.gz" --force
done
kept beagle || timed beagle beagle ref="$panel" gt="$targets" map="$shared/maps/plink.chr20.GRCh37.map" out=beagle nthreads=2
kept minimac4 || minimac4_run minimac4 "$panel" "$targets"
for t in beagle minimac4; do
  tabix -f -p vcf "$t.vcf.gz"
  bcftools view -r "$region" -Oz -o "$t.region.vcf.gz" "$t.vcf.gz" && tabix -f -p vcf "$t.region.vcf.gz"
done
for b in $backbones; do ratio "impute_$b" beagle; done

read -r -a names <<< "$backbones"
files=("${names[@]/%/.vcf.gz}")
labels=$(IFS=,; echo "${names[*]},beagle,minimac4")
genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$panel" --labels "$labels" \
  "${files[@]}" beagle.region.vcf.gz minimac4.region.vcf.gz | tee r2.txt

BACKBONES="$backbones" python - <<'PY'
import json, os
print("\nbackbone  parameters  steps  s/step  val_r2  impute_s  impute_GB")
for b in os.environ["BACKBONES"].split():
    prov = json.load(open(f"model_{b}/provenance.json"))
    wall, kb = open(f"impute_{b}.time").read().split()
    print(f"{b:8s}  {prov['parameters']:10d}  {prov['steps']:5d}  {60 * prov['minutes'] / prov['steps']:6.2f}  "
          f"{prov['history'][-1]['val_r2']:6.4f}  {float(wall):8.1f}  {int(kb) / 1048576:9.2f}")
PY
