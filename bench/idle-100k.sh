#!/usr/bin/env bash
# 100,000 idle clients: a release Gatehouse (transaction pooling, one
# worker thread) in front of a PostgreSQL primary, and that many
# authenticated PostgreSQL clients (SCRAM-SHA-256, one `SELECT 1` each)
# opened through it and held idle by `gatehouse-loadgen idle-clients`
# processes, from loopback source addresses of their own (127.0.0.2, .3,
# …, 10,000 connections each at most: bind() finds a free port of one
# address quickly among about 14,000 of them). The open file
# limits are raised for the proxy and the clients (ulimit -Hn, as root,
# up to fs.nr_open). Reports the proxy's RSS before and with the clients,
# per client ((with - before) / clients), its open fds, its client gauge,
# the time to open them all, and the time psql takes for a `SELECT 1`
# through the proxy while they are held. Fails when fewer were opened
# than asked or the SELECT 1 fails.
#
# Where the hard open-file limit cannot be raised (no CAP_SYS_RESOURCE,
# as in a container without it), one process holds at most that many fds:
# the script says so and opens what one proxy's limit allows, with the
# RSS extrapolated to the number asked; or, with IDLE_PROXIES=N, it runs N
# proxies side by side (one client process each) so that all the clients
# are held at once, and reports their sum.
#
#   bench/idle-100k.sh                    # 100,000 clients, 4 client processes
#   IDLE_PROXIES=6 bench/idle-100k.sh     # 100,000 over 6 proxies (fd limit 20,000)
#   IDLE_CLIENTS=20000 IDLE_SOURCES=1 bench/idle-100k.sh
#
# Knobs: IDLE_CLIENTS (100000), IDLE_PROXIES (1), IDLE_SOURCES (client
# processes with one proxy, 4; with several, one per proxy),
# IDLE_CONCURRENCY (logins in flight per process, 100), IDLE_PER_ADDRESS
# (connections per source address at most, 10000), GH_WORKER_THREADS
# (the proxy's, 1). Target of the issue: under 200 MiB of proxy RSS with
# the 100,000 held.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh

CLIENTS=${IDLE_CLIENTS:-100000}
PROXIES=${IDLE_PROXIES:-1}
SOURCES=${IDLE_SOURCES:-4}
((PROXIES > 1)) && SOURCES=$PROXIES
CONCURRENCY=${IDLE_CONCURRENCY:-100}
PER_ADDRESS=${IDLE_PER_ADDRESS:-10000}
DIR="$PWD/.bench/idle-100k"
# A proxy's share of the clients, its listeners, pools and log, and slack.
NOFILE=$(((CLIENTS + PROXIES - 1) / PROXIES + 10000))
ensure_packages
ensure_rust
build_release
ASKED=$CLIENTS
if ! raise_nofile "$NOFILE"; then
  # Without CAP_SYS_RESOURCE (bit 24 of the capability sets) no process
  # may raise its hard limit: one process then holds at most that many
  # fds, less a reserve for the proxy's listeners, pools, log and admin.
  hard=$(ulimit -Hn)
  capeff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
  cap="CAP_SYS_RESOURCE $( (((0x$capeff >> 24) & 1)) && echo present || echo missing) (CapEff $capeff)"
  fit=$(((hard - 100) * PROXIES))
  log "the open-file hard limit stays $hard ($cap): the bound is $((hard - 100)) clients per proxy process, $fit with $PROXIES"
  ((CLIENTS > fit)) && CLIENTS=$fit && log "opening $CLIENTS clients instead of $ASKED (IDLE_PROXIES=N to hold more at once)"
  ulimit -Sn "$hard"
fi
rm -rf "$DIR"
mkdir -p "$DIR"
PIDS=() PROXY_PIDS=() PROXY_PORTS=() ADMIN_PORTS=()

cleanup() {
  local p
  for p in "${PIDS[@]}" "${PROXY_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${TESTKIT:-}" ] && "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

PER_PROXY=$(((CLIENTS + PROXIES - 1) / PROXIES))
log "starting PostgreSQL and $PROXIES Gatehouse (max_client_connections $((PER_PROXY + 1000)), open files $(ulimit -Sn))"
cluster_up "$DIR/cluster" 0 $((20 + 12 * PROXIES)) 1
for ((p = 0; p < PROXIES; p++)); do
  mkdir -p "$DIR/proxy$p"
  ADMIN_PORTS+=("$(free_port)")
  GH_MAX_CLIENTS=$((PER_PROXY + 1000)) GH_EXTRA_TOML="
[admin]
listen = \"127.0.0.1:${ADMIN_PORTS[$p]}\"
" start_gatehouse "$DIR/proxy$p" 10 transaction
  wait_port 127.0.0.1 "${ADMIN_PORTS[$p]}"
  PROXY_PIDS+=("$GH_PROXY_PID") PROXY_PORTS+=("$GH_PROXY_PORT")
done
log "proxy limits: $(grep 'Max open files' "/proc/${PROXY_PIDS[0]}/limits")"

