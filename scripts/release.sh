#!/usr/bin/env bash
# scripts/release.sh VERSION: build chatmem's release binaries into dist/.
#
# Cross-compiles cmd/chatmem for linux, darwin and windows on amd64 and arm64,
# static (CGO_ENABLED=0: the SQLite store is pure Go), with VERSION, the commit
# and its time stamped into internal/buildinfo (what `chatmem version`,
# GET /v1/version and chatmem_build_info report), and writes dist/SHA256SUMS.
#
#   scripts/release.sh v1.2.3
#   RELEASE_TARGETS=linux/amd64 scripts/release.sh v0.0.0-ci   # one target
#
# Each binary is dist/chatmem_VERSION_OS_ARCH (.exe on windows).
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-}"
if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$ ]]; then
  echo "usage: scripts/release.sh VERSION   (a semantic version such as v1.2.3)" >&2
  exit 2
fi
targets="${RELEASE_TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}"

pkg=github.com/chatmem/chatmem/internal/buildinfo
revision="$(git rev-parse HEAD 2>/dev/null || true)"
commit_time="$(git log -1 --format=%cI 2>/dev/null || true)"
ldflags="-s -w -X $pkg.version=$version"
[ -n "$revision" ] && ldflags="$ldflags -X $pkg.revision=$revision"
[ -n "$commit_time" ] && ldflags="$ldflags -X $pkg.time=$commit_time"
if [ -n "$revision" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "warning: the working tree has uncommitted changes; the binaries are not exactly $revision" >&2
fi

rm -rf dist
mkdir -p dist
for target in $targets; do
  os="${target%/*}"
  arch="${target#*/}"
  out="dist/chatmem_${version}_${os}_${arch}"
  [ "$os" = windows ] && out="$out.exe"
  echo "building $out"
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$out" ./cmd/chatmem
done
(cd dist && sha256sum chatmem_* > SHA256SUMS)
echo "dist/SHA256SUMS:"
cat dist/SHA256SUMS
