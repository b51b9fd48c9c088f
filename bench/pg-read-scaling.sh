#!/usr/bin/env bash
# Read scaling: waves of pgbench --select-only -C (a new connection per
# transaction, the serverless pattern) against Gatehouse's read-only
# endpoint over two streaming replicas, a third replica added to the cluster
# by a reload (POST /api/reload) mid-run; and the same waves directly
# against the replicas, one replica per wave, round-robin over two and over
# three from the same wave on (beginning with the new one), as DNS
# round-robin would spread them.
#
# A PostgreSQL 15 primary and three replicas (test kit); the proxy's cluster
# lists the primary and the first two replicas, and from the reload the
# third. The two runs' waves are interleaved (P D D P P D ...), so that
# neither gets a systematically warmer machine; the reload comes right
# before the proxy's wave BENCH_ADD_AFTER + 1, which starts as soon as the
# reload answers.
#
# A sampler (every second, from each wave's start) records per replica:
# backend connections of the bench database (pg_stat_activity client
# backends, through one psql session per replica, split by whose socket is
# the client end: the proxy's or anyone else's, from ss), CPU seconds of the
# server (the postmaster and its children, live and reaped, from /proc),
# client connections served (pg_stat_database.sessions: through the proxy,
# the server connections it opened), and from the admin API whether the
# proxy has it up and the leases it routed there (about one per transaction,
# so with -C one per client connection; the report checks the ratio); and
# the proxy's CPU and the machine's busy CPU (/proc/stat). After the reload
# a poller reads /api/backends every 0.1 s for BENCH_RELOAD_POLL seconds
# (its requests fall in that proxy wave): when the new replica was up, got
# its first transaction, and first had a fair share (>= BENCH_FAIR_SHARE %
# of the routed transactions in a 1 s window).
#
# Prints per-second tables per run and replica, TPS per wave for each run,
# and a summary: reload answer and timings, share per replica after the
# reload, peak backend connections per replica (through the proxy bounded by
# the pool size; direct one per client connection), CPU per 1,000
# transactions, busy cores, and the machine's bound: what pgbench -C itself
# costs per transaction, and the TPS that cost alone allows on these cores.
#
#   bench/pg-read-scaling.sh                             # 10 waves of 5 s per run, reload after wave 5
#   bench/pg-read-scaling.sh --server-cpu 0.1 --proxy-cpu 0.6 --client-cpu 0.8   # the testbed's hosts (bench/testbed.sh)
#   BENCH_WAVES=4 BENCH_WAVE_SECONDS=3 bench/pg-read-scaling.sh
#
# Knobs: BENCH_WAVES (10), BENCH_WAVE_SECONDS (5), BENCH_ADD_AFTER (waves/2),
# BENCH_CLIENTS (100), BENCH_POOL (20, per backend), BENCH_SCALE (pgbench
# scale, 1), BENCH_WARMUP (seconds of unrecorded -C per target first, 2),
# BENCH_RELOAD_POLL (3), BENCH_FAIR_SHARE (25), GH_WORKER_THREADS (1).
# Raw data under .bench/pg-read-scaling/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
testbed_options "$@"
build_release

WAVES=${BENCH_WAVES:-10}
WAVE_SECS=${BENCH_WAVE_SECONDS:-5}
ADD_AFTER=${BENCH_ADD_AFTER:-$((WAVES / 2))}
CLIENTS=${BENCH_CLIENTS:-100}
POOL=${BENCH_POOL:-20}
SCALE=${BENCH_SCALE:-1}
WARMUP=${BENCH_WARMUP:-2}
RELOAD_POLL=${BENCH_RELOAD_POLL:-3}
FAIR=${BENCH_FAIR_SHARE:-25}
MAX_CONNECTIONS=300
CORES=$(nproc)
JOBS=$((CLIENTS < 2 ? 1 : 2))
TCK=$(getconf CLK_TCK)
if ((ADD_AFTER < 0 || ADD_AFTER >= WAVES)); then
  echo "BENCH_ADD_AFTER must be between 0 and BENCH_WAVES - 1 ($ADD_AFTER, $WAVES waves)" >&2
  exit 2
fi
DIR="$PWD/.bench/pg-read-scaling"
rm -rf "$DIR"
mkdir -p "$DIR/runs" "$DIR/mon"
started=$SECONDS

