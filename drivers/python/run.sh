#!/usr/bin/env bash
# drivers/run python DRIVER MODE: one Python driver program (drivers/README.md).
#   pymysql default | mysql_connector default|prepared | psycopg default|prepared
#   sqlalchemy default | asyncpg default|prepared
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
driver=${1:?usage: drivers/run python DRIVER MODE}
mode=${2:-default}
case "$driver/$mode" in
  pymysql/default | mysql_connector/default | mysql_connector/prepared | \
    psycopg/default | psycopg/prepared | sqlalchemy/default | \
    asyncpg/default | asyncpg/prepared) ;;
  *) echo "drivers/python: no program for driver '$driver' in mode '$mode'" >&2; exit 2 ;;
esac
python="${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/python/venv/bin/python"
[ -x "$python" ] || { echo "drivers/python: $python missing: run drivers/setup python" >&2; exit 2; }
export GH_MODE="$mode"
# The programs are named check_*.py: a file named after its driver would
# shadow the driver's own package.
exec "$python" -u "$here/check_$driver.py"
