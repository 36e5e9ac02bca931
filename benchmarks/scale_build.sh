#!/usr/bin/env bash
# Build one instance of the large-panel series (../shared/scale/make_panels.py:
# 1 Mb, 1,002 targets, nested panels of 1,000, 4,000 and 16,000 samples) with
# the given simulation seed, in a virtualenv of its own (stdpopsim, msprime);
# a directory that already holds a finished build is kept.
#
#   bash benchmarks/scale_build.sh SEED OUT_DIR
#   env: SIMVENV (default /tmp/simvenv), PANELS (default "1000 4000 16000"),
#        LENGTH (bp, default 1000000), TARGETS (default 1002),
#        SHARED_SCALE (the directory of make_panels.py, default ../shared/scale)
#
# About 1-2 minutes on 2 cores at 1 Mb; a 10 Mb region with 16,000 samples
# takes about 27 minutes (a 20 GB VCF written before it is compressed). Needs
# python3, bcftools and tabix.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seed=$1 out=$2
venv=${SIMVENV:-/tmp/simvenv}
scale=${SHARED_SCALE:-$root/../shared/scale}
panels=${PANELS:-1000 4000 16000}
length=${LENGTH:-1000000} targets=${TARGETS:-1002}
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
"$venv/bin/python" "$scale/make_panels.py" --outdir "$out" --length "$length" --targets "$targets" \
  --panels "$panels" --seed "$seed"
