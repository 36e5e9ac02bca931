#!/usr/bin/env bash
# Speed and memory of `genimpute impute` next to Beagle 5.4 and Minimac4, on
# the same jobs in the same run, as ratios (the machine is shared and noisy):
#  1. chr20_1kgp1: 101 Omni2.5 targets against the 991-sample panel, with
#     MODEL_DIR trained on that panel; wall time, peak RSS, ratios, and the
#     aggregate r2 table of the three outputs (accuracy from the same run).
#  2. scaling in targets: the simulated 5 Mb panel, its 150 array targets and
#     the same replicated to 1,050 (renamed), imputed in SIM_REGION.
#  3. a whole chromosome: the HapMap CEU chr20 panel (63k records) and its 51
#     chip targets, end to end.
#  4. VCF write throughput alone (formatting and bgzip of GT:DS:GP).
# Parts 2 and 3 need models of their panels; they are trained here for
# TRAIN_MINUTES each (default 5): enough to time imputation, not to judge accuracy.
# TRAIN_FLAGS (default none) are extra `genimpute train` flags for them, e.g.
# "--backbone spin --neighbours 24 --lr 3e-3" to time that backbone.
# PARTS (default "1 2 3 4") picks the parts to run.
#
#   bash benchmarks/speed_memory.sh MODEL_DIR [out dir]
#
# Needs: genimpute installed; beagle, minimac4, bcftools, tabix on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_DATA:-$root/../shared/data}
model=$(cd "$1" && pwd)
out=${2:-$root/benchmarks/out/speed}
train_minutes=${TRAIN_MINUTES:-5}
sim_region=${SIM_REGION:-20:42000000-42050000}
map=$shared/maps/plink.chr20.GRCh37.map
parts=${PARTS:-1 2 3 4}
read -r -a train_flags <<< "${TRAIN_FLAGS:-}"
mkdir -p "$out"
cd "$out"

source "$root/benchmarks/lib.sh"
part() { [[ " $parts " == *" $1 "* ]]; }

if part 1; then
echo "1. chr20_1kgp1, 101 targets (Omni2.5), whole panel:"
data=$shared/chr20_1kgp1
timed genimpute_chr20 genimpute -q impute "$data/targets.omni2.5.vcf.gz" --model "$model" --out genimpute_chr20.vcf.gz --force
timed beagle_chr20 beagle ref="$data/panel.vcf.gz" gt="$data/targets.omni2.5.vcf.gz" map="$map" out=beagle_chr20 nthreads=2
minimac4_run minimac4_chr20 "$data/panel.vcf.gz" "$data/targets.omni2.5.vcf.gz"
ratio genimpute_chr20 beagle_chr20
ratio genimpute_chr20 minimac4_chr20
genimpute evaluate --truth "$data/targets.truth.vcf.gz" --ref "$data/panel.vcf.gz" --labels genimpute,beagle,minimac4 \
  genimpute_chr20.vcf.gz beagle_chr20.vcf.gz minimac4_chr20.vcf.gz | tee r2_chr20.txt
fi

if part 2; then
echo "2. scaling in targets: simulated panel, $sim_region:"
sim=$shared/sim_ooa_chr20_5Mb
[ -f sim_model/model.pt ] || genimpute -q train --ref "$sim/panel.vcf.gz" --array "$sim/array.omni2.5-like.txt" \
  --out sim_model --max-minutes "$train_minutes" "${train_flags[@]}" > sim_train.log 2>&1
python - "$sim/targets.array.vcf.gz" targets_1050.vcf 7 <<'PY'
import gzip
import sys

source, dest, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
with gzip.open(source, "rt") as src, open(dest, "w") as out:
    for line in src:
        if not line.startswith("##"):
            fields = line.rstrip("\n").split("\t")
            if line.startswith("#CHROM"):
                fields[9:] = [f"{s}_copy{c}" for c in range(copies) for s in fields[9:]]
            else:
                fields[9:] = fields[9:] * copies
            line = "\t".join(fields) + "\n"
        out.write(line)
PY
bgzip -f targets_1050.vcf && tabix -f -p vcf targets_1050.vcf.gz
timed genimpute_sim_150 genimpute -q impute "$sim/targets.array.vcf.gz" --model sim_model --region "$sim_region" \
  --out sim_150.vcf.gz --force
timed genimpute_sim_1050 genimpute -q impute targets_1050.vcf.gz --model sim_model --region "$sim_region" \
  --out sim_1050.vcf.gz --force
ratio genimpute_sim_1050 genimpute_sim_150
fi

if part 3; then
echo "3. a whole chromosome: HapMap CEU chr20, 51 chip targets:"
hapmap=$shared/hapmap_ceu_chr20
# Beagle reads VCF, not BCF
bcftools view "$hapmap/panel.b37.bcf" | to_vcf hapmap_panel.vcf.gz
bcftools query -f '%CHROM\t%POS\t%REF\t%ALT\n' "$hapmap/targets.chip330k.phased.vcf.gz" > chip330k.txt
[ -f hapmap_model/model.pt ] || genimpute -q train --ref hapmap_panel.vcf.gz --array chip330k.txt --map "$map" \
  --out hapmap_model --max-minutes "$train_minutes" "${train_flags[@]}" > hapmap_train.log 2>&1
timed genimpute_hapmap genimpute -q impute "$hapmap/targets.chip330k.phased.vcf.gz" --model hapmap_model \
  --out genimpute_hapmap.vcf.gz --force
timed beagle_hapmap beagle ref=hapmap_panel.vcf.gz gt="$hapmap/targets.chip330k.phased.vcf.gz" map="$map" \
  out=beagle_hapmap nthreads=2
minimac4_run minimac4_hapmap hapmap_panel.vcf.gz "$hapmap/targets.chip330k.phased.vcf.gz"
ratio genimpute_hapmap beagle_hapmap
ratio genimpute_hapmap minimac4_hapmap
fi

if part 4; then
echo "4. VCF write throughput (GT:DS:GP, bgzipped, 1,000 samples x 20,000 records):"
python - <<'PY'
import time
import numpy as np
from genimpute.io.vcf_writer import VcfWriter, dosage_r2, genotype_columns

samples, records, per_block = 1000, 20000, 100
rng = np.random.default_rng(1)
probs = rng.beta(0.3, 3, size=(per_block, 2 * samples)).astype(np.float32)  # mostly near 0, as imputed P(alt)
start = time.perf_counter()
with VcfWriter("throughput.vcf.gz", force=True) as writer:
    writer.write_header([f"s{i}" for i in range(samples)], ["20"], {})
    for block in range(records // per_block):
        fixed = [["20", str(1000 + block * per_block + i), ".", "A", "G"] for i in range(per_block)]
        af, r2 = dosage_r2(probs)
        info = [f"AF={a:.4g};DR2={d:.3f};IMP" for a, d in zip(af, r2)]
        writer.write_records(fixed, info, "GT:DS:GP", genotype_columns(probs[:, 0::2], probs[:, 1::2]))
seconds = time.perf_counter() - start
print(f"  {records:,} records in {seconds:.1f} s: {records / seconds:,.0f} records/s, "
      f"{records * samples / seconds / 1e6:.2f} M genotypes/s (indexing included)")
PY
fi
