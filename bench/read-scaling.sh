#!/usr/bin/env bash
# Read-only endpoint scaling on PostgreSQL (DESIGN.md, reference experiment
# 2), directly and through Gatehouse, alternating, on the same throwaway
# cluster: a PostgreSQL 15 primary and three streaming replicas, their
# shipped max_connections (100).
#
# The load (gatehouse-loadgen load): SCALE_USERS virtual users (50), each
# connecting, running pgbench's select-only query (SELECT abalance FROM
# pgbench_accounts WHERE aid = a random id) and disconnecting, with no
# think time, for SCALE_SECONDS (40): the serverless pattern, a new
# connection per transaction (pgbench -S -C).
#   direct:    to a random one of the first two replicas (a DNS name over
#              them); from second SCALE_ADD_AT (half the run) the third
#              joins them, as a DNS name gains an address;
#   gatehouse: a read_only endpoint over the first two replicas
#              (transaction pooling, SCALE_POOL per replica); at second
#              SCALE_ADD_AT a reload (POST /api/reload) adds the third.
# Once a second: each replica's client connections (pg_stat_activity) and
# its CPU and RSS (the postmaster's whole tree, /proc), Gatehouse's CPU and
# RSS, its pooled connections per replica and whether it has the third up.
# Before each Gatehouse run a reload takes the third replica out again, so
# every round starts from two.
#
# The report: a terminal table, SCALE_DIR/report.html (self-contained, with
# charts: the third replica's connections and CPU rising from the reload on),
# SCALE_DIR/summary.json and each run's JSON.
#
#   bench/read-scaling.sh                          # 50 users, 40 s per target, 1 round (~3 min)
#   SCALE_SECONDS=20 SCALE_ROUNDS=2 bench/read-scaling.sh
# Knobs: SCALE_USERS (50), SCALE_SECONDS (40), SCALE_ADD_AT (SECONDS/2),
# SCALE_ROUNDS (1), SCALE_POOL (10 per replica), SCALE_MAX_CONNECTIONS
# (100), SCALE_DIR (.bench/read-scaling), GH_WORKER_THREADS (the proxy's, 1).
# bench/pg-read-scaling.sh is the same experiment with pgbench -S -C waves
# and the reload's timings measured to 0.1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

USERS=${SCALE_USERS:-50}
SECS=${SCALE_SECONDS:-40}
ADD_AT=${SCALE_ADD_AT:-$((SECS / 2))}
ROUNDS=${SCALE_ROUNDS:-1}
POOL=${SCALE_POOL:-10}
MAXCONN=${SCALE_MAX_CONNECTIONS:-100}
DIR=${SCALE_DIR:-$PWD/.bench/read-scaling}
if ((ADD_AT < 1 || ADD_AT >= SECS)); then
  echo "SCALE_ADD_AT must be between 1 and SCALE_SECONDS - 1 ($ADD_AT, $SECS s)" >&2
  exit 2
fi
rm -rf "$DIR"
mkdir -p "$DIR/runs"
TCK=$(getconf CLK_TCK)

