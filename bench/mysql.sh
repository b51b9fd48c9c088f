#!/usr/bin/env bash
# MySQL engine: sysbench oltp_point_select and oltp_read_only at several
# thread counts, and a connect-query-disconnect loop (bench/mysql-connect.lua,
# the serverless pattern: a new connection per SELECT 1), directly against a
# MariaDB primary and through Gatehouse (transaction pooling, one endpoint,
# pool of 20), targets alternated (A B A B) over several rounds. Per run:
# sysbench's queries/s and transactions/s (connections/s for the loop), its
# average latency, ignored errors, the ratios, and CPU seconds per 1,000
# queries of the proxy, MariaDB (both from /proc/PID/stat) and sysbench
# itself, with the machine's busy cores over the run (/proc/stat): on a small
# machine client, proxy and server share the cores, and a run that keeps
# them all busy measures CPU per query more than anything else. Clients
# authenticate with mysql_native_password both ways: Gatehouse checks the
# tenant's stored hash and logs into MariaDB with the secret's credentials.
#
#   bench/mysql.sh      # 8, 64, 256 threads, 50 connect clients, 10 s runs, 2 rounds
#   BENCH_SECONDS=5 BENCH_ROUNDS=1 BENCH_THREADS="8 64" bench/mysql.sh
#   BENCH_WORKLOADS="connect" BENCH_CONNECT_CLIENTS=100 bench/mysql.sh
#
# `insert` (sysbench oltp_insert: autocommit INSERTs into AUTO_INCREMENT
# tables) measures what moving LAST_INSERT_ID() costs: the id read back
# before a lease returns, and the session's id set on a connection last
# used by another client.
# Knobs: BENCH_WORKLOADS (point_select read_only connect; also insert), BENCH_THREADS,
# BENCH_CONNECT_CLIENTS (50), BENCH_SECONDS (10), BENCH_ROUNDS (2),
# BENCH_POOL (20), BENCH_TABLES / BENCH_TABLE_SIZE (4 x 10,000 rows),
# BENCH_PS_MODE (sysbench --db-ps-mode: auto = binary prepared statements,
# disable = text queries), GH_WORKER_THREADS (the proxy's, 1).
# Targets of the issue: oltp_read_only through Gatehouse >= 0.8x direct at 64
# and 256 threads; the connect loop >= 3x direct.
#
# Build against build (the MySQL half of bench/build-ab.sh): with
# GH_BASELINE_BIN set to another build of gatehouse (say, the commit before
# a change), a second Gatehouse runs it with the same configuration in
# front of the same MariaDB, a third target (direct base gatehouse, in that
# order within each round), and the report adds this/base ratios of
# throughput and of the proxy's CPU per query:
#   GH_BASELINE_BIN=/tmp/base/target/release/gatehouse BENCH_WORKLOADS=point_select bench/mysql.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-2}
read -r -a THREADS <<<"${BENCH_THREADS:-8 64 256}"
read -r -a WORKLOADS <<<"${BENCH_WORKLOADS:-point_select read_only connect}"
CONNECT_CLIENTS=${BENCH_CONNECT_CLIENTS:-50}
POOL=${BENCH_POOL:-20}
TABLES=${BENCH_TABLES:-4}
TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
PS_MODE=${BENCH_PS_MODE:-auto}
WARMUP=${BENCH_WARMUP:-2}
MAX_CONNECTIONS=400
TARGETS=(direct gatehouse)
BASE_BIN=${GH_BASELINE_BIN:-}
if [ -n "$BASE_BIN" ]; then
  [ -x "$BASE_BIN" ] || { echo "GH_BASELINE_BIN=$BASE_BIN is not an executable" >&2; exit 2; }
  TARGETS=(direct base gatehouse)
fi
DIR="$PWD/.bench/mysql"
rm -rf "$DIR"
mkdir -p "$DIR/runs"
started=$SECONDS