SAMPLER_PID=
POLLER_PID=
GH_PROXY_PID=
MON_PIDS=()
cleanup() {
  [ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null
  [ -n "$POLLER_PID" ] && kill "$POLLER_PID" 2>/dev/null
  [ -n "$GH_PROXY_PID" ] && kill "$GH_PROXY_PID" 2>/dev/null
  local p
  for p in "${MON_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${TESTKIT:-}" ] && "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

log "starting PostgreSQL 15: a primary and 3 streaming replicas (max_connections $MAX_CONNECTIONS), pgbench scale $SCALE"
cluster_up "$DIR/cluster" 3 "$MAX_CONNECTIONS" "$SCALE"
P0=$GH_PG_PRIMARY_PORT P1=$GH_PG1_PORT P2=$GH_PG2_PORT P3=$GH_PG3_PORT
REPLICA_PORTS=("$P1" "$P2" "$P3")
su_psql() { PGPASSWORD=$GH_PG_PASSWORD psql -X -q -At -h 127.0.0.1 -p "$1" -U "$GH_PG_USER" -d "${2:-postgres}" -c "$3"; }

# The replicas have replayed everything the primary wrote (pgbench -i), and
# the bench owner sees the tables there.
pg_replicas_caught_up $((SCALE * 100000)) "${REPLICA_PORTS[@]}"
# The postmasters, for their CPU (and their children's).
PM=()
for n in 1 2 3; do
  d="GH_PG${n}_DIR"
  PM+=("$(head -1 "${!d}/data/postmaster.pid")")
done

# Gatehouse: one read-only endpoint over the primary and the first two
# replicas, the admin API behind a bearer token.
GH_PROXY_PORT=$(free_port)
ADMIN_PORT=$(free_port)
head -c 24 /dev/urandom | base64 -w0 >"$DIR/admin.token"
chmod 600 "$DIR/admin.token"
ADMIN_TOKEN=$(cat "$DIR/admin.token")
backends_line() {
  local out="backends = [\"127.0.0.1:$P0\"" p
  for p in "$@"; do out+=", \"127.0.0.1:$p\""; done
  echo "$out]"
}
cat >"$DIR/gatehouse.toml" <<TOML
[proxy]
log_filter = "warn,gatehouse::reload=info,gatehouse::core=info,gatehouse::topology=info"
worker_threads = ${GH_WORKER_THREADS:-1}

[admin]
listen = "127.0.0.1:$ADMIN_PORT"
token_file = "$DIR/admin.token"

[[clusters]]
name = "reads"
engine = "postgres"
$(backends_line "$P1" "$P2")
monitor_secret = "monitor"
health_check_interval = "1s"
pool = { size = $POOL, borrow_timeout = "30s" }

[[endpoints]]
name = "ro"
listen = "127.0.0.1:$GH_PROXY_PORT"
cluster = "reads"
role = "read_only"
pool_mode = "transaction"
max_client_connections = 20000

[[tenants]]
name = "$BENCH_TENANT"
databases = ["$BENCH_DB"]
secret = "owner"
scram_verifier = "$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password)"

[[secrets]]
name = "owner"
user = "$BENCH_OWNER"
password = "$BENCH_OWNER_PW"

[[secrets]]
name = "monitor"
user = "$GH_PG_USER"
password = "$GH_PG_PASSWORD"
TOML
"$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
log "starting Gatehouse (read-only endpoint over primary + 2 replicas, pool $POOL per backend, transaction mode)"
gatehouse_run "$DIR"
wait_port 127.0.0.1 "$GH_PROXY_PORT"
wait_port 127.0.0.1 "$ADMIN_PORT"

api_backends() {
  curl -s -m 2 -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:$ADMIN_PORT/api/backends"
}
# api_lines: "addr up(0/1) routed leases" per backend from /api/backends JSON on stdin.
api_lines() { jq -r '.[].backends[] | "\(.backend) \(if .up then 1 else 0 end) \(.routed) \(.leases)"' 2>/dev/null; }

# Both replicas up in the proxy before anything runs.
for ((i = 0; i < 100; i++)); do
  [ "$(api_backends | api_lines | awk -v a="127.0.0.1:$P1" -v b="127.0.0.1:$P2" '($1 == a || $1 == b) && $2 == 1 { n++ } END { print n + 0 }')" = 2 ] && break
  sleep 0.1
done

# One psql session per replica, kept open (FIFOs): the sampler's queries
# cost no connection of their own and do not touch the bench database.
declare -A MON_W MON_R
open_monitor() {
  local n=$1 port=$2 in="$DIR/mon/pg$1.in" out="$DIR/mon/pg$1.out" w r
  mkfifo "$in" "$out"
  PGPASSWORD=$GH_PG_PASSWORD psql -X -q -At -h 127.0.0.1 -p "$port" -U "$GH_PG_USER" -d postgres <"$in" >"$out" 2>&1 &
  MON_PIDS+=($!)
  exec {w}>"$in"
  exec {r}<"$out"
  MON_W[$n]=$w MON_R[$n]=$r
}
for n in 1 2 3; do open_monitor "$n" "${REPLICA_PORTS[n - 1]}"; done
MON_SQL="SELECT coalesce(string_agg(client_port::text, ','), '-') || '|' ||
  coalesce((SELECT sessions FROM pg_stat_database WHERE datname = '$BENCH_DB'), 0)
  FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = '$BENCH_DB';"
MON_SQL=${MON_SQL//$'\n'/ }

# monitor_row N: "PORTS|SESSIONS" from replica N (PORTS: the client ports of
# the bench database's backends, comma-separated, or "-").
monitor_row() {
  local line=
  printf '%s\n' "$MON_SQL" >&"${MON_W[$1]}" || { echo "-|-"; return; }
  IFS= read -r -t 5 line <&"${MON_R[$1]}" || line="-|-"
  echo "$line"
}

# tree_cpu PID...: per PID, CPU seconds (user+system) of the process, of its
# live children and of its reaped ones (cutime+cstime), on one line.
tree_cpu() {
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v t="$TCK" -v pids="$*" '
    BEGIN { n = split(pids, p, " "); for (i = 1; i <= n; i++) want[p[i]] = i }
    { pid = $1; sub(/^.*\) /, ""); c = $12 + $13 + $14 + $15
      if (pid in want) s[want[pid]] += c; else if ($2 in want) s[want[$2]] += c }
    END { for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " " : ""), s[i] / t; print "" }'
}

