#!/usr/bin/env bash
# Where a pooled transaction's CPU goes, Gatehouse beside PgBouncer: one
# PostgreSQL 15 primary (test kit), a Gatehouse (release build, transaction
# mode, pool 20, every optional feature off) and a PgBouncer (Debian, the
# same pool and mode) in front of it, pgbench -S through each. Per client
# count and proxy:
#   * a flat profile (perf record -F PERF_FREQ on the proxy's process only,
#     self time by shared object and by symbol): how much of the proxy's CPU
#     is the kernel (loopback TCP, epoll, the scheduler) and how much its
#     own code, and which functions;
#   * its system calls per transaction (strace -c -f on a run of its own:
#     strace slows the proxy, so only the counts are kept, not the rate).
# Reported: the proxies' TPS and CPU seconds per 1,000 transactions on the
# unprofiled runs, the kernel's share and the top symbols of each profile,
# and the system calls per transaction by name. Then the same for the MySQL
# engine: sysbench oltp_point_select through Gatehouse in front of a
# MariaDB primary (there is no PgBouncer for MySQL: compare with earlier
# profiles), per query. Raw data under .bench/profile/ (perf.data files,
# `perf report` texts, strace summaries).
#
#   bench/profile.sh
#   BENCH_CLIENTS="10" BENCH_SECONDS=5 bench/profile.sh
#
# Knobs: BENCH_ENGINES ("postgres mysql"), BENCH_CLIENTS ("10 100"),
# BENCH_THREADS (sysbench's, "8 64"), BENCH_SECONDS (10), BENCH_POOL (20),
# PERF_FREQ (sampling rate, 1999 Hz), PROFILE_TOP (symbols listed, 25).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
command -v strace >/dev/null || { echo "strace is not installed" >&2; exit 2; }

read -r -a ENGINES <<<"${BENCH_ENGINES:-postgres mysql}"
read -r -a CLIENTS <<<"${BENCH_CLIENTS:-10 100}"
read -r -a THREADS <<<"${BENCH_THREADS:-8 64}"
has_engine() { [[ " ${ENGINES[*]} " == *" $1 "* ]]; }
SECS=${BENCH_SECONDS:-10}
POOL=${BENCH_POOL:-20}
FREQ=${PERF_FREQ:-1999}
TOP=${PROFILE_TOP:-25}
DIR="$PWD/.bench/profile"
rm -rf "$DIR"
mkdir -p "$DIR/gatehouse" "$DIR/runs"
started=$SECONDS
trap cleanup_proxies EXIT

# profile TARGET PID NAME RUN...: a flat perf profile of PID while RUN
# runs (the report texts dso-NAME.txt and symbols-NAME.txt), then RUN
# again under strace -c (strace-NAME.txt); prints RUN's last output line
# of that second run.
profile() {
  local target=$1 pid=$2 name=$3 perf_pid strace_pid last
  shift 3
  sleep 1
  perf record -q -F "$FREQ" -p "$pid" -o "$DIR/perf-$name.data" -- sleep "$SECS" >/dev/null 2>&1 &
  perf_pid=$!
  "$@" >/dev/null
  wait "$perf_pid" || true
  report_lines "$DIR/perf-$name.data" dso >"$DIR/dso-$name.txt"
  report_lines "$DIR/perf-$name.data" dso,symbol >"$DIR/symbols-$name.txt"
  sleep 1
  strace -c -f -q -p "$pid" -o "$DIR/strace-$name.txt" &
  strace_pid=$!
  sleep 0.5
  last=$("$@" | tail -1)
  kill -INT "$strace_pid" 2>/dev/null || true
  wait "$strace_pid" 2>/dev/null || true
  log "$name: profiled and traced"
  echo "$last"
}

# A report's lines of self time above 0.05 %, as "percent name".
report_lines() {
  perf report -i "$1" --no-children --stdio --percent-limit 0.05 --sort "$2" 2>/dev/null |
    awk '/^ *[0-9.]+%/ { p = $1; $1 = ""; sub(/^ +/, ""); sub(/( +-)+ *$/, ""); print p, $0 }'
}

