#!/usr/bin/env bash
# A whole chromosome (the genome-wide speed issue's yardstick): a panel of
# PANEL_SAMPLES samples over COPIES copies of the simulated series' 1 Mb
# region, tiled along one contig (each copy's positions and map one span
# further on: 60 copies give about 60 Mb and 1.1 million records), and
# COHORT targets at the array sites over the same copies. FOR TIME AND
# MEMORY ONLY: the copies' haplotypes are the same, so each tool finds the
# same matches in each copy and switches only at the seams; accuracy on it
# means nothing and none is reported.
#
# Each panel is converted once, timed apart: `genimpute panel --map` (the
# compact panel), Beagle's bref3 and Minimac4's msav. Then each tool imputes
# the targets from its converted panel with the tiled map, one tool at a
# time, THREADS threads each, writing the same FORMAT fields (GT:DS:
# genimpute --format GT:DS, Beagle's gp=false ap=false, Minimac4 -f GT,DS);
# the table gives each one's wall time, peak RSS and time per target (wall
# over targets), the median of ROUNDS runs, and genimpute's ratio to each.
#
# genimpute's numba code is compiled (and cached) on the 1 Mb source before
# anything of it is timed, once per code version: a one-off of an
# installation, not of a job. Everything is kept in OUT_DIR and reused: the
# source series instance, the tiled files (made again only if their inputs
# or tiled_vcf.py changed), a conversion made by the same genimpute code or
# the same program, and a tool's figures measured with the same code,
# targets, threads and rounds (FRESH=1 measures them and the conversions
# again). Imputed outputs are deleted once their FORMAT is checked, unless
# KEEP=1.
#
#   bash benchmarks/whole_chromosome.sh [OUT_DIR]   (default benchmarks/out/whole_chromosome)
#   env: COPIES (default 60), PANEL_SAMPLES (default 2500), COHORT (default 1000; 10000 for
#        the large cohort: beyond the series' 1,002 targets, its samples repeated under new names),
#        ROUNDS (default 1), THREADS (default 2), TOOLS (default "genimpute beagle minimac4"),
#        SERIES (a 1 Mb series instance with a panel of at least PANEL_SAMPLES samples; default
#        OUT_DIR/series.SEED.PANEL_SAMPLES, built by scale_build.sh with SEED, default 7, and
#        SIMVENV, SHARED_SCALE as it reads them), FRESH, KEEP; Java's heap: JAVA_TOOL_OPTIONS;
#        a real region instead of the series: SOURCE_PANEL, SOURCE_TARGETS (its targets at the array
#        sites) and SOURCE_MAP (a PLINK map of its contig), all three; PANEL_SAMPLES is then the panel's
#
# At the full size (60 copies, 2,500 samples, 1,000 targets) the tiled
# panel is about 0.2 GB bgzipped (12 GB of text, never on disk), each
# converted panel and each imputed output (in turn) 0.1-0.3 GB; at 10,000
# targets an output is about 2.5 GB, and Beagle runs out of Java's default
# heap (a quarter of the machine's memory; give it more with
# JAVA_TOOL_OPTIONS=-Xmx20g). Needs: genimpute installed; beagle,
# minimac4, java (bref3: BREF3, default /usr/share/beagle/bref3.jar),
# bcftools, tabix, bgzip on PATH.
set -euo pipefail
shopt -s nullglob
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/benchmarks/out/whole_chromosome}
copies=${COPIES:-60} samples=${PANEL_SAMPLES:-2500} cohort=${COHORT:-1000}
rounds=${ROUNDS:-1} threads=${THREADS:-2}
tools=${TOOLS:-genimpute beagle minimac4}
bref3=${BREF3:-/usr/share/beagle/bref3.jar}
mkdir -p "$out"
out=$(cd "$out" && pwd)
series=${SERIES:-$out/series.${SEED:-7}.$samples}
tiler=$root/benchmarks/tiled_vcf.py
cd "$out"
source "$root/benchmarks/lib.sh"

# The source: the series' 1 Mb instance, its panel cut to the first PANEL_SAMPLES samples if larger;
# or a real region's files (SOURCE_PANEL, SOURCE_TARGETS, SOURCE_MAP), the map cut to the panel's span
if [[ -n ${SOURCE_PANEL:-} ]]; then
  source_panel=$SOURCE_PANEL source_map=$out/source.map
  source_targets=${SOURCE_TARGETS:?with SOURCE_PANEL, set SOURCE_TARGETS and SOURCE_MAP}
  samples=$(bcftools query -l "$source_panel" | wc -l)
  read -r first_bp last_bp < <(bcftools query -f '%POS\n' "$source_panel" | awk 'NR == 1 {f = $1} END {print f, $1}')
  awk -v f="$first_bp" -v l="$last_bp" '$4 >= f && $4 <= l' "${SOURCE_MAP:?}" > "$source_map.part"
  if cmp -s "$source_map.part" "$source_map"; then rm "$source_map.part"; else mv "$source_map.part" "$source_map"; fi
