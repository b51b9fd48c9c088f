#!/usr/bin/env bash
# Soak: a release Gatehouse in front of a PostgreSQL and a MariaDB primary
# (the test kit's), one endpoint per engine, under a mixed load on both at
# once for a long time (`gatehouse-loadgen soak`: per engine 4 users in
# multi-statement transactions with prepared statements, 2 users running
# prepared statements outside transactions and re-preparing them, 2 users
# that connect, run one transaction and disconnect, and 50 idle clients
# held open and checked at the end). Every interval it samples the proxy's
# RSS and open fds (/proc/PID/status, /proc/PID/fd), its client and
# database (pool) connections, backend leases and client errors
# (/metrics), and the load's transactions and errors (its status file);
# prints a table and writes it as CSV.
#
#   scripts/soak.sh                          # 30 minutes, a sample every 10 s
#   scripts/soak.sh --minutes 3 --interval 5 # (or SOAK_MINUTES, SOAK_INTERVAL)
#
# It fails (exit 1) on:
# - errors: any failure the load counted (or its non-zero exit), or any
#   increase of the proxy's gatehouse_client_errors_total;
# - RSS growth: samples of the warm-up (the first tenth of the run, at
#   least 60 s unless the run is shorter than 3 minutes) are skipped; the
#   rest is cut in thirds, and the largest RSS of the last third must not
#   exceed the largest of the first third by more than 10% + 8 MiB;
# - fd growth: the largest fd count of the last third must not exceed the
#   largest of the first third by more than 16 (the load's connections come
#   and go; a leak of one fd per connection would add thousands), and 10 s
#   after the load stops the proxy's fds must be back to what it had before
#   the load plus 4 (its backend pools may keep idle connections: counted
#   apart, from /metrics);
# - leases: 10 s after the load stops, no backend lease is out
#   (gatehouse_backend_leases) and no client is connected.
# Results: .bench/soak/ (soak.csv, soak.txt, the logs), or --results DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh

MINUTES=${SOAK_MINUTES:-30}
INTERVAL=${SOAK_INTERVAL:-10}
DIR=${SOAK_RESULTS:-$PWD/.bench/soak}
POOL=${SOAK_POOL:-20}
while (($#)); do
  case $1 in
    --minutes) MINUTES=$2; shift 2 ;;
    --interval) INTERVAL=$2; shift 2 ;;
    --results) DIR=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes N] [--interval SECS] [--results DIR]" >&2; exit 2 ;;
  esac
done
SECS=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
((SECS >= 30 && INTERVAL >= 1)) || { echo "the run must last 30 s or more, the interval 1 s or more" >&2; exit 2; }
WARMUP=$((SECS / 10 > 60 ? SECS / 10 : (SECS >= 180 ? 60 : SECS / 10)))

ensure_packages
ensure_rust
build_release
rm -rf "$DIR"
mkdir -p "$DIR"
CSV="$DIR/soak.csv"
TABLE="$DIR/soak.txt"

