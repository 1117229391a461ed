#!/usr/bin/env bash
# Regenerates the k8s.io/* replace lines of deploy/devcluster/go.mod from the
# pinned k8s.io/kubernetes release's own go.mod. That go.mod points every
# staging module at ./staging/src/...; a module depending on k8s.io/kubernetes
# must instead pin each of them to the matching published v0.<minor>.<patch>.
#
# usage: hack/gen-replaces.sh [v1.35.y]   (default: the version already required)
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-$(go mod edit -json | tr -d ' \n\t' | grep -o '"Path":"k8s.io/kubernetes","Version":"[^"]*"' | head -1 | cut -d'"' -f8)}"
[ -n "$version" ] || { echo "cannot tell the k8s.io/kubernetes version; pass it" >&2; exit 1; }
staging="v0.${version#v1.}"

gomod="$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')"
[ -f "$gomod" ] || { echo "could not download the go.mod of k8s.io/kubernetes@${version}" >&2; exit 1; }

# Drop the old k8s.io replaces, then add one per staging module of this release.
for old in $(go mod edit -json | sed -n 's/^\s*"Path": "\(k8s.io\/[^"]*\)"$/\1/p' | sort -u); do
	go mod edit -dropreplace="$old" 2>/dev/null || true
done
args=(-require="k8s.io/kubernetes@${version}")
while read -r mod; do
	args+=(-replace="${mod}=${mod}@${staging}")
done < <(sed -n 's#^\s*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$gomod" | sort -u)
go mod edit "${args[@]}"
echo "pinned k8s.io/kubernetes ${version} and $(( ${#args[@]} - 1 )) staging modules at ${staging}" >&2
