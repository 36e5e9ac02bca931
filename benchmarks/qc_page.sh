#!/usr/bin/env bash
# What the QC page costs on a cohort: one impute run of COHORT targets (the
# series' 1,002 repeated under new names, as tiled_vcf.py does) against the
# series' PANEL-sample compact panel over its 1 Mb, GT:DS out, with the page;
# prints the run's wall time, the page's own time (from the log), its share
# of the run, the page's size, and whether headless Chromium renders it.
#
#   bash benchmarks/qc_page.sh SERIES_DIR [OUT_DIR]   (default benchmarks/out/qc_page)
#   env: PANEL (default 16000), COHORT (default 10000)
#
# SERIES_DIR: an instance of the simulated series (benchmarks/scale_build.sh).
# Needs genimpute, bcftools, tabix, bgzip, GNU time and chromium.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
series=$(cd "$1" && pwd)
out=${2:-$root/benchmarks/out/qc_page}
panel=${PANEL:-16000} cohort=${COHORT:-10000}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: Chromium takes the page as a file:// address
cd "$out"

targets=targets.$cohort.vcf.gz
[[ -s $targets.tbi ]] || python "$root/benchmarks/tiled_vcf.py" vcf "$series/targets.array.vcf.gz" "$targets" 1 0 \
  --samples "$cohort"
compact=panel.$panel.gpanel
[[ -s $compact ]] || genimpute -q panel "$series/panel.$panel.vcf.gz" --map "$series/const.map" --out "$compact"

/usr/bin/time -f "%e %M" -o run.time genimpute impute "$targets" --ref "$compact" --format GT:DS --out run.vcf.gz \
  --force 2> run.log
read -r wall peak_kib < run.time
page_s=$(sed -n 's/.*QC page .* written in \([0-9.]*\) s$/\1/p' run.log)
size=$(stat -c %s run.html)
rendered=no
if timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$out/chromium" \
  --screenshot="$out/run.png" --window-size=1200,4000 "file://$out/run.html" > chromium.log 2>&1 && [[ -s run.png ]]; then
  rendered=yes
fi
awk -v w="$wall" -v p="$page_s" -v s="$size" -v k="$peak_kib" -v r="$rendered" -v n="$cohort" -v m="$panel" 'BEGIN {
  printf "%d targets, %d-sample panel: run %.1f s (peak %.2f GB), page %.2f s (%.1f%% of the run), %.2f MB, rendered: %s\n",
    n, m, w, k / 1048576, p, 100 * p / w, s / 1e6, r }'
