#!/usr/bin/env bash
# Saturation (DESIGN.md, reference experiment 4): the storm's
# connect-query-disconnect load (bench/storm-setup.sh: 200 tenants, TLS,
# a primary and two replicas with their shipped max_connections) held for
# minutes:
#   direct                the same load straight to the replicas;
#   gatehouse-P%          through Gatehouse with max_connections_percent P,
#                         for each P of SAT_PERCENTS (20 50 100), changed
#                         between phases by a configuration reload (SIGHUP);
#   gatehouse-autocommit0 the client that never ends its transaction, as
#                         PyMySQL with autocommit=0 does: connect,
#                         SET autocommit=0 (PostgreSQL: BEGIN), query,
#                         close, at the last P. What the proxy shows for it
#                         (leases held, pins) is in the report's metric
#                         charts.
# Per phase: successful requests per minute, latency, failures, backend
# connections and CPU, the proxy's CPU and metrics; one HTML report with
# every phase (direct the baseline) and a per-minute table.
#
#   bench/saturation.sh                 # MariaDB, 120 s per phase
#   SAT_SECONDS=300 bench/saturation.sh
#   bench/saturation.sh postgres
#   bench/saturation.sh mysql --server-cpu 0.3 --proxy-cpu 0.5 --client-cpu 0.6   # the testbed's hosts (bench/testbed.sh)
# Knobs: SAT_SECONDS (120), SAT_PERCENTS ("20 50 100"), SAT_USERS (1000),
# SAT_SPAWN_RATE (50), SAT_THINK_MS (50), SAT_TENANTS (200), SAT_POOL (2),
# SAT_DIR (.bench/saturation-ENGINE).
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${1:-mysql}
# The testbed's options after the engine (bench/testbed.sh).
TESTBED_ARGS=("${@:2}")
TENANTS=${SAT_TENANTS:-200}
USERS=${SAT_USERS:-1000}
SPAWN=${SAT_SPAWN_RATE:-50}
SECS=${SAT_SECONDS:-120}
THINK=${SAT_THINK_MS:-50}
POOL=${SAT_POOL:-2}
read -r -a PERCENTS <<<"${SAT_PERCENTS:-20 50 100}"
MAXPCT=${PERCENTS[0]}
IDLEPCT=50
STORM_DIR=${SAT_DIR:-$PWD/.bench/saturation-$ENGINE}
# shellcheck source=bench/storm-setup.sh
source bench/storm-setup.sh

# run NAME SQL TARGET_ARGS...: one phase.
run() {
  local name=$1 sql=$2
  shift 2
  log "$name for ${SECS} s"
  "${TB_CLIENT[@]}" "$LOADGEN" load --name "$name" "$@" "${common[@]}" --sql "$sql" \
    --json "$DIR/runs/$name.json" | tee "$DIR/runs/$name.txt"
  sleep 5
}

# applied_reloads: the proxy's count of applied reloads (its /metrics).
applied_reloads() {
  curl -s "http://127.0.0.1:$GH_ADMIN_PORT/metrics" |
    awk '/^gatehouse_reloads_total\{result="applied"\}/ { print $2; found = 1 } END { if (!found) print 0 }'
}

# reload_percent P: max_connections_percent P in the configuration, applied
# by SIGHUP; waits until the proxy counts the reload as applied.
reload_percent() {
  sed -i "s/max_connections_percent = [0-9]*/max_connections_percent = $1/" "$DIR/gatehouse.toml"
  local before
  before=$(applied_reloads)
  kill -HUP "$GH_PROXY_PID"
  for _ in $(seq 1 100); do
    [ "$(applied_reloads)" -gt "$before" ] && return 0
    sleep 0.1
  done
  echo "the reload to max_connections_percent $1 was not applied (see $DIR/gatehouse.log)" >&2
  exit 1
}

SQL='SELECT * FROM mytable2 WHERE id IN ({ids:5:1000})'
if [ "$ENGINE" = mysql ]; then
  OPEN_TXN="SET autocommit=0; $SQL"
else
  OPEN_TXN="BEGIN; $SQL"
fi
names=(direct)
run direct "$SQL" "${direct[@]}"
for p in "${PERCENTS[@]}"; do
  reload_percent "$p"
  run "gatehouse-$p%" "$SQL" "${through[@]}"
  names+=("gatehouse-$p%")
done
run gatehouse-autocommit0 "$OPEN_TXN" "${through[@]}"
names+=(gatehouse-autocommit0)

runs=()
for n in "${names[@]}"; do runs+=("$DIR/runs/$n.json"); done
"$LOADGEN" report --title "Saturation ($ENGINE): Gatehouse's share of the replicas' connections" \
  --out "$DIR/report.html" --json-out "$DIR/summary.json" \
  --config "testbed=$(testbed_describe)" \
  --config "engine=$ENGINE" --config "servers=a primary and two replicas, TLS, max_connections $MAXCONN" \
  --config "tenants=$TENANTS" \
  --config "load=$USERS users at $SPAWN/s, connect-query-disconnect, think ${THINK} ms, ${SECS} s per phase" \
  --config "gatehouse=tokens over TLS, read_only endpoint over both replicas, pool $POOL per tenant and replica; max_connections_percent ${PERCENTS[*]} by reload; autocommit0 at ${PERCENTS[-1]}%" \
  "${runs[@]}" >"$DIR/summary.txt"
cat "$DIR/summary.txt"

echo
echo "successful requests per minute (and failures) by phase:"
for n in "${names[@]}"; do
  jq -r --arg n "$n" '
    [.seconds | group_by((.second - 1) / 60 | floor)[]
      | {ok: (map(.requests - .failures) | add), failed: (map(.failures) | add)}]
    | map("\(.ok) (\(.failed))") | "\($n): " + join("  ")' "$DIR/runs/$n.json"
done
testbed_report
log "report: $DIR/report.html"
