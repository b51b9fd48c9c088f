#!/usr/bin/env bash
# drivers/setup go: builds the programs (cmd/mysql, cmd/pgx) into
# $GH_DRIVERS_CACHE/go/bin. Modules come from go.sum into Go's own module
# cache (outside the clone); the build is skipped when the sources, go.mod,
# go.sum and the Go version are what the binaries were built from.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/go"
command -v go >/dev/null || { echo "go is not installed" >&2; exit 1; }
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false"
cd "$here"
want=$( (go version; find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1)
if [ -f "$cache/.built" ] && [ "$(cat "$cache/.built")" = "$want" ] && [ -x "$cache/bin/mysql" ] && [ -x "$cache/bin/pgx" ]; then
  exit 0
fi
mkdir -p "$cache/bin"
rm -f "$cache/.built"
go build -trimpath -o "$cache/bin/" ./cmd/mysql ./cmd/pgx
echo "$want" >"$cache/.built"
