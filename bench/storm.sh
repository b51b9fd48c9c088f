#!/usr/bin/env bash
# Multi-tenant connection storm (DESIGN.md, reference experiment 1), on MySQL
# (MariaDB) or PostgreSQL, directly and through Gatehouse, alternating, on
# the same throwaway cluster: a primary and two replicas, every server with
# TLS and its shipped max_connections (MariaDB 151, PostgreSQL 100), never
# raised to fit the test.
#
# STORM_TENANTS tenants (200), each a database user with its own database
# holding mytable2 (1,000 rows: id and five random integers a..e). Each
# virtual user (gatehouse-loadgen load) picks a random tenant, connects,
# runs SELECT * FROM mytable2 WHERE id IN (five random ids), disconnects,
# thinks, and repeats; STORM_USERS users (1,000) spawned at STORM_SPAWN_RATE
# (10/s).
#   direct:    the tenant's own password over TLS, to a random replica
#              (as a DNS reader endpoint spreads connections);
#   gatehouse: a token minted for the tenant, over TLS, to a read_only
#              endpoint balanced over the two replicas (transaction pooling,
#              each tenant's backend credentials in Gatehouse's secrets).
# Once a second: both replicas' client connections and their CPU and RSS
# (/proc, the whole process tree), Gatehouse's CPU, RSS and own metrics.
# The report: a terminal table, REPORT_DIR/report.html (self-contained,
# with charts), REPORT_DIR/summary.json and each run's JSON.
#
#   bench/storm.sh mysql                       # 200 tenants, 1,000 users, 120 s per target
#   bench/storm.sh postgres
#   STORM_USERS=300 STORM_SECONDS=60 bench/storm.sh mysql
# Knobs: STORM_TENANTS, STORM_USERS, STORM_SPAWN_RATE, STORM_SECONDS,
# STORM_THINK_MS (1000), STORM_ROUNDS (1), STORM_MAX_CONNECTIONS (the
# engine's shipped default), STORM_POOL (Gatehouse's pool per tenant and
# replica, 2), STORM_MAX_CONNECTIONS_PERCENT (90) and STORM_MAX_IDLE_PERCENT
# (50) (the proxy's pool limits), STORM_DIR (.bench/storm-ENGINE), GH_WORKER_THREADS (the
# proxy's; its default when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${1:-mysql}
TENANTS=${STORM_TENANTS:-200}
USERS=${STORM_USERS:-1000}
SPAWN=${STORM_SPAWN_RATE:-10}
SECS=${STORM_SECONDS:-120}
THINK=${STORM_THINK_MS:-1000}
ROUNDS=${STORM_ROUNDS:-1}
POOL=${STORM_POOL:-2}
# Gatehouse's share of each server's max_connections, and of that share how
# much may sit idle (the proxy's defaults).
MAXPCT=${STORM_MAX_CONNECTIONS_PERCENT:-90}
IDLEPCT=${STORM_MAX_IDLE_PERCENT:-50}
# shellcheck source=bench/storm-setup.sh
source bench/storm-setup.sh
SQL='SELECT * FROM mytable2 WHERE id IN ({ids:5:1000})'


log "storm: $TENANTS tenants, $USERS users spawned at $SPAWN/s, think ${THINK} ms, ${SECS} s per target, $ROUNDS round(s)"
for ((round = 1; round <= ROUNDS; round++)); do
  for target in direct gatehouse; do
    if [ "$target" = direct ]; then args=("${direct[@]}"); else args=("${through[@]}"); fi
    log "round $round: $target"
    "$LOADGEN" load --name "$target" --round "$round" "${args[@]}" "${common[@]}" --sql "$SQL" \
      --json "$DIR/runs/$target-$round.json" | tee "$DIR/runs/$target-$round.txt"
    # Let the servers close what the run left (TIME_WAIT, exiting backends).
    sleep 5
  done
done

runs=()
for ((round = 1; round <= ROUNDS; round++)); do
  runs+=("$DIR/runs/direct-$round.json" "$DIR/runs/gatehouse-$round.json")
done
"$LOADGEN" report --title "Multi-tenant connection storm ($ENGINE)" \
  --out "$DIR/report.html" --json-out "$DIR/summary.json" \
  --config "engine=$ENGINE" --config "servers=a primary and two replicas, TLS, max_connections $MAXCONN" \
  --config "tenants=$TENANTS (a user, a database and mytable2 of 1,000 rows each)" \
  --config "direct=the tenant's password over TLS, a random replica per connection" \
  --config "gatehouse=a token per tenant over TLS, read_only endpoint over both replicas, transaction pooling, pool $POOL per tenant and replica, max_connections_percent $MAXPCT, max_idle_percent $IDLEPCT" \
  --config "load=$USERS users at $SPAWN/s, connect-query-disconnect, think ${THINK} ms, ${SECS} s per target, $ROUNDS round(s)" \
  "${runs[@]}" | tee "$DIR/summary.txt"
log "report: $DIR/report.html"
