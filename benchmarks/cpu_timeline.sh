#!/usr/bin/env bash
# A command's CPU use over its run: every half second, the seconds of CPU
# (user + system, all its threads) it used since the last sample, as a
# share of one core (200% = two cores busy), read from /proc/PID/stat.
# Shows where a run leaves cores idle (docs/results.md#whole-chromosome-ahead).
#
#   bash benchmarks/cpu_timeline.sh COMMAND [ARGS...]   (Linux; the table on stdout, the command's stderr kept)
set -euo pipefail
(($#)) || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
"$@" &
pid=$!
hz=$(getconf CLK_TCK)
start=$(date +%s.%N) last=0
echo "seconds cpu_percent"
while stat=$(cat "/proc/$pid/stat" 2>/dev/null); do
  ticks=$(awk '{print $12 + $13}' <<<"${stat##*) }")
  awk -v t="$(date +%s.%N)" -v s="$start" -v d=$((ticks - last)) -v hz="$hz" \
    'BEGIN {printf "%.1f %d\n", t - s, 100 * d / hz / 0.5}'
  last=$ticks
  sleep 0.5
done
wait "$pid"
