#!/usr/bin/env bash
# A real node for a running devcluster (see README.md, "A real node"):
# containerd + runc from the machine's packages, a kubelet of the control
# plane's release (built by node/build.sh, cached), node name real-node-0,
# label operator-host.dev/real-node=true, taint
# operator-host.dev/real-node=true:NoSchedule.
#
#   node.sh start              start it (needs root and containerd, runc,
#                              containernetworking-plugins); returns once the
#                              Node is Ready; idempotent
#   node.sh stop               stop it and remove everything it left
#   node.sh import ARCHIVE...  import image archives (OCI layout or docker
#                              save tarballs) into the node's containerd
#   node.sh status             print node.json if it runs
#
# Cluster: $DEVCLUSTER_DIR (default <repo>/target/devcluster), started with
# start.sh first. The node stops by itself when that cluster stops, and
# stop.sh stops it too. One real node per machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${DEVCLUSTER_DIR:-$root/target/devcluster}"
timeout="${DEVCLUSTER_NODE_TIMEOUT:-240}"
name="${DEVCLUSTER_NODE_NAME:-real-node-0}"

alive() { # pid -> running (zombies count as gone)
	[ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && ! awk '{exit !($3=="Z")}' "/proc/$1/stat" 2>/dev/null
}
is_node() { # guards against a recycled pid
	alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "devcluster-node up --dir $dir "
}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

[ $# -ge 1 ] || usage
cmd="$1"
shift
if [ ! -d "$dir" ]; then
	[ "$cmd" = stop ] && exit 0
	echo "no devcluster state dir $dir (start the cluster with DEVCLUSTER_DIR=$dir deploy/devcluster/start.sh)" >&2
	exit 1
fi
dir="$(cd "$dir" && pwd)"
pid="$(cat "$dir/node.pid" 2>/dev/null || true)"

stop_node() {
	if is_node "$pid"; then
		kill -TERM "$pid"
		for _ in $(seq 1 600); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			echo "devcluster-node pid $pid did not stop in 60s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		echo "real node stopped ($dir)"
	fi
	# A node killed by SIGKILL (or the above) left its pods, mounts and cgroups.
	if [ -d "$dir/node" ]; then
		if [ ! -x "$dir/bin/devcluster-node" ]; then
			echo "cannot clean up $dir/node: no $dir/bin/devcluster-node (run node.sh start once)" >&2
			return 1
		fi
		"$dir/bin/devcluster-node" cleanup --dir "$dir"
		# Its Node object too (a node that stopped normally deleted it itself).
		if [ -s "$dir/kubeconfig" ]; then
			"$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout=5s \
				delete node "$name" --ignore-not-found --wait=false >/dev/null 2>&1 || true
		fi
	fi
	rm -f "$dir/node.pid"
}

case "$cmd" in
start)
	mkdir -p "$dir/logs" "$dir/bin"
	exec 7>"$dir/.node.lock"
	flock 7
	if is_node "$pid" && [ -s "$dir/node/node.json" ]; then
		echo "real node already running (pid $pid); $dir/node/node.json"
		exit 0
	fi
	missing=""
	for b in containerd containerd-shim-runc-v2 ctr runc; do
		command -v "$b" >/dev/null || missing+=" $b"
	done
	[ -e /usr/lib/cni/bridge ] || [ -e /opt/cni/bin/bridge ] || missing+=" CNI plugins (bridge, host-local, loopback)"
	if [ -n "$missing" ]; then
		echo "a real node needs:$missing; install with: apt-get install -y --no-install-recommends containerd runc containernetworking-plugins" >&2
		exit 1
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "a real node needs root (containerd, runc, cgroups, mounts)" >&2
		exit 1
	fi
	stop_node >&2
	bin="$("$here/node/build.sh")"
	for b in kubelet devcluster-node pause.tar testpod.tar; do
		ln -sfn "$bin/$b" "$dir/bin/$b"
	done
	# setsid+nohup: the node outlives this script; fd 7 (the lock) stays here.
	setsid nohup "$bin/devcluster-node" up --dir "$dir" --bin "$bin" --name "$name" \
		>"$dir/logs/node.log" 2>&1 </dev/null 7>&- &
	pid=$!
	echo "$pid" >"$dir/node.pid"
	start=$SECONDS
	while [ ! -s "$dir/node/node.json" ]; do
		if ! alive "$pid" || ((SECONDS - start > timeout)); then
			if alive "$pid"; then why="not Ready after ${timeout}s"; else why="devcluster-node exited"; fi
			echo "real node failed to start: $why" >&2
			for f in node containerd kubelet; do
				if [ -s "$dir/logs/$f.log" ]; then
					echo "----- tail of $dir/logs/$f.log" >&2
					tail -n 25 "$dir/logs/$f.log" >&2
				fi
			done
			stop_node >/dev/null 2>&1 || true
			exit 1
		fi
		sleep 0.2
	done
	echo "real node $name ready (pid $pid) in $((SECONDS - start))s; $dir/node/node.json"
	;;
stop)
	exec 7>"$dir/.node.lock"
	flock 7
	stop_node
	;;
import)
	[ $# -ge 1 ] || usage
	exec "$dir/bin/devcluster-node" import --dir "$dir" "$@"
	;;
status)
	if is_node "$pid" && [ -s "$dir/node/node.json" ]; then
		cat "$dir/node/node.json"
	else
		echo "no real node running ($dir)" >&2
		exit 1
	fi
	;;
*)
	usage
	;;
esac
