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
# On the testbed (options below) both start from one replica and the
# second and third join at a third and two thirds of the run; the bench
# owner and the tenant then log in with md5 (SCALE_AUTH), so that the load
# generator's PBKDF2 per SCRAM connection (about 1.1 ms of CPU here) does
# not become the limit instead of the replicas.
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
#   bench/read-scaling.sh --server-cpu 0.1 --proxy-cpu 0.6 --client-cpu 0.6   # on the testbed
# Knobs: SCALE_USERS (50), SCALE_SECONDS (40), SCALE_FROM (the replicas at
# the start: 2 on shared cores, 1 on the testbed; the others join one by
# one at even intervals), SCALE_ADD_AT (with two at the start: SECONDS/2),
# SCALE_ROUNDS (1), SCALE_POOL (10 per replica), SCALE_MAX_CONNECTIONS
# (100), SCALE_DIR (.bench/read-scaling), GH_WORKER_THREADS (the proxy's, 1).
# Options: the testbed's (bench/testbed.sh: --server-cpu, --proxy-cpu,
# --client-cpu, --az-latency, ...): each replica a host with its own CPU,
# so that adding one adds capacity, as on separate machines. The summary
# then gives requests/s per replica count, the ratio of three to one, and
# how evenly the replicas' CPU was shared with three.
# bench/pg-read-scaling.sh is the same experiment with pgbench -S -C waves
# and the reload's timings measured to 0.1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
testbed_options "$@"
build_release

USERS=${SCALE_USERS:-50}
SECS=${SCALE_SECONDS:-40}
ROUNDS=${SCALE_ROUNDS:-1}
POOL=${SCALE_POOL:-10}
MAXCONN=${SCALE_MAX_CONNECTIONS:-100}
DIR=${SCALE_DIR:-$PWD/.bench/read-scaling}
if testbed_on; then FROM=${SCALE_FROM:-1} AUTH=${SCALE_AUTH:-md5}; else FROM=${SCALE_FROM:-2} AUTH=${SCALE_AUTH:-scram}; fi
case $AUTH in scram | md5) ;; *) echo "SCALE_AUTH must be scram or md5 ($AUTH)" >&2; exit 2 ;; esac
if ((FROM < 1 || FROM > 2)); then
  echo "SCALE_FROM must be 1 or 2 ($FROM)" >&2
  exit 2
fi
# JOIN_AT[k]: the second replica k+1 joins (k >= FROM).
JOIN_AT=()
if ((FROM == 2)); then
  JOIN_AT[2]=${SCALE_ADD_AT:-$((SECS / 2))}
else
  JOIN_AT[1]=$((SECS / 3))
  JOIN_AT[2]=$((2 * SECS / 3))
fi
ADD_AT=${JOIN_AT[$FROM]}
for k in "${!JOIN_AT[@]}"; do
  if ((JOIN_AT[k] < 1 || JOIN_AT[k] >= SECS)); then
    echo "a replica would join at ${JOIN_AT[k]} s of a ${SECS} s run" >&2
    exit 2
  fi
done
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

log "starting PostgreSQL 15: a primary and 3 streaming replicas (max_connections $MAXCONN), pgbench scale 1; testbed: $(testbed_describe)"
cluster_up "$DIR/cluster" 3 "$MAXCONN" 1
P0=$GH_PG_PRIMARY_PORT
REPLICAS=("$GH_PG1_PORT" "$GH_PG2_PORT" "$GH_PG3_PORT")
if [ "$AUTH" = md5 ]; then
  # md5 for the bench owner on every server (its password stored as an md5
  # hash, an md5 line first in each pg_hba.conf), and for the tenant at
  # the proxy: a connection then costs the load generator no PBKDF2.
  for n in 0 1 2 3; do
    d="GH_PG${n}_DIR"
    sed -i "1i host all $BENCH_OWNER 127.0.0.1/32 md5" "${!d}/data/pg_hba.conf"
  done
  PGPASSWORD=$GH_PG_PASSWORD psql -X -q -h 127.0.0.1 -p "$P0" -U "$GH_PG_USER" -d postgres -v ON_ERROR_STOP=1 \
    -c "SET password_encryption = 'md5'" -c "ALTER ROLE $BENCH_OWNER PASSWORD '$BENCH_OWNER_PW'" \
    -c "SELECT pg_reload_conf()" >/dev/null
  for p in "${REPLICAS[@]}"; do
    PGPASSWORD=$GH_PG_PASSWORD psql -X -q -h 127.0.0.1 -p "$p" -U "$GH_PG_USER" -d postgres -c "SELECT pg_reload_conf()" >/dev/null
  done
  TENANT_AUTH="md5_hash = \"md5$(printf '%s%s' "$BENCH_TENANT_PW" "$BENCH_TENANT" | md5sum | cut -d' ' -f1)\""
else
  TENANT_AUTH="scram_verifier = \"$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password)\""
fi
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
testbed_report

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
$TENANT_AUTH

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
write_config "$FROM"
"$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
log "starting Gatehouse (read_only endpoint over $FROM replica(s), pool $POOL per replica, transaction pooling)"
gatehouse_run "$DIR"
wait_port 127.0.0.1 "$GH_PROXY_PORT"
wait_port 127.0.0.1 "$ADMIN_PORT"

