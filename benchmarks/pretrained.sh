#!/usr/bin/env bash
# The pretrained model (issue 4, goal 2): no training on the target region.
# `genimpute impute TARGETS --ref panel.vcf.gz --engine model` with the model shipped in the
# package (or MODEL) next to Beagle 5.4 and Minimac4 from the same run, on
#   - chr20_1kgp1's Omni2.5 and OmniExpress targets;
#   - HapMap CEU chr20:8-12 Mb, the region the model's training left out of
#     HapMap: the samples its training held out for validation (never
#     trained on) as targets at the Omni2.5 sites, the other samples as the
#     panel. HapMap's own chip targets have no truth.
# Prints wall time and peak RSS, their ratios, and the aggregate r2 table by
# MAF bin for each target set.
#
#   bash benchmarks/pretrained.sh [out dir]   (default benchmarks/out/pretrained)
# Run again on the same out dir, it keeps the steps an earlier (killed) run
# finished (genimpute's only if the same code, MODEL and ENGINE ran them) and
# does the rest.
#   env: MODEL (a model directory; default: the bundled model),
#        ARRAYS (default "omni2.5 omniexpress": targets.$ARRAY.vcf.gz),
#        ENGINE (default model; copying: what `impute --ref` alone runs)
#
# Needs: genimpute installed; beagle, minimac4, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
out=${1:-$root/benchmarks/out/pretrained}
arrays=${ARRAYS:-omni2.5 omniexpress}
data=$shared/chr20_1kgp1
panel=$data/panel.vcf.gz
map=$shared/maps/plink.chr20.GRCh37.map  # the genetic map, for genimpute and Beagle alike
mkdir -p "$out"
cd "$out"
source "$root/benchmarks/lib.sh"
engine=${ENGINE:-model}  # model: the model, not the copying engine that --ref alone runs
model=(--engine "$engine")
[[ -n ${MODEL:-} ]] && model=(--engine "$engine" --model "$MODEL")
# what makes genimpute's outputs here (lib.sh's kept): its code, MODEL's files and the engine
GENIMPUTE_CODE="$(python "$root/benchmarks/code_version.py" ${MODEL:+"$MODEL"}) $engine"

for a in $arrays; do
  targets=$data/targets.$a.vcf.gz
  echo "$a targets:"
  kept "impute_$a" genimpute || timed "impute_$a" genimpute -q impute "$targets" --ref "$panel" --map "$map" "${model[@]}" \
    --out "pretrained.$a.vcf.gz" --force
  kept "beagle_$a" beagle || timed "beagle_$a" beagle ref="$panel" gt="$targets" map="$map" \
    out="beagle_$a" nthreads=2
  kept "minimac4_$a" minimac4 || minimac4_run "minimac4_$a" "$panel" "$targets"
  ratio "impute_$a" "beagle_$a"
  ratio "impute_$a" "minimac4_$a"
done

echo "HapMap CEU chr20:8-12 Mb, held-out samples as targets:"
held_out=$(python -c "import json, sys; print(','.join(json.load(open(sys.argv[1]))['panels'][1]['validation_samples']))" \
  "${MODEL:-$(python -c "from genimpute.modeldir import PRETRAINED_DIR; print(PRETRAINED_DIR)")}/provenance.json")
hm=hapmap_8-12Mb
if [[ ! -s $hm.truth.vcf.gz.tbi ]]; then
  bcftools view -r 20:8000000-12000000 -s "$held_out" "$shared/hapmap_ceu_chr20/panel.b37.bcf" | to_vcf "$hm.truth.vcf.gz"
  bcftools view -r 20:8000000-12000000 -s "^$held_out" "$shared/hapmap_ceu_chr20/panel.b37.bcf" | to_vcf "$hm.panel.vcf.gz"
  bcftools view -T "$shared/arrays/omni2.5_chr20_b37.txt" "$hm.truth.vcf.gz" | to_vcf "$hm.targets.vcf.gz"
fi
kept impute_hapmap genimpute || timed impute_hapmap genimpute -q impute "$hm.targets.vcf.gz" --ref "$hm.panel.vcf.gz" --map "$map" "${model[@]}" \
  --out pretrained.hapmap.vcf.gz --force
kept beagle_hapmap beagle || timed beagle_hapmap beagle ref="$hm.panel.vcf.gz" gt="$hm.targets.vcf.gz" \
  map="$map" out=beagle_hapmap nthreads=2
kept minimac4_hapmap minimac4 || minimac4_run minimac4_hapmap "$hm.panel.vcf.gz" "$hm.targets.vcf.gz"

score() {  # score NAME TRUTH PANEL
  echo -e "\n$1 targets:"
  genimpute evaluate --truth "$2" --ref "$3" --labels pretrained,beagle,minimac4 \
    "pretrained.$1.vcf.gz" "beagle_$1.vcf.gz" "minimac4_$1.vcf.gz" | tee "r2.$1.txt"
}
for a in $arrays; do score "$a" "$data/targets.truth.vcf.gz" "$panel"; done
score hapmap "$hm.truth.vcf.gz" "$hm.panel.vcf.gz"
