#!/usr/bin/env bash
# Connection cost on PostgreSQL (DESIGN.md, reference experiment 3): what
# one iteration costs a single client, directly and through Gatehouse,
# alternating, on the same throwaway PostgreSQL 15 primary (test kit).
# Each run is `gatehouse-loadgen load` with one user, no think time, for
# CONNECT_SECONDS:
#   connect: connect, SELECT 1, close per iteration (--connect-each);
#   query:   SELECT 1 per iteration on one open connection;
# each in two placements:
#   near: direct = client -> PostgreSQL;
#         gatehouse = client -> Gatehouse -> PostgreSQL;
#   far:  the database CONNECT_DELAY_MS (one way) away, through a
#         `gatehouse-loadgen relay` that delays every chunk:
#         direct = client -> relay -> PostgreSQL;
#         gatehouse = client -> Gatehouse -> relay -> PostgreSQL (a second
#         Gatehouse whose backend is the relay; its health probes go
#         through it too).
# Far is the managed-proxy story: a client near the proxy pays one round
# trip to the far server per query, instead of the server's whole login
# (startup and SCRAM, three round trips) plus the query on every connect,
# since the proxy's pooled server connections are already logged in.
# (The relay does not model the TCP handshake, so a far direct connect
# is charged one round trip less than a real network would charge it.)
#
# Both Gatehouses: transaction pooling, pool 20, the bench tenant (SCRAM
# verifier), one worker thread (GH_WORKER_THREADS). Sampled once a second:
# PostgreSQL's postmaster tree (CPU, RSS) and client connections, and for
# the Gatehouse runs the proxy's CPU and RSS and its own /metrics.
# Reported: per pattern and placement an HTML page (.bench/connect-cost/
# connect-near.html, ...; direct the baseline) with its JSON summary, and
# a final table of per-iteration mean and p50, direct against Gatehouse.
#
#   bench/connect-cost.sh                                  # 10 s per run, 2 rounds, 2 ms away (~4 min)
#   CONNECT_SECONDS=3 CONNECT_ROUNDS=1 bench/connect-cost.sh   # a quick look (~1.5 min)
#   CONNECT_DELAY_MS=10 bench/connect-cost.sh
#   bench/connect-cost.sh --server-cpu 0.5 --proxy-cpu 0.5 --client-cpu 0.5   # the testbed's hosts (bench/testbed.sh;
#                                                          # the distance stays CONNECT_DELAY_MS's relay)
# Knobs: CONNECT_SECONDS (10), CONNECT_ROUNDS (2; direct and gatehouse
# alternate within each), CONNECT_DELAY_MS (2, one way: a round trip costs
# twice), CONNECT_POOL (20), CONNECT_DIR (.bench/connect-cost),
# GH_WORKER_THREADS (the proxies', 1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
testbed_options "$@"
build_release

SECS=${CONNECT_SECONDS:-10}
ROUNDS=${CONNECT_ROUNDS:-2}
DELAY=${CONNECT_DELAY_MS:-2}
POOL=${CONNECT_POOL:-20}
DIR=${CONNECT_DIR:-$PWD/.bench/connect-cost}
PATTERNS=(connect query)
PLACEMENTS=(near far)
rm -rf "$DIR"
mkdir -p "$DIR/runs" "$DIR/near" "$DIR/far"
TCK=$(getconf CLK_TCK)

