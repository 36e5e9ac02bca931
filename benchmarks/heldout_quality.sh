#!/usr/bin/env bash
# How well each tool's quality score (INFO/DR2) foresees the true r2 of
# held-out panel samples: `genimpute evaluate` on an OUT_DIR of
# heldout_large_panel.py, the held-out samples' own genotypes in the panel
# as the truth and the reference they were imputed from for the MAF bins.
# No target of the scale series is read.
#
#   bash benchmarks/heldout_quality.sh OUT_DIR [TOOL ...]
#
# TOOLs are the outputs' names in OUT_DIR (TOOL.vcf.gz; default: copying
# beagle). Prints evaluate's tables (the quality score less the true r2 by
# MAF bin last) and keeps them in OUT_DIR/quality/ (report.md, report.json).
set -euo pipefail
out=$(cd "$1" && pwd); shift
tools=("$@")
((${#tools[@]})) || tools=(copying beagle)
for f in inputs.json held_out.txt ref.vcf.gz; do
  [[ -s $out/$f ]] || { echo "expected a heldout_large_panel.py output in $out; found no $f" >&2; exit 1; }
done
panel=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["panel"])' "$out/inputs.json")
truth=$out/truth.vcf.gz
if [[ ! -s $truth.tbi || $truth.tbi -ot $out/held_out.txt ]]; then  # written last: a whole truth of this draw
  bcftools view -Oz -o "$truth" -S "$out/held_out.txt" "$panel"
  tabix -f "$truth"
fi
files=()
for tool in "${tools[@]}"; do files+=("$out/$tool.vcf.gz"); done
labels=$(IFS=,; echo "${tools[*]}")
genimpute evaluate --truth "$truth" --ref "$out/ref.vcf.gz" --labels "$labels" --out "$out/quality" "${files[@]}"
