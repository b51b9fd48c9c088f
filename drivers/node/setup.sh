#!/usr/bin/env bash
# drivers/setup node: installs the packages pinned in package-lock.json into
# $GH_DRIVERS_CACHE/node/node_modules (outside the clone). `npm ci` runs only
# when package.json or package-lock.json changed since the last install.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/node"
command -v node >/dev/null || { echo "node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 1; }
mkdir -p "$cache"
want=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$cache/.installed" ] && [ "$(cat "$cache/.installed")" = "$want" ] && [ -d "$cache/node_modules" ]; then
  exit 0
fi
rm -f "$cache/.installed"
cp "$here/package.json" "$here/package-lock.json" "$cache/"
(cd "$cache" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$cache/.installed"