# us_to_s MICROSECONDS: seconds with three decimals (negative allowed).
us_to_s() { awk -v u="$1" 'BEGIN { printf "%.3f", u / 1e6 }'; }

# sample_once RUN WAVE T0_US: one row of samples.txt:
#   run wave t machine_cpu proxy_cpu primary_up primary_routed
#   then per replica 1..3: be_proxy be_other sessions cpu up routed
# (up and routed "-" while the replica is not in the proxy's cluster).
sample_once() {
  local kind=$1 wave=$2 t0=$3 now mc cpus api owners rows="" n line
  now=${EPOCHREALTIME/./}
  mc=$(machine_cpu_seconds)
  cpus=$(tree_cpu "${PM[@]}" "$GH_PROXY_PID")
  api=$(api_backends | api_lines | tr '\n' ';')
  owners=$(ss -Htnp state established "( dport = :$P1 or dport = :$P2 or dport = :$P3 )" 2>/dev/null)
  for n in 1 2 3; do
    line=$(monitor_row "$n")
    rows+="${REPLICA_PORTS[n - 1]}|$line "
  done
  awk -v run="$kind" -v wave="$wave" -v t="$(us_to_s $((now - t0)))" -v mc="$mc" -v cpus="$cpus" \
    -v api="$api" -v rows="$rows" -v gh="$GH_PROXY_PID" -v p0="$P0" '
    { # ss: Recv-Q Send-Q local peer process; key "server port:client port"
      nl = split($3, l, ":"); np = split($4, r, ":")
      if (match($0, /pid=[0-9]+/)) owner[r[np] ":" l[nl]] = substr($0, RSTART + 4, RLENGTH - 4) }
    END {
      split(cpus, c, " ")
      na = split(api, a, ";")
      for (i = 1; i <= na; i++) { split(a[i], f, " "); up[f[1]] = f[2]; routed[f[1]] = f[3] }
      k0 = "127.0.0.1:" p0
      out = sprintf("%s %s %s %s %s %s %s", run, wave, t, mc, c[4], (k0 in up) ? up[k0] : "-", (k0 in routed) ? routed[k0] : "-")
      split(rows, rr, " ")
      for (i = 1; i <= 3; i++) {
        split(rr[i], f, "|")  # server port, client ports, sessions
        bp = 0; bo = 0
        if (f[2] != "-" && f[2] != "") {
          np = split(f[2], ports, ",")
          for (j = 1; j <= np; j++) if (owner[f[1] ":" ports[j]] == gh) bp++; else bo++
        }
        k = "127.0.0.1:" f[1]
        out = out sprintf(" %d %d %s %s %s %s", bp, bo, (f[3] ~ /^[0-9]+$/) ? f[3] : "-", c[i],
          (k in up) ? up[k] : "-", (k in routed) ? routed[k] : "-")
      }
      print out
    }' <<<"$owners"
}

# wave_sampler RUN WAVE T0_US FILE: sample_once every second after T0 (the
# caller took the one at T0), and once more on USR1, then stops.
wave_sampler() {
  set +e
  trap '' PIPE
  local stop=0 k=0 now d
  trap 'stop=1' USR1
  while :; do
    k=$((k + 1))
    now=${EPOCHREALTIME/./}
    d=$(($3 + k * 1000000 - now))
    if ((d > 0)); then
      sleep "$(us_to_s "$d")" &
      wait $!
      kill $! 2>/dev/null
    fi
    sample_once "$1" "$2" "$3" >>"$4"
    ((stop)) && break
  done
}

# reload_poller T0_US SECONDS FILE: "ms-since-T0 JSON" from /api/backends
# every 0.1 s, for SECONDS or until USR1.
reload_poller() {
  set +e
  local stop=0 now
  trap 'stop=1' USR1
  while ((!stop)); do
    now=${EPOCHREALTIME/./}
    ((now - $1 > $2 * 1000000)) && break
    printf '%s %s\n' "$(((now - $1) / 1000))" "$(api_backends | tr -d '\n')" >>"$3"
    sleep 0.1 &
    wait $!
  done
}

