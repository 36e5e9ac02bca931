#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for the workflow's cluster
# test: munged, slurmctld and slurmd on localhost, every file of theirs in
# one directory (state, spool, logs, the job-completion log) but munged's,
# which must lie on a path its own user can walk (a directory of its own
# in /tmp, removed by stop). A job's own srun reads the default
# /etc/slurm/slurm.conf (Snakemake's job step drops SLURM_CONF), so that
# path is linked to this cluster's file while it runs, and only where no
# other configuration is there; stop removes the link. Root only (the
# daemons switch users).
#
#   eval "$(bash scripts/slurm-local.sh start DIR)"   # exports SLURM_CONF
#   bash scripts/slurm-local.sh stop DIR
#
# Debian packages: slurm-wlm, munge (scripts/debian-tools.sh installs them).
# Without an accounting database sacct has nothing to report: each finished
# job is written to DIR/jobcomp.txt instead (JobCompType=jobcomp/filetxt),
# and MinJobAge keeps finished jobs visible to squeue, which the Snakemake
# executor then polls.
set -euo pipefail
action=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
conf=$dir/slurm.conf

start() {
  mkdir -p "$dir/state" "$dir/spool"
  local munge
  munge=$(mktemp -d /tmp/genimpute-munge.XXXXXX)
  chmod 755 "$munge"
  chown munge:munge "$munge"
  echo "$munge" > "$dir/munge-dir"
  runuser -u munge -- /usr/sbin/munged --socket="$munge/munge.socket" --pid-file="$munge/munged.pid" \
    --log-file="$munge/munged.log" --seed-file="$munge/munged.seed"
  local node memory
  node=$(hostname -s)
  memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
  cat > "$conf" <<CONF
ClusterName=genimpute-local
SlurmctldHost=$node
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=3600
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
DefMemPerCPU=2000
NodeName=$node CPUs=$(nproc) RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  if [[ -e /etc/slurm/slurm.conf && ! -L /etc/slurm/slurm.conf ]]; then
    echo "slurm-local: /etc/slurm/slurm.conf belongs to another cluster; not touching it" >&2
    return 1
  fi
  mkdir -p /etc/slurm
  ln -sfn "$conf" /etc/slurm/slurm.conf
  SLURM_CONF=$conf /usr/sbin/slurmctld
  SLURM_CONF=$conf /usr/sbin/slurmd
  for _ in $(seq 60); do
    if SLURM_CONF=$conf sinfo -h -o %t 2>/dev/null | grep -q idle; then
      echo "export SLURM_CONF=$conf"
      return 0
    fi
    sleep 1
  done
  echo "slurm-local: the node did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
  return 1
}

stop() {
  local pidfile munge
  munge=$(cat "$dir/munge-dir" 2>/dev/null || true)
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" ${munge:+"$munge/munged.pid"}; do
    if [[ -s $pidfile ]]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
  sleep 1
  if [[ $(readlink /etc/slurm/slurm.conf 2>/dev/null) == "$conf" ]]; then rm -f /etc/slurm/slurm.conf; fi
  if [[ -n $munge && $munge == /tmp/genimpute-munge.* ]]; then rm -rf "$munge"; fi
}

case $action in
  start) start ;;
  stop) stop ;;
  *) echo "usage: slurm-local.sh start|stop DIR" >&2; exit 2 ;;
esac
