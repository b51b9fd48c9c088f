#!/usr/bin/env bash
# Transaction-mode pooling: pgbench -S with the simple and the prepared
# protocol at several client counts, and pgbench -S -C (a new connection per
# transaction), directly, through Gatehouse and through PgBouncer (both in
# transaction mode, same pool size), targets alternated (A B C A B C) over
# several rounds. Per run: TPS, average latency, the bench owner's backend
# connections (sampled from pg_stat_activity), the proxy's own CPU per 1,000
# transactions (from /proc) and the ratios, and the whole machine's CPU per
# 1,000 transactions and busy cores over the run's steady state (from
# /proc/stat). From those, the ceiling: the GH/PgB throughput a proxy costing
# no CPU at all could reach with the cores saturated, what bounds any
# proxy's ratio to PgBouncer on a machine that pgbench and PostgreSQL share.
# Then each proxy's memory per idle authenticated client (loadgen
# idle-clients, VmRSS from /proc).
# Clients authenticate with SCRAM to both proxies, each checking a stored
# verifier; direct ones with SCRAM to PostgreSQL. connect_md5 is -C again
# with md5 between client and proxies (Gatehouse: a tenant stored with an
# md5 hash; PgBouncer: auth_type md5), direct still SCRAM: the serverless
# case where the proxy's cheap login replaces the server's fork and SCRAM
# (with SCRAM to the proxy too, pgbench's own PBKDF2 per connection bounds
# both proxies' rates). It runs last: PgBouncer is switched to md5 for it.
#
#   bench/pg-transaction.sh     # 10, 100, 1000 clients, 10 s runs, 2 rounds, 10,000 idle clients
#   BENCH_CLIENTS="10 100" BENCH_SECONDS=3 BENCH_ROUNDS=1 BENCH_IDLE=2000 bench/pg-transaction.sh
#   BENCH_WORKLOADS="simple" BENCH_IDLE=0 ...   # only some workloads (simple prepared connect connect_md5); no memory run
#
# PgBouncer before 1.21 has no protocol-level prepared statements in
# transaction mode: its -M prepared runs fail and are reported as "failed".
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-2}
read -r -a CLIENTS <<<"${BENCH_CLIENTS:-10 100 1000}"
POOL=${BENCH_POOL:-20}
CONNECT_CLIENTS=${BENCH_CONNECT_CLIENTS:-50}
IDLE=${BENCH_IDLE:-10000}
read -r -a WORKLOADS <<<"${BENCH_WORKLOADS:-simple prepared connect connect_md5}"
IDLE_HOLD=${BENCH_IDLE_HOLD:-10}
# pgbench's -T includes its initial connections (sequential per thread, a
# SCRAM exchange each: about 10-20 ms per client here), and its TPS excludes
# them: runs get CONNECT_MS per client on top of BENCH_SECONDS, so that 1,000
# clients still have a full measuring window.
CONNECT_MS=${BENCH_CONNECT_MS:-15}
MAX_CONNECTIONS=1100
TARGETS=(direct gatehouse pgbouncer)
DIR="$PWD/.bench/pg-transaction"
rm -rf "$DIR"
mkdir -p "$DIR/runs"
started=$SECONDS

