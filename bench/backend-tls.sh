#!/usr/bin/env bash
# What TLS to the database costs: one PostgreSQL 15 primary (test kit,
# started with TLS) behind two Gatehouse processes, same pool and mode
# (transaction), one with `backend_tls = "require"` and one with
# `backend_tls = "disable"`, and, for reference, two PgBouncers (Debian)
# with `server_tls_sslmode = require` and `disable`. pgbench -S at several
# client counts, the targets alternated over several rounds, a second
# apart. Per run: TPS, average latency and each proxy's CPU seconds per
# 1,000 transactions (/proc/PID/stat; every target is its own process and
# the runs never overlap). Reported: the means and the require/disable
# ratios of each proxy. The client side is plain text throughout, so the
# difference is the backend side's encryption alone (the pooled backend
# connections are opened once, so the handshakes are not in the runs).
#
#   bench/backend-tls.sh       # 10 and 100 clients, 10 s runs, 3 rounds
#   BENCH_SECONDS=5 BENCH_ROUNDS=1 bench/backend-tls.sh
#
# Knobs: BENCH_CLIENTS ("10 100"), BENCH_SECONDS (10), BENCH_ROUNDS (3),
# BENCH_POOL (20), BENCH_SCALE (10), BENCH_WARMUP (2 s per target),
# GH_WORKER_THREADS (the Gatehouses', 1). Raw data under .bench/backend-tls/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
read -r -a CLIENTS <<<"${BENCH_CLIENTS:-10 100}"
POOL=${BENCH_POOL:-20}
SCALE=${BENCH_SCALE:-10}
WARMUP=${BENCH_WARMUP:-2}
MAX_CONNECTIONS=300
TARGETS=(gh-require gh-disable pgb-require pgb-disable)
DIR="$PWD/.bench/backend-tls"
rm -rf "$DIR"
mkdir -p "$DIR/runs"
started=$SECONDS

declare -A PID PORT
cleanup() {
  local t
  for t in "${!PID[@]}"; do kill "${PID[$t]}" 2>/dev/null || true; done
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "starting PostgreSQL 15 with TLS (max_connections $MAX_CONNECTIONS, pgbench scale $SCALE), two Gatehouses and two PgBouncers (pool $POOL, transaction mode)"
GH_TESTKIT_UP_ARGS=--tls cluster_up "$DIR/cluster" 0 "$MAX_CONNECTIONS" "$SCALE"
for mode in require disable; do
  mkdir -p "$DIR/gh-$mode"
  GH_CLUSTER_TOML="backend_tls = \"$mode\"" start_gatehouse "$DIR/gh-$mode" "$POOL" transaction
  PID[gh-$mode]=$GH_PROXY_PID PORT[gh-$mode]=$GH_PROXY_PORT
  mkdir -p "$DIR/pgb-$mode"
  GH_PGBOUNCER_INI="server_tls_sslmode = $mode" start_pgbouncer "$DIR/pgb-$mode" "$POOL" transaction
  PID[pgb-$mode]=$PGB_PID PORT[pgb-$mode]=$PGB_PORT
done

# who TARGET: the user and password pgbench logs in with (Gatehouse's
# tenant; PgBouncer's users are the server's).
who() {
  case $1 in
    gh-*) echo "$BENCH_TENANT $BENCH_TENANT_PW" ;;
    *) echo "$BENCH_OWNER $BENCH_OWNER_PW" ;;
  esac
}

# The backend connections really are (or are not) under TLS: the server's
# view of the bench owner's connections after a warm-up.
server_ssl_count() {
  PGPASSWORD=$GH_PG_PASSWORD psql -X -q -At -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$GH_PG_USER" -d postgres -c \
    "SELECT count(*) FILTER (WHERE s.ssl) || ' of ' || count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
     WHERE a.usename = '$BENCH_OWNER'"
}

# run_one N TARGET ROUND: one pgbench run, appended to $results as "pg N
# TARGET ROUND status tps transactions latency_ms proxy_cpu_s
# proxy_cpu_s_per_1k_tx".
run_one() {
  local n=$1 target=$2 r=$3 user pw
  read -r user pw < <(who "$target")
  pgbench_measured "$n" "$target" "$r" "${PID[$target]}" "$DIR/runs/n$n-$target-r$r.log" \
    "${PORT[$target]}" "$user" "$pw" "$SECS"
}

results="$DIR/results.txt"
: >"$results"
for target in "${TARGETS[@]}"; do
  read -r user pw < <(who "$target")
  read -r status _ < <(pgbench_detail "$DIR/runs/warmup-$target.log" "${PORT[$target]}" "$user" "$pw" 8 "$WARMUP")
  [ "$status" = ok ] || { log "warm-up of $target failed: $(grep -m1 -i 'error\|fatal\|abort' "$DIR/runs/warmup-$target.log" || true)"; exit 1; }
done
ssl_seen=$(server_ssl_count)
for n in "${CLIENTS[@]}"; do
  for ((r = 1; r <= ROUNDS; r++)); do
    for target in "${TARGETS[@]}"; do
      sleep 1
      run_one "$n" "$target" "$r"
    done
  done
done

report() {
  echo
  echo "backend TLS: pgbench -S through proxies in front of one PostgreSQL 15 with TLS (scale $SCALE), pool $POOL, transaction mode,"
  echo "clients in plain text; Gatehouse ${GH_WORKER_THREADS:-1} worker thread(s); $(nproc) cores; ${SECS}s x $ROUNDS rounds per client count"
  echo "(targets alternated), means; * = some rounds failed (mean of the others)"
  echo "the server saw the bench owner's connections after the warm-ups: $ssl_seen under TLS (the two \"require\" proxies' pools)"
  echo
  printf '%7s %-9s | %9s %9s %6s | %7s %7s | %9s %9s %6s %s\n' clients proxy "TPS tls" "TPS plain" ratio "lat tls" "lat pl" \
    "CPU tls" "CPU plain" ratio "(CPU s per 1,000 tx; tls = require, plain = disable)"
  local n p ttls tpl ctls cpl
  for n in "${CLIENTS[@]}"; do
    for p in gh pgb; do
      ttls=$(mean_of pg "$n" "$p-require" 6 "%.0f") tpl=$(mean_of pg "$n" "$p-disable" 6 "%.0f")
      ctls=$(mean_of pg "$n" "$p-require" 10 "%.4f") cpl=$(mean_of pg "$n" "$p-disable" 10 "%.4f")
      printf '%7s %-9s | %9s %9s %6s | %7s %7s | %9s %9s %6s\n' "$n" "$([ $p = gh ] && echo Gatehouse || echo PgBouncer)" \
        "$ttls" "$tpl" "$(rat "$ttls" "$tpl")" "$(mean_of pg "$n" "$p-require" 8 "%.3f")" "$(mean_of pg "$n" "$p-disable" 8 "%.3f")" \
        "$ctls" "$cpl" "$(rat "$ctls" "$cpl")"
    done
  done
  echo
  echo "total time $((SECONDS - started)) s; raw runs: $results, pgbench output in $DIR/runs/, configs in $DIR/{gh,pgb}-*/"
}
report | tee "$DIR/report.txt"