RELAY_PID='' NEAR_PID='' FAR_PID=''
cleanup() {
  local pid
  for pid in "$NEAR_PID" "$FAR_PID" "$RELAY_PID"; do
    if [ -n "$pid" ]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "starting PostgreSQL 15 (a primary)"
cluster_up "$DIR/cluster" 0 100 1
pg_dir_var="GH_${GH_PG_PRIMARY^^}_DIR"
PG_PID=$(head -1 "${!pg_dir_var}/data/postmaster.pid")
PG_PORT=$GH_PG_PRIMARY_PORT

log "starting the relay: PostgreSQL ${DELAY} ms away (one way)"
"$LOADGEN" relay --listen 127.0.0.1:0 --to "127.0.0.1:$PG_PORT" --delay-ms "$DELAY" \
  >"$DIR/relay.addr" 2>"$DIR/relay.log" &
RELAY_PID=$!
for ((i = 0; i < 100; i++)); do
  [ -s "$DIR/relay.addr" ] && break
  sleep 0.1
done
RELAY_PORT=$(sed -n '1s/^.*://p' "$DIR/relay.addr")
[ -n "$RELAY_PORT" ] || {
  echo "the relay printed no address:" >&2
  cat "$DIR/relay.log" >&2
  exit 1
}

# start_proxy NAME BACKEND_PORT: a Gatehouse (start_gatehouse) whose
# backend is BACKEND_PORT, with an admin API for its metrics; sets
# PROXY_PID, PROXY_PORT and ADMIN_PORT.
start_proxy() {
  local name=$1 backend=$2 pg_port=$GH_PG_PRIMARY_PORT
  ADMIN_PORT=$(free_port)
  GH_PG_PRIMARY_PORT=$backend
  GH_EXTRA_TOML="
[admin]
listen = \"127.0.0.1:$ADMIN_PORT\"
" start_gatehouse "$DIR/$name" "$POOL" transaction
  GH_PG_PRIMARY_PORT=$pg_port
  wait_port 127.0.0.1 "$ADMIN_PORT"
  PROXY_PID=$GH_PROXY_PID PROXY_PORT=$GH_PROXY_PORT
}
log "starting Gatehouse near (backend: PostgreSQL) and far (backend: the relay); transaction pooling, pool $POOL"
start_proxy near "$PG_PORT"
NEAR_PID=$PROXY_PID NEAR_PORT=$PROXY_PORT NEAR_ADMIN=$ADMIN_PORT
start_proxy far "$RELAY_PORT"
FAR_PID=$PROXY_PID FAR_PORT=$PROXY_PORT FAR_ADMIN=$ADMIN_PORT

# target_args PLACEMENT TARGET: sets args, the target's connection string
# and what is watched besides PostgreSQL.
target_args() {
  local port user pw pid admin
  case "$1 $2" in
    "near direct") port=$PG_PORT ;;
    "far direct") port=$RELAY_PORT ;;
    "near gatehouse") port=$NEAR_PORT pid=$NEAR_PID admin=$NEAR_ADMIN ;;
    "far gatehouse") port=$FAR_PORT pid=$FAR_PID admin=$FAR_ADMIN ;;
  esac
  if [ "$2" = direct ]; then
    user=$BENCH_OWNER pw=$BENCH_OWNER_PW
  else
    user=$BENCH_TENANT pw=$BENCH_TENANT_PW
  fi
  args=(--target "host=127.0.0.1 port=$port user=$user password=$pw dbname=$BENCH_DB")
  if [ "$2" = gatehouse ]; then
    args+=(--watch-proxy "gatehouse=$pid" --metrics "127.0.0.1:$admin")
  fi
}
common=(--users 1 --spawn-rate 0 --think-ms 0 --sql "SELECT 1" --threads 1 --clk-tck "$TCK"
  --max-failure-rate 1 --quiet --watch "postgres=$PG_PID"
  --count-connections "postgres=host=127.0.0.1 port=$PG_PORT user=$GH_PG_USER password=$GH_PG_PASSWORD dbname=postgres")

log "warm-up: 1 s of connect-query-close per placement and target"
for placement in "${PLACEMENTS[@]}"; do
  for target in direct gatehouse; do
    target_args "$placement" "$target"
    "${TB_CLIENT[@]}" "$LOADGEN" load --name warmup "${args[@]}" --users 1 --spawn-rate 0 --think-ms 0 --seconds 1 \
      --connect-each --threads 1 --quiet --max-failure-rate 1 >"$DIR/runs/warmup-$placement-$target.txt"
  done
done

