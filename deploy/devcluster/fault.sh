#!/usr/bin/env bash
# Injects a control-plane fault into a running devcluster:
#   deploy/devcluster/fault.sh (stop|start|restart) (kube-apiserver|etcd) [--down-for 5s]
# stop returns once the component is down; start and restart once the
# apiserver's /readyz answers ok again (same port, same certificates).
# State dir: $DEVCLUSTER_DIR, default <repo>/target/devcluster.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${DEVCLUSTER_DIR:-$root/target/devcluster}"
# The binary of the running cluster: it speaks the same protocol.
exec "$dir/bin/devcluster" fault --dir "$dir" "$@"
