#!/usr/bin/env bash
# Issue 23's benchmark in one run: the large-panel series built with two
# simulation seeds (scale_build.sh), and for each, 100 targets imputed
# against panels of 1,000, 4,000 and 16,000 samples by genimpute (`impute
# --ref` of the compact panel: the copying engine), Beagle 5.4 and
# Minimac4, each with the map: r2 overall and by MAF bin, wall time and
# peak RSS (scale_series.sh). PANELS="1000 4000 16000 32000" adds the
# largest size the generator offers (Beagle needs about 11 GB there); the
# series of a seed is then another simulation, built in series.SEED.32000.
#
#   bash benchmarks/large_panels.sh [out dir]   (default benchmarks/out/large_panels)
#   env: SEEDS (default "7 11"), ROUNDS (default 3), COHORTS (default 100), PANELS (default "1000 4000 16000")
#
# Needs: genimpute installed; beagle, minimac4, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/benchmarks/out/large_panels}
mkdir -p "$out"
export PANELS=${PANELS:-1000 4000 16000}
# a series is one simulation of all its panels' samples: other sizes, another series
largest=$(tr ' ' '\n' <<< "$PANELS" | sort -n | tail -1)
suffix=$([[ $largest == 16000 ]] || echo ".$largest")
for seed in ${SEEDS:-7 11}; do
  echo "== simulation seed $seed"
  bash "$root/benchmarks/scale_build.sh" "$seed" "$out/series.$seed$suffix"
  COHORTS=${COHORTS:-100} bash "$root/benchmarks/scale_series.sh" "$out/series.$seed$suffix" "$out/seed.$seed$suffix"
done
