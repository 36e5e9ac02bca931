#!/usr/bin/env bash
# Install the Debian packages genimpute's tests, benchmarks and quickstart
# call that are not on PATH yet: bcftools and tabix (reading outputs back),
# beagle and shapeit4 (phasing unphased targets), minimac4 (the benchmark
# command), plink2 (reading BGEN and PGEN outputs back), shellcheck (the
# shell scripts' test), GNU time (the benchmarks' helpers), slurm-wlm and
# munge (the workflow's test on a local SLURM node),
# chromium (the QC page's test opens it in a real browser),
# python3-venv (Debian's python3 lacks the venv module without it).
# Installing needs root; without it, the missing packages are named.
set -euo pipefail
missing=()
for tool in bcftools tabix beagle minimac4 shapeit4 plink2 shellcheck; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -x /usr/bin/time ] || missing+=(time)  # `command -v time` finds the shell's keyword
[ -x /usr/sbin/slurmctld ] || missing+=(slurm-wlm)
[ -x /usr/sbin/munged ] || missing+=(munge)
command -v chromium >/dev/null || missing+=(chromium)
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}; as root: apt-get install ${missing[*]}" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