SAMPLER_PID=
WINDOW_PID=
LOADGEN_PID=
cleanup() {
  [ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null
  [ -n "$WINDOW_PID" ] && kill "$WINDOW_PID" 2>/dev/null
  [ -n "$LOADGEN_PID" ] && kill "$LOADGEN_PID" 2>/dev/null
  [ -n "${GH_PROXY_PID:-}" ] && kill "$GH_PROXY_PID" 2>/dev/null
  [ -n "${PGB_PID:-}" ] && kill "$PGB_PID" 2>/dev/null
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "starting PostgreSQL 15 (max_connections $MAX_CONNECTIONS), Gatehouse and PgBouncer (pool $POOL, transaction mode)"
cluster_up "$DIR/cluster" 0 "$MAX_CONNECTIONS"
# A second tenant stored with an md5 hash, for connect_md5: the same
# database and backend credentials, md5 between client and proxy.
MD5_TENANT="${BENCH_TENANT}_md5"
GH_EXTRA_TOML=$(md5_tenant_toml "$MD5_TENANT")
start_gatehouse "$DIR" "$POOL" transaction
start_pgbouncer "$DIR" "$POOL" transaction
raise_fd_limit "$PGB_PID"
# PgBouncer's client auth from a stored SCRAM verifier like Gatehouse's
# (BENCH_PGB_AUTH=plain keeps start_pgbouncer's plain-text password, which
# costs PgBouncer a PBKDF2 per client login).
PGB_AUTH=${BENCH_PGB_AUTH:-verifier}
PGB_AUTH_MAIN=$PGB_AUTH
if [ "$PGB_AUTH" = verifier ]; then
  pgbouncer_use_verifier "$DIR"
fi
PGB_VERSION=$(pgbouncer --version | sed -n '1s/^PgBouncer \([0-9.]*\).*/\1/p')
log "PgBouncer $PGB_VERSION, pgbench $(pgbench --version | awk '{ print $3 }')"

# target_of NAME [WORKLOAD]: sets port, user, pw and pid (empty for direct);
# connect_md5 uses Gatehouse's md5 tenant (PgBouncer is switched to md5 for it).
target_of() {
  case $1 in
    direct) port=$GH_PG_PRIMARY_PORT user=$BENCH_OWNER pw=$BENCH_OWNER_PW pid= ;;
    gatehouse) port=$GH_PROXY_PORT user=$BENCH_TENANT pw=$BENCH_TENANT_PW pid=$GH_PROXY_PID ;;
    pgbouncer) port=$PGB_PORT user=$BENCH_OWNER pw=$BENCH_OWNER_PW pid=$PGB_PID ;;
  esac
  if [ "${2:-}" = connect_md5 ] && [ "$1" = gatehouse ]; then
    user=$MD5_TENANT
  fi
}

