#!/usr/bin/env bash
# Rebuild the small real-data slices used by the tests and the quickstart from
# ../shared/data (1000 Genomes phase 1 chr20, see its README). Needs bcftools,
# tabix, beagle and minimac4 (Debian: apt-get install bcftools tabix beagle minimac4).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../../../shared/data/chr20_1kgp1}
examples=$here/../../examples/data
mkdir -p "$examples"

# tests: 100 kb, every 5th reference sample, 10 targets
bcftools query -l "$src/panel.vcf.gz" | awk 'NR % 5 == 1' > "$here/panel_samples.txt"
bcftools query -l "$src/targets.truth.vcf.gz" | head -n 10 > "$here/target_samples.txt"
region=20:9000000-9100000
bcftools view -r $region -S "$here/panel_samples.txt" --no-update -Oz -o "$here/panel.vcf.gz" "$src/panel.vcf.gz"
for kind in truth omni2.5 omni2.5.unphased; do
  bcftools view -r $region -S "$here/target_samples.txt" -Oz -o "$here/targets.$kind.vcf.gz" "$src/targets.$kind.vcf.gz"
done
rm "$here/panel_samples.txt" "$here/target_samples.txt"
awk -F'\t' '$1 == "20" && $2 >= 9000000 && $2 <= 9100000' \
  "$src/../arrays/omni2.5_chr20_b37.txt" > "$here/omni2.5_chr20_9.0-9.1Mb.txt"

# Beagle 5.4's and Minimac4's own outputs on the test slice, so evaluate is
# tested on their formats as they come (DR2/IMP; R2/IMPUTED/TYPED)
beagle ref="$here/panel.vcf.gz" gt="$here/targets.omni2.5.vcf.gz" out="$here/beagle.imputed" nthreads=2 > /dev/null
minimac4 --compress-reference "$here/panel.vcf.gz" > "$here/panel.msav"
minimac4 -t 2 -f GT,DS -O vcf.gz -o "$here/minimac4.imputed.vcf.gz" "$here/panel.msav" "$here/targets.omni2.5.vcf.gz" 2> /dev/null
rm "$here/panel.msav" "$here/beagle.imputed.log"

# quickstart: 300 kb, every panel and target sample
region=20:9000000-9300000
bcftools view -r $region -Oz -o "$examples/panel.vcf.gz" "$src/panel.vcf.gz"
for kind in truth omni2.5; do
  bcftools view -r $region -Oz -o "$examples/targets.$kind.vcf.gz" "$src/targets.$kind.vcf.gz"
done
awk -F'\t' '$1 == "20" && $2 >= 9000000 && $2 <= 9300000' \
  "$src/../arrays/omni2.5_chr20_b37.txt" > "$examples/omni2.5_chr20_9.0-9.3Mb.txt"
for f in "$here"/*.vcf.gz "$examples"/*.vcf.gz; do tabix -f -p vcf "$f"; done
