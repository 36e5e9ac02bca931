#!/usr/bin/env bash
# A large unphased cohort against a panel of a few thousand samples, the
# common case (1000 Genomes 30x and an array cohort): genimpute (`impute
# --ref` of the converted panel, which phases the targets with Beagle at
# the typed sites first), genimpute with its own phaser (`--phaser
# genimpute`) and Beagle 5.4 (phasing and imputing in one run), each the
# median wall of ROUNDS (default 3), one tool at a time, then all three
# scored against the truth by MAF bin. The targets are the series'
# own, with every call's `|` made `/`.
#
#   bash benchmarks/unphased_cohort.sh SCALE_DIR PANEL_SAMPLES [OUT_DIR]   (default SCALE_DIR/unphased)
#
# SCALE_DIR: a scale_build.sh output (panel.P.vcf.gz, targets.array.vcf.gz,
# targets.truth.vcf.gz, const.map), e.g. `PANELS=3000 TARGETS=5002 bash
# benchmarks/scale_build.sh 7 DIR`. Needs genimpute, beagle, bcftools, tabix.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scale=$(cd "$1" && pwd)
p=$2 out=${3:-$scale/unphased}
mkdir -p "$out" && cd "$out"
source "$root/benchmarks/lib.sh"
[[ -s unphased.vcf.gz.tbi ]] || {
  bcftools view "$scale/targets.array.vcf.gz" | awk 'BEGIN { OFS = "\t" } /^#/ { print; next }
    { for (i = 10; i <= NF; i++) gsub(/\|/, "/", $i); print }' | bgzip > unphased.vcf.gz
  tabix -f unphased.vcf.gz
}
[[ -s panel.gpanel ]] || genimpute -q panel "$scale/panel.$p.vcf.gz" --map "$scale/const.map" --out panel.gpanel
n=$(bcftools query -l unphased.vcf.gz | wc -l)
echo "panel $p samples, $n unphased targets:"
median_of "genimpute.$p.$n" genimpute -q impute unphased.vcf.gz --ref panel.gpanel --out "genimpute.$p.$n.vcf.gz" \
  --force
median_of "genimpute_own.$p.$n" genimpute -q impute unphased.vcf.gz --ref panel.gpanel --phaser genimpute \
  --out "genimpute_own.$p.$n.vcf.gz" --force
median_of "beagle.$p.$n" beagle ref="$scale/panel.$p.vcf.gz" gt=unphased.vcf.gz map="$scale/const.map" \
  out="beagle.$p.$n" nthreads=2
ratio "genimpute.$p.$n" "beagle.$p.$n"
ratio "genimpute_own.$p.$n" "beagle.$p.$n"
grep -h 'phasing time\|Total time' "beagle.$p.$n".r*.log | sort | uniq -c | sed 's/^/  beagle log: /'
genimpute evaluate --truth "$scale/targets.truth.vcf.gz" --ref panel.gpanel --labels genimpute,genimpute_own,beagle \
  "genimpute.$p.$n.vcf.gz" "genimpute_own.$p.$n.vcf.gz" "beagle.$p.$n.vcf.gz" | sed -n '1,11p'