# backend_count TARGET: the bench owner's backends (pg_stat_activity) whose
# client end belongs to TARGET: the proxy's process for a proxy, any other
# process (pgbench) for direct. ss maps the client ports to processes, so
# the other proxy's idle pooled connections do not count.
backend_count() {
  local target=$1 ports
  ports=$(PGPASSWORD=$GH_PG_PASSWORD psql -X -Atq -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$GH_PG_USER" -d postgres \
    -c "SELECT client_port FROM pg_stat_activity WHERE usename = '$BENCH_OWNER'") || return 0
  ss -Htnp state established "( dport = :$GH_PG_PRIMARY_PORT )" |
    awk -v target="$target" -v gh="$GH_PROXY_PID" -v pgb="$PGB_PID" -v ports="${ports//$'\n'/ }" '
      { n = split($3, a, ":"); if (match($0, /pid=[0-9]+/)) owner[a[n]] = substr($0, RSTART + 4, RLENGTH - 4) }
      END {
        want = target == "gatehouse" ? gh : target == "pgbouncer" ? pgb : ""
        n = split(ports, p, " ")
        for (i = 1; i <= n; i++) {
          o = (p[i] in owner) ? owner[p[i]] : ""
          if (want != "" ? o == want : (o != gh && o != pgb)) c++
        }
        print c + 0
      }'
}

# sample_backends TARGET FILE: a backend_count per second into FILE, until killed.
sample_backends() {
  while :; do
    sleep 1
    backend_count "$1" >>"$2" || true
  done
}

# machine_window LEAD SECONDS FILE: after LEAD seconds, the machine's busy
# cores over the next SECONDS (from /proc/stat) into FILE: the steady state
# of a run, without pgbench's initial connections.
machine_window() {
  local lead=$1 win=$2 file=$3 m0 m1
  sleep "$lead"
  m0=$(machine_cpu_seconds)
  sleep "$win"
  m1=$(machine_cpu_seconds)
  awk -v a="$m0" -v b="$m1" -v w="$win" 'BEGIN { printf "%.2f\n", (b - a) / w }' >"$file"
}

# run_one WORKLOAD CLIENTS TARGET ROUND: one pgbench run, appended to $results as
# "workload clients target round status tps transactions latency_ms backends
# cpu_s_per_1k_tx machine_cpu_s_per_1k_tx busy_cores user_s_per_1k_tx
# kernel_s_per_1k_tx" (the proxy's CPU split between its own code and the
# kernel's work on its behalf: system calls, loopback TCP, wakeups).
run_one() {
  local w=$1 c=$2 target=$3 r=$4 extra=() port user pw pid
  case $w in
    prepared) extra=(-M prepared) ;;
    connect | connect_md5) extra=(-C) ;;
  esac
  target_of "$target" "$w"
  local f="$DIR/runs/$w-c$c-$target-r$r" cpu0=0 cpu1=0 split0="0 0" split1="0 0" status tps tx lat secs=$SECS
  case $w in connect*) ;; *) secs=$((SECS + c * CONNECT_MS / 1000)) ;; esac
  : >"$f.backends"
  [ -n "$pid" ] && cpu0=$(cpu_seconds "$pid") && split0=$(cpu_split "$pid")
  sample_backends "$target" "$f.backends" &
  SAMPLER_PID=$!
  # The steady state: from a second after the initial connections to a
  # second before the end.
  local lead=$((secs - SECS + 1)) win=$((SECS > 3 ? SECS - 2 : 1))
  rm -f "$f.busy"
  machine_window "$lead" "$win" "$f.busy" &
  WINDOW_PID=$!
  read -r status tps tx lat < <(pgbench_detail "$f.log" "$port" "$user" "$pw" "$c" "$secs" "${extra[@]}")
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=
  wait "$WINDOW_PID" 2>/dev/null || true
  WINDOW_PID=
  local busy=- machk=-
  [ -s "$f.busy" ] && busy=$(cat "$f.busy")
  [ "$busy" != - ] && machk=$(awk -v b="$busy" -v t="$tps" 'BEGIN { if (t > 0) printf "%.4f", b * 1000 / t; else print "-" }')
  [ -n "$pid" ] && cpu1=$(cpu_seconds "$pid") && split1=$(cpu_split "$pid")
  local backends cpuk=- userk=- kernk=-
  backends=$(awk '$1 > m { m = $1 } END { print m + 0 }' "$f.backends")
  [ -n "$pid" ] && cpuk=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$tx" 'BEGIN { if (t > 0) printf "%.4f", (b - a) * 1000 / t; else print "-" }')
  if [ -n "$pid" ]; then
    read -r userk kernk < <(awk -v a="$split0" -v b="$split1" -v t="$tx" 'BEGIN {
      split(a, x, " "); split(b, y, " ")
      if (t > 0) printf "%.4f %.4f\n", (y[1] - x[1]) * 1000 / t, (y[2] - x[2]) * 1000 / t; else print "- -" }')
  fi
  echo "$w $c $target $r $status $tps $tx $lat $backends $cpuk $machk $busy $userk $kernk" >>"$results"
  if [ "$status" = ok ]; then
    log "$w clients=$c round=$r $target: $tps tps, ${lat} ms, $backends backends, proxy CPU ${cpuk} s/1000 tx, machine CPU ${machk} s/1000 tx, busy cores $busy"
  else
    log "$w clients=$c round=$r $target: FAILED ($(grep -m1 -i 'error\|abort' "$f.log" || tail -1 "$f.log"))"
  fi
}

# idle_memory TARGET: VmRSS of the proxy idle, then while $IDLE idle clients
# are held; appended to $memory as "target rss_before_kib rss_held_kib opened kib_per_client".
idle_memory() {
  local target=$1 port user pw pid
  target_of "$target"
  local ready="$DIR/idle-$target.ready" before held=0 opened=0 i
  rm -f "$ready"
  before=$(rss_kib "$pid")
  log "idle clients: opening $IDLE against $target (VmRSS $before KiB)"
  "$LOADGEN" idle-clients --target "host=127.0.0.1 port=$port user=$user password=$pw dbname=$BENCH_DB" \
    --count "$IDLE" --hold "$IDLE_HOLD" --ready-file "$ready" >"$DIR/idle-$target.log" 2>&1 &
  LOADGEN_PID=$!
  for ((i = 0; i < 3000; i++)); do # up to 300 s to open them all
    [ -e "$ready" ] || ! kill -0 "$LOADGEN_PID" 2>/dev/null && break
    sleep 0.1
  done
  if [ -e "$ready" ]; then
    opened=$(cat "$ready")
    sleep 2
    for i in 1 2 3; do
      held=$(awk -v a="$held" -v b="$(rss_kib "$pid")" 'BEGIN { print (b > a ? b : a) }')
      sleep 1
    done
  else
    kill "$LOADGEN_PID" 2>/dev/null || true
  fi
  wait "$LOADGEN_PID" 2>/dev/null || true
  LOADGEN_PID=
  local per
  per=$(awk -v a="$before" -v b="$held" -v n="$opened" 'BEGIN { if (n > 0 && b > 0) printf "%.1f", (b - a) / n; else print "failed" }')
  echo "$target $before $held $opened $per" >>"$memory"
  log "idle clients: $target held $opened/$IDLE open, VmRSS $held KiB, $per KiB per client ($(grep -m1 'failed=' "$DIR/idle-$target.log" || true))"
  sleep 3 # let the proxy close them before anything else runs
}

