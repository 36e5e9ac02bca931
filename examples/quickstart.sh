#!/usr/bin/env bash
# Quickstart on bundled real data (1000 Genomes phase 1, chr20:9.0-9.3 Mb;
# docs/data.md): impute the 101 held-out targets, typed at Omni2.5 sites,
# from the 991-sample panel with genimpute's copying engine, and with Beagle
# 5.4 where it is on PATH; then score both against the targets' true
# genotypes, r2 by MAF bin side by side (tables printed, report in OUT/report).
#
#   bash examples/quickstart.sh [OUT]   (default quickstart_out; `make quickstart` runs it)
set -euo pipefail
data=$(cd "$(dirname "$0")/data" && pwd)
work=${1:-quickstart_out}
mkdir -p "$work"
cd "$work"
map=$data/plink.chr20_8.9-9.4Mb.GRCh37.map  # a slice of the HapMap chr20 genetic map (GRCh37)

genimpute impute "$data/targets.omni2.5.vcf.gz" --ref "$data/panel.vcf.gz" --map "$map" \
  --out genimpute.vcf.gz --force
outputs=(genimpute.vcf.gz) labels=genimpute
if command -v beagle >/dev/null; then
  beagle gt="$data/targets.omni2.5.vcf.gz" ref="$data/panel.vcf.gz" map="$map" out=beagle nthreads=2 \
    > beagle.stdout
  outputs+=(beagle.vcf.gz) labels+=,beagle
else
  echo "beagle is not on PATH (Debian: apt-get install beagle): genimpute alone is scored" >&2
fi
genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$data/panel.vcf.gz" --labels "$labels" \
  --out report "${outputs[@]}"
