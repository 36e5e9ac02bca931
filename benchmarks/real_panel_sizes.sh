#!/usr/bin/env bash
# Real data, panels of growing size (issue 23): the dev panel (chr20_1kgp1,
# 991 samples) cut to nested random subsets of its samples, each imputed by
# genimpute (`impute --ref` of the subset's VCF with the map, the default
# engine) and Beagle 5.4 (the same VCF and map), 2 threads, one tool at a
# time. A subset keeps the records polymorphic in it, as make_panels.py cuts
# the simulated series. Prints aggregate r2 by MAF bin (bins by the whole
# panel's MAF, so a bin holds the same kind of variant at every size) and,
# per size, genimpute's error (1 - r2 over all untyped variants) over
# Beagle's: whether a larger panel helps genimpute as fast as it helps Beagle.
#
#   bash benchmarks/real_panel_sizes.sh [out dir]   (default benchmarks/out/real_panel_sizes)
#   env: SIZES (default "125 250 500 991"), ARRAYS (default "omni2.5 omniexpress
#        omni2.5.quarter"; NAME.quarter: every fourth typed record of NAME's
#        targets, about a GSA's density for Omni2.5), SEED (the subsets' draw, default 1)
#
# Needs: genimpute installed; beagle, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
out=${1:-$root/benchmarks/out/real_panel_sizes}
sizes=${SIZES:-125 250 500 991}
arrays=${ARRAYS:-omni2.5 omniexpress omni2.5.quarter}
seed=${SEED:-1}
data=$shared/chr20_1kgp1
panel=$data/panel.vcf.gz
map=$shared/maps/plink.chr20.GRCh37.map
mkdir -p "$out"
cd "$out"
source "$root/benchmarks/lib.sh"

# the subsets, and the outputs kept from an earlier run, are those of one draw: another needs another directory
if [[ -s seed.txt && $(< seed.txt) != "$seed" ]]; then
  echo "$out holds the subsets of SEED=$(< seed.txt); expected SEED=$seed there: give another out dir" >&2
  exit 2
fi
echo "$seed" > seed.txt
# one random order of the panel's samples; each size takes its first N, so the subsets are nested
bcftools query -l "$panel" | python -c "
import random, sys
names = sys.stdin.read().split()
random.Random($seed).shuffle(names)
print('\n'.join(names))" > order.txt

for n in $sizes; do
  [[ -s panel.$n.vcf.gz.tbi ]] || {
    head -n "$n" order.txt > "samples.$n.txt"
    bcftools view -S "samples.$n.txt" -c 1:minor -Ou "$panel" | bcftools +fill-tags -Oz -o "panel.$n.vcf.gz" -- -t AF,AC,AN
    tabix -f -p vcf "panel.$n.vcf.gz"
  }
done

for a in $arrays; do
  targets=$data/targets.$a.vcf.gz
  if [[ $a == *.quarter ]]; then
    targets=targets.$a.vcf.gz
    [[ -s $targets.tbi ]] || {
      bcftools view "$data/targets.${a%.quarter}.vcf.gz" | awk '/^#/ || ++n % 4 == 0' | bgzip > "$targets"
      tabix -f -p vcf "$targets"
    }
  fi
  for n in $sizes; do
    echo "$a targets, panel of $n samples ($(bcftools index -n "panel.$n.vcf.gz") records):"
    kept "genimpute.$a.$n" genimpute || timed "genimpute.$a.$n" genimpute -q impute "$targets" --ref "panel.$n.vcf.gz" \
      --map "$map" --out "genimpute.$a.$n.vcf.gz" --force
    kept "beagle.$a.$n" beagle || timed "beagle.$a.$n" beagle ref="panel.$n.vcf.gz" gt="$targets" map="$map" \
      out="beagle.$a.$n" nthreads=2
    genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$panel" --labels genimpute,beagle \
      "genimpute.$a.$n.vcf.gz" "beagle.$a.$n.vcf.gz" --json > "r2.$a.$n.json"
  done
done

python - "$sizes" "$arrays" <<'EOF'
import json, sys
sizes, arrays = sys.argv[1].split(), sys.argv[2].split()
for a in arrays:
    print(f"\n{a} targets: aggregate r2 genimpute / Beagle 5.4 by the whole panel's MAF bin, all untyped,"
          " and genimpute's error (1 - r2) over Beagle's")
    for n in sizes:
        r2 = {}
        for row in json.load(open(f"r2.{a}.{n}.json"))["accuracy"]:
            if row["population"] == "all":
                r2.setdefault(row["maf_bin"], {})[row["tool"]] = row["aggregate_r2"]
        cells = [f"{bin_}: {t['genimpute']:.4f}/{t['beagle']:.4f}" for bin_, t in r2.items()]
        overall = r2["all imputed"]
        ratio = (1 - overall["genimpute"]) / (1 - overall["beagle"])
        print(f"  {n:>4} samples | " + " | ".join(cells) + f" | error ratio {ratio:.2f}")
EOF
