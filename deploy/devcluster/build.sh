#!/usr/bin/env bash
# Builds the devcluster binaries (devcluster, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) once per pinned
# version into a content-addressed cache directory and prints that bin dir.
# The key hashes every input, so a source or go.sum change rebuilds; the normal
# Go build cache keeps rebuilds incremental.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

cache_root="${DEVCLUSTER_CACHE:-$HOME/.cache/operator-host/devcluster}"
key="$(cat go.mod go.sum ./*.go kwok/go.mod kwok/go.sum build.sh | sha256sum | cut -c1-16)"
out="$cache_root/$key/bin"
if [ -x "$out/devcluster" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$cache_root"
# Test binaries may call start.sh concurrently: serialise builds.
exec 9>"$cache_root/.build.lock"
flock 9
if [ -x "$out/devcluster" ]; then
	echo "$out"
	exit 0
fi

# Version stamps: /version must report the real release, and the
# apiserver derives its compatibility version from gitVersion.
k8s_version="$(go mod edit -json | tr -d ' \n\t' | grep -o '"Path":"k8s.io/kubernetes","Version":"[^"]*"' | head -1 | cut -d'"' -f8)"
kwok_version="$(cd kwok && go mod edit -json | tr -d ' \n\t' | grep -o '"Path":"sigs.k8s.io/kwok","Version":"[^"]*"' | head -1 | cut -d'"' -f8)"
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
echo "devcluster: building kubernetes $k8s_version and kwok $kwok_version into $out (first build takes a while)" >&2
go build -ldflags "$ld" -o "$tmp/" \
	. \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubectl
# kwok needs newer k8s.io libraries than the control plane, so it is built
# from its own module (kwok/go.mod) with the versions its release pins.
(cd kwok && go build -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
# kwok itself has no default stages (kwokctl adds them); ship the ones
# kwokctl uses by default, from the same kwok release.
kwok_src="$(cd kwok && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
	pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
	echo "---"
	cat "$kwok_src/kustomize/stage/$f"
done >"$tmp/kwok-stages.yaml"
echo "devcluster: built in $((SECONDS - start))s" >&2

rm -rf "$out"
mv "$tmp" "$out"
# Each key holds ~500 MB of binaries: drop the builds of older inputs
# (running processes keep their deleted executables alive).
for old in "$cache_root"/*/; do
	[ "${old%/}" = "$cache_root/$key" ] || rm -rf "$old"
done
echo "$out"
