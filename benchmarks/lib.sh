# shellcheck shell=bash
# Helpers shared by the benchmark scripts (sourced, not run).

timed() {  # timed NAME CMD... : run CMD, record wall seconds and peak RSS in NAME.time, output in NAME.log,
  # and what made it in NAME.code (made_by)
  local name=$1; shift
  if ! /usr/bin/time -f "%e %M" -o "$name.time" "$@" > "$name.log" 2>&1; then
    rm -f "$name.time"  # so that a rerun does not keep it
    echo "$name failed; see $PWD/$name.log" >&2
    return 1
  fi
  made_by "$@" > "$name.code"
  report "$name"
}

made_by() {  # made_by CMD... : "genimpute" and the code_version.py of the code it runs, or CMD's program
  if [[ " $* " == *" genimpute "* ]]; then
    [[ -n ${GENIMPUTE_CODE:-} ]] || GENIMPUTE_CODE=$(python "$(dirname "${BASH_SOURCE[0]}")/code_version.py")
    echo "genimpute $GENIMPUTE_CODE"
  else
    basename "$1"
  fi
}

report() {  # report NAME [NOTE] : print NAME.time
  local wall kb
  read -r wall kb < "$1.time"
  printf '  %-28s wall %8.1f s  peak RSS %5.2f GB%s\n' "$1" "$wall" "$(echo "$kb / 1048576" | bc -l)" "${2:+  $2}"
}

median_of() {  # median_of NAME CMD... : ROUNDS (default 3) timed runs; NAME.time keeps the median wall's line
  local name=$1 rounds=${ROUNDS:-3}; shift
  for r in $(seq "$rounds"); do timed "$name.r$r" "$@" > /dev/null; done
  sort -n "$name".r*.time | sed -n "$(( (rounds + 1) / 2 ))p" > "$name.time"
  report "$name" "(median of $rounds)"
}

kept() {  # kept NAME PROGRAM : true, and NAME's figures printed, if an earlier run of PROGRAM finished NAME
  # and, for genimpute, the same code did (time writes NAME.time when the command ends, so a killed step
  # leaves it empty): an output of other code would be read as this code's, so it is made again
  [[ -s $1.time && -s $1.code && $(< "$1.code") == "$(made_by "$2")" ]] && report "$1" "(kept from an earlier run)"
}

ratio() {  # ratio A B : A's wall time and peak RSS over B's
  local wa ma wb mb
  read -r wa ma < "$1.time"; read -r wb mb < "$2.time"
  printf '  %s / %s: wall %.1fx, peak RSS %.1fx\n' "$1" "$2" "$(echo "$wa / $wb" | bc -l)" "$(echo "$ma / $mb" | bc -l)"
}

per_target() {  # per_target NAME SMALL LARGE : (wall(NAME.LARGE) - wall(NAME.SMALL)) / (LARGE - SMALL), in ms
  local small large
  read -r small _ < "$1.$2.time"; read -r large _ < "$1.$3.time"
  printf '  %-28s %6.2f ms per target beyond %d\n' "$1" "$(echo "1000 * ($large - $small) / ($3 - $2)" | bc -l)" "$2"
}

minimac4_run() {  # minimac4_run NAME PANEL TARGETS : compress the panel (not timed), then impute
  minimac4 --compress-reference "$2" > "$1.msav" 2> "$1.compress.log"
  timed "$1" minimac4 -t 2 -f GT,DS,HDS -O vcf.gz -o "$1.vcf.gz" "$1.msav" "$3"
}

to_vcf() {  # ... | to_vcf OUT.vcf.gz : bgzip and index VCF text from stdin, spelling "##fileformat" as htslib
  # requires (HapMap's header says "##fileFormat", so htslib refuses it as text VCF)
  sed '1s/^##fileFormat=/##fileformat=/' | bgzip > "$1" && tabix -f -p vcf "$1"
}
