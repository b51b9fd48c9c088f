#!/usr/bin/env bash
# drivers/setup python: a venv at $GH_DRIVERS_CACHE/python/venv with the
# pinned drivers of requirements.txt. It is rebuilt only when requirements.txt
# or the interpreter changed (their hash is kept in the venv), so a second
# run returns at once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/python"
venv="$cache/venv"
stamp="$venv/.gatehouse-requirements"

python=${GH_PYTHON:-}
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
      python=$candidate
      break
    fi
  done
fi
[ -n "$python" ] || { echo "drivers/python: no python3 >= 3.9 found" >&2; exit 1; }

want=$({ cat "$here/requirements.txt"; "$python" -c 'import sys; print(sys.version, sys.executable)'; } | sha256sum | cut -d' ' -f1)
fresh() { [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; }
fresh && exit 0

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
fresh && exit 0  # another setup finished while this one waited

echo "drivers/python: building $venv with $("$python" --version)" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet -r "$here/requirements.txt"
"$venv/bin/python" -c 'import asyncpg, mysql.connector, psycopg, pymysql, sqlalchemy'
echo "$want" >"$stamp"
