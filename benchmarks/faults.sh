#!/usr/bin/env bash
# Issue 25's cohort-scale faults, scripted on the scale series (1,000 targets,
# 1,000-sample compact panel), each printing PASS or FAIL:
#  - SIGTERM and SIGKILL mid-run over an existing output: the old output and
#    its index are kept byte for byte, no partial file under the output's
#    name, a SIGTERM leaves nothing, a SIGKILL's hidden temporary file is
#    removed by the next run, and the rerun writes the uninterrupted run's
#    records;
#  - a full disk: the output on a 3 MB tmpfs (root only; skipped, and said,
#    otherwise), in one batch and in batches of 300 samples (spooled): one
#    error line, exit status 1, nothing left on the disk.
#
#   bash benchmarks/faults.sh SCALE_DIR [out dir]   (default benchmarks/out/faults)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scale=$(cd "$1" && pwd)
out=${2:-$root/benchmarks/out/faults}
mkdir -p "$out"
cd "$out"
failed=0
check() {  # check DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then echo "PASS  $what"; else echo "FAIL  $what"; failed=1; fi
}
body() { zcat "$1" | grep -v '^##genimputeCommand\|^##fileDate'; }

bcftools query -l "$scale/targets.array.vcf.gz" | sed -n "1,1000p" > targets.txt
[[ -s targets.vcf.gz ]] || bcftools view -S targets.txt -Oz -o targets.vcf.gz "$scale/targets.array.vcf.gz"
[[ -s panel.gpanel ]] || genimpute -q panel "$scale/panel.1000.vcf.gz" --map "$scale/const.map" --out panel.gpanel
impute() { genimpute -q impute targets.vcf.gz --ref panel.gpanel "$@"; }
impute --out straight.vcf.gz --force 2> /dev/null

for sig in TERM KILL; do
  impute --out old.vcf.gz --force 2> /dev/null
  before=$(cat old.vcf.gz old.vcf.gz.tbi | md5sum)
  # genimpute itself in the background (not the impute function, whose
  # subshell's PID would not name the temporary file)
  genimpute -q impute targets.vcf.gz --ref panel.gpanel --out old.vcf.gz --force 2> "$sig.err" &
  pid=$!
  for _ in $(seq 600); do  # until writing has begun (at most 30 s)
    compgen -G ".tmp$pid.old.vcf.gz" > /dev/null && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.05
  done
  check "SIG$sig: writing had begun when the signal came" test -n "$(compgen -G ".tmp$pid.old.vcf.gz" || true)"
  sleep 0.5
  kill -s "$sig" "$pid"
  wait "$pid" && status=0 || status=$?
  check "SIG$sig: exit status $status, the old output and index kept" test "$(cat old.vcf.gz old.vcf.gz.tbi | md5sum)" = "$before"
  if [[ $sig == TERM ]]; then
    check "SIGTERM: exit 143, one line ($(grep '^genimpute:' TERM.err)), no traceback, no temporary file left" \
      test "$status" = 143 -a "$(grep -c '^genimpute:' TERM.err)" = 1 -a "$(grep -c Traceback TERM.err)" = 0 \
      -a -z "$(compgen -G '.tmp*' || true)"
  else
    check "SIGKILL: its hidden temporary file is there" test -n "$(compgen -G ".tmp$pid.old.vcf.gz" || true)"
  fi
  impute --out old.vcf.gz --force 2> /dev/null
  check "SIG$sig: the rerun writes the uninterrupted run's records" cmp -s <(body old.vcf.gz) <(body straight.vcf.gz)
  check "SIG$sig: no temporary file after the rerun" test -z "$(compgen -G '.tmp*' || true)"
done

if [[ $(id -u) == 0 ]]; then
  mkdir -p full
  mount -t tmpfs -o size=3m tmpfs full
  for batch in 1000 300; do
    impute --out full/out.vcf.gz --batch-samples "$batch" 2> full.err && status=0 || status=$?
    check "full disk, batches of $batch: exit $status, one line ($(grep '^genimpute:' full.err)), no traceback, nothing left" \
      test "$status" = 1 -a "$(grep -c '^genimpute:' full.err)" = 1 -a "$(grep -c Traceback full.err)" = 0 -a -z "$(ls -A full)"
  done
  umount full
else
  echo "SKIP  full disk: mounting a tmpfs needs root"
fi
exit "$failed"