# run_wave RUN WAVE PORT USER PASSWORD TARGET: one pgbench -S -C wave with
# the sampler; appended to $waves as "run wave target status tps
# transactions latency_ms pgbench_cpu_s machine_cpu_s wall_s start_us".
run_wave() {
  local kind=$1 wave=$2 port=$3 user=$4 pw=$5 target=$6
  local f="$DIR/runs/$kind-w$wave" t0 t1 m0 m1 status=ok TIMEFORMAT='%U %S'
  t0=${EPOCHREALTIME/./}
  # The wave's first sample before pgbench starts: its baseline.
  sample_once "$kind" "$wave" "$t0" >>"$samples" || true
  wave_sampler "$kind" "$wave" "$t0" "$samples" &
  SAMPLER_PID=$!
  m0=$(machine_cpu_seconds)
  { time PGPASSWORD=$pw "${TB_CLIENT[@]}" pgbench -n -S -C -c "$CLIENTS" -j "$JOBS" -T "$WAVE_SECS" \
    -h 127.0.0.1 -p "$port" -U "$user" "$BENCH_DB" >"$f.log" 2>&1; } 2>"$f.time" || status=failed
  m1=$(machine_cpu_seconds)
  t1=${EPOCHREALTIME/./}
  kill -USR1 "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=
  local tps tx lat pcpu
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$f.log" | head -1)
  tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$f.log" | head -1)
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$f.log" | head -1)
  pcpu=$(awk '{ print $1 + $2 }' "$f.time")
  [ "${tx:-0}" -gt 0 ] || status=failed
  echo "$kind $wave $target $status ${tps:-0} ${tx:-0} ${lat:-0} $pcpu $(awk -v a="$m0" -v b="$m1" 'BEGIN { printf "%.2f", b - a }') $(us_to_s $((t1 - t0))) $t0" >>"$waves"
  if [ "$status" = ok ]; then
    log "wave $wave $kind -> $target: ${tps%.*} tps, $tx transactions, pgbench CPU ${pcpu}s"
  else
    log "wave $wave $kind -> $target: FAILED ($(grep -m1 -i 'error\|abort\|fatal' "$f.log" || tail -1 "$f.log"))"
  fi
}

