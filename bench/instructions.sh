#!/usr/bin/env bash
# User-space instructions per pooled transaction, counted, not timed: each
# proxy runs under valgrind's callgrind, which counts the instructions its
# process executes (its own code, libc, the runtime; not the kernel's), so
# the figure is the same from run to run whatever else the machine does
# (within a fraction of a percent: how many sockets one wakeup finds ready
# still varies), where the CPU seconds of bench/pg-transaction.sh swing by
# ±10 % on this 2-core machine. Counters are zeroed after a warm-up and
# dumped after a fixed number of transactions.
#
# Targets: Gatehouse (this build, transaction mode, pool 5, every optional
# feature off), GH_BASELINE_BIN (another build, beside it, when set) and
# PgBouncer (Debian's, the same mode and pool), pgbench -S (simple protocol)
# in front of one PostgreSQL 15; then Gatehouse in front of MariaDB,
# sysbench oltp_point_select (one query per transaction). Clients: 1 (every
# transaction wakes the proxy on its own: the whole per-transaction path)
# and BENCH_CLIENTS.
#
#   bench/instructions.sh                       # report
#   bench/instructions.sh --check               # and compare with bench/baseline.txt
#   bench/instructions.sh --record              # and write bench/baseline.txt
#
# --check exits 1 when a Gatehouse figure is more than BENCH_DRIFT_PCT (3)
# percent above the baseline's: the guard against drift. One client's
# figures repeat within 0.1 %; with 10 clients on a pool of 5 how many
# leases wait varies, and the figures within about 2 %. Figures kept in
# bench/baseline.txt are those of the last release measured; a change that
# costs 2 % shows against it, not only against the commit before.
#
# Knobs: BENCH_ENGINES ("postgres mysql"), BENCH_CLIENTS ("1 10"),
# BENCH_TX (transactions per run, 4000), BENCH_DRIFT_PCT (3),
# GH_BASELINE_BIN, BENCH_BASELINE_FILE (bench/baseline.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }

MODE=report
case "${1:-}" in
  --check) MODE=check ;;
  --record) MODE=record ;;
  "") ;;
  *) echo "usage: $0 [--check|--record]" >&2; exit 2 ;;
esac
read -r -a ENGINES <<<"${BENCH_ENGINES:-postgres mysql}"
read -r -a CLIENTS <<<"${BENCH_CLIENTS:-1 10}"
has_engine() { [[ " ${ENGINES[*]} " == *" $1 "* ]]; }
TX=${BENCH_TX:-4000}
DRIFT=${BENCH_DRIFT_PCT:-3}
BASELINE_FILE=${BENCH_BASELINE_FILE:-bench/baseline.txt}
POOL=5
DIR="$PWD/.bench/instructions"
rm -rf "$DIR"
mkdir -p "$DIR/gatehouse" "$DIR/base" "$DIR/runs" "$DIR/callgrind"
chmod 777 "$DIR/callgrind"
trap cleanup_proxies EXIT
# Results: "engine clients target instructions_per_tx".
results="$DIR/results.txt"
: >"$results"
# PgBouncer runs as another user: the control pipes' names are given.
VGDB_PREFIX="--vgdb-prefix=$DIR/callgrind/vgdb"
CALLGRIND="valgrind --tool=callgrind $VGDB_PREFIX --callgrind-out-file=$DIR/callgrind/%p.out --dump-instr=no --compress-strings=no"

# counted PID FILE RUN...: the instructions PID executed while RUN ran,
# after a first RUN to warm up: counters zeroed before, dumped after.
counted() {
  local pid=$1 out=$2 dump as=()
  shift 2
  # Asked as the process's own user (PgBouncer runs as postgres).
  [ "$(stat -c %U "/proc/$pid")" = "$(id -un)" ] || as=(runuser -u "$(stat -c %U "/proc/$pid")" --)
  "${as[@]}" callgrind_control "$VGDB_PREFIX" -z "$pid" >/dev/null
  "$@" >"$out" 2>&1 || { cat "$out" >&2; return 1; }
  "${as[@]}" callgrind_control "$VGDB_PREFIX" -d "$pid" >/dev/null
  # The newest dump of that process.
  dump=$(ls -t "$DIR/callgrind/$pid.out".* 2>/dev/null | head -1)
  awk '/^(summary|totals):/ { print $2; exit }' "$dump"
}

