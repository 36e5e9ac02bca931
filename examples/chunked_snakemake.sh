#!/usr/bin/env bash
# The bundled example (1000 Genomes phase 1, chr20:9.0-9.3 Mb) through the
# Snakemake workflow: train a small model, split the panel into 100 kb chunks,
# impute each chunk as its own job, concatenate, index, and score against the
# truth into <out>/report/. A cluster run is the same command with an executor
# (e.g. --executor slurm --jobs 100); see docs/pipelines.md.
#
#   bash examples/chunked_snakemake.sh [out dir, default chunked_out]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=$root/examples/data
work=${1:-chunked_out}
mkdir -p "$work"
snakemake -s "$root/workflows/snakemake/Snakefile" --configfile "$root/workflows/snakemake/config.yaml" \
  --directory "$work" --cores 2 \
  --config panel="$data/panel.vcf.gz" array="$data/omni2.5_chr20_9.0-9.3Mb.txt" \
  targets="$data/targets.omni2.5.vcf.gz" truth="$data/targets.truth.vcf.gz" outdir=results
echo "imputed: $work/results/imputed.vcf.gz; report: $work/results/report/all/report.md"
