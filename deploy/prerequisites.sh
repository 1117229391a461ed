#!/usr/bin/env bash
# What the build and the tests need from the machine besides Rust (rustup) and Go: adds the
# rustup targets and components, and for the tests installs the Debian packages that are
# missing; the tests run a real node, so they need root, and without it this stops at once
# saying how to run them.
#   deploy/prerequisites.sh build   the plugins' target (make build, make demo)
#   deploy/prerequisites.sh test    that, and what `make test` needs: the musl target and
#                                   musl-gcc (the host image), the real node's containerd, runc
#                                   and CNI plugins, python3 with venv, node with npm
set -euo pipefail
what="${1:-build}"

command -v rustup >/dev/null || { echo "rustup is required: https://rustup.rs" >&2; exit 1; }
command -v go >/dev/null || { echo "Go (1.24 or later) is required to build deploy/devcluster and the Go plugins" >&2; exit 1; }
# rustup installs the targets rust-toolchain.toml names only where it installs by itself
# (not with RUSTUP_AUTO_INSTALL=0): add them, a no-op when they are there.
installed="$(rustup target list --installed)"
targets=(wasm32-wasip2)
[ "$what" = test ] && targets+=(x86_64-unknown-linux-musl)
for target in "${targets[@]}"; do
	grep -qx "$target" <<<"$installed" || rustup target add "$target"
done
components="$(rustup component list --installed)"
for component in rustfmt clippy; do
	grep -q "^$component" <<<"$components" || rustup component add "$component"
done
[ "$what" = test ] || exit 0
if [ "$(id -u)" -ne 0 ]; then
	# The real node's containerd and kubelet run as root; the tests never skip them.
	echo "make test starts a real kubelet node (containerd, runc), which needs root; run it as root:" >&2
	echo "  sudo -E env PATH=\"\$PATH\" make test" >&2
	exit 1
fi

missing=()
command -v musl-gcc >/dev/null || missing+=(musl-tools)
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -e /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
[ "${#missing[@]}" -eq 0 ] && exit 0

echo "installing the Debian packages make test needs: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