url() { echo "host=127.0.0.1 port=$1 user=$2 password=$3 dbname=$BENCH_DB"; }
direct=()
for ((k = 0; k < 3; k++)); do
  if ((k < FROM)); then
    direct+=(--target "$(url "${REPLICAS[k]}" "$BENCH_OWNER" "$BENCH_OWNER_PW")")
  else
    direct+=(--target-from "${JOIN_AT[k]}=$(url "${REPLICAS[k]}" "$BENCH_OWNER" "$BENCH_OWNER_PW")")
  fi
done
through=(--target "$(url "$GH_PROXY_PORT" "$BENCH_TENANT" "$BENCH_TENANT_PW")"
  --watch-proxy "gatehouse=$GH_PROXY_PID" --metrics "127.0.0.1:$ADMIN_PORT" "${metric[@]}")
common=(--users "$USERS" --spawn-rate 0 --think-ms 0 --seconds "$SECS" --connect-each
  --sql 'SELECT abalance FROM pgbench_accounts WHERE aid = {ids:1:100000}'
  --clk-tck "$TCK" --max-failure-rate 1 "${watch[@]}" "${count[@]}")

joins=$(for k in "${!JOIN_AT[@]}"; do printf 'replica %d at %d s, ' $((k + 1)) "${JOIN_AT[k]}"; done)
log "read scaling: $USERS users, connect-query-disconnect, ${SECS} s per target, from $FROM replica(s): ${joins%, }; $ROUNDS round(s)"
runs=()
for ((round = 1; round <= ROUNDS; round++)); do
  for target in direct gatehouse; do
    log "round $round: $target"
    if [ "$target" = direct ]; then
      args=("${direct[@]}")
    else
      args=("${through[@]}")
      write_config "$FROM"
      reload >"$DIR/runs/reload-out-$round.json"
      sleep 2
      # The other replicas join by reload, each at its JOIN_AT.
      (
        at=0
        for k in "${!JOIN_AT[@]}"; do
          sleep $((JOIN_AT[k] - at))
          at=${JOIN_AT[k]}
          write_config $((k + 1))
          reload >"$DIR/runs/reload-in-$round-$((k + 1)).json" || echo "reload failed" >"$DIR/runs/reload-in-$round-$((k + 1)).json"
        done
      ) &
      joiner=$!
    fi
    "${TB_CLIENT[@]}" "$LOADGEN" load --name "$target" --round "$round" "${args[@]}" "${common[@]}" \
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
  --config "testbed=$(testbed_describe)" \
  --config "direct=bench_owner's password (${AUTH^^}), a random replica per connection: $FROM at the start, ${joins%, }" \
  --config "gatehouse=the bench tenant (${AUTH^^}) to a read_only endpoint, transaction pooling, pool $POOL per replica: $FROM at the start, the others added by reloads: ${joins%, }" \
  "${runs[@]}" | tee "$DIR/summary.txt"
# Per replica count: requests/s and each replica's CPU (the seconds after
# a join settles: 2 s), the ratio of the most replicas to the fewest, and
# with three how evenly their CPU was shared (each within 15 % of the mean).
bounds=$(for k in "${!JOIN_AT[@]}"; do echo "${JOIN_AT[k]}"; done | jq -s -c .)
for f in "${runs[@]}"; do
  jq -r --argjson from "$FROM" --argjson joins "$bounds" --argjson secs "$SECS" '
    def mean: map(select(. != null)) as $v | if ($v | length) > 0 then ($v | add / length) else null end;
    def r2: . * 100 | round / 100;
    def cpu(n): [.processes[] | select(.name == n) | .cpu_cores] | add;
    ([0] + $joins) as $starts | ($joins + [$secs]) as $ends
    | . as $run
    | [range(0; $starts | length) | . as $i
        | ($run.seconds | map(select(.second > $starts[$i] + 2 and .second <= $ends[$i]))) as $w
        | { replicas: ($from + $i),
            rps: ($w | map(.requests) | mean // 0),
            cpu: [range(1; 4) | . as $n | $w | map(cpu("replica\($n)")) | mean // 0] }] as $phases
    | ($phases | first) as $lo | ($phases | last) as $hi
    | ($hi.cpu | add / 3) as $m
    | "\($run.target) round \($run.round): "
      + ($phases | map("\(.replicas) replica(s) \(.rps | floor) requests/s, replica CPU " + (.cpu | map(r2 | tostring) | join("/"))) | join("; "))
      + "; \($hi.replicas) over \($lo.replicas): \(if $lo.rps > 0 then ($hi.rps / $lo.rps | r2) else "-" end)x"
      + "; with three, each replica within \(if $m > 0 then ($hi.cpu | map(((. - $m) / $m * 100) | fabs) | max | round) else "-" end) % of their mean CPU"
  ' "$f"
done | tee -a "$DIR/summary.txt"
if testbed_on; then
  # The bound: with every replica at the same budget, N replicas serve at
  # most N times what one does, as long as the replicas are the limit (a
  # proxy or load generator host that its quota stopped often was one).
  echo "bound on this testbed: each replica ${TB_SERVER_CPU:-unlimited} cores, so three serve at most 3x one's requests/s while the replicas are the limit; the hosts' throttled periods below say which hosts were" | tee -a "$DIR/summary.txt"
fi
testbed_report | tee -a "$DIR/summary.txt"
log "report: $DIR/report.html"
