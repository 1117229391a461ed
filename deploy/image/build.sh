#!/usr/bin/env bash
# `make image`: builds the host as a static, stripped musl binary and writes it and the bundled plugins as two reproducible OCI images under target/image; prints reference@digest of each.
#
# Usage: deploy/image/build.sh [PLUGIN...]   (default: memcached mysql, from target/plugins)
# Outputs in $IMAGE_OUT (default target/image): operator-host/ and operator-host-plugins/ (OCI
# image layouts) and operator-host.oci.tar, operator-host-plugins.oci.tar (OCI archives, for
# `ctr -n k8s.io images import`). Every timestamp is SOURCE_DATE_EPOCH (default: the commit
# time), so two builds of one commit give the same digests. $IMAGE_SOURCE, when set, becomes
# the org.opencontainers.image.source label.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

target=x86_64-unknown-linux-musl
out="${IMAGE_OUT:-$root/target/image}"

plugins=("$@")
[ ${#plugins[@]} -gt 0 ] || plugins=(memcached mysql)
plugin_args=()
for p in "${plugins[@]}"; do
	f="target/plugins/$p.wasm"
	[ -f "$f" ] || { echo "image: $f is missing: run \`make plugins\` first (\`make image\` does)" >&2; exit 1; }
	plugin_args+=(-plugin "$f")
done

command -v musl-gcc >/dev/null || { echo "image: musl-gcc is missing (Debian: apt-get install musl-tools)" >&2; exit 1; }
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$target"; then
	echo "image: the Rust target is missing: rustup target add $target" >&2
	exit 1
fi

# The image tool, built once per version of its sources (and of Go).
tool_cache="${IMAGE_TOOL_CACHE:-$HOME/.cache/operator-host/image-tool}"
key="$(cd "$here" && { cat go.mod go.sum ./*.go; go version; } | sha256sum | cut -c1-16)"
tool="$tool_cache/$key/image"
if [ ! -x "$tool" ]; then
	mkdir -p "$tool_cache/$key"
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tool.tmp.$$" .)
	mv "$tool.tmp.$$" "$tool"
	for old in "$tool_cache"/*/; do
		[ "${old%/}" = "$tool_cache/$key" ] || rm -rf "$old"
	done
fi

# The host. Its flags are fixed here (RUSTFLAGS would replace them) and apply to the musl
# target only, so the host's other builds in a shared target dir are untouched. The remaps
# take out the two absolute paths that would reach the binary (registry sources, and build
# scripts' OUT_DIR); workspace crates are compiled from relative paths already.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR="$(cd "$CARGO_TARGET_DIR" && pwd)"
cargo_home="$(cd "${CARGO_HOME:-$HOME/.cargo}" && pwd)"
case "$CARGO_TARGET_DIR$cargo_home" in
*[[:space:]]*) echo "image: CARGO_TARGET_DIR and CARGO_HOME must not contain spaces" >&2; exit 1 ;;
esac
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
# Cargo rebuilds a crate when a variable its build script read differs from cargo's own
# environment, and ring reads CARGO_MANIFEST_DIR and CARGO_PKG_*, which cargo sets for a test
# (or build script) that runs this script: ring and all above it would be rebuilt in turn by
# `make image` and the image test. Clear them; and give cc (which reads SOURCE_DATE_EPOCH) one
# fixed value, the same for every commit.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}"
for v in $(compgen -e); do
	case "$v" in
	CARGO_PKG_* | CARGO_MANIFEST_* | CARGO_BIN_* | CARGO_CRATE_NAME | CARGO_PRIMARY_PACKAGE | CARGO_TARGET_TMPDIR | OUT_DIR) unset "$v" ;;
	esac
done
export SOURCE_DATE_EPOCH=0
export CC_x86_64_unknown_linux_musl=musl-gcc
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=$cargo_home=/cargo --remap-path-prefix=$CARGO_TARGET_DIR=/target"
cargo build --locked --profile image --target "$target" -p operator-host
bin="$CARGO_TARGET_DIR/$target/image/operator-host"

version="$("$bin" --version | awk '{print $2}')"
revision="$(git rev-parse HEAD)"
mkdir -p "$out"
"$tool" -binary "$bin" "${plugin_args[@]}" -out "$out" -version "$version" \
	-revision "$revision" -epoch "$epoch" ${IMAGE_SOURCE:+-source "$IMAGE_SOURCE"}
for name in operator-host operator-host-plugins; do
	echo "image: $out/$name.oci.tar ($(du -h "$out/$name.oci.tar" | cut -f1))" >&2
done
