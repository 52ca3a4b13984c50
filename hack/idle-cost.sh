#!/usr/bin/env bash
# Measures the agent's idle cost in standalone mode on this host: starts it,
# lets it settle, then samples its CPU time and RSS over a window, and stops
# it (by PID) however the script ends.
#   usage: hack/idle-cost.sh BIN [SECONDS [AGENT FLAGS...]]
set -euo pipefail
bin=${1:?usage: idle-cost.sh BIN [SECONDS [AGENT FLAGS...]]}
secs=${2:-60}
shift $(( $# >= 2 ? 2 : $# ))
settle=5
log=$(mktemp)
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid"; wait "$pid" 2>/dev/null || true
	fi
	rm -f "$log"
}
trap cleanup EXIT

"$bin" --metrics-bind-address 127.0.0.1:0 --log-level warn "$@" >"$log" 2>&1 &
pid=$!
sleep "$settle"
kill -0 "$pid" 2>/dev/null || { echo "evictd exited early:"; cat "$log"; exit 1; }

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }

c0=$(cpu); t0=$(date +%s.%N)
max_rss=0
for _ in $(seq "$secs"); do
	sleep 1
	r=$(rss_kib); [ "$r" -gt "$max_rss" ] && max_rss=$r
done
c1=$(cpu); t1=$(date +%s.%N)
awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v hz="$ticks" -v rss="$max_rss" -v s="$secs" 'BEGIN {
	printf "idle standalone over %ds: CPU %.3f%% of one core, peak RSS %.1f MiB\n", s, 100 * (c1 - c0) / hz / (t1 - t0), rss / 1024
}'
