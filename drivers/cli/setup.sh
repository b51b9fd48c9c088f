#!/usr/bin/env bash
# The mysql command-line client comes from Debian's mariadb-client (scripts/lib.sh installs it).
set -euo pipefail
command -v mysql >/dev/null || { echo "mysql client not installed" >&2; exit 1; }
