#!/usr/bin/env bash
# What each target costs genimpute and Beagle 5.4 on a long region of a large
# panel: the series' targets, then a cohort of them and EXTRA panel samples
# (at the array's sites), each tool's wall the median of ROUNDS (default 3),
# one tool at a time, and the walls' difference per extra target.
#
#   bash benchmarks/cohort_cost.sh SCALE_DIR RUN_DIR PANEL_SAMPLES [EXTRA]
#
# SCALE_DIR: a scale_build.sh output (panel.P.vcf.gz, array.txt, const.map);
# RUN_DIR: its scale_series.sh output (panel.P.gpanel, targets.N.vcf.gz: the
# largest of its cohorts is taken). EXTRA defaults to 1000. The extra targets are panel
# samples: genimpute finds them there and keeps each from copying itself;
# Beagle copies them from themselves, which does not change its work.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scale=$(cd "$1" && pwd)
cd "$2"
p=$3 extra=${4:-1000}
source "$root/benchmarks/lib.sh"

n=0
for list in targets.*.txt; do  # the series' cohorts
  m=${list#targets.}; m=${m%.txt}
  if [[ $m =~ ^[0-9]+$ ]] && ((m > n)); then n=$m; fi
done
if ((n == 0)); then echo "expected a scale_series.sh output in $PWD (targets.N.txt); found none" >&2; exit 1; fi
big=$((n + extra))
cohort=cohort.$p.$big.vcf.gz  # its extra samples are this panel's
[[ -s $cohort.tbi ]] || {
  bcftools query -l "$scale/panel.$p.vcf.gz" | sed -n "1,${extra}p" > "extra.$p.$extra.txt"
  bcftools view -S "extra.$p.$extra.txt" -T "$scale/array.txt" -Oz -o "extra.$p.$extra.vcf.gz" \
    "$scale/panel.$p.vcf.gz"
  tabix -f "extra.$p.$extra.vcf.gz"
  bcftools merge "targets.$n.vcf.gz" "extra.$p.$extra.vcf.gz" -Oz -o "$cohort"
  tabix -f "$cohort"
}
heap=()
if ((p > 16000)); then heap=(env JAVA_TOOL_OPTIONS=-Xmx20g); fi
for m in $n $big; do
  echo "panel $p samples, $m targets:"
  targets=targets.$n.vcf.gz
  if ((m == big)); then targets=$cohort; fi
  median_of "cost_genimpute.$p.$m" genimpute -q impute "$targets" --ref "panel.$p.gpanel" \
    --out "cost_genimpute.$p.$m.vcf.gz" --force
  median_of "cost_beagle.$p.$m" "${heap[@]}" beagle ref="$scale/panel.$p.vcf.gz" gt="$targets" \
    map="$scale/const.map" out="cost_beagle.$p.$m" nthreads=2
  ratio "cost_genimpute.$p.$m" "cost_beagle.$p.$m"
done
echo "time per target (the median walls' difference over the cohorts'):"
per_target "cost_genimpute.$p" "$n" "$big"
per_target "cost_beagle.$p" "$n" "$big"