cleanup() {
  [ -n "${GH_PROXY_PID:-}" ] && kill "$GH_PROXY_PID" 2>/dev/null
  [ -n "${BASE_PID:-}" ] && kill "$BASE_PID" 2>/dev/null
  [ -n "${TESTKIT:-}" ] && "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

for w in "${WORKLOADS[@]}"; do
  case $w in
    point_select | read_only | insert | connect) ;;
    *) echo "unknown workload $w (point_select, read_only, insert, connect)" >&2; exit 2 ;;
  esac
done

SB_COMMON=(--mysql-host=127.0.0.1 --mysql-db="$BENCH_DB" --mysql-ssl=off --tables="$TABLES"
  --table-size="$TABLE_SIZE" --db-ps-mode="$PS_MODE" --report-interval=0)
log "starting MariaDB (max_connections $MAX_CONNECTIONS), loading $TABLES x $TABLE_SIZE rows, starting Gatehouse (pool $POOL, transaction mode)"
mysql_cluster_up "$DIR/cluster" "$MAX_CONNECTIONS"
if [ -n "$BASE_BIN" ]; then
  mkdir -p "$DIR/base"
  GATEHOUSE=$BASE_BIN start_gatehouse "$DIR/base" "$POOL" transaction mysql
  BASE_PID=$GH_PROXY_PID BASE_PORT=$GH_PROXY_PORT
  log "baseline Gatehouse ($BASE_BIN) on port $BASE_PORT"
fi
start_gatehouse "$DIR" "$POOL" transaction mysql
MARIADB_VERSION=$("$TESTKIT" sql --dir "$DIR/cluster" "$GH_MYSQL_PRIMARY" "SELECT VERSION()")
log "MariaDB $MARIADB_VERSION, $(sysbench --version)"

# target_of NAME: sets port, user and pw for sysbench, and pid (the proxy's,
# empty for direct).
target_of() {
  case $1 in
    direct) port=$GH_MYSQL_PRIMARY_PORT user=$BENCH_OWNER pw=$BENCH_OWNER_PW pid= ;;
    gatehouse) port=$GH_PROXY_PORT user=$BENCH_TENANT pw=$BENCH_TENANT_PW pid=$GH_PROXY_PID ;;
    base) port=$BASE_PORT user=$BENCH_TENANT pw=$BENCH_TENANT_PW pid=$BASE_PID ;;
  esac
}

# script_of WORKLOAD: sysbench's test for it.
script_of() {
  case $1 in
    point_select) echo oltp_point_select ;;
    read_only) echo oltp_read_only ;;
    insert) echo oltp_insert ;;
    connect) echo "$PWD/bench/mysql-connect.lua" ;;
  esac
}

# per_k A B N: (B - A) * 1000 / N with four decimals ("-" when N is zero).
per_k() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (n > 0) printf "%.4f", (b - a) * 1000 / n; else print "-" }'; }

