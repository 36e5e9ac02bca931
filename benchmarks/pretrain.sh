#!/usr/bin/env bash
# Rebuilds the pretrained model shipped in genimpute/pretrained (issue 4):
# the default backbone (match) with default settings, trained on
#   - the simulated panel (../shared/data/sim_ooa_chr20_5Mb, 2,149 samples,
#     chr20:40-45 Mb) with its Omni2.5-like array, and
#   - HapMap CEU chr20 (../shared/data/hapmap_ceu_chr20, 60 samples) with the
#     Omni2.5 chr20 sites, less chr20:8-12 Mb (b37), which holds the
#     chr20_1kgp1 benchmark region (9-11 Mb) and a margin,
# with --min-array-density 0.3, so that a step's array keeps 30-100% of its
# sites, as sparser arrays (OmniExpress) do, and the HapMap chr20 genetic map
# (b37) for both panels' positions (the simulation's recombination is
# uniform, so on it the map's hotspots are noise). No 1000 Genomes data and no
# benchmark target is seen.
#
#   bash benchmarks/pretrain.sh [out dir]     (default benchmarks/out/pretrain)
# Run again on the same dir, it resumes from the checkpoint.
#   env: STEPS (default 3000), MAX_MINUTES (default 30)
#
# Then copy config.json, model.pt and provenance.json from OUT/model to
# genimpute/pretrained/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
out=${1:-$root/benchmarks/out/pretrain}
mkdir -p "$out"
cd "$out"

hapmap=hapmap_ceu_chr20.not8-12Mb.bcf
if [[ ! -s $hapmap.csi ]]; then
  # a BCF, not a VCF: the HapMap header spells ##fileFormat, which htslib refuses in text VCF
  bcftools view -t ^20:8000000-12000000 -Ob -o "$hapmap" "$shared/hapmap_ceu_chr20/panel.b37.bcf"
  bcftools index -f "$hapmap"
fi
resume=()
[[ -s model/checkpoint.pt ]] && resume=(--resume)
genimpute train \
  --ref "$shared/sim_ooa_chr20_5Mb/panel.vcf.gz" --array "$shared/sim_ooa_chr20_5Mb/array.omni2.5-like.txt" \
  --ref "$hapmap" --array "$shared/arrays/omni2.5_chr20_b37.txt" \
  --map "$shared/maps/plink.chr20.GRCh37.map" --min-array-density 0.3 --steps "${STEPS:-3000}" --max-minutes "${MAX_MINUTES:-30}" --out model "${resume[@]}"
