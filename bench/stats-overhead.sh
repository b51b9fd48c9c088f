#!/usr/bin/env bash
# What `/metrics`' latency histograms and per-tenant series cost on the hot
# path: two Gatehouse processes in front of the same PostgreSQL 15 primary
# (test kit), same pool and mode (transaction), one with `[stats]
# histograms = true, tenant_series = 20` (on: the defaults) and one with
# `histograms = false, tenant_series = 0` (off: only the counters every
# build keeps). pgbench -S (BENCH_PGBENCH_MODE: simple, extended or
# prepared) at several client counts, the targets alternated (on off on
# off) over several rounds, a second apart. Per run: TPS, average latency
# and the proxy's CPU seconds per 1,000 transactions (/proc/PID/stat; each
# target is its own process and the runs never overlap). Reported: the
# means and the on/off ratios, against the target of at most 5 % more CPU
# per transaction with them on (on/off <= 1.05), and the transactions the
# "on" proxy's /metrics counted against pgbench's.
#
#   bench/stats-overhead.sh     # 10 and 100 clients, 10 s runs, 3 rounds
#   BENCH_SECONDS=5 BENCH_ROUNDS=1 bench/stats-overhead.sh
#
# Knobs: BENCH_CLIENTS ("10 100"), BENCH_SECONDS (10), BENCH_ROUNDS (3),
# BENCH_POOL (20), BENCH_PGBENCH_MODE (simple), BENCH_SCALE (pgbench
# scale, 10), BENCH_WARMUP (seconds of unrecorded load per target first,
# 2), GH_WORKER_THREADS (the proxies', 1).
# Raw data under .bench/stats-overhead/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

pgbench_knobs
MAX_CONNECTIONS=300
TARGETS=(on off)
# CPU per transaction, on / off, at most.
WANT=1.05
DIR="$PWD/.bench/stats-overhead"
rm -rf "$DIR"
mkdir -p "$DIR/runs" "$DIR/on" "$DIR/off"
started=$SECONDS
trap cleanup_proxies EXIT

log "starting PostgreSQL 15 (max_connections $MAX_CONNECTIONS, pgbench scale $SCALE) and two Gatehouses (pool $POOL, transaction mode): [stats] on and off"
cluster_up "$DIR/cluster" 0 "$MAX_CONNECTIONS" "$SCALE"
ON_ADMIN=$(free_port)
GH_EXTRA_TOML="
[admin]
listen = \"127.0.0.1:$ON_ADMIN\"

[stats]
histograms = true
tenant_series = 20
" start_gatehouse "$DIR/on" "$POOL" transaction
add_target on
wait_port 127.0.0.1 "$ON_ADMIN"
GH_EXTRA_TOML="
[stats]
histograms = false
tenant_series = 0
" start_gatehouse "$DIR/off" "$POOL" transaction
add_target off

# metric NAME: the sum of a series of the "on" proxy's /metrics.
metric() {
  curl -s -m 5 "http://127.0.0.1:$ON_ADMIN/metrics" |
    awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%d\n", s }'
}

results="$DIR/results.txt"
: >"$results"
pgbench_warm_up "${TARGETS[@]}"
counted0=$(metric gatehouse_transactions_total)
pgbench_alternated "${TARGETS[@]}"
counted=$(($(metric gatehouse_transactions_total) - counted0))
timed=$(metric gatehouse_query_seconds_count)
ran=$(awk '$3 == "on" { s += $7 } END { printf "%d\n", s }' "$results")

# verdict RATIO: the CPU target, met or not.
verdict() {
  awk -v r="$1" -v want="$WANT" 'BEGIN {
    if (r !~ /^[0-9.]+$/) print "(<= " want ": -)"; else if (r <= want) print "(<= " want ": met)"; else print "(<= " want ": MISSED)" }'
}

report() {
  echo
  echo "[stats] overhead: pgbench -S -M $PGBENCH_MODE through two Gatehouses (${GH_WORKER_THREADS:-1} worker thread(s) each, pool $POOL,"
  echo "transaction mode) in front of one PostgreSQL 15 (scale $SCALE); on = histograms and 20 tenant series, off = neither; $(nproc) cores"
  echo "${SECS}s x $ROUNDS rounds per client count (on off on off ...), means; * = some rounds failed (mean of the others)"
  echo
  printf '%7s | %9s %9s %6s | %7s %7s | %9s %9s %6s %s\n' clients "TPS on" "TPS off" on/off "lat on" "lat off" "CPU on" "CPU off" on/off "(CPU s per 1,000 tx)"
  for n in "${CLIENTS[@]}"; do
    local ton toff con coff ratio
    ton=$(mean_of pg "$n" on 6 "%.0f") toff=$(mean_of pg "$n" off 6 "%.0f")
    con=$(mean_of pg "$n" on 10 "%.4f") coff=$(mean_of pg "$n" off 10 "%.4f")
    ratio=$(rat "$con" "$coff")
    printf '%7s | %9s %9s %6s | %7s %7s | %9s %9s %6s %s\n' "$n" "$ton" "$toff" "$(rat "$ton" "$toff")" \
      "$(mean_of pg "$n" on 8 "%.3f")" "$(mean_of pg "$n" off 8 "%.3f")" "$con" "$coff" "$ratio" "$(verdict "$ratio")"
  done
  echo
  echo "the \"on\" proxy's /metrics: $counted transactions counted over the recorded runs (pgbench: $ran processed; pgbench"
  echo "leaves out the transactions in flight at its end), $timed statements timed in gatehouse_query_seconds since start"
  echo
  echo "total time $((SECONDS - started)) s; raw runs: $results, pgbench output in $DIR/runs/, proxy configs $DIR/{on,off}/gatehouse.toml"
}
report | tee "$DIR/report.txt"