results="$DIR/results.txt"
: >"$results"
: >"$DIR/strace-tx.txt"
if has_engine postgres; then
log "starting PostgreSQL 15 (pgbench scale 10), a Gatehouse and a PgBouncer (pool $POOL, transaction mode)"
cluster_up "$DIR/cluster" 0 300 10
start_gatehouse "$DIR/gatehouse" "$POOL" transaction
add_target gatehouse
start_pgbouncer "$DIR" "$POOL" transaction
PROXY_PIDS+=("$PGB_PID")
TARGET_PID[pgbouncer]=$PGB_PID
TARGET_PORT[pgbouncer]=$PGB_PORT

# target_login TARGET: sets user and pw (Gatehouse's tenant; PgBouncer
# knows the owner itself).
target_login() {
  case $1 in
    gatehouse) user=$BENCH_TENANT pw=$BENCH_TENANT_PW ;;
    pgbouncer) user=$BENCH_OWNER pw=$BENCH_OWNER_PW ;;
  esac
}

for target in gatehouse pgbouncer; do
  target_login "$target"
  pgbench_detail "$DIR/runs/warmup-$target.log" "${TARGET_PORT[$target]}" "$user" "$pw" 10 2 >/dev/null
done

for n in "${CLIENTS[@]}"; do
  for target in gatehouse pgbouncer; do
    target_login "$target"
    pid=${TARGET_PID[$target]} port=${TARGET_PORT[$target]}
    # Unprofiled: the rate and the CPU per transaction.
    sleep 1
    pgbench_measured "$n" "$target" 1 "$pid" "$DIR/runs/plain-$target-$n.log" "$port" "$user" "$pw" "$SECS"
    # Profiled, then traced: each a run of its own.
    read -r _ _ tx _ < <(profile "$target" "$pid" "$target-$n" \
      pgbench_detail "$DIR/runs/profiled-$target-$n.log" "$port" "$user" "$pw" "$n" "$SECS")
    echo "$n $target $tx" >>"$DIR/strace-tx.txt"
  done
done

cleanup_proxies
PROXY_PIDS=()
fi

if has_engine mysql; then
  TABLES=4
  SB_COMMON=(--mysql-host=127.0.0.1 --mysql-db="$BENCH_DB" --mysql-ssl=off --tables="$TABLES"
    --table-size=10000 --db-ps-mode=auto --report-interval=0)
  log "starting MariaDB (4 x 10,000 rows) and a Gatehouse (pool $POOL, transaction mode)"
  mysql_cluster_up "$DIR/cluster" 400
  mkdir -p "$DIR/gatehouse-mysql"
  start_gatehouse "$DIR/gatehouse-mysql" "$POOL" transaction mysql
  PROXY_PIDS+=("$GH_PROXY_PID")
  sb=(sysbench_detail "$DIR/runs/sb.log" oltp_point_select "${SB_COMMON[@]}" --mysql-port="$GH_PROXY_PORT"
    --mysql-user="$BENCH_TENANT" --mysql-password="$BENCH_TENANT_PW" --time="$SECS")
  "${sb[@]}" --threads=8 >/dev/null
  for t in "${THREADS[@]}"; do
    sleep 1
    cpu0=$(cpu_seconds "$GH_PROXY_PID")
    read -r status _ _ qps q _ < <("${sb[@]}" --threads="$t")
    cpu1=$(cpu_seconds "$GH_PROXY_PID")
    echo "my $t gatehouse 1 $status $qps $q $(awk -v a="$cpu0" -v b="$cpu1" -v q="$q" 'BEGIN { printf "%.4f", (q > 0 ? (b - a) * 1000 / q : 0) }')" >>"$DIR/mysql-results.txt"
    read -r _ _ _ _ q _ < <(profile gatehouse "$GH_PROXY_PID" "mysql-gatehouse-$t" "${sb[@]}" --threads="$t")
    echo "my$t gatehouse $q" >>"$DIR/strace-tx.txt"
  done
fi

# syscalls_per_tx FILE TX: "name calls_per_tx" for each call of an strace
# -c summary, and "total N".
syscalls_per_tx() {
  awk -v tx="$2" '
    /^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+/ && $NF != "total" { calls = $4; name = $NF; if (tx > 0) printf "%s %.2f\n", name, calls / tx }
    $NF == "total" { if (tx > 0) printf "total %.2f\n", $4 / tx }' "$1"
}

