#!/usr/bin/env bash
# Session-mode throughput: pgbench -S directly, through Gatehouse and
# through PgBouncer (same mode, same pool size), at several client counts,
# targets alternated (A B C A B C) over several rounds. Prints TPS, the
# proxies' own CPU per transaction (from /proc) and the ratios.
#
#   bench/pg-session.sh                      # 1, 10, 50 clients, 10 s runs, 2 rounds
#   BENCH_CLIENTS="1 10" BENCH_SECONDS=5 BENCH_ROUNDS=3 bench/pg-session.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-2}
read -r -a CLIENTS <<<"${BENCH_CLIENTS:-1 10 50}"
POOL=${BENCH_POOL:-50}
DIR="$PWD/.bench/pg-session"
rm -rf "$DIR"
mkdir -p "$DIR"

cleanup() {
  [ -n "${GH_PROXY_PID:-}" ] && kill "$GH_PROXY_PID" 2>/dev/null
  [ -n "${PGB_PID:-}" ] && kill "$PGB_PID" 2>/dev/null
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "starting PostgreSQL 15, Gatehouse and PgBouncer (pool $POOL, session mode)"
cluster_up "$DIR/cluster" 0 300
start_gatehouse "$DIR" "$POOL" session
start_pgbouncer "$DIR" "$POOL" session

results="$DIR/results.txt"
: >"$results"
for c in "${CLIENTS[@]}"; do
  for ((r = 1; r <= ROUNDS; r++)); do
    for target in direct gatehouse pgbouncer; do
      case $target in
        direct) port=$GH_PG_PRIMARY_PORT user=$BENCH_OWNER pw=$BENCH_OWNER_PW pid= ;;
        gatehouse) port=$GH_PROXY_PORT user=$BENCH_TENANT pw=$BENCH_TENANT_PW pid=$GH_PROXY_PID ;;
        pgbouncer) port=$PGB_PORT user=$BENCH_OWNER pw=$BENCH_OWNER_PW pid=$PGB_PID ;;
      esac
      cpu0=0
      [ -n "$pid" ] && cpu0=$(cpu_seconds "$pid")
      read -r tps tx < <(pgbench_run "$port" "$user" "$pw" "$c" "$SECS")
      cpu1=0
      [ -n "$pid" ] && cpu1=$(cpu_seconds "$pid")
      us=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$tx" 'BEGIN { if (t > 0) printf "%.1f", (b - a) * 1e6 / t; else print 0 }')
      echo "$c $target $r $tps $tx $us" >>"$results"
      log "clients=$c round=$r $target: $tps tps, proxy CPU ${us} µs/tx"
    done
  done
done

pick() { awk -v c="$1" -v t="$2" -v col="$3" '$1 == c && $2 == t { print $col }' "$results" | mean; }
echo
echo "pgbench -S, session mode, pool $POOL, ${SECS}s x $ROUNDS rounds per cell (mean TPS; proxy CPU µs per transaction)"
printf '%8s %12s %12s %12s %9s %9s %10s %10s\n' clients direct gatehouse pgbouncer GH/PgB GH/direct "GH µs/tx" "PgB µs/tx"
for c in "${CLIENTS[@]}"; do
  d=$(pick "$c" direct 4) g=$(pick "$c" gatehouse 4) b=$(pick "$c" pgbouncer 4)
  gu=$(pick "$c" gatehouse 6) bu=$(pick "$c" pgbouncer 6)
  printf '%8s %12s %12s %12s %9s %9s %10s %10s\n' "$c" "$d" "$g" "$b" "$(ratio "$g" "$b")" "$(ratio "$g" "$d")" "$gu" "$bu"
done
echo
echo "raw runs: $results"
