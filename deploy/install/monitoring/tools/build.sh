#!/usr/bin/env bash
# Builds promtool (from this module's Prometheus version, without the service discoveries
# the rule tools never use) and the dashboard query check (dashcheck) once per version into
# a content-addressed cache directory, and prints that bin dir.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

cache_root="${MONITORING_TOOLS_CACHE:-$HOME/.cache/operator-host/monitoring-tools}"
key="$(cat go.mod go.sum tools.go dashcheck/*.go build.sh | sha256sum | cut -c1-16)"
out="$cache_root/$key/bin"
if [ -x "$out/promtool" ] && [ -x "$out/dashcheck.test" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$cache_root"
# Test binaries may call this concurrently: serialise builds.
exec 9>"$cache_root/.build.lock"
flock 9
if [ -x "$out/promtool" ] && [ -x "$out/dashcheck.test" ]; then
	echo "$out"
	exit 0
fi
tmp="$cache_root/$key/tmp.$$"
mkdir -p "$tmp"
go build -trimpath -tags remove_all_sd -o "$tmp/promtool" github.com/prometheus/prometheus/cmd/promtool >&2
go test -c -trimpath -o "$tmp/dashcheck.test" ./dashcheck >&2
mv "$tmp" "$out"
echo "$out"
