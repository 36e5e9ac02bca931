#!/usr/bin/env bash
# Training a learned model on bundled real data (1000 Genomes phase 1,
# chr20:9.0-9.3 Mb; needs the learned extra, pip install .[learned]):
# train the default backbone (match) on the 991-sample panel for the Omni2.5 sites,
# impute the 101 held-out targets (with a truth-free accuracy check on hidden
# typed sites); impute them again from the panel alone with the copying
# engine (no training, no model); score both against their true genotypes
# into report/.
set -euo pipefail
data=$(cd "$(dirname "$0")/data" && pwd)
work=${1:-train_out}
mkdir -p "$work"
cd "$work"

map=$data/plink.chr20_8.9-9.4Mb.GRCh37.map  # a slice of the HapMap chr20 genetic map (GRCh37)
genimpute train --ref "$data/panel.vcf.gz" --array "$data/omni2.5_chr20_9.0-9.3Mb.txt" --map "$map" \
  --out model --steps 400 --max-minutes 4 --validate-every 100
genimpute impute "$data/targets.omni2.5.vcf.gz" --model model --out imputed.vcf.gz --force --validate
genimpute impute "$data/targets.omni2.5.vcf.gz" --ref "$data/panel.vcf.gz" --map "$map" --out copying.vcf.gz --force
genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$data/panel.vcf.gz" --labels trained,copying \
  --out report imputed.vcf.gz copying.vcf.gz
