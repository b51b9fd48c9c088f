#!/usr/bin/env bash
# 100,000 idle clients: a release Gatehouse (transaction pooling, one
# worker thread) in front of a PostgreSQL primary, and that many
# authenticated PostgreSQL clients (SCRAM-SHA-256, one `SELECT 1` each)
# opened through it and held idle by `gatehouse-loadgen idle-clients`
# processes, one per loopback source address (127.0.0.2, .3, …: one
# address has about 28,000 ephemeral ports to one destination). The open
# file limits are raised for the proxy and the clients (ulimit -Hn, as
# root, up to fs.nr_open). Reports the proxy's RSS before and with the
# clients, per client ((with - before) / clients), its open fds, its
# client-connection gauge, the time to open them all, and whether a
# normal client is still served (`SELECT 1` through psql) while they are
# held. Fails when fewer were opened than asked or the SELECT 1 fails.
#
#   bench/idle-100k.sh                    # 100,000 clients from 4 source addresses
#   IDLE_CLIENTS=20000 IDLE_SOURCES=1 bench/idle-100k.sh
#
# Knobs: IDLE_CLIENTS (100000), IDLE_SOURCES (4: one loadgen process each),
# IDLE_CONCURRENCY (logins in flight per process, 100), GH_WORKER_THREADS
# (the proxy's, 1). Target of the issue: under 200 MiB of proxy RSS with
# the 100,000 held.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh

CLIENTS=${IDLE_CLIENTS:-100000}
SOURCES=${IDLE_SOURCES:-4}
CONCURRENCY=${IDLE_CONCURRENCY:-100}
DIR="$PWD/.bench/idle-100k"
# Each process's share, the proxy's own listeners and pools, and slack.
NOFILE=$((CLIENTS + 10000))
ensure_packages
ensure_rust
build_release
raise_nofile "$NOFILE"
rm -rf "$DIR"
mkdir -p "$DIR"
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${GH_PROXY_PID:-}" ] && kill "$GH_PROXY_PID" 2>/dev/null
  [ -n "${TESTKIT:-}" ] && "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

log "starting PostgreSQL and Gatehouse (max_client_connections $((CLIENTS + 1000)), open files $NOFILE)"
cluster_up "$DIR/cluster" 0 100 1
ADMIN_PORT=$(free_port)
GH_MAX_CLIENTS=$((CLIENTS + 1000)) GH_EXTRA_TOML="
[admin]
listen = \"127.0.0.1:$ADMIN_PORT\"
" start_gatehouse "$DIR" 10 transaction
wait_port 127.0.0.1 "$ADMIN_PORT"
log "proxy limits: $(grep 'Max open files' "/proc/$GH_PROXY_PID/limits")"

# A normal client: psql's SELECT 1 through the proxy (prints 1).
select_one() {
  PGPASSWORD=$BENCH_TENANT_PW PGCONNECT_TIMEOUT=30 psql -X -At -h 127.0.0.1 -p "$GH_PROXY_PORT" \
    -U "$BENCH_TENANT" -d "$BENCH_DB" -c 'SELECT 1'
}
[ "$(select_one)" = 1 ] || { echo "SELECT 1 through the proxy failed before the clients" >&2; exit 1; }
sleep 2
RSS_BEFORE=$(rss_kib "$GH_PROXY_PID")
FDS_BEFORE=$(fd_count "$GH_PROXY_PID")
log "baseline: proxy VmRSS $RSS_BEFORE KiB, $FDS_BEFORE fds"

log "opening $CLIENTS idle clients from $SOURCES source addresses ($CONCURRENCY logins in flight each)"
started=$(date +%s.%N)
for ((i = 0; i < SOURCES; i++)); do
  share=$((CLIENTS / SOURCES + (i < CLIENTS % SOURCES ? 1 : 0)))
  "$LOADGEN" idle-clients \
    --target "host=127.0.0.1 port=$GH_PROXY_PORT user=$BENCH_TENANT password=$BENCH_TENANT_PW dbname=$BENCH_DB" \
    --count "$share" --concurrency "$CONCURRENCY" --hold 3600 --source "127.0.0.$((i + 2))" \
    --ready-file "$DIR/ready.$i" >"$DIR/idle.$i.log" 2>&1 &
  PIDS+=($!)
