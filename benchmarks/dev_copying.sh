#!/usr/bin/env bash
# The dev job (chr20_1kgp1, 101 targets) with the copying engine (`impute
# --ref`, no model) next to Beagle 5.4 in the same run, the genetic map given
# to both: wall time and peak RSS (median of ROUNDS runs) from the VCF panel
# and from the compact panel (`genimpute panel --map`, converted once,
# conversion time printed), the ratios to Beagle's, and aggregate r2 by MAF
# bin of the three (copying, the pretrained model's windows, Beagle).
#
#   bash benchmarks/dev_copying.sh [out dir]   (default benchmarks/out/dev_copying)
#   env: ARRAYS (default "omni2.5 omniexpress"), ROUNDS (default 3)
#
# Needs: genimpute installed; beagle, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
out=${1:-$root/benchmarks/out/dev_copying}
arrays=${ARRAYS:-omni2.5 omniexpress}
data=$shared/chr20_1kgp1
panel=$data/panel.vcf.gz
map=$shared/maps/plink.chr20.GRCh37.map
mkdir -p "$out"
cd "$out"
source "$root/benchmarks/lib.sh"


kept convert genimpute || timed convert genimpute panel "$panel" --map "$map" --out panel.gpanel --force
for a in $arrays; do
  targets=$data/targets.$a.vcf.gz
  echo "$a targets:"
  median_of "copying_compact_$a" genimpute -q impute "$targets" --ref panel.gpanel --out "copying.$a.vcf.gz" --force
  median_of "copying_vcf_$a" genimpute -q impute "$targets" --ref "$panel" --map "$map" --out "copying.$a.vcf.gz" \
    --force
  median_of "beagle_$a" beagle ref="$panel" gt="$targets" map="$map" out="beagle_$a" nthreads=2
  kept "model_$a" genimpute || timed "model_$a" genimpute -q impute "$targets" --ref "$panel" --map "$map" --engine model \
    --out "model.$a.vcf.gz" --force
  ratio "copying_compact_$a" "beagle_$a"
  ratio "copying_vcf_$a" "beagle_$a"
  genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$panel" --labels copying,model,beagle \
    "copying.$a.vcf.gz" "model.$a.vcf.gz" "beagle_$a.vcf.gz" | tee "r2.$a.txt"
done
