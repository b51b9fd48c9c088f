#!/usr/bin/env bash
# What a change costs on the hot path, build against build: two Gatehouse
# processes in front of the same PostgreSQL 15 primary (test kit), same
# configuration (pool, transaction mode), one running a baseline binary
# (GH_BASELINE_BIN: say, the commit before the change, built with
# `cargo build --release` in a worktree) and one this checkout's release
# build. pgbench -S (BENCH_PGBENCH_MODE: simple, extended or prepared) at
# several client counts, the targets alternated (base this base this) over
# several rounds, a second apart. Per run: TPS, average latency and the
# proxy's CPU seconds per 1,000 transactions (/proc/PID/stat; each target is
# its own process and the runs never overlap). Reported: the means and the
# this/base ratios. On this 2-core machine pgbench, PostgreSQL and the proxy
# share the cores, so single runs vary by about 10 %: use several rounds.
#
#   git worktree add /tmp/base HEAD~1 && (cd /tmp/base && cargo build --release -p gatehouse)
#   GH_BASELINE_BIN=/tmp/base/target/release/gatehouse bench/build-ab.sh
#
# Knobs: BENCH_CLIENTS ("10 100"), BENCH_SECONDS (10), BENCH_ROUNDS (3),
# BENCH_POOL (20), BENCH_PGBENCH_MODE (simple), BENCH_SCALE (10),
# BENCH_WARMUP (seconds of unrecorded load per target first, 2),
# GH_WORKER_THREADS (the proxies', 1). Raw data under .bench/build-ab/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
BASE_BIN=${GH_BASELINE_BIN:?GH_BASELINE_BIN: the baseline build of gatehouse to compare with}
[ -x "$BASE_BIN" ] || { echo "GH_BASELINE_BIN=$BASE_BIN is not an executable" >&2; exit 2; }
ensure_packages
ensure_rust
unset GH_GATEHOUSE_BIN
build_release
THIS_BIN=$GATEHOUSE

pgbench_knobs
TARGETS=(base this)
DIR="$PWD/.bench/build-ab"
rm -rf "$DIR"
mkdir -p "$DIR/runs" "$DIR/base" "$DIR/this"
started=$SECONDS
trap cleanup_proxies EXIT

log "starting PostgreSQL 15 (pgbench scale $SCALE) and two Gatehouses (pool $POOL, transaction mode): $BASE_BIN and $THIS_BIN"
cluster_up "$DIR/cluster" 0 300 "$SCALE"
GATEHOUSE=$BASE_BIN start_gatehouse "$DIR/base" "$POOL" transaction
add_target base
GATEHOUSE=$THIS_BIN start_gatehouse "$DIR/this" "$POOL" transaction
add_target this

results="$DIR/results.txt"
: >"$results"
pgbench_warm_up "${TARGETS[@]}"
pgbench_alternated "${TARGETS[@]}"

report() {
  echo
  echo "build against build: pgbench -S -M $PGBENCH_MODE through two Gatehouses (${GH_WORKER_THREADS:-1} worker thread(s) each, pool $POOL,"
  echo "transaction mode) in front of one PostgreSQL 15 (scale $SCALE); $(nproc) cores"
  echo "base = $BASE_BIN"
  echo "this = $THIS_BIN"
  echo "${SECS}s x $ROUNDS rounds per client count (base this base this ...), means; * = some rounds failed (mean of the others)"
  echo
  echo "CPU: the proxy's CPU seconds per 1,000 transactions, the means and then the medians"
  printf '%7s | %9s %9s %6s | %7s %7s | %9s %9s %6s | %9s %9s %6s\n' clients "TPS base" "TPS this" ratio "lat base" "lat this" \
    "CPU base" "CPU this" ratio "med base" "med this" ratio
  for n in "${CLIENTS[@]}"; do
    local tb tt cb ct mb mt
    tb=$(mean_of pg "$n" base 6 "%.0f") tt=$(mean_of pg "$n" this 6 "%.0f")
    cb=$(mean_of pg "$n" base 10 "%.4f") ct=$(mean_of pg "$n" this 10 "%.4f")
    mb=$(median_of pg "$n" base 10 "%.4f") mt=$(median_of pg "$n" this 10 "%.4f")
    printf '%7s | %9s %9s %6s | %7s %7s | %9s %9s %6s | %9s %9s %6s\n' "$n" "$tb" "$tt" "$(rat "$tt" "$tb")" \
      "$(mean_of pg "$n" base 8 "%.3f")" "$(mean_of pg "$n" this 8 "%.3f")" "$cb" "$ct" "$(rat "$ct" "$cb")" \
      "$mb" "$mt" "$(rat "$mt" "$mb")"
  done
  echo
  echo "total time $((SECONDS - started)) s; raw runs: $results, pgbench output in $DIR/runs/"
}
report | tee "$DIR/report.txt"
