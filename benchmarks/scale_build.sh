#!/usr/bin/env bash
# Build one instance of the large-panel series (../shared/scale/make_panels.py:
# 1 Mb, 1,002 targets, nested panels of 1,000, 4,000 and 16,000 samples) with
# the given simulation seed, in a virtualenv of its own (stdpopsim, msprime);
# a directory that already holds a finished build is kept.
#
#   bash benchmarks/scale_build.sh SEED OUT_DIR   (env: SIMVENV, default /tmp/simvenv; PANELS, default "1000 4000 16000")
#
# About 1-2 minutes on 2 cores. Needs python3, bcftools and tabix.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seed=$1 out=$2
venv=${SIMVENV:-/tmp/simvenv}
panels=${PANELS:-1000 4000 16000}
panels=${panels// /,}  # make_panels.py takes them comma-separated
built() {
  [[ -s $out/stats.json && -s $out/targets.array.vcf.gz.tbi ]] || return 1
  local n; for n in ${panels//,/ }; do [[ -s $out/panel.$n.vcf.gz.tbi ]] || return 1; done
}
if built; then
  echo "seed $seed: kept $out"
  exit 0
fi
[[ -x $venv/bin/python ]] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q stdpopsim msprime numpy; }
"$venv/bin/python" "$root/../shared/scale/make_panels.py" --outdir "$out" --length 1000000 --targets 1002 \
  --panels "$panels" --seed "$seed"
