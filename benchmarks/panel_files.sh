#!/usr/bin/env bash
# A reference panel's files, from the same panel VCFs: genimpute's compact
# panel (`genimpute panel`) against Beagle's bref3 and Minimac4's msav, their
# size on disk and the wall time and peak memory to write each; and the
# bytes the panel's records take whole (a bit per haplotype, as compact
# panels kept every record before format 2).
#
#   bash benchmarks/panel_files.sh OUT_DIR PANEL.vcf.gz...
#
# ROUNDS (default 3): each file is written ROUNDS times, the median wall kept.
# Needs genimpute (its venv active), bref3, minimac4 and GNU time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=benchmarks/lib.sh
source "$here/lib.sh"
[[ $# -ge 2 ]] || { echo "usage: $0 OUT_DIR PANEL.vcf.gz..." >&2; exit 2; }
out=$1; shift
mkdir -p "$out"
for tool in genimpute bref3 minimac4 /usr/bin/time; do
  command -v "$tool" > /dev/null || { echo "$tool not found" >&2; exit 1; }
done

mb() { printf '%.1f' "$(echo "$(stat -c %s "$1") / 1000000" | bc -l)"; }

for panel in "$@"; do
  panel=$(realpath "$panel")  # read from OUT_DIR below
  name=$(basename "$panel" .vcf.gz)
  echo "$panel:"
  (
    cd "$out"
    median_of "$name.gpanel" genimpute -q panel "$panel" --out "$name.gpanel" --force
    median_of "$name.bref3" sh -c "bref3 '$panel' > '$name.bref3'"
    median_of "$name.msav" sh -c "minimac4 --compress-reference '$panel' > '$name.msav'"
    whole=$(python -c "
import sys
from genimpute.panel import read_reference
p = read_reference(sys.argv[1])
print(f'{len(p)} records, {p.n_haplotypes} haplotypes, {(p.packed.whole_at < 0).mean():.1%} listed; '
      f'whole {len(p) * p.packed.shape[1] / 1e6:.1f} MB')" "$name.gpanel")
    echo "  $whole"
    echo "  MB on disk: VCF $(mb "$panel"), compact panel $(mb "$name.gpanel"), bref3 $(mb "$name.bref3"), msav $(mb "$name.msav")"
    ratio "$name.gpanel" "$name.bref3"
  )
done