# Memory first, while the proxies are fresh and idle.
memory="$DIR/memory.txt"
: >"$memory"
if ((IDLE > 0)); then
  idle_memory gatehouse
  idle_memory pgbouncer
fi

results="$DIR/results.txt"
: >"$results"
cells=()
for w in "${WORKLOADS[@]}"; do
  case $w in
    simple | prepared) for c in "${CLIENTS[@]}"; do cells+=("$w $c"); done ;;
    connect | connect_md5) cells+=("$w $CONNECT_CLIENTS") ;;
    *) echo "unknown workload $w (simple, prepared, connect, connect_md5)" >&2; exit 2 ;;
  esac
done
for cell in "${cells[@]}"; do
  read -r w c <<<"$cell"
  if [ "$w" = connect_md5 ] && [ "$PGB_AUTH" != md5 ]; then
    pgbouncer_use_md5 "$DIR"
    PGB_AUTH=md5
  fi
  for ((r = 1; r <= ROUNDS; r++)); do
    for target in "${TARGETS[@]}"; do
      sleep 1
      run_one "$w" "$c" "$target" "$r"
    done
  done
done

# maxcell W C TARGET COL: maximum of COL over all runs of the cell.
maxcell() { awk -v w="$1" -v c="$2" -v t="$3" -v col="$4" '$1 == w && $2 == c && $3 == t && $col > m { m = $col } END { print m + 0 }' "$results"; }
label() {
  case $1 in
    simple) echo "-S" ;;
    prepared) echo "-S -M prep" ;;
    connect) echo "-S -C" ;;
    connect_md5) echo "-C md5" ;;
  esac
}