done
# Until every process has written its ready file (or died), up to 30 min.
peak=0
for ((t = 0; t < 1800; t++)); do
  ready=0 alive=0
  for ((i = 0; i < SOURCES; i++)); do
    [ -e "$DIR/ready.$i" ] && ready=$((ready + 1))
    kill -0 "${PIDS[$i]}" 2>/dev/null && alive=$((alive + 1))
  done
  ((ready == SOURCES || alive == 0)) && break
  if ((t % 10 == 0)); then
    curl -fsS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" >"$DIR/metrics.txt" 2>/dev/null || : >"$DIR/metrics.txt"
    log "${t}s: $(metric_sum "$DIR/metrics.txt" gatehouse_client_connections) clients connected, proxy VmRSS $(rss_kib "$GH_PROXY_PID") KiB, $(fd_count "$GH_PROXY_PID") fds"
  fi
  sleep 1
done
open_s=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
opened=0
for ((i = 0; i < SOURCES; i++)); do
  [ -e "$DIR/ready.$i" ] && opened=$((opened + $(cat "$DIR/ready.$i")))
done
log "opened $opened of $CLIENTS in $open_s s"

sleep 5 # sessions park after park_idle_after
for i in 1 2 3; do
  r=$(rss_kib "$GH_PROXY_PID")
  ((r > peak)) && peak=$r
  sleep 1
done
FDS_HELD=$(fd_count "$GH_PROXY_PID")
curl -fsS --max-time 10 "http://127.0.0.1:$ADMIN_PORT/metrics" >"$DIR/metrics.txt" || : >"$DIR/metrics.txt"
GAUGE=$(metric_sum "$DIR/metrics.txt" gatehouse_client_connections)
t0=$(date +%s.%N)
one=$(select_one 2>&1 || true)
select_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
per=$(awk -v a="$RSS_BEFORE" -v b="$peak" -v n="$opened" 'BEGIN { if (n > 0) printf "%.2f", (b - a) / n; else print "-" }')

{
  printf '%-34s %s\n' "clients asked / opened" "$CLIENTS / $opened"
  printf '%-34s %s\n' "time to open them" "$open_s s"
  printf '%-34s %s\n' "proxy client gauge while held" "$GAUGE"
  printf '%-34s %s\n' "proxy VmRSS before" "$(awk -v k="$RSS_BEFORE" 'BEGIN { printf "%.1f MiB", k / 1024 }')"
  printf '%-34s %s\n' "proxy VmRSS with the clients" "$(awk -v k="$peak" 'BEGIN { printf "%.1f MiB", k / 1024 }')"
  printf '%-34s %s\n' "proxy RSS per idle client" "$per KiB"
  printf '%-34s %s\n' "proxy open fds before / held" "$FDS_BEFORE / $FDS_HELD"
  printf '%-34s %s\n' "SELECT 1 while held" "$one (${select_s} s)"
  printf '%-34s %s\n' "client processes' VmRSS" "$(for p in "${PIDS[@]}"; do rss_kib "$p" 2>/dev/null || echo 0; done | awk '{ s += $1 } END { printf "%.0f MiB", s / 1024 }')"
} | tee "$DIR/summary.txt"
grep -h 'first error' "$DIR"/idle.*.log | head -3 >&2 || true

status=0
((opened == CLIENTS)) || { log "FAIL: $opened of $CLIENTS opened"; status=1; }
[ "$one" = 1 ] || { log "FAIL: SELECT 1 while the clients were held: $one"; status=1; }
awk -v k="$peak" 'BEGIN { exit !(k / 1024 < 200) }' || log "over the 200 MiB target"
exit $status
