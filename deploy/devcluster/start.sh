#!/usr/bin/env bash
# Starts the devcluster in the background and returns once it is ready (API
# ready and fake nodes Ready). Idempotent: if one is already running and
# healthy, returns at once. On failure, prints the log tail and exits 1.
#
# State dir: $DEVCLUSTER_DIR, default <repo>/target/devcluster; the admin
# kubeconfig is <state dir>/kubeconfig, kubectl is <state dir>/bin/kubectl.
# With $DEVCLUSTER_OWNER_PID set, a cluster this script starts stops by itself
# once that process has exited (a cluster already running keeps its owner).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${DEVCLUSTER_DIR:-$root/target/devcluster}"
timeout="${DEVCLUSTER_START_TIMEOUT:-120}"
mkdir -p "$dir/logs" "$dir/bin"
dir="$(cd "$dir" && pwd)"

# Test binaries run concurrently and each calls this script: one at a time.
exec 8>"$dir/.start.lock"
flock 8

bin="$("$here/build.sh")"
for b in kubectl devcluster kube-apiserver kube-controller-manager kube-scheduler kwok; do
	ln -sfn "$bin/$b" "$dir/bin/$b"
done

alive() { # pid -> running (zombies count as gone)
	[ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && ! awk '{exit !($3=="Z")}' "/proc/$1/stat" 2>/dev/null
}
pid="$(cat "$dir/devcluster.pid" 2>/dev/null || true)"
if alive "$pid" && [ -s "$dir/kubeconfig" ] &&
	"$bin/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
	echo "devcluster already running (pid $pid); kubeconfig: $dir/kubeconfig"
	exit 0
fi
if alive "$pid"; then
	echo "devcluster pid $pid is running but not healthy; restarting it" >&2
	DEVCLUSTER_DIR="$dir" "$here/stop.sh" >&2
fi

rm -f "$dir/devcluster.pid" "$dir/kubeconfig"
owner=()
if [ -n "${DEVCLUSTER_OWNER_PID:-}" ]; then
	owner=(--owner-pid "$DEVCLUSTER_OWNER_PID")
fi
# setsid+nohup: the cluster outlives this script and the caller's terminal;
# fd 8 (the lock) must not be inherited or it would be held forever.
setsid nohup "$bin/devcluster" up --dir "$dir" --bin "$bin" "${owner[@]}" \
	>"$dir/logs/devcluster.log" 2>&1 </dev/null 8>&- &

fail() {
	echo "devcluster failed to start: $1" >&2
	for f in "$dir"/logs/*.log; do
		echo "----- tail of $f" >&2
		tail -n 25 "$f" >&2
	done
	DEVCLUSTER_DIR="$dir" "$here/stop.sh" >/dev/null 2>&1 || true
	exit 1
}
start=$SECONDS
while :; do
	pid="$(cat "$dir/devcluster.pid" 2>/dev/null || true)"
	if [ -s "$dir/kubeconfig" ] && alive "$pid"; then
		break
	fi
	if [ -n "$pid" ] && ! alive "$pid"; then
		fail "the devcluster process exited"
	fi
	if ! jobs -r | grep -q . && [ -z "$pid" ]; then
		fail "the devcluster process exited before writing its pid file"
	fi
	if ((SECONDS - start > timeout)); then
		fail "not ready after ${timeout}s"
	fi
	sleep 0.1
done
echo "devcluster ready (pid $pid) in $((SECONDS - start))s; kubeconfig: $dir/kubeconfig; kubectl: $dir/bin/kubectl"