# add_third_replica: the third replica into the cluster's backends in the
# file, then POST /api/reload; starts the 0.1 s poller. Sets RELOAD_US,
# RELOAD_CODE and RELOAD_MS (time to the answer).
add_third_replica() {
  sed -i "s|^backends = .*|$(backends_line "$P1" "$P2" "$P3")|" "$DIR/gatehouse.toml"
  "$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
  RELOAD_US=${EPOCHREALTIME/./}
  reload_poller "$RELOAD_US" "$RELOAD_POLL" "$DIR/reload-poll.txt" &
  POLLER_PID=$!
  RELOAD_CODE=$(curl -s -m 10 -o "$DIR/reload.json" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:$ADMIN_PORT/api/reload") || RELOAD_CODE=curl-failed
  RELOAD_MS=$(((${EPOCHREALTIME/./} - RELOAD_US) / 1000))
  log "reload: HTTP $RELOAD_CODE after ${RELOAD_MS} ms: $(tr -d '\n' <"$DIR/reload.json")"
  if [ "$RELOAD_CODE" != 200 ] || ! grep -q "127.0.0.1:$P3 added" "$DIR/reload.json"; then
    log "RELOAD PROBLEM: the answer does not list backend 127.0.0.1:$P3 as added"
  fi
}

# direct_target WAVE: the replica (1..3) wave WAVE goes to directly:
# round-robin over two, then over three from the wave after ADD_AFTER,
# beginning with the new one.
direct_target() {
  local k=$1
  if ((k <= ADD_AFTER)); then echo $(((k - 1) % 2 + 1)); else echo $(((k - ADD_AFTER + 1) % 3 + 1)); fi
}

samples="$DIR/samples.txt"
waves="$DIR/waves.txt"
: >"$samples"
: >"$waves"

# Unrecorded warm-up: the proxy opens its pools and caches its greeting;
# both paths warm pgbench and the servers.
if ((WARMUP > 0)); then
  log "warm-up: ${WARMUP}s of pgbench -S -C against the proxy and against each of the first two replicas"
  PGPASSWORD=$BENCH_TENANT_PW pgbench -n -S -C -c "$CLIENTS" -j "$JOBS" -T "$WARMUP" -h 127.0.0.1 -p "$GH_PROXY_PORT" \
    -U "$BENCH_TENANT" "$BENCH_DB" >"$DIR/runs/warmup-proxy.log" 2>&1 || log "warm-up through the proxy failed (see $DIR/runs/warmup-proxy.log)"
  for p in "$P1" "$P2"; do
    PGPASSWORD=$BENCH_OWNER_PW pgbench -n -S -C -c "$CLIENTS" -j "$JOBS" -T "$WARMUP" -h 127.0.0.1 -p "$p" \
      -U "$BENCH_OWNER" "$BENCH_DB" >"$DIR/runs/warmup-$p.log" 2>&1 || log "warm-up against port $p failed"
  done
fi

log "$WAVES waves of ${WAVE_SECS}s per run, $CLIENTS clients (pgbench -S -C), third replica after wave $ADD_AFTER"
RELOAD_US='' RELOAD_CODE=- RELOAD_MS=- PROXY_START_AFTER_RELOAD_MS=-
for ((k = 1; k <= WAVES; k++)); do
  order=(proxy direct)
  ((k % 2)) || order=(direct proxy)
  for kind in "${order[@]}"; do
    sleep 1
    if [ "$kind" = proxy ]; then
      if ((k == ADD_AFTER + 1)); then
        add_third_replica
        PROXY_START_AFTER_RELOAD_MS=$(((${EPOCHREALTIME/./} - RELOAD_US) / 1000))
      fi
      run_wave proxy "$k" "$GH_PROXY_PORT" "$BENCH_TENANT" "$BENCH_TENANT_PW" gatehouse
      if [ -n "$POLLER_PID" ]; then
        kill -USR1 "$POLLER_PID" 2>/dev/null || true
        wait "$POLLER_PID" 2>/dev/null || true
        POLLER_PID=
      fi
    else
      r=$(direct_target "$k")
      run_wave direct "$k" "${REPLICA_PORTS[r - 1]}" "$BENCH_OWNER" "$BENCH_OWNER_PW" "pg$r"
    fi
  done
done
api_backends | jq . >"$DIR/backends-end.json" 2>/dev/null || true

# The reload poller's records as "ms up3 routed0 routed1 routed2 routed3".
: >"$DIR/reload-poll.rows"
if [ -s "$DIR/reload-poll.txt" ]; then
  while read -r ms json; do
    printf '%s %s\n' "$ms" "$(api_lines <<<"$json" | awk -v p0="$P0" -v p1="$P1" -v p2="$P2" -v p3="$P3" '
      { up[$1] = $2; r[$1] = $3 }
      END { k3 = "127.0.0.1:" p3
        printf "%d %d %d %d %d", up[k3] + 0, r["127.0.0.1:" p0] + 0, r["127.0.0.1:" p1] + 0, r["127.0.0.1:" p2] + 0, r[k3] + 0 }')"
  done <"$DIR/reload-poll.txt" >"$DIR/reload-poll.rows"
fi

# Per-second table formats: a replica's group of columns, per run.
GROUP_PROXY=' %3s %4s %6s %5s |'
GROUP_DIRECT=' %3s %4s %6s |'

# per_second RUN: the per-second table of a run from the samples (rates
# between consecutive samples of the same wave; be as sampled at the end).
per_second() {
  local kind=$1 g=$GROUP_DIRECT
  [ "$kind" = proxy ] && g=$GROUP_PROXY
  printf '%4s %5s |' "" ""
  for n in 1 2 3; do
    if [ "$kind" = proxy ]; then printf ' %-21s|' "pg$n"; else printf ' %-15s|' "pg$n"; fi
  done
  echo
  printf '%4s %5s |' wave t
  for n in 1 2 3; do
    # shellcheck disable=SC2059
    if [ "$kind" = proxy ]; then printf "$g" be cpu% conn/s tx/s; else printf "$g" be cpu% conn/s; fi
  done
  if [ "$kind" = proxy ]; then printf ' %4s %6s\n' GH% tx/s; else printf ' %s\n' to; fi
  awk -v run="$kind" -v waves="$waves" -v gfmt="$g" '
    BEGIN { while ((getline l < waves) > 0) { split(l, f, " "); if (f[1] == run) tgt[f[2]] = f[3] } }
    function isnum(x) { return x ~ /^[0-9]+$/ }
    $1 != run { next }
    {
      # (a last interval shorter than 0.3 s, after pgbench ended, is left out)
      if ($2 == pw && $3 - pt >= 0.3) {
        dt = $3 - pt
        line = sprintf("%4s %5.1f |", $2, $3)
        tot = isnum($7) ? ($7 - (isnum(p0r) ? p0r : 0)) / dt : 0
        for (i = 1; i <= 3; i++) {
          b = 8 + (i - 1) * 6
          be = (run == "proxy") ? $b : $(b + 1)
          cpu = sprintf("%.0f", ($(b + 3) - pc[i]) / dt * 100)
          conn = (isnum($(b + 2)) && isnum(ps[i])) ? sprintf("%.0f", ($(b + 2) - ps[i]) / dt) : "-"
          if (run == "proxy") {
            tx = "-"
            if (isnum($(b + 5))) { v = ($(b + 5) - (isnum(pr[i]) ? pr[i] : 0)) / dt; tot += v; tx = sprintf("%.0f", v) }
            line = line sprintf(gfmt, be, cpu, conn, tx)
          } else
            line = line sprintf(gfmt, be, cpu, conn)
        }
        if (run == "proxy") line = line sprintf(" %4.0f %6.0f", ($5 - pg) / dt * 100, tot)
        else line = line " " tgt[$2]
        print line
      }
      pw = $2; pt = $3; pg = $5; p0r = $7
      for (i = 1; i <= 3; i++) { b = 8 + (i - 1) * 6; pc[i] = $(b + 3); ps[i] = $(b + 2); pr[i] = $(b + 5) }
    }' "$samples"
}

# wave_sums RUN: per wave of RUN, "wave dcpu1 dcpu2 dcpu3 dproxy dsess1 dsess2
# dsess3 drouted0 drouted1 drouted2 drouted3 peak_be1 peak_be2 peak_be3"
# (columns 1, 2-4, 5, 6-8, 9-12, 13-15)
# (deltas first to last sample of the wave; be: the proxy's through the
# proxy, anyone else's directly).
wave_sums() {
  awk -v run="$1" '
    function num(x) { return x ~ /^[0-9.]+$/ ? x : 0 }
    $1 != run { next }
    {
      w = $2
      if (!(w in first)) { first[w] = $0; order[++n] = w }
      last[w] = $0
      for (i = 1; i <= 3; i++) { b = 8 + (i - 1) * 6; be = (run == "proxy") ? $b : $(b + 1); if (be > peak[w, i]) peak[w, i] = be }
    }
    END {
      for (j = 1; j <= n; j++) {
        w = order[j]; split(first[w], a, " "); split(last[w], z, " ")
        out = w
        for (i = 1; i <= 3; i++) { b = 8 + (i - 1) * 6; out = out " " (z[b + 3] - a[b + 3]) }
        out = out " " (z[5] - a[5])
        for (i = 1; i <= 3; i++) { b = 8 + (i - 1) * 6; out = out " " (num(z[b + 2]) - num(a[b + 2])) }
        out = out " " (num(z[7]) - num(a[7]))
        for (i = 1; i <= 3; i++) { b = 8 + (i - 1) * 6; out = out " " (num(z[b + 5]) - num(a[b + 5])) }
        for (i = 1; i <= 3; i++) out = out " " (peak[w, i] + 0)
        print out
      }
    }' "$samples"
}
wave_sums proxy >"$DIR/wave-sums-proxy.txt"
wave_sums direct >"$DIR/wave-sums-direct.txt"

# wave_field RUN WAVE COL: column COL of the run's wave row in $waves.
wave_field() { awk -v r="$1" -v w="$2" -v c="$3" '$1 == r && $2 == w { print $c }' "$waves"; }
# sums_field RUN WAVE COL: column COL of the run's wave-sums row.
sums_field() { awk -v w="$2" -v c="$3" '$1 == w { print $c }' "$DIR/wave-sums-$1.txt"; }

# Reload timings from the 0.1 s poller (ms since the POST): up, first
# transaction, first 1 s window with >= FAIR % of the routed transactions.
reload_timings() {
  awk -v fair="$FAIR" '
    { n++; t[n] = $1; up[n] = $2; tot[n] = $3 + $4 + $5 + $6; r3[n] = $6 }
    END {
      upt = "-"; first = "-"; fs = "-"; fe = "-"
      for (i = 1; i <= n; i++) {
        if (upt == "-" && up[i] == 1) upt = t[i]
        if (first == "-" && r3[i] > 0) first = t[i]
      }
      for (j = 1; j <= n && fs == "-"; j++)
        for (i = j + 1; i <= n; i++)
          if (t[i] - t[j] >= 1000) {
            d = tot[i] - tot[j]
            if (d > 0 && (r3[i] - r3[j]) * 100 >= fair * d) { fs = t[j]; fe = t[i] }
            break
          }
      print upt, first, fs, fe
    }' "$DIR/reload-poll.rows"
}

# ramp: the new replica's share of routed transactions per 0.5 s after the reload.
ramp() {
  awk '
    { n++; t[n] = $1; tot[n] = $3 + $4 + $5 + $6; r3[n] = $6 }
    END {
      prev = 1; out = ""
      for (edge = 500; n > 1 && edge < t[n] + 500; edge += 500) {
        i = prev
        while (i < n && t[i + 1] <= edge) i++
        if (i == prev) continue
        d = tot[i] - tot[prev]
        out = out sprintf("  %.1f-%.1fs %s", t[prev] / 1000, t[i] / 1000, d > 0 ? sprintf("%d%% of %d", (r3[i] - r3[prev]) * 100 / d, d) : "no tx")
        prev = i
      }
      print out
    }' "$DIR/reload-poll.rows"
}

# Through the 1 s sampler: the first sample interval (from the proxy wave
# after the reload on) in which replica 3 got >= FAIR % of routed.
fair_in_samples() {
  awk -v fair="$FAIR" -v from=$((ADD_AFTER + 1)) '
    $1 != "proxy" || $2 < from { next }
    { tot = $7; for (i = 1; i <= 3; i++) tot += ($(8 + (i - 1) * 6 + 5) ~ /^[0-9]+$/) ? $(8 + (i - 1) * 6 + 5) : 0
      r3 = ($25 ~ /^[0-9]+$/) ? $25 : 0 }
    $2 == pw && tot > ptot && (r3 - pr3) * 100 >= fair * (tot - ptot) { printf "wave %s, %.1f-%.1fs into it (%d%%)\n", $2, pt, $3, (r3 - pr3) * 100 / (tot - ptot); found = 1; exit }
    { pw = $2; pt = $3; ptot = tot; pr3 = r3 }
    END { if (!found) print "never" }' "$samples"
}

# shares RUN FROM TO: transactions per backend over waves FROM..TO, with
# shares and the spread between the replicas that got any (proxy: also
# the primary, which only a read-only endpoint with no replica up uses).
shares() {
  awk -v kind="$1" -v from="$2" -v to="$3" '
    $1 >= from && $1 <= to {
      if (kind == "proxy") { r[0] += $9; r[1] += $10; r[2] += $11; r[3] += $12 }
      else { r[1] += $6; r[2] += $7; r[3] += $8 }
    }
    END {
      t = r[0] + r[1] + r[2] + r[3]; if (t == 0) t = 1
      out = sprintf("    %-7s", kind)
      if (kind == "proxy") out = out sprintf(" primary %6d (%3.0f%%),", r[0], r[0] * 100 / t)
      max = 0; min = -1
      for (i = 1; i <= 3; i++) {
        out = out sprintf(" pg%d %6d (%3.0f%%)%s", i, r[i], r[i] * 100 / t, i < 3 ? "," : "")
        if (r[i] > 0) { if (r[i] > max) max = r[i]; if (min < 0 || r[i] < min) min = r[i] }
      }
      printf "%s; spread %s\n", out, (min > 0 ? sprintf("%.2f", max / min) : "-")
    }' "$DIR/wave-sums-$1.txt"
}

report() {
  local k
  echo
  echo "Read scaling: pgbench -S -C (new connection per transaction), $CLIENTS clients, -j $JOBS, $WAVES waves of ${WAVE_SECS}s per run;"
  echo "PostgreSQL 15 primary + 3 streaming replicas (scale $SCALE), $CORES cores; the runs' waves interleaved P D D P ..."
  echo "proxy: Gatehouse read-only endpoint (transaction pooling, pool $POOL per backend, ${GH_WORKER_THREADS:-1} worker thread(s), health checks 1 s)"
  echo "       over primary + pg1 + pg2; pg3 added by POST /api/reload before the proxy's wave $((ADD_AFTER + 1))"
  echo "direct: each wave to one replica, round-robin pg1 pg2 ..., over pg1-pg3 from wave $((ADD_AFTER + 1)) (starting with pg3)"
  echo
  echo "Proxy run, per second per replica: be = backend connections (the proxy's), cpu = % of one core (server, all processes),"
  echo "conn/s = server connections opened (pg_stat_database.sessions), tx/s = leases routed there (with -C: transactions = client connections)"
  per_second proxy
  echo
  echo "Direct run, per second per replica: be = backend connections, cpu = % of one core, conn/s = client connections served"
  per_second direct
  echo
  echo "Per wave: TPS, share of transactions per replica (proxy: routed; direct: all to one), peak backend connections"
  printf '%4s | %7s %5s %5s %5s %4s %4s %4s | %6s %7s %4s | %9s\n' wave "GH tps" "pg1%" "pg2%" "pg3%" be1 be2 be3 target "dir tps" be "GH/direct"
  for ((k = 1; k <= WAVES; k++)); do
    local gt dt tg r0 r1 r2 r3 tot s1 s2 s3 mark=""
    gt=$(wave_field proxy "$k" 5) dt=$(wave_field direct "$k" 5) tg=$(wave_field direct "$k" 3)
    r0=$(sums_field proxy "$k" 9) r1=$(sums_field proxy "$k" 10) r2=$(sums_field proxy "$k" 11) r3=$(sums_field proxy "$k" 12)
    tot=$((r0 + r1 + r2 + r3))
    s1=$(awk -v a="$r1" -v t="$tot" 'BEGIN { if (t > 0) printf "%.0f", a * 100 / t; else print "-" }')
    s2=$(awk -v a="$r2" -v t="$tot" 'BEGIN { if (t > 0) printf "%.0f", a * 100 / t; else print "-" }')
    s3=$(awk -v a="$r3" -v t="$tot" 'BEGIN { if (t > 0) printf "%.0f", a * 100 / t; else print "-" }')
    ((k == ADD_AFTER + 1)) && mark="  <- pg3 added"
    local dbe
    dbe=$(sums_field direct "$k" $((12 + ${tg#pg})))
    printf '%4s | %7.0f %5s %5s %5s %4s %4s %4s | %6s %7.0f %4s | %9s%s\n' "$k" "$gt" "$s1" "$s2" "$s3" \
      "$(sums_field proxy "$k" 13)" "$(sums_field proxy "$k" 14)" "$(sums_field proxy "$k" 15)" \
      "$tg" "$dt" "$dbe" "$(rat "$gt" "$dt")" "$mark"
  done
  local failed
  failed=$(awk '$4 != "ok"' "$waves" | wc -l)
  ((failed == 0)) || echo "FAILED waves: $failed (see $DIR/runs/)"
  echo
  echo "Adding pg3 (reload before the proxy's wave $((ADD_AFTER + 1)))"
  echo "  POST /api/reload: HTTP $RELOAD_CODE in ${RELOAD_MS} ms; answer: $(jq -c . "$DIR/reload.json" 2>/dev/null || cat "$DIR/reload.json" 2>/dev/null)"
  echo "  the proxy's wave started ${PROXY_START_AFTER_RELOAD_MS} ms after the POST was sent"
  local upt first fs fe
  read -r upt first fs fe < <(reload_timings)
  ms() { awk -v m="$1" 'BEGIN { if (m == "-") print "-"; else printf "%.1f s", m / 1000 }'; }
  echo "  from the POST (admin API polled every 0.1 s): pg3 up after $(ms "$upt"), first transaction routed to it after $(ms "$first"),"
  if [ "$fs" = - ]; then
    echo "  a fair share (>= ${FAIR}% of routed transactions in a 1 s window): not within the ${RELOAD_POLL} s polled"
  else
    echo "  a fair share (>= ${FAIR}% of routed transactions in a 1 s window) first in the window $(ms "$fs") - $(ms "$fe")"
  fi
  echo "  pg3's share per 0.5 s:$(ramp)"
  echo "  from the 1 s sampler: first interval with >= ${FAIR}%: $(fair_in_samples)"
  echo
  echo "Share of transactions per backend (proxy: routed; direct: sessions), and the spread: the most loaded replica's"
  echo "share over the least loaded one's among those in use (1.00 = even)"
  local from to label
  for label in before after; do
    if [ "$label" = before ]; then from=1 to=$ADD_AFTER; else from=$((ADD_AFTER + 1)) to=$WAVES; fi
    ((from <= to)) || continue
    echo "  waves $from-$to ($label the reload):"
    shares proxy "$from" "$to"
    shares direct "$from" "$to"
  done
  pr=$(awk '{ s1 += $6; s2 += $7; s3 += $8 } END { printf "pg1 %d, pg2 %d, pg3 %d", s1, s2, s3 }' "$DIR/wave-sums-proxy.txt")
  echo "  server connections the proxy opened over the whole run (sessions): $pr"
  echo
  echo "Peak backend connections per replica (max of the 1 s samples)"
  for kind in proxy direct; do
    awk -v run="$kind" -v pool="$POOL" '{ for (i = 1; i <= 3; i++) if ($(12 + i) > m[i]) m[i] = $(12 + i) }
      END { printf "  %-7s pg1 %3d  pg2 %3d  pg3 %3d%s\n", run, m[1], m[2], m[3], run == "proxy" ? "   (pool size " pool ")" : "   (one per client connection)" }' "$DIR/wave-sums-$kind.txt"
  done
  echo
  echo "CPU over each run (s per 1,000 transactions) and the machine's bound"
  printf '  %-7s %8s %7s %6s | %7s %7s %7s %7s %7s | %6s %8s | %6s %7s\n' \
    run tx TPS busy servers proxy pgbench other machine "other" "pgb/mach" bound "TPS/bnd"
  for kind in proxy direct; do
    local line
    line=$(awk -v run="$kind" -v cores="$CORES" -v sums="$DIR/wave-sums-$kind.txt" '
      BEGIN { while ((getline l < sums) > 0) { split(l, f, " "); srv += f[2] + f[3] + f[4]; px += f[5] } }
      $1 == run && $4 == "ok" { tx += $6; pcpu += $8; mcpu += $9; wall += $10 }
      END {
        if (tx == 0 || wall == 0 || pcpu == 0) { print "-"; exit }
        tps = tx / wall; bound = cores / (pcpu / tx); oth = mcpu - srv - pcpu - (run == "proxy" ? px : 0)
        printf "%8d %7.0f %6.2f | %7.3f %7s %7.3f %7.3f %7.3f | %6.2f %7.0f%% | %6.0f %7.2f",
          tx, tps, mcpu / wall, srv * 1000 / tx, run == "proxy" ? sprintf("%.3f", px * 1000 / tx) : "-",
          pcpu * 1000 / tx, oth * 1000 / tx, mcpu * 1000 / tx, oth / wall, pcpu * 100 / mcpu, bound, tps / bound
      }' "$waves")
    printf '  %-7s %s\n' "$kind" "$line"
  done
  echo "  (CPU in s per 1,000 transactions = ms per transaction, i.e. per client connection. servers: the three replicas' processes;"
  echo "  other: the machine's busy CPU used by none of them (kernel work charged to no process, the samplers, the primary, and any"
  echo "  other process on the machine: a second column in cores; a large one means the machine was not quiet); busy: mean busy"
  echo "  cores over the waves (/proc/stat); pgb/mach: pgbench's share of the machine's CPU; bound: the TPS that pgbench's own CPU"
  echo "  per transaction allows on $CORES cores if servers and proxy cost nothing)"
  awk -v sums="$DIR/wave-sums-proxy.txt" '
    BEGIN { while ((getline l < sums) > 0) { split(l, f, " "); r += f[9] + f[10] + f[11] + f[12] } }
    $1 == "proxy" { tx += $6 }
    END { if (tx > 0) printf "  leases routed by the proxy per pgbench transaction (should be about 1 with -C): %.3f (%d / %d)\n", r / tx, r, tx }' "$waves"
  echo
  local plain="$DIR/gatehouse.plain.log"
  sed -E 's/\x1b\[[0-9;]*m//g' "$DIR/gatehouse.log" >"$plain"
  echo "Proxy log ($plain): $(grep -c ' ERROR ' "$plain" || true) ERROR lines, $(grep -c ' WARN ' "$plain" || true) WARN lines," \
    "$(grep ' WARN ' "$plain" | grep -vc 'backend up' || true) of them other than \"backend up\"; reload and topology lines:"
  grep -E 'reload|backend' "$plain" | head -8 | cut -c1-220 | sed 's/^/  /' || true
  echo
  echo "total time $((SECONDS - started)) s; raw: $samples (1 s samples), $waves, $DIR/reload-poll.txt, pgbench output in $DIR/runs/, proxy log $DIR/gatehouse.log"
}
report | tee "$DIR/report.txt"
