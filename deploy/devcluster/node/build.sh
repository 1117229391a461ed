#!/usr/bin/env bash
# Builds what a real node needs (see ../README.md, "A real node") once per
# inputs into a content-addressed cache directory and prints that bin dir:
#   kubelet          from k8s.io/kubernetes/cmd/kubelet, the control plane's release
#   devcluster-node  runs the node (this directory's main package)
#   pause.tar        the pod sandbox image localhost/devcluster/pause:1 (OCI archive)
#   testpod.tar      a test image localhost/devcluster/testpod:1 (OCI archive)
# Its cache is separate from ../build.sh's and keyed on this module only, so
# building a node never invalidates the control plane's cache, and back.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

k8s_version() { (cd "$1" && go mod edit -json | tr -d ' \n\t' | grep -o '"Path":"k8s.io/kubernetes","Version":"[^"]*"' | head -1 | cut -d'"' -f8); }
k8s_version="$(k8s_version .)"
if [ "$k8s_version" != "$(k8s_version ..)" ]; then
	echo "devcluster node: node/go.mod pins k8s.io/kubernetes $k8s_version, ../go.mod $(k8s_version ..): the kubelet must be the control plane's release (see README, Updating the pins)" >&2
	exit 1
fi

cache_root="${DEVCLUSTER_NODE_CACHE:-$HOME/.cache/operator-host/devcluster-node}"
key="$(cat go.mod go.sum build.sh $(find . -name '*.go' | LC_ALL=C sort) | sha256sum | cut -c1-16)"
out="$cache_root/$key/bin"
if [ -x "$out/kubelet" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if [ -x "$out/kubelet" ]; then
	echo "$out"
	exit 0
fi

# The same version stamps as the control plane's (../build.sh): the Node
# reports kubeletVersion from them.
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit="
done

export GOFLAGS="${GOFLAGS:-} -trimpath"
tmp="$cache_root/$key/bin.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
echo "devcluster node: building kubelet $k8s_version into $out" >&2
go build -ldflags "$ld" -o "$tmp/kubelet" k8s.io/kubernetes/cmd/kubelet
echo "devcluster node: kubelet built in $((SECONDS - start))s" >&2
go build -ldflags "-s -w" -o "$tmp/devcluster-node" .
# Static, so that the images need nothing but the binary.
CGO_ENABLED=0 go build -ldflags "-s -w" -o "$tmp/pause" ./pause
CGO_ENABLED=0 go build -ldflags "-s -w" -o "$tmp/testpod" ./testpod
"$tmp/devcluster-node" image --ref localhost/devcluster/pause:1 --add "$tmp/pause=/pause" --entrypoint /pause -o "$tmp/pause.tar"
"$tmp/devcluster-node" image --ref localhost/devcluster/testpod:1 --add "$tmp/testpod=/testpod" --entrypoint /testpod -o "$tmp/testpod.tar"
rm "$tmp/pause" "$tmp/testpod"
echo "devcluster node: built in $((SECONDS - start))s" >&2

rm -rf "$out"
mv "$tmp" "$out"
# Keep only this key's build (a running node keeps its deleted executables).
for old in "$cache_root"/*/; do
	[ "${old%/}" = "$cache_root/$key" ] || rm -rf "$old"
done
echo "$out"