report() {
  echo
  echo "Transaction mode, pool $POOL, ${SECS}s (+${CONNECT_MS} ms per client for pgbench's initial connections) x $ROUNDS rounds per cell, means"
  echo "PgBouncer $PGB_VERSION (SCRAM, auth_file: $PGB_AUTH_MAIN; -C md5: md5); * = some rounds failed (mean of the others); failed = all rounds failed"
  echo
  echo "Throughput (TPS) and average latency (ms)"
  printf '%-11s %7s | %10s %10s %10s %7s %9s | %8s %8s %8s\n' \
    workload clients "direct" "gatehouse" "pgbouncer" "GH/PgB" "GH/direct" "lat dir" "lat GH" "lat PgB"
  for cell in "${cells[@]}"; do
    read -r w c <<<"$cell"
    local d g b ld lg lb
    d=$(mean_of "$w" "$c" direct 6 "%.0f") g=$(mean_of "$w" "$c" gatehouse 6 "%.0f") b=$(mean_of "$w" "$c" pgbouncer 6 "%.0f")
    ld=$(mean_of "$w" "$c" direct 8 "%.3f") lg=$(mean_of "$w" "$c" gatehouse 8 "%.3f") lb=$(mean_of "$w" "$c" pgbouncer 8 "%.3f")
    printf '%-11s %7s | %10s %10s %10s %7s %9s | %8s %8s %8s\n' \
      "$(label "$w")" "$c" "$d" "$g" "$b" "$(rat "$g" "$b")" "$(rat "$g" "$d")" "$ld" "$lg" "$lb"
  done
  echo
  echo "Backend connections (max sampled) and proxy CPU (s per 1,000 transactions)"
  printf '%-11s %7s | %8s %8s %8s | %9s %9s %7s\n' workload clients "be dir" "be GH" "be PgB" "CPU GH" "CPU PgB" "GH/PgB"
  for cell in "${cells[@]}"; do
    read -r w c <<<"$cell"
    local cg cb
    cg=$(mean_of "$w" "$c" gatehouse 10 "%.4f") cb=$(mean_of "$w" "$c" pgbouncer 10 "%.4f")
    printf '%-11s %7s | %8s %8s %8s | %9s %9s %7s\n' "$(label "$w")" "$c" \
      "$(maxcell "$w" "$c" direct 9)" "$(maxcell "$w" "$c" gatehouse 9)" "$(maxcell "$w" "$c" pgbouncer 9)" \
      "$cg" "$cb" "$(rat "$cg" "$cb")"
  done
  echo
  echo "Proxy CPU split (s per 1,000 transactions): user space and kernel. floor: the GH/PgB CPU ratio"
  echo "Gatehouse would have if its own code cost nothing (its kernel time over PgBouncer's whole CPU);"
  echo "PgB kern%: PgBouncer's kernel share, the floor of any proxy making PgBouncer's system calls"
  printf '%-11s %7s | %8s %8s | %8s %8s | %6s %9s\n' workload clients "user GH" "kern GH" "user PgB" "kern PgB" floor "PgB kern%"
  for cell in "${cells[@]}"; do
    read -r w c <<<"$cell"
    local ug kg ub kb cb floor share
    ug=$(mean_of "$w" "$c" gatehouse 13 "%.4f") kg=$(mean_of "$w" "$c" gatehouse 14 "%.4f")
    ub=$(mean_of "$w" "$c" pgbouncer 13 "%.4f") kb=$(mean_of "$w" "$c" pgbouncer 14 "%.4f")
    cb=$(mean_of "$w" "$c" pgbouncer 10 "%.4f")
    floor=$(rat "$kg" "$cb")
    share=$(awk -v k="${kb%\*}" -v p="${cb%\*}" 'BEGIN {
      if (k ~ /^[0-9.]+$/ && p ~ /^[0-9.]+$/ && p > 0) printf "%.0f%%", 100 * k / p; else print "-" }')
    printf '%-11s %7s | %8s %8s | %8s %8s | %6s %9s\n' "$(label "$w")" "$c" "$ug" "$kg" "$ub" "$kb" "$floor" "$share"
  done
  echo
  echo "Machine CPU (s per 1,000 transactions, every process, steady state) and busy cores. ceiling: the GH/PgB"
  echo "throughput a proxy costing no CPU at all could reach with the cores saturated, pgbench and PostgreSQL"
  echo "costing what they cost in PgBouncer's runs: machine CPU / (machine CPU - PgBouncer's own)"
  printf '%-11s %7s | %8s %8s %8s | %6s %6s %6s | %7s\n' workload clients "M dir" "M GH" "M PgB" "busyd" "busyG" "busyB" ceiling
  for cell in "${cells[@]}"; do
    read -r w c <<<"$cell"
    local md mg mb cb ceil
    md=$(mean_of "$w" "$c" direct 11 "%.4f") mg=$(mean_of "$w" "$c" gatehouse 11 "%.4f") mb=$(mean_of "$w" "$c" pgbouncer 11 "%.4f")
    cb=$(mean_of "$w" "$c" pgbouncer 10 "%.4f")
    ceil=$(awk -v m="${mb%\*}" -v p="${cb%\*}" 'BEGIN {
      if (m ~ /^[0-9.]+$/ && p ~ /^[0-9.]+$/ && m > p) printf "%.2f", m / (m - p); else print "-" }')
    printf '%-11s %7s | %8s %8s %8s | %6s %6s %6s | %7s\n' "$(label "$w")" "$c" "$md" "$mg" "$mb" \
      "$(mean_of "$w" "$c" direct 12 "%.2f")" "$(mean_of "$w" "$c" gatehouse 12 "%.2f")" \
      "$(mean_of "$w" "$c" pgbouncer 12 "%.2f")" "$ceil"
  done
  echo
  echo "Memory with $IDLE idle authenticated clients (VmRSS, KiB)"
  printf '%-10s %10s %10s %8s %11s\n' proxy idle held clients KiB/client
  while read -r t before held opened per; do
    printf '%-10s %10s %10s %8s %11s\n' "$t" "$before" "$held" "$opened" "$per"
  done <"$memory"
  echo
  echo "total time $((SECONDS - started)) s; raw runs: $results, $memory, pgbench output in $DIR/runs/"
}
report | tee "$DIR/report.txt"
