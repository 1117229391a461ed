#!/usr/bin/env bash
# Builds the test registry (main.go) and the reference clients of the interop tests (the oras and cosign CLIs) once per version of this module and of Go; prints the directory holding them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${REGISTRY_TOOL_CACHE:-$HOME/.cache/operator-host/registry-tool}"
key="$(cd "$here" && { cat go.mod go.sum ./*.go; go version; } | sha256sum | cut -c1-16)"
bin="$cache/$key"
if [ ! -x "$bin/registry" ] || [ ! -x "$bin/oras" ] || [ ! -x "$bin/cosign" ]; then
	mkdir -p "$bin"
	cd "$here"
	CGO_ENABLED=0 go build -trimpath -o "$bin/registry.tmp.$$" . >&2
	CGO_ENABLED=0 go build -trimpath -o "$bin/oras.tmp.$$" oras.land/oras/cmd/oras >&2
	CGO_ENABLED=0 go build -trimpath -o "$bin/cosign.tmp.$$" github.com/sigstore/cosign/v3/cmd/cosign >&2
	for tool in registry oras cosign; do
		mv "$bin/$tool.tmp.$$" "$bin/$tool"
	done
	for old in "$cache"/*/; do
		[ "${old%/}" = "$bin" ] || rm -rf "$old"
	done
fi
echo "$bin"
