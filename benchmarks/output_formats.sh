#!/usr/bin/env bash
# What each output format costs: the same impute job written as VCF
# GT:DS:GP (the default), VCF GT:DS, BCF GT:DS:GP, BGEN with 8 bits per
# probability and PGEN; prints each one's wall time, peak RSS and size (the output with its
# index, samples or variants file; the info file, the same for all five, left
# out), then each one's ratios to VCF GT:DS:GP. The QC page is skipped
# (--no-html): it is the same whatever the format.
#
# The yardstick of the analysis-ready outputs: 10,000 targets on the
# simulated series' 4,000-sample panel (SERIES=DIR, an instance built by
# scale_build.sh; its 1,002 targets repeated under new names as tiled_vcf.py
# does). Without SERIES it runs the bundled example (examples/data: 101
# targets, a 991-sample panel), which only shows that it works.
#
#   bash benchmarks/output_formats.sh [OUT_DIR]   (default benchmarks/out/output_formats)
#   env: SERIES, PANEL_SAMPLES (default 4000), COHORT (default 10000): the series' job;
#        ROUNDS (default 1: each figure the median of ROUNDS runs), THREADS (default 2)
#
# The panel is converted to a compact panel first, and genimpute's numba code
# compiled on the bundled example, neither timed. Needs genimpute installed,
# GNU time, and bgzip and tabix for the series' targets.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/benchmarks/out/output_formats}
threads=${THREADS:-2}
export ROUNDS=${ROUNDS:-1}  # read by lib.sh's median_of
example=$root/examples/data
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: the warm-up directory is made after the cd below
cd "$out"
source "$root/benchmarks/lib.sh"

if [[ -n ${SERIES:-} ]]; then
  series=$(cd "$SERIES" && pwd) samples=${PANEL_SAMPLES:-4000} cohort=${COHORT:-10000}
  panel=$series/panel.$samples.vcf.gz map=$series/const.map targets=targets.$cohort.vcf.gz
  [[ -s $targets.tbi ]] || python "$root/benchmarks/tiled_vcf.py" vcf "$series/targets.array.vcf.gz" "$targets" 1 0 \
    --samples "$cohort"
  job=series.$samples.$cohort
else
  panel=$example/panel.vcf.gz map=$example/plink.chr20_8.9-9.4Mb.GRCh37.map targets=$example/targets.omni2.5.vcf.gz
  job=example
fi
compact=$job.gpanel
[[ -s $compact ]] || genimpute -q panel "$panel" --map "$map" --out "$compact"

# each format: its name, the --out ending, the extra flags, and the endings of the files it is made of
names=(vcf_gt_ds_gp vcf_gt_ds bcf_gt_ds_gp bgen_8_bits pgen)
endings=(vcf.gz vcf.gz bcf bgen pgen)
flags=("" "--format GT:DS" "" "" "")
files=("vcf.gz vcf.gz.tbi" "vcf.gz vcf.gz.tbi" "bcf bcf.csi" "bgen sample bgen.bgi" "pgen pvar psam")

warm=$(mktemp -d "$out/.warm.XXXX")
for i in "${!names[@]}"; do  # compiles (once per installation) the writers' code too
  genimpute -q impute "$example/targets.omni2.5.vcf.gz" --ref "$example/panel.vcf.gz" --no-html --force \
    --map "$example/plink.chr20_8.9-9.4Mb.GRCh37.map" --out "$warm/${names[$i]}.${endings[$i]}" > /dev/null
done
rm -rf "$warm"

echo "$job: $(basename "$targets") imputed from $compact, $threads threads"
for i in "${!names[@]}"; do
  name=$job.${names[$i]}
  read -r -a extra <<< "${flags[$i]}"
  read -r -a parts <<< "${files[$i]}"
  median_of "$name" genimpute -q impute "$targets" --ref "$compact" --threads "$threads" --no-html --force \
    --out "$name.${endings[$i]}" "${extra[@]}"
  bytes=0
  for ending in "${parts[@]}"; do bytes=$((bytes + $(stat -c %s "$name.$ending"))); done
  echo "$bytes" > "$name.bytes"
done

base=$job.${names[0]}
read -r base_wall base_kb < "$base.time"
base_bytes=$(< "$base.bytes")
printf '\n  %-28s %9s %12s %10s   %s\n' format "wall s" "peak RSS GB" "size MB" "ratios to ${names[0]}: wall, RSS, size"
for i in "${!names[@]}"; do
  name=$job.${names[$i]}
  read -r wall kb < "$name.time"
  bytes=$(< "$name.bytes")
  printf '  %-28s %9.1f %12.2f %10.2f   %.2f %.2f %.2f\n' "${names[$i]}" "$wall" "$(echo "$kb / 1048576" | bc -l)" \
    "$(echo "$bytes / 1000000" | bc -l)" "$(echo "$wall / $base_wall" | bc -l)" "$(echo "$kb / $base_kb" | bc -l)" \
    "$(echo "$bytes / $base_bytes" | bc -l)"
done