cleanup() {
  [ -n "${LOAD_PID:-}" ] && kill "$LOAD_PID" 2>/dev/null
  [ -n "${GH_PROXY_PID:-}" ] && kill "$GH_PROXY_PID" 2>/dev/null
  [ -n "${TESTKIT:-}" ] && "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

log "starting PostgreSQL and MariaDB primaries"
GH_TESTKIT_UP_ARGS=--mysql cluster_up "$DIR/cluster" 0 200 1
"$TESTKIT" sql --dir "$DIR/cluster" "$GH_MYSQL_PRIMARY" \
  "CREATE USER '$BENCH_OWNER'@'%' IDENTIFIED BY '$BENCH_OWNER_PW'; CREATE DATABASE $BENCH_DB; \
   GRANT ALL ON $BENCH_DB.* TO '$BENCH_OWNER'@'%';" >/dev/null

# The PostgreSQL side is start_gatehouse's; the MariaDB cluster, its
# endpoint and tenant, and the admin listener are added to its config.
MY_PORT=$(free_port)
ADMIN_PORT=$(free_port)
GH_EXTRA_TOML="
[[secrets]]
name = \"my_monitor\"
user = \"$GH_MYSQL_USER\"
password = \"$GH_MYSQL_PASSWORD\"

[admin]
listen = \"127.0.0.1:$ADMIN_PORT\"

[[clusters]]
name = \"bench_my\"
engine = \"mysql\"
backends = [\"127.0.0.1:$GH_MYSQL_PRIMARY_PORT\"]
monitor_secret = \"my_monitor\"
pool = { size = $POOL, borrow_timeout = \"30s\" }

[[endpoints]]
name = \"rw_my\"
listen = \"127.0.0.1:$MY_PORT\"
cluster = \"bench_my\"
role = \"read_write\"

[[tenants]]
name = \"${BENCH_TENANT}_my\"
databases = [\"$BENCH_DB\"]
secret = \"owner\"
mysql_native_password = \"$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password --mysql)\"
" start_gatehouse "$DIR" "$POOL" transaction postgres
wait_port 127.0.0.1 "$ADMIN_PORT"
log "Gatehouse pid $GH_PROXY_PID: PostgreSQL endpoint :$GH_PROXY_PORT, MariaDB endpoint :$MY_PORT, admin :$ADMIN_PORT"

# sample T: one row (CSV and table) at second T of the run.
sample() {
  local t=$1 page="$DIR/metrics.txt" rss fds clients dbconns leased perrors done lerrors
  curl -fsS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" >"$page" || : >"$page"
  rss=$(awk '{ printf "%.1f", $1 / 1024 }' <<<"$(rss_kib "$GH_PROXY_PID")")
  fds=$(fd_count "$GH_PROXY_PID")
  clients=$(metric_sum "$page" gatehouse_client_connections)
  dbconns=$(metric_sum "$page" gatehouse_pool_connections)
  leased=$(metric_sum "$page" gatehouse_backend_leases)
  perrors=$(metric_sum "$page" gatehouse_client_errors_total)
  read -r done lerrors < <(awk '{ d += $2; e += $3 } END { print d + 0, e + 0 }' "$DIR/status" 2>/dev/null || echo "0 0")
  echo "$t,$rss,$fds,$clients,$dbconns,$leased,$done,$lerrors,$perrors" >>"$CSV"
  printf '%7s %8s %6s %8s %8s %7s %10s %7s %7s\n' "$t" "$rss" "$fds" "$clients" "$dbconns" "$leased" "$done" \
    "$lerrors" "$perrors" | tee -a "$TABLE"
}

echo "t_s,rss_mib,fds,clients,server_conns,leases,tx_done,load_errors,proxy_client_errors" >"$CSV"
printf '%7s %8s %6s %8s %8s %7s %10s %7s %7s\n' t_s rss_MiB fds clients srv_conn leases tx_done l_err p_err | tee "$TABLE"
sample before
FDS_BEFORE=$(fd_count "$GH_PROXY_PID")
ERRORS_BEFORE=$(metric_sum "$DIR/metrics.txt" gatehouse_client_errors_total)

log "soak: $SECS s, a sample every $INTERVAL s (warm-up $WARMUP s), load log $DIR/load.log"
PGT="postgres://$BENCH_TENANT:$BENCH_TENANT_PW@127.0.0.1:$GH_PROXY_PORT/$BENCH_DB"
MYT="mysql://${BENCH_TENANT}_my:$BENCH_TENANT_PW@127.0.0.1:$MY_PORT/$BENCH_DB"
"$LOADGEN" soak --target "pg=$PGT" --target "my=$MYT" --seconds "$SECS" --status "$DIR/status" \
  >"$DIR/load.log" 2>&1 &
LOAD_PID=$!
start=$SECONDS
next=$INTERVAL
while kill -0 "$LOAD_PID" 2>/dev/null; do
  if ((SECONDS - start >= next)); then
    sample "$next"
    next=$((next + INTERVAL))
  fi
  sleep 0.2
done
load_status=0
wait "$LOAD_PID" || load_status=$?
LOAD_PID=
sample end
sleep 10
sample after

# verdict: the checks described at the top.
failed=0
fail() { log "FAIL: $*"; failed=1; }
[ "$load_status" = 0 ] || fail "the load exited with status $load_status (see $DIR/load.log)"
tail -n +2 "$DIR/load.log" | grep -m5 'failure' >&2 || true
read -r lerrors done <<<"$(awk -F, '$1 == "end" { print $8, $7 }' "$CSV")"
perrors=$(($(awk -F, '$1 == "end" { print $9 }' "$CSV") - ERRORS_BEFORE))
((lerrors == 0)) || fail "the load counted $lerrors errors"
((perrors == 0)) || fail "the proxy counted $perrors client errors"
((done > 0)) || fail "the load completed no transaction"

# The numeric rows after the warm-up, in thirds.
read -r rss_first rss_last fds_first fds_last n <<<"$(awk -F, -v w="$WARMUP" '
  $1 ~ /^[0-9]+$/ && $1 > w { n++; rss[n] = $2; fds[n] = $3 }
  END {
    third = int(n / 3); if (third < 1) { print "0 0 0 0", n; exit }
    for (i = 1; i <= third; i++) { if (rss[i] > r1) r1 = rss[i]; if (fds[i] > f1) f1 = fds[i] }
    for (i = n - third + 1; i <= n; i++) { if (rss[i] > r3) r3 = rss[i]; if (fds[i] > f3) f3 = fds[i] }
    print r1, r3, f1, f3, n
  }' "$CSV")"
if ((n < 3)); then
  fail "only $n samples after the warm-up: no growth check (run longer)"
else
  rss_bound=$(awk -v r="$rss_first" 'BEGIN { printf "%.1f", r * 1.10 + 8 }')
  log "RSS: max of the first third $rss_first MiB, of the last third $rss_last MiB; bound $rss_bound MiB (first x 1.10 + 8 MiB)"
  awk -v a="$rss_last" -v b="$rss_bound" 'BEGIN { exit !(a <= b) }' || fail "RSS grew: $rss_last MiB > $rss_bound MiB"
  log "fds: max of the first third $fds_first, of the last third $fds_last; bound $((fds_first + 16)) (first + 16)"
  ((fds_last <= fds_first + 16)) || fail "fds grew: $fds_last > $((fds_first + 16))"
fi
read -r fds_after clients_after leased_after dbconns_after <<<"$(awk -F, '$1 == "after" { print $3, $4, $6, $5 }' "$CSV")"
log "after the load: fds $fds_after (before it: $FDS_BEFORE, bound $((FDS_BEFORE + 4)) + the $dbconns_after pool connections), clients $clients_after, leases $leased_after"
((fds_after <= FDS_BEFORE + 4 + dbconns_after)) || fail "fds not back: $fds_after > $FDS_BEFORE + 4 + $dbconns_after"
((clients_after == 0)) || fail "$clients_after clients still connected after the load"
((leased_after == 0)) || fail "$leased_after backend leases still out after the load"

tail -n 12 "$DIR/load.log" >&2
if ((failed)); then
  log "soak FAILED ($DIR)"
  exit 1
fi
log "soak passed: $done transactions and statements, 0 errors, no growth ($CSV)"
