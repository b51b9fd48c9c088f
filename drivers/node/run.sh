#!/usr/bin/env bash
# drivers/run node DRIVER MODE: DRIVER is mysql2 or pg; MODE default or prepared.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
driver=${1:?usage: drivers/run node mysql2|pg default|prepared}
mode=${2:-default}
case "$driver" in
  mysql2 | pg) ;;
  *) echo "node has no driver '$driver' (mysql2, pg)" >&2; exit 2 ;;
esac
export NODE_PATH="${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/node/node_modules"
exec node "$here/$driver.js" "$mode"
