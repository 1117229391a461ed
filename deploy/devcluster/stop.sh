#!/usr/bin/env bash
# Stops the devcluster started by start.sh and waits until it and every
# process it started are gone. With $DEVCLUSTER_DIR set, stops that cluster;
# without it, every cluster under <repo>/target/devcluster* (the shared one and
# the isolated ones tests start for themselves, target/devcluster-<name>),
# and a real node (node.sh) attached to it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

alive() { # pid -> running (zombies count as gone)
	[ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && ! awk '{exit !($3=="Z")}' "/proc/$1/stat" 2>/dev/null
}
is_devcluster() { # guards against a recycled pid
	alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q 'devcluster up'
}

stop_dir() {
	local dir pid children c
	dir="$(cd "$1" 2>/dev/null && pwd || echo "$1")"
	pid="$(cat "$dir/devcluster.pid" 2>/dev/null || true)"
	# Children recorded at ready time (and after each fault), checked again below in case of SIGKILL.
	children="$(sed -n '/"children"/,/}/p' "$dir/state.json" 2>/dev/null | grep -o ': [0-9]\+' | grep -o '[0-9]\+' || true)"
	# A real node (node.sh) first, while its apiserver still answers.
	if [ -e "$dir/node.pid" ] || [ -d "$dir/node" ]; then
		DEVCLUSTER_DIR="$dir" "$here/node.sh" stop || echo "stopping the real node of $dir failed" >&2
	fi
	if ! is_devcluster "$pid"; then
		echo "devcluster is not running ($dir)"
	else
		kill -TERM "$pid"
		for _ in $(seq 1 300); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			echo "devcluster pid $pid did not stop in 30s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		echo "devcluster stopped ($dir)"
	fi
	for c in $children; do
		for _ in $(seq 1 100); do
			alive "$c" || break
			sleep 0.1
		done
		# Every child's command line names files in $dir: that identifies it.
		if alive "$c" && tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null | grep -qF "$dir/"; then
			echo "killing stray child $c" >&2
			kill -KILL "$c" 2>/dev/null || true
		fi
	done
	rm -f "$dir/devcluster.pid" "$dir/kubeconfig"
}

if [ -n "${DEVCLUSTER_DIR:-}" ]; then
	stop_dir "$DEVCLUSTER_DIR"
else
	stop_dir "$root/target/devcluster"
	for d in "$root"/target/devcluster-*/; do
		if [ -d "$d" ]; then stop_dir "${d%/}"; fi
	done
fi