# sum_over_proxies CMD: CMD PID for each proxy, summed.
sum_over_proxies() {
  local pid
  for pid in "${PROXY_PIDS[@]}"; do "$1" "$pid"; done | awk '{ s += $1 } END { print s + 0 }'
}
# clients_gauge: gatehouse_client_connections summed over the proxies.
clients_gauge() {
  local p total=0
  for p in "${ADMIN_PORTS[@]}"; do
    curl -fsS --max-time 10 "http://127.0.0.1:$p/metrics" >"$DIR/metrics.txt" 2>/dev/null || : >"$DIR/metrics.txt"
    total=$((total + $(metric_sum "$DIR/metrics.txt" gatehouse_client_connections)))
  done
  echo "$total"
}
# A normal client: psql's SELECT 1 through proxy PORT (prints 1).
select_one() {
  PGPASSWORD=$BENCH_TENANT_PW PGCONNECT_TIMEOUT=30 psql -X -At -h 127.0.0.1 -p "$1" \
    -U "$BENCH_TENANT" -d "$BENCH_DB" -c 'SELECT 1'
}
for port in "${PROXY_PORTS[@]}"; do
  [ "$(select_one "$port")" = 1 ] || { echo "SELECT 1 through the proxy on $port failed before the clients" >&2; exit 1; }
done
sleep 2
RSS_BEFORE=$(sum_over_proxies rss_kib)
FDS_BEFORE=$(sum_over_proxies fd_count)
log "baseline: proxy VmRSS $RSS_BEFORE KiB, $FDS_BEFORE fds ($PROXIES process(es))"

log "opening $CLIENTS idle clients from $SOURCES processes ($CONCURRENCY logins in flight each, $PER_ADDRESS per source address at most)"
started=$(date +%s.%N)
addr=2
for ((i = 0; i < SOURCES; i++)); do
  share=$((CLIENTS / SOURCES + (i < CLIENTS % SOURCES ? 1 : 0)))
  # At most PER_ADDRESS connections from one source address: bind() with
  # port 0 takes the even half of the ephemeral range first (about 14,000
  # ports) and searches far longer once that is used up.
  from=()
  for ((k = 0; k < (share + PER_ADDRESS - 1) / PER_ADDRESS; k++)); do
    from+=(--source "127.0.0.$addr")
    addr=$((addr + 1))
  done
  "$LOADGEN" idle-clients \
    --target "host=127.0.0.1 port=${PROXY_PORTS[$((i % PROXIES))]} user=$BENCH_TENANT password=$BENCH_TENANT_PW dbname=$BENCH_DB" \
    --count "$share" --concurrency "$CONCURRENCY" --hold 3600 "${from[@]}" \
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
    log "${t}s: $(clients_gauge) clients connected, proxy VmRSS $(sum_over_proxies rss_kib) KiB, $(sum_over_proxies fd_count) fds"
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
  r=$(sum_over_proxies rss_kib)
  ((r > peak)) && peak=$r
  sleep 1
done
FDS_HELD=$(sum_over_proxies fd_count)
GAUGE=$(clients_gauge)
one=1 select_s=0
for port in "${PROXY_PORTS[@]}"; do
  t0=$(date +%s.%N)
  got=$(select_one "$port" 2>&1 || true)
  [ "$got" = 1 ] || one=$got
  select_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" -v m="$select_s" 'BEGIN { d = b - a; printf "%.3f", (d > m ? d : m) }')
done
per=$(awk -v a="$RSS_BEFORE" -v b="$peak" -v n="$opened" 'BEGIN { if (n > 0) printf "%.2f", (b - a) / n; else print "-" }')

{
  printf '%-34s %s\n' "clients asked / opened" "$CLIENTS / $opened"
  printf '%-34s %s\n' "proxy processes" "$PROXIES"
  if ((CLIENTS < ASKED)); then
    printf '%-34s %s\n' "fd bound (hard open-file limit)" "$(ulimit -Hn) (the $ASKED asked for do not fit)"
    printf '%-34s %s\n' "extrapolated RSS at $ASKED" "$(awk -v a="$RSS_BEFORE" -v b="$peak" -v n="$opened" -v m="$ASKED" -v p="$PROXIES" \
      'BEGIN { if (n > 0) printf "%.1f MiB (before / %d + %d x per client)", (a / p + (b - a) / n * m) / 1024, p, m; else print "-" }')"
  fi
  printf '%-34s %s\n' "time to open them" "$open_s s"
  printf '%-34s %s\n' "proxy client gauge while held" "$GAUGE"
  printf '%-34s %s\n' "proxy VmRSS before" "$(awk -v k="$RSS_BEFORE" 'BEGIN { printf "%.1f MiB", k / 1024 }')"
  printf '%-34s %s\n' "proxy VmRSS with the clients" "$(awk -v k="$peak" 'BEGIN { printf "%.1f MiB", k / 1024 }')"
  printf '%-34s %s\n' "proxy RSS per idle client" "$per KiB"
  printf '%-34s %s\n' "proxy open fds before / held" "$FDS_BEFORE / $FDS_HELD"
  printf '%-34s %s\n' "SELECT 1 while held" "$one (slowest ${select_s} s)"
  printf '%-34s %s\n' "client processes' VmRSS" "$(for p in "${PIDS[@]}"; do rss_kib "$p" 2>/dev/null || echo 0; done | awk '{ s += $1 } END { printf "%.0f MiB", s / 1024 }')"
} | tee "$DIR/summary.txt"
grep -h 'first error' "$DIR"/idle.*.log | head -3 >&2 || true

status=0
((opened == CLIENTS)) || { log "FAIL: $opened of $CLIENTS opened"; status=1; }
[ "$one" = 1 ] || { log "FAIL: SELECT 1 while the clients were held: $one"; status=1; }
awk -v k="$peak" -v p="$PROXIES" 'BEGIN { exit !(k / 1024 < 200) }' || log "over the 200 MiB target"
exit $status
