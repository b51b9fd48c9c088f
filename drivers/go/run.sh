#!/usr/bin/env bash
# drivers/run go DRIVER MODE: DRIVER is mysql (go-sql-driver/mysql) or pgx
# (jackc/pgx v5); MODE default or prepared. Built by drivers/setup go.
set -euo pipefail
driver=${1:?usage: drivers/run go mysql|pgx default|prepared}
mode=${2:-default}
case "$driver" in
  mysql | pgx) ;;
  *) echo "go has no driver '$driver' (mysql, pgx)" >&2; exit 2 ;;
esac
exec "${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/go/bin/$driver" "$mode"