# A client's login (PgBouncer's SCRAM with a plain password runs PBKDF2,
# Gatehouse's a few HMACs) is not a transaction's cost: each figure is the
# difference of a long run and a short one with the same clients, divided
# by the difference of their transactions.
SHORT_TX=${BENCH_SHORT_TX:-20}

# per_tx INSTRUCTIONS TRANSACTIONS
per_tx() { awk -v i="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.0f", i / t; else print 0 }'; }

if has_engine postgres; then
  log "starting PostgreSQL 15 (pgbench scale 1), Gatehouse and PgBouncer under callgrind (pool $POOL, transaction mode)"
  cluster_up "$DIR/cluster" 0 100 1
  declare -A LOGIN_USER=() LOGIN_PW=()
  GH_PROXY_WRAP=$CALLGRIND start_gatehouse "$DIR/gatehouse" "$POOL" transaction
  add_target gatehouse
  LOGIN_USER[gatehouse]=$BENCH_TENANT LOGIN_PW[gatehouse]=$BENCH_TENANT_PW
  TARGETS=(gatehouse)
  if [ -n "${GH_BASELINE_BIN:-}" ]; then
    GATEHOUSE_THIS=$GATEHOUSE
    GATEHOUSE=$GH_BASELINE_BIN GH_PROXY_WRAP=$CALLGRIND start_gatehouse "$DIR/base" "$POOL" transaction
    GATEHOUSE=$GATEHOUSE_THIS
    add_target base
    LOGIN_USER[base]=$BENCH_TENANT LOGIN_PW[base]=$BENCH_TENANT_PW
    TARGETS+=(base)
  fi
  GH_PROXY_WRAP=$CALLGRIND start_pgbouncer "$DIR" "$POOL" transaction
  PROXY_PIDS+=("$PGB_PID")
  TARGET_PID[pgbouncer]=$PGB_PID TARGET_PORT[pgbouncer]=$PGB_PORT
  LOGIN_USER[pgbouncer]=$BENCH_OWNER LOGIN_PW[pgbouncer]=$BENCH_OWNER_PW
  TARGETS+=(pgbouncer)
  for n in "${CLIENTS[@]}"; do
    for target in "${TARGETS[@]}"; do
      run() {
        env PGPASSWORD="${LOGIN_PW[$target]}" pgbench -n -S -c "$n" -j 1 -t "$1" \
          -h 127.0.0.1 -p "${TARGET_PORT[$target]}" -U "${LOGIN_USER[$target]}" "$BENCH_DB"
      }
      processed() { sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1"; }
      run $((TX / n)) >"$DIR/runs/pg-$target-$n.warmup" 2>&1
      short=$(counted "${TARGET_PID[$target]}" "$DIR/runs/pg-$target-$n.short" run "$SHORT_TX")
      long=$(counted "${TARGET_PID[$target]}" "$DIR/runs/pg-$target-$n.log" run $((TX / n)))
      tx=$(($(processed "$DIR/runs/pg-$target-$n.log") - $(processed "$DIR/runs/pg-$target-$n.short")))
      echo "postgres $n $target $(per_tx $((long - short)) "$tx")" >>"$results"
      log "postgres, $n clients, $target: $(per_tx $((long - short)) "$tx") instructions per transaction"
    done
  done
  cleanup_proxies
  PROXY_PIDS=()
fi

if has_engine mysql; then
  TABLES=1
  SB_COMMON=(--mysql-host=127.0.0.1 --mysql-db="$BENCH_DB" --mysql-ssl=off --tables="$TABLES"
    --table-size=10000 --db-ps-mode=auto --report-interval=0)
  log "starting MariaDB and Gatehouse under callgrind (pool $POOL, transaction mode)"
  mysql_cluster_up "$DIR/cluster" 100
  TARGETS=(gatehouse)
  GH_PROXY_WRAP=$CALLGRIND start_gatehouse "$DIR/gatehouse" "$POOL" transaction mysql
  add_target gatehouse
  if [ -n "${GH_BASELINE_BIN:-}" ]; then
    GATEHOUSE_THIS=$GATEHOUSE
    GATEHOUSE=$GH_BASELINE_BIN GH_PROXY_WRAP=$CALLGRIND start_gatehouse "$DIR/base" "$POOL" transaction mysql
    GATEHOUSE=$GATEHOUSE_THIS
    add_target base
    TARGETS+=(base)
  fi
  for n in "${CLIENTS[@]}"; do
    for target in "${TARGETS[@]}"; do
      run() {
        sysbench oltp_point_select "${SB_COMMON[@]}" --mysql-port="${TARGET_PORT[$target]}" \
          --mysql-user="$BENCH_TENANT" --mysql-password="$BENCH_TENANT_PW" --threads="$n" --time=0 \
          --events="$1" run
      }
      queries() { awk '$1 == "queries:" { print $2 }' "$1"; }
      run "$TX" >"$DIR/runs/my-$target-$n.warmup" 2>&1
      short=$(counted "${TARGET_PID[$target]}" "$DIR/runs/my-$target-$n.short" run $((SHORT_TX * n)))
      long=$(counted "${TARGET_PID[$target]}" "$DIR/runs/my-$target-$n.log" run "$TX")
      q=$(($(queries "$DIR/runs/my-$target-$n.log") - $(queries "$DIR/runs/my-$target-$n.short")))
      echo "mysql $n $target $(per_tx $((long - short)) "$q")" >>"$results"
      log "mysql, $n clients, $target: $(per_tx $((long - short)) "$q") instructions per query"
    done
  done
fi

echo
echo "User-space instructions per transaction (callgrind; PostgreSQL: pgbench -S, MySQL: sysbench point_select,"
echo "one query per transaction), pool $POOL, transaction mode: a run of $TX transactions less one of $SHORT_TX per client"
printf '%-8s | %7s | %-9s | %12s | %s\n' engine clients target "instr / tx" "vs Gatehouse"
while read -r engine n target ins; do
  gh=$(awk -v e="$engine" -v n="$n" '$1 == e && $2 == n && $3 == "gatehouse" { print $4 }' "$results")
  printf '%-8s | %7s | %-9s | %12s | %s\n' "$engine" "$n" "$target" "$ins" "$(ratio "$ins" "$gh")"
done <"$results"

status=0
if [ "$MODE" = check ]; then
  echo
  echo "Against $BASELINE_FILE (Gatehouse figures; drift allowed: $DRIFT %):"
  while read -r engine n target ins; do
    [ "$target" = gatehouse ] || continue
    base=$(awk -v e="$engine" -v n="$n" '!/^#/ && $1 == e && $2 == n && $3 == "gatehouse" { print $4 }' "$BASELINE_FILE")
    if [ -z "$base" ]; then
      printf '  %-8s %4s clients: %s (no baseline figure)\n' "$engine" "$n" "$ins"
      continue
    fi
    verdict=$(awk -v a="$ins" -v b="$base" -v d="$DRIFT" 'BEGIN { r = a / b; printf "%.3f %s", r, (r > 1 + d / 100 ? "OVER" : "ok") }')
    printf '  %-8s %4s clients: %s against %s: %s\n' "$engine" "$n" "$ins" "$base" "$verdict"
    [[ $verdict == *OVER ]] && status=1
  done <"$results"
elif [ "$MODE" = record ]; then
  tree=$(git status --porcelain -- . ":!$BASELINE_FILE" | grep -q . && echo 'with uncommitted changes' || echo clean)
  {
    echo "# User-space instructions per transaction, bench/instructions.sh --record"
    echo "# $(git log -1 --format='%h %cs') ($tree); TX=$TX, pool $POOL"
    echo "# engine clients target instructions_per_tx"
    cat "$results"
  } >"$BASELINE_FILE"
  echo
  echo "written: $BASELINE_FILE"
fi
exit "$status"