else
  [[ -n ${SERIES:-} ]] || PANELS=$samples bash "$root/benchmarks/scale_build.sh" "${SEED:-7}" "$series"
  mapfile -t sizes < <(for f in "$series"/panel.*.vcf.gz; do f=${f##*/panel.}; echo "${f%.vcf.gz}"; done | sort -n)
  size=""
  for n in "${sizes[@]}"; do if ((n >= samples)); then size=$n; break; fi; done
  [[ -n $size ]] || { echo "no panel of at least $samples samples in $series (found: ${sizes[*]})" >&2; exit 1; }
  source_panel=$series/panel.$size.vcf.gz source_targets=$series/targets.array.vcf.gz source_map=$series/const.map
  if ((size > samples)); then
    source_panel=$out/source.$samples.vcf.gz
    [[ -s $source_panel.tbi ]] || {
      bcftools query -l "$series/panel.$size.vcf.gz" | sed -n "1,${samples}p" > "source.$samples.txt"
      bcftools view -S "source.$samples.txt" -Ou "$series/panel.$size.vcf.gz" | bcftools view -c 1:minor -Ou |
        bcftools +fill-tags -Oz -o "$source_panel" -- -t AF,MAF
      tabix -f -p vcf "$source_panel"
    }
  fi
fi

stamp() {  # stamp FILE... : what a tiled file is made from: the tiler's code, the copies, and the files
  echo "$(sha256sum < "$tiler" | cut -c1-16) copies $copies $(stat -c '%n %s %Y' "$@" | tr '\n' ' ')"
}
current() {  # current FILE STAMP : true if FILE is whole and was made from what STAMP says
  [[ -s $1 && -s $1.made && $(< "$1.made") == "$2" ]]
}

# The tiled job: panel, map and targets; what was made from an older one goes with it
job=$out/tiled.$samples.x$copies
mkdir -p "$job"
cd "$job"
made=$(stamp "$source_panel" "$source_map")
if ! current panel.vcf.gz.tbi "$made"; then
  echo "tiling $copies copies of $source_panel ..."
  rm -f ./*.made ./*.time ./*.code
  python "$tiler" shift "$source_panel" "$source_map" > shift.txt
  timed tile.panel python "$tiler" vcf "$source_panel" panel.vcf.gz "$copies" "$(< shift.txt)" --threads "$threads"
  python "$tiler" map "$source_map" genetic.map "$copies" "$(< shift.txt)"
  echo "$made" > panel.vcf.gz.tbi.made
fi
made=$(stamp "$source_targets" shift.txt)
if ! current "targets.$cohort.vcf.gz.tbi" "$made"; then
  rm -f ./*."$cohort".*time ./*."$cohort".*code
  python "$tiler" vcf "$source_targets" "targets.$cohort.vcf.gz" "$copies" "$(< shift.txt)" \
    --samples "$cohort" --threads "$threads"
  echo "$made" > "targets.$cohort.vcf.gz.tbi.made"
fi
records=$(bcftools index -n panel.vcf.gz)
typed=$(bcftools index -n "targets.$cohort.vcf.gz")
read -r _ _ _ start < genetic.map
last=$(awk 'END {print $4}' genetic.map)
printf 'panel: %d samples, %d records over %.1f Mb (%d copies); targets: %d, at %d sites\n' \
  "$samples" "$records" "$(echo "($last - $start) / 1000000" | bc -l)" "$copies" "$cohort" "$typed"

converted() {  # converted NAME FILE CMD... : CMD's stdout in FILE, timed as lib.sh's timed, unless kept
  local name=$1 file=$2; shift 2
  kept "$name" "$1" && return
  if ! /usr/bin/time -f "%e %M" -o "$name.time" "$@" > "$file" 2> "$name.log"; then
    rm -f "$name.time"
    echo "$name failed; see $PWD/$name.log" >&2
    return 1
  fi
  made_by "$@" > "$name.code"
  report "$name"
}

measured() {  # measured NAME CMD... : the median of ROUNDS runs, unless an earlier run measured it with
  # the same code (or program), threads and rounds (lib.sh's kept, with the rounds and threads in the stamp)
  local name=$1 made; shift
  made="$(made_by "$@") threads $threads rounds $rounds"
  if [[ -z ${FRESH:-} && -s $name.time && -s $name.code && $(< "$name.code") == "$made" ]]; then
    report "$name" "(kept from an earlier run)"
    return
  fi
  rm -f "$name".r*.time "$name.code"
  ROUNDS=$rounds median_of "$name" "$@"
  echo "$made" > "$name.code"
}

checked() {  # checked OUTPUT : print the FORMAT of its first 1,000 records, then delete it unless KEEP
  local fields
  fields=$(set +o pipefail; bgzip -dc "$1" | awk '!/^#/ {seen[$9]; if (++n == 1000) exit} END {
    for (f in seen) printf "%s ", f}')
  printf '    %s: FORMAT %s\n' "$1" "$fields"
  [[ -n ${KEEP:-} ]] || rm -f "$1" "$1".tbi "$1".csi "${1%.vcf.gz}.info.gz"
}

warmed() {  # warmed : genimpute's numba code compiled and cached before it is timed (once per code version:
  # a one-off of the installation, not of a job), by a conversion and a run on the 1 Mb source, 20 targets
  local made; made=$(made_by genimpute)
  [[ -s warm.code && $(< warm.code) == "$made" ]] && return
  echo "compiling genimpute's code (not timed) ..."
  # numba's cache of a function keeps the code it inlined from the functions it calls, and is kept while
  # its own file is unchanged: a changed callee would go unseen, so the code is compiled afresh
  find "$root/genimpute" -name '*.nb[ic]' -delete
  {
    genimpute -q panel "$source_panel" --map "$source_map" --out warm.gpanel --threads "$threads" --force
    python "$tiler" vcf "$source_targets" warm.targets.vcf.gz 1 "$(< shift.txt)" --samples 20
    genimpute -q impute warm.targets.vcf.gz --ref warm.gpanel --format GT:DS --threads "$threads" \
      --out warm.vcf.gz --force
  } > warm.log 2>&1 || { echo "compiling failed; see $PWD/warm.log" >&2; exit 1; }
  rm -f warm.gpanel warm.targets.vcf.gz* warm.vcf.gz* warm.html
  echo "$made" > warm.code
}

has() { [[ " $tools " == *" $1 "* ]]; }

echo "conversions, once per panel:"
[[ -z ${FRESH:-} ]] || rm -f convert.*.time
if has genimpute; then
  warmed
  kept convert.genimpute genimpute || timed convert.genimpute genimpute panel panel.vcf.gz --map genetic.map \
    --out panel.gpanel --threads "$threads" --force
fi
if has beagle; then converted convert.bref3 panel.bref3 java -jar "$bref3" panel.vcf.gz; fi
if has minimac4; then converted convert.msav panel.msav minimac4 --compress-reference panel.vcf.gz; fi

echo "imputation, $cohort targets, $threads threads, median of $rounds:"
targets=targets.$cohort.vcf.gz
if has genimpute; then
  measured "genimpute.$cohort" genimpute -q impute "$targets" --ref panel.gpanel --format GT:DS \
    --threads "$threads" --out "genimpute.$cohort.vcf.gz" --force
  [[ ! -e genimpute.$cohort.vcf.gz ]] || checked "genimpute.$cohort.vcf.gz"
fi
if has beagle; then
  measured "beagle.$cohort" beagle ref=panel.bref3 gt="$targets" map=genetic.map out="beagle.$cohort" \
    nthreads="$threads" gp=false ap=false
  [[ ! -e beagle.$cohort.vcf.gz ]] || checked "beagle.$cohort.vcf.gz"
fi
if has minimac4; then
  measured "minimac4.$cohort" minimac4 -t "$threads" -f GT,DS -m genetic.map -O vcf.gz \
    -o "minimac4.$cohort.vcf.gz" panel.msav "$targets"
  [[ ! -e minimac4.$cohort.vcf.gz ]] || checked "minimac4.$cohort.vcf.gz"
fi

echo
echo "whole chromosome: $samples-sample panel, $records records, $cohort targets, $threads threads (median of $rounds)"
printf '%-22s %10s %10s %14s\n' step "wall s" "peak GB" "ms per target"
for name in convert.genimpute convert.bref3 convert.msav genimpute.$cohort beagle.$cohort minimac4.$cohort; do
  [[ -s $name.time ]] || continue
  read -r wall kb < "$name.time"
  per=-; [[ $name == convert.* ]] || per=$(printf '%.1f' "$(echo "1000 * $wall / $cohort" | bc -l)")
  printf '%-22s %10.1f %10.2f %14s\n' "$name" "$wall" "$(echo "$kb / 1048576" | bc -l)" "$per"
done
ratio_row() {  # ratio_row A B LABEL [per]: A's figures over B's, and the time per target's with "per"
  local wa ma wb mb
  read -r wa ma < "$1.time"; read -r wb mb < "$2.time"
  printf '%-22s %9.2fx %9.2fx %13s\n' "$3" "$(echo "$wa / $wb" | bc -l)" "$(echo "$ma / $mb" | bc -l)" \
    "$([[ -n ${4:-} ]] && printf '%.2fx' "$(echo "$wa / $wb" | bc -l)" || echo -)"
}
for tool in beagle minimac4; do
  if [[ -s genimpute.$cohort.time && -s $tool.$cohort.time ]]; then
    ratio_row "genimpute.$cohort" "$tool.$cohort" "genimpute / $tool" per
  fi
done
for conversion in bref3 msav; do
  if [[ -s convert.genimpute.time && -s convert.$conversion.time ]]; then
    ratio_row convert.genimpute "convert.$conversion" "gpanel / $conversion"
  fi
done