log "runs: ${PATTERNS[*]} x ${PLACEMENTS[*]}, ${SECS} s each, $ROUNDS round(s), direct and gatehouse alternating"
for placement in "${PLACEMENTS[@]}"; do
  for pattern in "${PATTERNS[@]}"; do
    extra=()
    [ "$pattern" = connect ] && extra=(--connect-each)
    for ((round = 1; round <= ROUNDS; round++)); do
      for target in direct gatehouse; do
        target_args "$placement" "$target"
        tag="$pattern-$placement-$target-$round"
        "${TB_CLIENT[@]}" "$LOADGEN" load --name "$target" --round "$round" --seconds "$SECS" "${args[@]}" "${extra[@]}" \
          "${common[@]}" --json "$DIR/runs/$tag.json" >"$DIR/runs/$tag.txt"
        log "$tag: $(jq -r '.summary | "\(.requests) iterations, mean \(.mean_ms // 0 | . * 1000 | round / 1000) ms, p50 \(.p50_ms // 0 | . * 1000 | round / 1000) ms, failures \(.failures)"' "$DIR/runs/$tag.json")"
        sleep 1
      done
    done
  done
done

MACHINE="$(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
PG_VERSION=$("$PG_BIN/postgres" --version | awk '{ print $3 }')
for placement in "${PLACEMENTS[@]}"; do
  if [ "$placement" = near ]; then
    where="client, Gatehouse and PostgreSQL on one machine (loopback)"
  else
    where="PostgreSQL ${DELAY} ms away one way (gatehouse-loadgen relay; round trip $((2 * DELAY)) ms) from the client (direct) or from Gatehouse, which is near the client"
  fi
  for pattern in "${PATTERNS[@]}"; do
    if [ "$pattern" = connect ]; then
      what="connect (SCRAM), SELECT 1, close per iteration"
    else
      what="SELECT 1 per iteration on one open connection"
    fi
    runs=()
    for ((round = 1; round <= ROUNDS; round++)); do
      runs+=("$DIR/runs/$pattern-$placement-direct-$round.json" "$DIR/runs/$pattern-$placement-gatehouse-$round.json")
    done
    "$LOADGEN" report --title "Connection cost: $pattern, $placement (PostgreSQL)" \
      --out "$DIR/$pattern-$placement.html" --json-out "$DIR/$pattern-$placement.json" \
      --config "machine=$MACHINE" --config "server=PostgreSQL $PG_VERSION, a primary (test kit)" \
      --config "placement=$placement: $where" \
      --config "iteration=$what" \
      --config "direct=bench_owner's password (SCRAM) straight to PostgreSQL" \
      --config "gatehouse=the bench tenant (SCRAM verifier in Gatehouse), transaction pooling, pool $POOL, ${GH_WORKER_THREADS:-1} worker thread(s)" \
      --config "load=1 user, no think time, ${SECS} s per run, $ROUNDS round(s), direct and gatehouse alternating" \
      "${runs[@]}" >"$DIR/$pattern-$placement.txt"
  done
done

# The final table, from the reports' summaries (rounds merged).
{
  printf '%-8s %-5s %12s %12s %14s %14s %7s %7s %11s %9s\n' pattern place "direct mean" "direct p50" \
    "gatehouse mean" "gatehouse p50" "mean x" "p50 x" "added mean" failures
  for pattern in "${PATTERNS[@]}"; do
    for placement in "${PLACEMENTS[@]}"; do
      jq -r --arg p "$pattern" --arg l "$placement" '
        (.targets | map({(.target): .values}) | add) as $v
        | (.targets | map({(.target): .ratios}) | add) as $r
        | [$p, $l, $v.direct.mean_ms, $v.direct.p50_ms, $v.gatehouse.mean_ms, $v.gatehouse.p50_ms,
           $r.gatehouse.mean_ms, $r.gatehouse.p50_ms, $v.direct.failures, $v.gatehouse.failures]
        | map(. // "-") | @tsv' "$DIR/$pattern-$placement.json"
    done
  done | awk -F'\t' '
    function ms(v) { return v == "-" ? "-" : sprintf("%.3f ms", v) }
    function x(v) { return v == "-" ? "-" : sprintf("%.2fx", v) }
    {
      added = ($3 == "-" || $5 == "-") ? "-" : sprintf("%+.3f ms", $5 - $3)
      printf "%-8s %-5s %12s %12s %14s %14s %7s %7s %11s %9s\n", $1, $2, ms($3), ms($4), ms($5), ms($6), x($7), x($8), added, $9 "/" $10
    }'
} | tee "$DIR/summary.txt"
echo
echo "per iteration, ${SECS} s x $ROUNDS round(s) per target; far = PostgreSQL ${DELAY} ms away one way; failures direct/gatehouse"
echo "reports: $DIR/{connect,query}-{near,far}.html"
