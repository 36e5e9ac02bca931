#!/usr/bin/env bash
# Issue 23's goal is judged on one cohort of 100 targets per panel and seed.
# How much does that cohort's draw decide a bin? This imputes COHORTS
# disjoint cohorts of SIZE targets of one series (targets 1-100, 101-200,
# ... of ../shared/scale's targets; the first is scale_series.sh's cohort)
# with genimpute (`impute --ref` of the converted panel, the map in it) and
# Beagle 5.4 (with the map), each cohort a run of its own, and prints each
# cohort's r2 by MAF bin for both tools and, per bin, how many cohorts
# genimpute is at least Beagle's in (cohort_bins.py). Accuracy only: the
# runs are not timed.
#
#   bash benchmarks/cohorts.sh SCALE_DIR [out dir]   (default benchmarks/out/cohorts)
#   env: PANEL (default 16000), COHORTS (default 10), SIZE (default 100)
#
# Needs: genimpute installed; beagle, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scale=$(cd "$1" && pwd)
panel_size=${PANEL:-16000} cohorts=${COHORTS:-10} size=${SIZE:-100}
out=${2:-$root/benchmarks/out/cohorts}/$(basename "$scale").$panel_size
mkdir -p "$out"
cd "$out"
panel=$scale/panel.$panel_size.vcf.gz
available=$(bcftools query -l "$scale/targets.array.vcf.gz" | wc -l)
if ((cohorts * size > available)); then
  echo "COHORTS x SIZE: expected at most the series' $available targets; found $cohorts x $size = $((cohorts * size))" >&2
  exit 1
fi
[[ -s panel.gpanel.done ]] || {
  genimpute -q panel "$panel" --map "$scale/const.map" --out panel.gpanel --force && touch panel.gpanel.done
}
for k in $(seq "$cohorts"); do
  [[ -s beagle.$k.vcf.gz ]] && continue  # Beagle's output is the cohort's last: a finished cohort is kept
  bcftools query -l "$scale/targets.array.vcf.gz" | sed -n "$(( (k - 1) * size + 1 )),$(( k * size ))p" > "targets.$k.txt"
  bcftools view -S "targets.$k.txt" -Oz -o "targets.$k.vcf.gz" "$scale/targets.array.vcf.gz"
  bcftools view -S "targets.$k.txt" -Oz -o "truth.$k.vcf.gz" "$scale/targets.truth.vcf.gz"
  genimpute -q impute "targets.$k.vcf.gz" --ref panel.gpanel --out "genimpute.$k.vcf.gz" --force
  beagle ref="$panel" gt="targets.$k.vcf.gz" map="$scale/const.map" out="beagle.$k.partial" nthreads=2 > /dev/null
  mv "beagle.$k.partial.vcf.gz" "beagle.$k.vcf.gz"
done
echo "panel $panel_size samples, $cohorts cohorts of $size targets ($scale):"
python "$root/benchmarks/cohort_bins.py" "$panel" "$cohorts"
