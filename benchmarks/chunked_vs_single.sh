#!/usr/bin/env bash
# Chunked imputation against a single run on ../shared/data/chr20_1kgp1:
# split the panel into chunks, impute each with --region, join them with
# bcftools concat, and compare with one whole-contig run of the same model:
# record for record, and r2 by MAF bin side by side.
#
#   bash benchmarks/chunked_vs_single.sh MODEL_DIR [chunk size, default 500kb] [out dir]
#
# MODEL_DIR: a model trained on the chr20_1kgp1 panel for Omni2.5 (e.g. the
# one `genimpute benchmark --train` leaves in its output directory). Environment:
# TARGETS (default: the shared Omni2.5 targets) and SINGLE (a whole-contig
# output of the same model and targets, to reuse instead of imputing again).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${SHARED_DATA:-$root/../shared/data}/chr20_1kgp1
model=$(cd "$1" && pwd)
size=${2:-500kb}
out=${3:-$root/benchmarks/out/chunked}
mkdir -p "$out/chunks"
cd "$out"

targets=$(realpath "${TARGETS:-$data/targets.omni2.5.vcf.gz}")
if [ -n "${SINGLE:-}" ]; then
  [ "$SINGLE" -ef single.vcf.gz ] || cp "$SINGLE" single.vcf.gz
else
  genimpute -q impute "$targets" --model "$model" --out single.vcf.gz --force
fi
genimpute chunks --ref "$data/panel.vcf.gz" --size "$size" --out chunks.txt
parts=()
i=0
while read -r region; do
  genimpute -q impute "$targets" --model "$model" --region "$region" \
    --out "chunks/$i.vcf.gz" --force > /dev/null
  parts+=("chunks/$i.vcf.gz")
  i=$((i + 1))
done < chunks.txt
bcftools concat -Oz -o joined.vcf.gz "${parts[@]}" 2> /dev/null
tabix -f -p vcf joined.vcf.gz

echo "$i chunks of $size"
if cmp -s <(bcftools view -H single.vcf.gz) <(bcftools view -H joined.vcf.gz); then
  echo "records: identical ($(bcftools view -H single.vcf.gz | wc -l) records)"
else
  echo "records: DIFFERENT"
fi
genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$data/panel.vcf.gz" \
  --labels single,chunked single.vcf.gz joined.vcf.gz
