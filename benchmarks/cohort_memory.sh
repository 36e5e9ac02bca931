#!/usr/bin/env bash
# Issue 24's cohort goal: 10,020 targets (the scale series' 1,002, each ten
# times under new names) against one of its panels (4,000 samples unless
# PANEL says), next to the first 1,000 of them: genimpute's wall time, peak
# RSS and time per target, and the ratio of the two runs' peak memory (goal:
# within 1.2x); Beagle 5.4 on the same files. Each tool writes the same
# FORMAT fields as the other: genimpute's default GT:DS:GP beside Beagle's
# gp=true, and genimpute's --format GT:DS beside Beagle's default GT:DS.
# Median of ROUNDS runs; one tool at a time.
#
#   bash benchmarks/cohort_memory.sh SCALE_DIR [out dir]   (default benchmarks/out/cohort)
#   env: PANEL (default 4000), the panel's size in samples; ROUNDS (default 3)
#
# Needs: genimpute installed; beagle, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scale=$(cd "$1" && pwd)
out=${2:-$root/benchmarks/out/cohort}
size=${PANEL:-4000}
panel=$scale/panel.$size.vcf.gz
mkdir -p "$out"
cd "$out"
source "$root/benchmarks/lib.sh"

if [[ ! -s targets.10020.vcf.gz.tbi ]]; then
  copies=()
  for c in $(seq 0 9); do
    bcftools query -l "$scale/targets.array.vcf.gz" | sed "s/\$/_c$c/" > "names.$c.txt"
    bcftools reheader -s "names.$c.txt" -o "copy.$c.vcf.gz" "$scale/targets.array.vcf.gz"
    tabix -f "copy.$c.vcf.gz"
    copies+=("copy.$c.vcf.gz")
  done
  bcftools merge -Oz -o targets.10020.vcf.gz "${copies[@]}" && tabix -f targets.10020.vcf.gz
  rm -f copy.* names.*
fi
[[ -s targets.1000.vcf.gz.tbi ]] || {
  bcftools query -l targets.10020.vcf.gz | sed -n "1,1000p" > targets.1000.txt
  bcftools view -S targets.1000.txt -Oz -o targets.1000.vcf.gz targets.10020.vcf.gz && tabix -f targets.1000.vcf.gz
}
kept "convert.$size" genimpute || timed "convert.$size" genimpute panel "$panel" --map "$scale/const.map" --out "panel.$size.gpanel" --force
for n in 1000 10020; do
  echo "$n targets, $size-sample panel:"
  for fields in GT:DS:GP GT:DS; do
    name=genimpute.$size.$n.${fields//:/_}
    gp=$([[ $fields == *GP ]] && echo true || echo false)
    median_of "$name" genimpute -q impute "targets.$n.vcf.gz" --ref "panel.$size.gpanel" --format "$fields" \
      --out "$name.vcf.gz" --force
    median_of "beagle.$size.$n.gp_$gp" beagle ref="$panel" gt="targets.$n.vcf.gz" \
      map="$scale/const.map" out="beagle.$size.$n.gp_$gp" nthreads=2 gp="$gp"
    ratio "$name" "beagle.$size.$n.gp_$gp"
    for run in "$name" "beagle.$size.$n.gp_$gp"; do
      read -r wall _ < "$run.time"
      printf '  %-28s %.2f ms per target\n' "$run" "$(echo "1000 * $wall / $n" | bc -l)"
    done
  done
done
read -r _ small < "genimpute.$size.1000.GT_DS_GP.time"; read -r _ large < "genimpute.$size.10020.GT_DS_GP.time"
printf 'genimpute peak RSS, 10,020 targets / 1,000: %.2fx (goal: at most 1.2x)\n' "$(echo "$large / $small" | bc -l)"