# run_one WORKLOAD THREADS TARGET ROUND: one sysbench run, appended to
# $results as "workload threads target round status tps transactions qps
# queries latency_ms errors" and CPU seconds per 1,000 queries of the proxy
# ("-" direct), MariaDB and sysbench, then the machine's busy cores over the
# run and the part of them none of the three used (other processes, kernel).
run_one() {
  local w=$1 t=$2 target=$3 r=$4 port user pw pid
  target_of "$target"
  local f="$DIR/runs/$w-t$t-$target-r$r" cpu0=0 cpu1=0 my0 my1 m0 m1 s0 s1
  local status tps tx qps q lat err sbcpu
  [ -n "$pid" ] && cpu0=$(cpu_seconds "$pid")
  my0=$(cpu_seconds "$MY_PID") m0=$(machine_cpu_seconds) s0=$(date +%s.%N)
  read -r status tps tx qps q lat err sbcpu < <(sysbench_detail "$f.log" "$(script_of "$w")" "${SB_COMMON[@]}" \
    --mysql-port="$port" --mysql-user="$user" --mysql-password="$pw" --threads="$t" --time="$SECS")
  [ -n "$pid" ] && cpu1=$(cpu_seconds "$pid")
  my1=$(cpu_seconds "$MY_PID") m1=$(machine_cpu_seconds) s1=$(date +%s.%N)
  local cpuk=- mycpuk sbk busy other
  [ -n "$pid" ] && cpuk=$(per_k "$cpu0" "$cpu1" "$q")
  mycpuk=$(per_k "$my0" "$my1" "$q")
  sbk=$(per_k 0 "$sbcpu" "$q")
  read -r busy other < <(awk -v m0="$m0" -v m1="$m1" -v s0="$s0" -v s1="$s1" -v p0="$cpu0" -v p1="$cpu1" \
    -v d0="$my0" -v d1="$my1" -v c="$sbcpu" \
    'BEGIN { s = s1 - s0; printf "%.2f %.2f\n", (m1 - m0) / s, (m1 - m0 - (p1 - p0) - (d1 - d0) - c) / s }')
  echo "$w $t $target $r $status $tps $tx $qps $q $lat $err $cpuk $mycpuk $sbk $busy $other" >>"$results"
  if [ "$status" = ok ]; then
    log "$w threads=$t round=$r $target: $qps qps, $tps tps, ${lat} ms, $err ignored errors, CPU s/1000 queries: proxy $cpuk, MariaDB $mycpuk, sysbench $sbk; busy cores $busy (other $other)"
  else
    log "$w threads=$t round=$r $target: FAILED ($(grep -m1 -i 'error\|fatal' "$f.log" || tail -1 "$f.log"))"
  fi
}

results="$DIR/results.txt"
: >"$results"
cells=()
for w in "${WORKLOADS[@]}"; do
  case $w in
    connect) cells+=("connect $CONNECT_CLIENTS") ;;
    *) for t in "${THREADS[@]}"; do cells+=("$w $t"); done ;;
  esac
done

sysbench_warmup "$WARMUP"
alternate_cells

# target_note W T RATIO: the issue's target for the cell, met or not.
target_note() {
  local want=
  case "$1 $2" in
    "read_only 64" | "read_only 256") want=0.8 ;;
    "connect "*) want=3 ;;
  esac
  [ -n "$want" ] || return 0
  awk -v r="$3" -v want="$want" 'BEGIN {
    if (r !~ /^[0-9.]+$/) print "(>= " want "x: -)"; else if (r >= want) print "(>= " want "x: met)"; else print "(>= " want "x: MISSED)" }'
}

