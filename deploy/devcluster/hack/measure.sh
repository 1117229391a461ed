#!/usr/bin/env bash
# Measures warm start time to ready and the idle resident memory of the
# whole control plane (devcluster + its children), for docs/devcluster-figures.md.
# usage: hack/measure.sh [runs=3] [idle-seconds=60]   (stops a running devcluster)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${DEVCLUSTER_DIR:-$root/target/devcluster}"
runs="${1:-3}" idle="${2:-60}"

"$here/build.sh" >/dev/null
"$here/stop.sh" >/dev/null
for i in $(seq 1 "$runs"); do
	s=$(date +%s%N)
	"$here/start.sh" >/dev/null
	e=$(date +%s%N)
	echo "warm start $i: $(((e - s) / 1000000)) ms to ready (start.sh wall time)"
	[ "$i" = "$runs" ] || "$here/stop.sh" >/dev/null
done

sleep "$idle"
pids="$(cat "$dir/devcluster.pid") $(sed -n '/"children"/,/}/p' "$dir/state.json" | grep -o ': [0-9]\+' | grep -o '[0-9]\+')"
total=0
for p in $pids; do
	rss=$(awk '/^VmRSS/{print $2}' "/proc/$p/status")
	printf '%-26s %8d KiB\n' "$(basename "$(awk '{print $1}' "/proc/$p/cmdline" | tr '\0' ' ' | cut -d' ' -f1)")" "$rss"
	total=$((total + rss))
done
echo "RSS sum after ${idle}s idle: $((total / 1024)) MiB"
