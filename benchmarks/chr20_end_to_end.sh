#!/usr/bin/env bash
# End-to-end benchmark on ../shared/data/chr20_1kgp1 (1000 Genomes phase 1,
# chr20:9-11 Mb; 991-sample panel, 101 targets typed on Omni2.5):
# genimpute train -> impute -> evaluate, next to Beagle 5.4 and Minimac4 run on
# the same data in the same run. Prints wall time and peak memory of each
# imputation and the side-by-side aggregate r2 table by panel MAF bin.
#
#   bash benchmarks/chr20_end_to_end.sh [training steps, default: genimpute's] [out dir]
#
# Training uses genimpute's defaults (backbone, k, steps, 30-minute budget)
# unless steps are given; TRAIN_FLAGS adds flags (e.g. "--backbone msa").
# ARRAY=omniexpress runs the same with the OmniExpress sites and targets
# (default omni2.5).
#
# Needs: genimpute installed, and beagle, minimac4, bcftools, tabix on PATH
# (Debian: apt-get install -y beagle minimac4 bcftools tabix).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
steps=${1:-}
out=${2:-$root/benchmarks/out/chr20}
data=$shared/chr20_1kgp1
panel=$data/panel.vcf.gz
map=$shared/maps/plink.chr20.GRCh37.map  # the genetic map, for genimpute and Beagle alike
array=${ARRAY:-omni2.5}
targets=$data/targets.$array.vcf.gz
mkdir -p "$out"
cd "$out"

timed() {  # timed NAME CMD... : run CMD, report wall seconds and peak RSS
  local name=$1; shift
  /usr/bin/time -f "$name wall_s=%e peak_rss_kb=%M" -o "$name.time" "$@" > "$name.log" 2>&1
  awk '{ split($3, a, "="); printf "%s %s peak_rss_gb=%.2f\n", $1, $2, a[2] / 1048576 }' "$name.time" | tee -a timings.txt
}
: > timings.txt

rm -rf model
# shellcheck disable=SC2086  # TRAIN_FLAGS is a list of flags
timed genimpute_train genimpute train --ref "$panel" --array "$shared/arrays/${array}_chr20_b37.txt" --map "$map" \
  --out model ${steps:+--steps "$steps"} ${TRAIN_FLAGS:-}
timed genimpute_impute genimpute impute "$targets" --model model --out genimpute.vcf.gz --force

timed beagle beagle ref="$panel" gt="$targets" map="$map" out=beagle nthreads=2
tabix -f -p vcf beagle.vcf.gz

minimac4 --compress-reference "$panel" > panel.msav 2> minimac4_compress.log
timed minimac4 minimac4 -t 2 -f GT,DS,HDS -O vcf.gz -o minimac4.vcf.gz panel.msav "$targets"

genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$panel" \
  --labels genimpute,beagle,minimac4 genimpute.vcf.gz beagle.vcf.gz minimac4.vcf.gz | tee r2.txt
python - <<'PY'
import json
prov = json.load(open("model/provenance.json"))
print(f"genimpute model: {prov['parameters']} parameters, {prov['steps']} steps in {prov['minutes']} min, "
      f"final validation r2 {prov['history'][-1]['val_r2']:.4f}")
PY