report() {
  echo
  echo "MySQL engine: MariaDB $MARIADB_VERSION, $(sysbench --version), $TABLES tables x $TABLE_SIZE rows, --db-ps-mode=$PS_MODE, $(nproc) cores"
  echo "Gatehouse: transaction pooling, pool $POOL, ${GH_WORKER_THREADS:-1} worker thread(s); ${SECS}s x $ROUNDS rounds per cell, means"
  echo "connect = $(basename "$(script_of connect)"): new connection, SELECT 1, disconnect per transaction (TPS = connections/s)"
  echo "* = some rounds failed (mean of the others); failed = all rounds failed"
  echo
  echo "Throughput, average latency (ms per transaction), sysbench's ignored errors (all rounds)"
  printf '%-12s %7s | %9s %9s | %8s %8s %6s | %7s %7s | %5s %5s\n' \
    workload threads "QPS dir" "QPS GH" "TPS dir" "TPS GH" "GH/dir" "lat dir" "lat GH" "err d" "err G"
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    local qd qg td tg ld lg ratio
    qd=$(mean_of "$w" "$t" direct 8 "%.0f") qg=$(mean_of "$w" "$t" gatehouse 8 "%.0f")
    td=$(mean_of "$w" "$t" direct 6 "%.0f") tg=$(mean_of "$w" "$t" gatehouse 6 "%.0f")
    ld=$(mean_of "$w" "$t" direct 10 "%.2f") lg=$(mean_of "$w" "$t" gatehouse 10 "%.2f")
    ratio=$(rat "$tg" "$td")
    printf '%-12s %7s | %9s %9s | %8s %8s %6s | %7s %7s | %5s %5s %s\n' \
      "$w" "$t" "$qd" "$qg" "$td" "$tg" "$ratio" "$ld" "$lg" \
      "$(sum_of "$w" "$t" direct 11)" "$(sum_of "$w" "$t" gatehouse 11)" "$(target_note "$w" "$t" "$ratio")"
  done
  echo
  echo "CPU seconds per 1,000 queries (proxy, MariaDB, sysbench), machine's busy cores during the runs and their part used by none of the three;"
  echo "ceiling: the GH/direct ratio the two runs' machine CPU per query allows when both saturate the cores"
  echo "((busy cores / QPS) direct over the same through Gatehouse)"
  printf '%-12s %7s | %7s | %7s %7s | %7s %7s | %5s %5s | %5s %5s | %7s\n' \
    workload threads "proxy" "DB dir" "DB GH" "sb dir" "sb GH" "busyd" "busyG" "othd" "othG" ceiling
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    local ceil
    ceil=$(awk -v bd="$(mean_of "$w" "$t" direct 15 "%.4f")" -v bg="$(mean_of "$w" "$t" gatehouse 15 "%.4f")" \
      -v qd="$(mean_of "$w" "$t" direct 8 "%.2f")" -v qg="$(mean_of "$w" "$t" gatehouse 8 "%.2f")" 'BEGIN {
        sub(/\*$/, "", bd); sub(/\*$/, "", bg); sub(/\*$/, "", qd); sub(/\*$/, "", qg)
        if (bd > 0 && bg > 0 && qd > 0 && qg > 0) printf "%.2f", (bd / qd) / (bg / qg); else print "-" }')
    printf '%-12s %7s | %7s | %7s %7s | %7s %7s | %5s %5s | %5s %5s | %7s\n' "$w" "$t" \
      "$(mean_of "$w" "$t" gatehouse 12 "%.4f")" \
      "$(mean_of "$w" "$t" direct 13 "%.4f")" "$(mean_of "$w" "$t" gatehouse 13 "%.4f")" \
      "$(mean_of "$w" "$t" direct 14 "%.4f")" "$(mean_of "$w" "$t" gatehouse 14 "%.4f")" \
      "$(mean_of "$w" "$t" direct 15 "%.2f")" "$(mean_of "$w" "$t" gatehouse 15 "%.2f")" \
      "$(mean_of "$w" "$t" direct 16 "%.2f")" "$(mean_of "$w" "$t" gatehouse 16 "%.2f")" "$ceil"
  done
  echo "(other: CPU charged to no process, e.g. loopback softirq work that a proxy hop doubles, plus any other process on the machine)"
  echo
  if [ -n "$BASE_BIN" ]; then
    echo "Build against build: base = $BASE_BIN"
    echo "                     this = $GATEHOUSE"
    printf '%-12s %7s | %9s %9s %6s | %8s %8s %6s\n' workload threads "QPS base" "QPS this" ratio "CPU base" "CPU this" ratio
    for cell in "${cells[@]}"; do
      read -r w t <<<"$cell"
      local qb qt cb ct
      qb=$(mean_of "$w" "$t" base 8 "%.0f") qt=$(mean_of "$w" "$t" gatehouse 8 "%.0f")
      cb=$(mean_of "$w" "$t" base 12 "%.4f") ct=$(mean_of "$w" "$t" gatehouse 12 "%.4f")
      printf '%-12s %7s | %9s %9s %6s | %8s %8s %6s\n' "$w" "$t" "$qb" "$qt" "$(rat "$qt" "$qb")" "$cb" "$ct" "$(rat "$ct" "$cb")"
    done
    echo "(CPU: the proxy's seconds per 1,000 queries; ratios this/base)"
    echo
  fi
  echo "total time $((SECONDS - started)) s; raw runs: $results, sysbench output in $DIR/runs/, proxy log $DIR/gatehouse.log"
}
report | tee "$DIR/report.txt"