GH_PROXY_PID=
cleanup() {
  if [ -n "$GH_PROXY_PID" ]; then
    kill "$GH_PROXY_PID" 2>/dev/null || true
    wait "$GH_PROXY_PID" 2>/dev/null || true
  fi
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "starting PostgreSQL 15: a primary and 3 streaming replicas (max_connections $MAXCONN), pgbench scale 1"
cluster_up "$DIR/cluster" 3 "$MAXCONN" 1
P0=$GH_PG_PRIMARY_PORT
REPLICAS=("$GH_PG1_PORT" "$GH_PG2_PORT" "$GH_PG3_PORT")
pg_replicas_caught_up 100000 "${REPLICAS[@]}"
watch=()
count=()
metric=()
for n in 1 2 3; do
  d="GH_PG${n}_DIR"
  port=${REPLICAS[n - 1]}
  watch+=(--watch "replica$n=$(head -1 "${!d}/data/postmaster.pid")")
  count+=(--count-connections "replica$n=host=127.0.0.1 port=$port user=$GH_PG_USER password=$GH_PG_PASSWORD dbname=postgres")
  metric+=(--metric "gatehouse_pool_connections{backend=\"127.0.0.1:$port\"}")
done
metric+=(--metric "gatehouse_backend_up{backend=\"127.0.0.1:${REPLICAS[2]}\"}")

# Gatehouse: a read_only endpoint over the primary and the first two
# replicas (the third added by reload), its admin API for reloads and
# metrics.
ADMIN_PORT=$(free_port)
GH_PROXY_PORT=$(free_port)
backends_toml() {
  local out="[\"127.0.0.1:$P0\"" p
  for p in "$@"; do out+=", \"127.0.0.1:$p\""; done
  echo "$out]"
}
# write_config N: the configuration with the first N replicas.
write_config() {
  cat >"$DIR/gatehouse.toml" <<TOML
[proxy]
log_filter = "warn,gatehouse::reload=info"
worker_threads = ${GH_WORKER_THREADS:-1}

[admin]
listen = "127.0.0.1:$ADMIN_PORT"

[[clusters]]
name = "reads"
engine = "postgres"
backends = $(backends_toml "${REPLICAS[@]:0:$1}")
monitor_secret = "monitor"
health_check_interval = "1s"
pool = { size = $POOL, borrow_timeout = "10s" }

[[endpoints]]
name = "ro"
listen = "127.0.0.1:$GH_PROXY_PORT"
cluster = "reads"
role = "read_only"
pool_mode = "transaction"
max_client_connections = 20000

[[tenants]]
name = "$BENCH_TENANT"
databases = ["$BENCH_DB"]
secret = "owner"
scram_verifier = "$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password)"

[[secrets]]
name = "owner"
user = "$BENCH_OWNER"
password = "$BENCH_OWNER_PW"

[[secrets]]
name = "monitor"
user = "$GH_PG_USER"
password = "$GH_PG_PASSWORD"
TOML
}
reload() { curl -sf -m 10 -X POST "http://127.0.0.1:$ADMIN_PORT/api/reload"; }
write_config 2
"$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
log "starting Gatehouse (read_only endpoint over 2 replicas, pool $POOL per replica, transaction pooling)"
"$GATEHOUSE" run --config "$DIR/gatehouse.toml" >"$DIR/gatehouse.log" 2>&1 &
GH_PROXY_PID=$!
wait_port 127.0.0.1 "$GH_PROXY_PORT"
wait_port 127.0.0.1 "$ADMIN_PORT"

url() { echo "host=127.0.0.1 port=$1 user=$2 password=$3 dbname=$BENCH_DB"; }
direct=(--target "$(url "${REPLICAS[0]}" "$BENCH_OWNER" "$BENCH_OWNER_PW")"
  --target "$(url "${REPLICAS[1]}" "$BENCH_OWNER" "$BENCH_OWNER_PW")"
  --target-from "$ADD_AT=$(url "${REPLICAS[2]}" "$BENCH_OWNER" "$BENCH_OWNER_PW")")
through=(--target "$(url "$GH_PROXY_PORT" "$BENCH_TENANT" "$BENCH_TENANT_PW")"
  --watch-proxy "gatehouse=$GH_PROXY_PID" --metrics "127.0.0.1:$ADMIN_PORT" "${metric[@]}")
common=(--users "$USERS" --spawn-rate 0 --think-ms 0 --seconds "$SECS" --connect-each
  --sql 'SELECT abalance FROM pgbench_accounts WHERE aid = {ids:1:100000}'
  --clk-tck "$TCK" --max-failure-rate 1 "${watch[@]}" "${count[@]}")

log "read scaling: $USERS users, connect-query-disconnect, ${SECS} s per target, the third replica joining at ${ADD_AT} s, $ROUNDS round(s)"
runs=()
for ((round = 1; round <= ROUNDS; round++)); do
  for target in direct gatehouse; do
    log "round $round: $target"
    if [ "$target" = direct ]; then
      args=("${direct[@]}")
    else
      args=("${through[@]}")
      write_config 2
      reload >"$DIR/runs/reload-out-$round.json"
      sleep 2
      # The third replica joins by reload at ADD_AT.
      (
        sleep "$ADD_AT"
        write_config 3
        reload >"$DIR/runs/reload-in-$round.json" || echo "reload failed" >"$DIR/runs/reload-in-$round.json"
      ) &
      joiner=$!
    fi
    "$LOADGEN" load --name "$target" --round "$round" "${args[@]}" "${common[@]}" \
      --json "$DIR/runs/$target-$round.json" | tee "$DIR/runs/$target-$round.txt"
    [ "$target" = gatehouse ] && wait "$joiner"
    runs+=("$DIR/runs/$target-$round.json")
    # Let the servers close what the run left (TIME_WAIT, exiting backends).
    sleep 3
  done
done

MACHINE="$(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
PG_VERSION=$("$PG_BIN/postgres" --version | awk '{ print $3 }')
"$LOADGEN" report --title "Read-only endpoint scaling (PostgreSQL)" \
  --out "$DIR/report.html" --json-out "$DIR/summary.json" \
  --config "machine=$MACHINE" \
  --config "servers=PostgreSQL $PG_VERSION, a primary and three streaming replicas, max_connections $MAXCONN" \
  --config "load=$USERS users, connect, SELECT abalance FROM pgbench_accounts WHERE aid = random, disconnect, no think time, ${SECS} s per target, $ROUNDS round(s)" \
  --config "direct=bench_owner's password (SCRAM), a random replica per connection: two, the third from ${ADD_AT} s" \
  --config "gatehouse=the bench tenant (SCRAM) to a read_only endpoint, transaction pooling, pool $POOL per replica: two replicas, the third added by a reload at ${ADD_AT} s" \
  "${runs[@]}" | tee "$DIR/summary.txt"
# Each replica's mean CPU and connections before and after the third joined.
for f in "${runs[@]}"; do
  jq -r --argjson at "$ADD_AT" '
    def mean: map(select(. != null)) as $v | if ($v | length) > 0 then ($v | add / length) else null end;
    def cpu(n): [.processes[] | select(.name == n) | .cpu_cores] | add;
    def conns(n): [.connections[] | select(.name == n) | .count] | first;
    .target as $t | (.seconds | map(select(.second > 2 and .second <= $at))) as $before
    | (.seconds | map(select(.second > $at + 2))) as $after
    | ["replica1", "replica2", "replica3"] as $names
    | "\($t) round \(.round): requests/s before \($before | map(.requests) | mean // 0 | floor), after \($after | map(.requests) | mean // 0 | floor); "
      + "replica CPU (cores) before " + ($names | map(. as $n | $before | map(cpu($n)) | mean // 0 | . * 100 | round / 100 | tostring) | join("/"))
      + ", after " + ($names | map(. as $n | $after | map(cpu($n)) | mean // 0 | . * 100 | round / 100 | tostring) | join("/"))
      + "; client connections after " + ($names | map(. as $n | $after | map(conns($n)) | mean // 0 | round | tostring) | join("/"))' "$f"
done | tee -a "$DIR/summary.txt"
log "report: $DIR/report.html"
