#!/usr/bin/env bash
# `make demo`: build what is missing, start the local control plane, run the host with the
# example plugins, apply the examples, show the result, then keep the host running (Ctrl-C stops it).
# With KUBECONFIG set (kind, k3d, a real cluster), the demo runs against that cluster instead and
# builds no control plane; it needs kubectl on the PATH and creates the examples' CRDs there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
state=target/demo
mkdir -p "$state"

if [ -n "${KUBECONFIG:-}" ]; then
	kubectl="$(command -v kubectl)" || { echo "KUBECONFIG is set: the demo needs kubectl on the PATH" >&2; exit 1; }
	"$kubectl" version >/dev/null || { echo "the cluster of KUBECONFIG=$KUBECONFIG does not answer" >&2; exit 1; }
	echo "using the cluster of KUBECONFIG=$KUBECONFIG (unset it for the local control plane)"
	make build
else
	# The control plane's Go build and the host's Rust build, side by side on a cold machine.
	deploy/devcluster/build.sh >/dev/null &
	control_plane=$!
	make build
	wait "$control_plane"
	deploy/devcluster/start.sh
	export KUBECONFIG="$root/target/devcluster/kubeconfig"
	kubectl="$root/target/devcluster/bin/kubectl"
fi

metrics_addr=127.0.0.1:8080
# The examples' policy: each example plugin's kinds, restricted pods, and for etcd its TLS
# Secret as a related resource (hashes only).
target/release/operator-host run --plugins target/plugins --install-crds \
	--policy examples/policy.yaml --metrics-addr "$metrics_addr" >"$state/host.log" 2>&1 &
host=$!
trap 'kill -TERM $host 2>/dev/null; wait $host 2>/dev/null || true' EXIT INT TERM

echo "operator-host is running (pid $host, log $state/host.log); waiting until it is ready..."
for _ in $(seq 1 120); do
	if curl -fsS "http://$metrics_addr/readyz" >/dev/null 2>&1; then break; fi
	if ! kill -0 $host 2>/dev/null; then cat "$state/host.log"; exit 1; fi
	sleep 0.5
done

"$kubectl" apply -f examples/memcached.yaml -f examples/mysql.yaml -f examples/etcd.yaml
echo "waiting for the Memcached example to become Available..."
"$kubectl" wait --for=condition=Available memcached/memcached-sample --timeout=120s
"$kubectl" get memcached,deployments,services,pods -o wide
echo "waiting for the MySQL example to become ONLINE..."
"$kubectl" wait --for=jsonpath='{.status.cluster.status}'=ONLINE innodbcluster/mycluster --timeout=180s
"$kubectl" get innodbclusters,statefulsets,deployments,services,pods -l app.kubernetes.io/managed-by=operator-host
echo "waiting for the etcd example to be Running..."
"$kubectl" wait --for=condition=Ready etcdcluster/example --timeout=180s
"$kubectl" get etcdclusters,statefulsets,services,pods -l app.kubernetes.io/instance=example
# The binary is also the kubectl plugin `kubectl operator-host`, under the name kubectl looks for.
mkdir -p "$state/bin"
ln -sf "$root/target/release/operator-host" "$state/bin/kubectl-operator_host"
echo
echo "What each replica serves, and the parents that fail (kubectl operator-host):"
PATH="$root/$state/bin:$PATH" "$kubectl" operator-host plugins
PATH="$root/$state/bin:$PATH" "$kubectl" operator-host failing -A
echo
echo "Try editing the CR and watch the host follow:"
echo "  KUBECONFIG=$KUBECONFIG $kubectl patch memcached memcached-sample --type merge -p '{\"spec\":{\"size\":5}}'"
echo "  KUBECONFIG=$KUBECONFIG $kubectl patch ic mycluster --type merge -p '{\"spec\":{\"router\":{\"instances\":0}}}'"
echo "  KUBECONFIG=$KUBECONFIG $kubectl patch etcd example --type merge -p '{\"spec\":{\"replicas\":5}}'   # membership Jobs, one member at a time"
echo "  make test-plugins && cp target/test-plugins/memcached-v2.wasm target/plugins/memcached.wasm   # hot swap: children get the v2 annotation"
echo "  cp target/plugins-python/memcached.wasm target/plugins/memcached.wasm   # the same operator in Python takes over; its children are not written again"
echo "  curl -s http://$metrics_addr/metrics | grep operator_host_"
echo "  PATH=$root/$state/bin:\$PATH KUBECONFIG=$KUBECONFIG $kubectl operator-host explain memcached/memcached-sample"
echo "The host keeps running; Ctrl-C stops it (the control plane stays up: make cluster-down)."
wait $host
