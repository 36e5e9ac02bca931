#!/usr/bin/env bash
# The backbones side by side (issues 3 and 27): each trained with the same
# wall-clock budget on chr20_1kgp1 (Omni2.5 sites, with the genetic map),
# then imputing the 101 Omni2.5 targets, next to Beagle 5.4 and Minimac4
# from the same run (Beagle BEAGLE_ROUNDS times: its wall time is their
# median). Prints, per backbone: parameters, steps reached, seconds per
# training step, imputation wall time and peak RSS, its wall time over
# Beagle's; and the aggregate r2 table by MAF bin.
#
#   bash benchmarks/backbones.sh [out dir]
# Run again on the same out dir, it keeps the steps an earlier (killed) run
# finished (genimpute's only if the same code ran them: lib.sh's kept) and
# does the rest; start from an empty dir for a fresh run.
#   env: TRAIN_MINUTES (default 30); BACKBONES (default "msa-ev npssm-ev
#        spin-ev match": each reading match's evidence from the query's 128
#        nearest rows, as match does; msa's layers over local windows of 16
#        columns and match's 12 nearest rows around the cells match puts at
#        P(alt) in (0.05, 0.95), npssm's over 8 columns and 6 rows around
#        those in (0.1, 0.9); spin's reader over 24 of the rows, on windows
#        of 250 untyped and 250 typed columns (fewer windows per job than
#        200 and 300: within 10 times Beagle's time); match trained the
#        same way. Also spin, msa, npssm: the backbones
#        alone, as issue 3 measured them; spin-nb: SPIN with --neighbours 24);
#        REGION (default: the whole job; the backbones alone need one, e.g.
#        20:10000000-10199999: NPSSM alone takes 13 min for the whole job;
#        Beagle and Minimac4 impute the whole panel and are scored on REGION
#        too); TRAIN_MAP (default the chr20 map; empty: none, as the runs
#        before issue 27 trained); BEAGLE_ROUNDS (default 3)
#
# Needs: genimpute installed; beagle, minimac4, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
out=${1:-$root/benchmarks/out/backbones}
train_minutes=${TRAIN_MINUTES:-30}
backbones=${BACKBONES:-msa-ev npssm-ev spin-ev match}
region=${REGION:-}
beagle_rounds=${BEAGLE_ROUNDS:-3}
genetic_map=$shared/maps/plink.chr20.GRCh37.map
train_map=${TRAIN_MAP-$genetic_map}
data=$shared/chr20_1kgp1
panel=$data/panel.vcf.gz
targets=$data/targets.omni2.5.vcf.gz
mkdir -p "$out"
cd "$out"
source "$root/benchmarks/lib.sh"

# SPIN learns faster at a higher rate (held-out panel haplotypes, one window: r2 0.72 vs 0.64 after 300 steps)
# (with evidence it starts from the pretrained match, which a higher rate unsettles: 1e-3)
lr_for() { case $1 in spin-ev) echo 1e-3 ;; spin*) echo 3e-3 ;; *) echo 1e-3 ;; esac; }
model_flags() {
  case $1 in
    spin-nb) echo "--backbone spin --neighbours 24" ;;
    spin-ev) echo "--backbone spin --neighbours 24 --evidence --untyped 250 --typed 250 --context 128" ;;
    msa-ev) echo "--backbone msa --evidence --body-rows 12 --local-columns 16 --unsure 0.05 --untyped 300 --typed 300 \
                  --context 128" ;;
    npssm-ev) echo "--backbone npssm --evidence --body-rows 6 --local-columns 8 --unsure 0.1 --untyped 300 --typed 300 \
                    --context 128" ;;
    *) echo "--backbone $1" ;;
  esac
}
map_flags=()
if [[ -n $train_map ]]; then map_flags=(--map "$train_map"); fi
region_flags=()
if [[ -n $region ]]; then region_flags=(--region "$region"); fi

echo "training, $train_minutes min each:"
for b in $backbones; do
  kept "train_$b" genimpute && continue
  rm -rf "model_$b"
  # steps far beyond the budget: the budget stops training, the learning rate stays near its peak
  # shellcheck disable=SC2046  # the flags are meant to split into words
  timed "train_$b" genimpute -v train --ref "$panel" --array "$shared/arrays/omni2.5_chr20_b37.txt" $(model_flags "$b") \
    "${map_flags[@]}" \
    --lr "$(lr_for "$b")" --steps 1000000 --max-minutes "$train_minutes" --out "model_$b"
done
echo "imputing ${region:-the whole job}:"
for b in $backbones; do
  kept "impute_$b" genimpute || timed "impute_$b" genimpute -q impute "$targets" --model "model_$b" "${region_flags[@]}" \
    --out "$b.vcf.gz" --force
done
for r in $(seq "$beagle_rounds"); do
  kept "beagle.$r" beagle || timed "beagle.$r" beagle ref="$panel" gt="$targets" map="$genetic_map" out=beagle nthreads=2
done
sort -n beagle.*.time | sed -n "$(( (beagle_rounds + 1) / 2 ))p" > beagle.time  # the median round
kept minimac4 minimac4 || minimac4_run minimac4 "$panel" "$targets"
for t in beagle minimac4; do
  tabix -f -p vcf "$t.vcf.gz"
  if [[ -n $region ]]; then
    bcftools view -r "$region" -Oz -o "$t.scored.vcf.gz" "$t.vcf.gz"
  else
    cp "$t.vcf.gz" "$t.scored.vcf.gz"
  fi
  tabix -f -p vcf "$t.scored.vcf.gz"
done
echo "wall time and peak RSS over Beagle's (its median round):"
for b in $backbones; do ratio "impute_$b" beagle; done

read -r -a names <<< "$backbones"
files=("${names[@]/%/.vcf.gz}")
labels=$(IFS=,; echo "${names[*]},beagle,minimac4")
genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$panel" --labels "$labels" \
  "${files[@]}" beagle.scored.vcf.gz minimac4.scored.vcf.gz | tee r2.txt

BACKBONES="$backbones" python - <<'PY'
import json, os
print("\nbackbone  parameters  steps  s/step  val_r2  impute_s  impute_GB")
for b in os.environ["BACKBONES"].split():
    prov = json.load(open(f"model_{b}/provenance.json"))
    wall, kb = open(f"impute_{b}.time").read().split()
    print(f"{b:8s}  {prov['parameters']:10d}  {prov['steps']:5d}  {60 * prov['minutes'] / prov['steps']:6.2f}  "
          f"{prov['history'][-1]['val_r2']:6.4f}  {float(wall):8.1f}  {int(kb) / 1048576:9.2f}")
PY
