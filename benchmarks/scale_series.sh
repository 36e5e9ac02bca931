#!/usr/bin/env bash
# Large panels and large cohorts (issues 23, 24): the simulated series of
# ../shared/scale (make it first, as its README says), imputed by genimpute
# (`impute --ref PANEL.gpanel --engine E`, the panel converted once by
# `genimpute panel --map`, as Minimac4's is compressed once; load time
# included), Beagle 5.4 (the VCF panel) and Minimac4, each with the map and 2
# threads, one tool at a time. For each panel size and cohort size: wall time
# and peak RSS (the median of ROUNDS runs), the ratio to Beagle's, and
# aggregate r2 by MAF bin against the targets' truth, with 90% intervals of
# genimpute's error less Beagle's (benchmarks/paired_errors.py); with two
# cohort sizes or more, each tool's time per target between the smallest and
# the largest (issue 24). The conversions' and Minimac4's compression times
# are printed once per panel.
#
#   bash benchmarks/scale_series.sh SCALE_DIR [out dir]   (default benchmarks/out/scale)
#   env: PANELS (default "1000 4000 16000"), COHORTS (default "100 1000"),
#        ENGINES (default "copying"; add "model" for the windows), ROUNDS (default 3)
#
# Needs: genimpute installed; beagle, minimac4, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scale=$(cd "$1" && pwd)
out=${2:-$root/benchmarks/out/scale}
panels=${PANELS:-1000 4000 16000}
cohorts=${COHORTS:-100 1000}
engines=${ENGINES:-copying}
mkdir -p "$out"
cd "$out"
source "$root/benchmarks/lib.sh"


for n in $cohorts; do
  [[ -s targets.$n.vcf.gz.tbi ]] || {
    bcftools query -l "$scale/targets.array.vcf.gz" | sed -n "1,${n}p" > "targets.$n.txt"  # sed reads it all: no SIGPIPE
    bcftools view -S "targets.$n.txt" -Oz -o "targets.$n.vcf.gz" "$scale/targets.array.vcf.gz"
    bcftools view -S "targets.$n.txt" -Oz -o "truth.$n.vcf.gz" "$scale/targets.truth.vcf.gz"
    tabix -f "targets.$n.vcf.gz"; tabix -f "truth.$n.vcf.gz"
  }
done

for p in $panels; do
  panel=$scale/panel.$p.vcf.gz
  echo "panel $p samples, converted once:"
  kept "convert.$p" genimpute || timed "convert.$p" genimpute panel "$panel" --map "$scale/const.map" \
    --out "panel.$p.gpanel" --force
  if ! kept "compress.$p" minimac4; then
    /usr/bin/time -f "%e %M" -o "compress.$p.time" minimac4 --compress-reference "$panel" > "minimac4.$p.msav" 2> /dev/null
    made_by minimac4 > "compress.$p.code"
    report "compress.$p"
  fi
  for n in $cohorts; do
    job=$p.$n
    echo "panel $p samples, $n targets:"
    for e in $engines; do
      median_of "genimpute_$e.$job" genimpute -q impute "targets.$n.vcf.gz" --ref "panel.$p.gpanel" \
        --engine "$e" --out "genimpute_$e.$job.vcf.gz" --force
    done
    # Java's default heap (a quarter of memory, 6 GB here) holds Beagle's runs up to 16,000 samples (2.9 GB)
    # but not 32,000 (about 11 GB)
    heap=()
    if ((p > 16000)); then heap=(env JAVA_TOOL_OPTIONS=-Xmx20g); fi
    median_of "beagle.$job" "${heap[@]}" beagle ref="$panel" gt="targets.$n.vcf.gz" map="$scale/const.map" \
      out="beagle.$job" nthreads=2
    median_of "minimac4.$job" minimac4 -t 2 -f GT,DS -m "$scale/const.map" -O vcf.gz -o "minimac4.$job.vcf.gz" \
      "minimac4.$p.msav" "targets.$n.vcf.gz"
    for e in $engines; do ratio "genimpute_$e.$job" "beagle.$job"; ratio "genimpute_$e.$job" "minimac4.$job"; done
    labels="" files=()
    for e in $engines; do labels+="genimpute_$e,"; files+=("genimpute_$e.$job.vcf.gz"); done
    genimpute evaluate --truth "truth.$n.vcf.gz" --ref "$panel" --labels "${labels}beagle,minimac4" \
      "${files[@]}" "beagle.$job.vcf.gz" "minimac4.$job.vcf.gz" | tee "r2.$job.txt"
    # how much of each bin's difference from Beagle other variants or other targets could give
    pairs=("beagle=beagle.$job.vcf.gz")
    for e in $engines; do pairs+=("genimpute_$e=genimpute_$e.$job.vcf.gz"); done
    python "$root/benchmarks/paired_errors.py" "truth.$n.vcf.gz" "$panel" "${pairs[@]}" | tee "intervals.$job.txt"
  done
  mapfile -t sizes < <(for n in $cohorts; do echo "$n"; done | sort -n)
  smallest=${sizes[0]} largest=${sizes[-1]}
  if [[ $smallest != "$largest" ]]; then
    echo "panel $p samples, time per target (the wall times' difference over the cohorts' difference):"
    for e in $engines; do per_target "genimpute_$e.$p" "$smallest" "$largest"; done
    per_target "beagle.$p" "$smallest" "$largest"; per_target "minimac4.$p" "$smallest" "$largest"
  fi
done