report() {
  echo
  if has_engine postgres; then
  echo "Where a pooled transaction's CPU goes: pgbench -S through Gatehouse ($GATEHOUSE) and PgBouncer"
  echo "($(pgbouncer --version 2>/dev/null | head -1)), transaction mode, pool $POOL, one PostgreSQL 15 primary; $(nproc) cores; ${SECS}s runs"
  echo
  printf '%7s | %-9s | %9s | %12s | %14s | %s\n' clients proxy TPS "CPU s/1000tx" "kernel share" "syscalls/tx"
  for n in "${CLIENTS[@]}"; do
    for target in gatehouse pgbouncer; do
      local tps cpuk kernel tx total
      tps=$(awk -v n="$n" -v t="$target" '$2 == n && $3 == t { printf "%.0f", $6 }' "$results")
      cpuk=$(awk -v n="$n" -v t="$target" '$2 == n && $3 == t { print $10 }' "$results")
      kernel=$(awk '$2 ~ /kernel/ { s += $1 } END { printf "%.1f %%", s }' "$DIR/dso-$target-$n.txt")
      tx=$(awk -v n="$n" -v t="$target" '$1 == n && $2 == t { print $3 }' "$DIR/strace-tx.txt")
      total=$(syscalls_per_tx "$DIR/strace-$target-$n.txt" "$tx" | awk '$1 == "total" { print $2 }')
      printf '%7s | %-9s | %9s | %12s | %14s | %s\n' "$n" "$target" "$tps" "$cpuk" "$kernel" "${total:--}"
    done
  done
  for n in "${CLIENTS[@]}"; do
    for target in gatehouse pgbouncer; do
      echo
      echo "== $target, $n clients: self time by shared object"
      head -8 "$DIR/dso-$target-$n.txt"
      echo "== $target, $n clients: the top $TOP symbols (self time, % of the proxy's samples)"
      head -"$TOP" "$DIR/symbols-$target-$n.txt"
      local tx
      tx=$(awk -v n="$n" -v t="$target" '$1 == n && $2 == t { print $3 }' "$DIR/strace-tx.txt")
      echo "== $target, $n clients: system calls per transaction (strace -c over $tx transactions)"
      syscalls_per_tx "$DIR/strace-$target-$n.txt" "$tx" | sort -k2 -n -r | head -12 | awk '{ printf "  %-20s %s\n", $1, $2 }'
    done
  done
  fi
  if has_engine mysql; then
    echo
    echo "MySQL engine: sysbench oltp_point_select through Gatehouse in front of one MariaDB primary, pool $POOL, transaction mode"
    printf '%7s | %9s | %13s | %14s | %s\n' threads QPS "CPU s/1000 q" "kernel share" "syscalls/query"
    for t in "${THREADS[@]}"; do
      local qps cpuk kernel q total
      qps=$(awk -v t="$t" '$2 == t { printf "%.0f", $6 }' "$DIR/mysql-results.txt")
      cpuk=$(awk -v t="$t" '$2 == t { print $8 }' "$DIR/mysql-results.txt")
      kernel=$(awk '$2 ~ /kernel/ { s += $1 } END { printf "%.1f %%", s }' "$DIR/dso-mysql-gatehouse-$t.txt")
      q=$(awk -v t="my$t" '$1 == t { print $3 }' "$DIR/strace-tx.txt")
      total=$(syscalls_per_tx "$DIR/strace-mysql-gatehouse-$t.txt" "$q" | awk '$1 == "total" { print $2 }')
      printf '%7s | %9s | %13s | %14s | %s\n' "$t" "$qps" "$cpuk" "$kernel" "${total:--}"
    done
    for t in "${THREADS[@]}"; do
      local q
      q=$(awk -v t="my$t" '$1 == t { print $3 }' "$DIR/strace-tx.txt")
      echo
      echo "== gatehouse (MySQL), $t threads: self time by shared object"
      head -8 "$DIR/dso-mysql-gatehouse-$t.txt"
      echo "== gatehouse (MySQL), $t threads: the top $TOP symbols"
      head -"$TOP" "$DIR/symbols-mysql-gatehouse-$t.txt"
      echo "== gatehouse (MySQL), $t threads: system calls per query (strace -c over $q queries)"
      syscalls_per_tx "$DIR/strace-mysql-gatehouse-$t.txt" "$q" | sort -k2 -n -r | head -12 | awk '{ printf "  %-20s %s\n", $1, $2 }'
    done
  fi
  echo
  echo "total time $((SECONDS - started)) s; raw data in $DIR (perf.data: perf report -i FILE)"
}
report | tee "$DIR/report.txt"
