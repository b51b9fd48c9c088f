#!/usr/bin/env bash
# Read/write split, the seed experiment: sysbench oltp_read_only,
# oltp_write_only and oltp_read_write against a replicated MariaDB (a
# primary and two GTID replicas, row-based binlog, from the test kit),
# directly against the primary and through a Gatehouse split endpoint
# (role = "split", transaction pooling, a pool much smaller than sysbench's
# threads) over the cluster of all three, targets alternated (A B A B) over
# several rounds. The split endpoint sends each transaction known to be
# read-only to the least busy replica and everything else (writes, explicit
# BEGIN blocks not declared READ ONLY, anything unknown) to the writer.
#
# Per run: sysbench's transactions/s, queries/s, average and 99th
# percentile latency and ignored errors; per server (primary, replica1,
# replica2) its share of the SELECTs run (delta of SHOW GLOBAL STATUS
# Com_select over the run: what each server executed, whoever sent it) and
# its CPU seconds over the run (mariadbd, /proc/PID/stat), and the proxy's;
# Com_insert + Com_update + Com_delete on the primary and on the replicas
# (MariaDB 10.11 counts each row event a replica applies there too, so the
# replicas' mirror the primary's even with row-based replication), and what
# proves who served the writes: the bench user's own SELECT_COMMANDS and
# UPDATE_COMMANDS per server (information_schema.USER_STATISTICS, userstat
# on: replication applies rows as no user, so a replica's stays 0 unless a
# client's write reached it); the leases the
# proxy routed, by why (writer, least_busy_reader, writer_fallback,
# writer_read_your_writes: from its /metrics); and how long the replicas
# took to catch up after the run (@@gtid_slave_pos reaching the primary's
# @@gtid_binlog_pos; every run starts with the replicas caught up); the
# machine's busy cores over the run (/proc/stat) and their part none of the
# benchmark's processes used (servers, proxy, sysbench): kernel work
# charged to no process, plus any other process competing for the cores.
#
# sysbench's OLTP tests wrap each transaction in BEGIN ... COMMIT unless
# --skip_trx=on: a plain BEGIN may write later, so a split endpoint sends
# the whole block to the writer, oltp_read_only's included. BENCH_SKIP_TRX=on
# runs every statement on its own (autocommit), which the split endpoint
# can route one by one.
#
#   bench/split.sh      # 16 threads, pool 8, 20 s runs, 2 rounds
#   BENCH_SECONDS=5 BENCH_ROUNDS=1 bench/split.sh
#   BENCH_SKIP_TRX=on bench/split.sh                     # autocommit statements, no BEGIN/COMMIT
#                                                        # (duplicate keys, 1062, then ignored and counted)
#   BENCH_TARGETS="direct rw split" bench/split.sh       # also a plain read_write endpoint (same pool)
#   bench/split.sh --server-cpu 0.3 --proxy-cpu 0.5 --client-cpu 0.5   # on the testbed
#   bench/split.sh --server-cpu 0.3 --proxy-cpu 0.5 --client-cpu 0.5 --az-latency 1ms
#
# Options: the testbed's (bench/testbed.sh): every server a host with its
# own CPU budget, as on separate machines, so that the replicas have CPU of
# their own to give to the reads the split endpoint sends them; with
# --az-latency the servers are that round trip away from sysbench and the
# proxy (a proxy next to the client, the databases in another zone). The
# report then prints the bound the budgets allow: what the servers that
# ran the SELECTs could serve, over what the writer alone could.
#
# Knobs: BENCH_WORKLOADS (read_only write_only read_write), BENCH_THREADS
# (16; several allowed), BENCH_SECONDS (20), BENCH_ROUNDS (2), BENCH_POOL (8,
# per backend), BENCH_TABLES / BENCH_TABLE_SIZE (4 x 10,000 rows),
# BENCH_PS_MODE (sysbench --db-ps-mode: auto = binary prepared statements,
# disable = text queries), BENCH_SKIP_TRX (off), BENCH_TARGETS (direct split;
# also rw), BENCH_READ_YOUR_WRITES (true), BENCH_MAX_REPLICA_LAG (10s),
# BENCH_WARMUP (seconds of unrecorded oltp_read_only per target first, 2),
# BENCH_IGNORE_ERRORS (with BENCH_SKIP_TRX=on, the MySQL errors sysbench
# ignores and counts: 1062,1213,1020,1205; 1062 alone to show no other
# occurred), BENCH_WRITER_READS (false; true: the split endpoint's writer_reads, the
# writer also takes reads when it is the least busy),
# GH_WORKER_THREADS (the proxy's, 1).
# Raw data under .bench/split/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
testbed_options "$@"
build_release

SECS=${BENCH_SECONDS:-20}
ROUNDS=${BENCH_ROUNDS:-2}
read -r -a THREADS <<<"${BENCH_THREADS:-16}"
read -r -a WORKLOADS <<<"${BENCH_WORKLOADS:-read_only write_only read_write}"
read -r -a TARGETS <<<"${BENCH_TARGETS:-direct split}"
POOL=${BENCH_POOL:-8}
TABLES=${BENCH_TABLES:-4}
TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
PS_MODE=${BENCH_PS_MODE:-auto}
SKIP_TRX=${BENCH_SKIP_TRX:-off}
RYW=${BENCH_READ_YOUR_WRITES:-true}
WRITER_READS=${BENCH_WRITER_READS:-false}
MAX_LAG=${BENCH_MAX_REPLICA_LAG:-10s}
WARMUP=${BENCH_WARMUP:-2}
MAX_CONNECTIONS=400
REPLICAS=2
DIR="$PWD/.bench/split"
rm -rf "$DIR"
mkdir -p "$DIR/runs"
started=$SECONDS

for w in "${WORKLOADS[@]}"; do
  case $w in
    read_only | write_only | read_write) ;;
    *) echo "unknown workload $w (read_only, write_only, read_write)" >&2; exit 2 ;;
  esac
done
for target in "${TARGETS[@]}"; do
  case $target in
    direct | rw | split) ;;
    *) echo "unknown target $target (direct, rw, split)" >&2; exit 2 ;;
  esac
done
case $SKIP_TRX in on | off) ;; *) echo "BENCH_SKIP_TRX must be on or off" >&2; exit 2 ;; esac
case $RYW in true | false) ;; *) echo "BENCH_READ_YOUR_WRITES must be true or false" >&2; exit 2 ;; esac
case $WRITER_READS in true | false) ;; *) echo "BENCH_WRITER_READS must be true or false" >&2; exit 2 ;; esac

GH_PROXY_PID=
cleanup() {
  [ -n "$GH_PROXY_PID" ] && kill "$GH_PROXY_PID" 2>/dev/null
  [ -n "${TESTKIT:-}" ] && "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

SB_COMMON=(--mysql-host=127.0.0.1 --mysql-db="$BENCH_DB" --mysql-ssl=off --tables="$TABLES"
  --table-size="$TABLE_SIZE" --db-ps-mode="$PS_MODE" --skip_trx="$SKIP_TRX")
# Without transactions, a thread's DELETE + INSERT of an id races another's
# on the same id (duplicate key, 1062): ignored (and counted) like
# sysbench's default deadlocks and lock waits.
# BENCH_IGNORE_ERRORS=1062 ignores the duplicate keys only: any other
# error then ends the run as failed, which shows there was none.
if [ "$SKIP_TRX" = on ]; then SB_COMMON+=("--mysql-ignore-errors=${BENCH_IGNORE_ERRORS:-1062,1213,1020,1205}"); fi

log "starting MariaDB: a primary and $REPLICAS replicas (max_connections $MAX_CONNECTIONS), loading $TABLES x $TABLE_SIZE rows on the primary; testbed: $(testbed_describe)"
"$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
# shellcheck disable=SC2046
"$TESTKIT" up --dir "$DIR/cluster" --no-pg --mysql-replicas "$REPLICAS" --mysql-max-connections "$MAX_CONNECTIONS" \
  $(testbed_up_args) >/dev/null
# shellcheck disable=SC1091
source "$DIR/cluster/cluster.env"
testbed_hosts "$DIR/cluster"
read -r -a SERVERS <<<"$GH_MYSQL_SERVERS" # my0 (the primary) my1 my2
if [ "${SERVERS[0]}" != "$GH_MYSQL_PRIMARY" ] || ((${#SERVERS[@]} != REPLICAS + 1)); then
  echo "unexpected servers \"$GH_MYSQL_SERVERS\" (primary $GH_MYSQL_PRIMARY)" >&2
  exit 1
fi
my_sql() { "$TESTKIT" sql --dir "$DIR/cluster" "$1" "$2"; }

# The owner and the database on the primary only: both replicate.
my_sql "$GH_MYSQL_PRIMARY" "CREATE USER '$BENCH_OWNER'@'%' IDENTIFIED BY '$BENCH_OWNER_PW'; CREATE DATABASE $BENCH_DB; \
  GRANT ALL ON $BENCH_DB.* TO '$BENCH_OWNER'@'%';" >/dev/null
sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-port="$GH_MYSQL_PRIMARY_PORT" \
  --mysql-user="$BENCH_OWNER" --mysql-password="$BENCH_OWNER_PW" --threads="$TABLES" prepare \
  >"$DIR/prepare.log" 2>&1 || { cat "$DIR/prepare.log" >&2; exit 1; }

# wait_replicas: waits (up to 300 s) until every replica's @@gtid_slave_pos
# is the primary's @@gtid_binlog_pos; prints the seconds it took, or
# "timeout".
wait_replicas() {
  local t0=${EPOCHREALTIME/./} pos n i
  pos=$(my_sql "$GH_MYSQL_PRIMARY" "SELECT @@gtid_binlog_pos")
  for n in "${SERVERS[@]:1}"; do
    for ((i = 0; ; i++)); do
      [ "$(my_sql "$n" "SELECT @@gtid_slave_pos")" = "$pos" ] && break
      ((i < 3000)) || { echo timeout; return; }
      sleep 0.1
    done
  done
  awk -v a="$t0" -v b="${EPOCHREALTIME/./}" 'BEGIN { printf "%.1f\n", (b - a) / 1e6 }'
}

# Per-user statistics on every server (not replicated: SET GLOBAL is not
# binlogged): the bench user's commands per server.
for n in "${SERVERS[@]}"; do my_sql "$n" "SET GLOBAL userstat = ON" >/dev/null; done

log "waiting for the replicas to replay the load"
catchup=$(wait_replicas)
[ "$catchup" != timeout ] || { echo "replicas did not catch up with the primary in 300 s" >&2; exit 1; }
for n in "${SERVERS[@]:1}"; do
  rows=$(my_sql "$n" "SELECT COUNT(*) FROM $BENCH_DB.sbtest$TABLES")
  [ "$rows" = "$TABLE_SIZE" ] || { echo "replica $n has $rows rows in sbtest$TABLES" >&2; exit 1; }
done
PIDS=()
for n in "${SERVERS[@]}"; do
  d="GH_${n^^}_DIR"
  PIDS+=("$(cat "${!d}/mariadbd.pid")")
done
PORTS=()
for n in "${SERVERS[@]}"; do
  p="GH_${n^^}_PORT"
  PORTS+=("${!p}")
done
# What each recorded run samples once a second (gatehouse-loadgen observe
# around sysbench): every server's CPU, RSS and client connections, and
# through the proxy its routing by why.
TCK=$(getconf CLK_TCK)
OBSERVE_SERVERS=()
OBSERVE_METRICS=(--metric gatehouse_client_connections --metric 'gatehouse_pool_connections{state="leased"}')
for i in "${!SERVERS[@]}"; do
  name=${SERVERS[i]}
  [ "$i" = 0 ] && name=primary || name=replica$i
  OBSERVE_SERVERS+=(--watch "$name=${PIDS[i]}"
    --count-connections "$name=mysql://$GH_MYSQL_USER:$GH_MYSQL_PASSWORD@127.0.0.1:${PORTS[i]}/mysql")
  OBSERVE_METRICS+=(--metric "gatehouse_backend_leases{backend=\"127.0.0.1:${PORTS[i]}\"}")
done
MARIADB_VERSION=$(my_sql "$GH_MYSQL_PRIMARY" "SELECT VERSION()")
log "MariaDB $MARIADB_VERSION, $(sysbench --version), replicas caught up in ${catchup}s"

# Gatehouse: a cluster of the primary and both replicas (roles probed with
# the monitor secret), a split endpoint and a plain read_write one (the rw
# target) over it, the admin API (for /metrics) behind a bearer token.
SPLIT_PORT=$(free_port)
RW_PORT=$(free_port)
ADMIN_PORT=$(free_port)
head -c 24 /dev/urandom | base64 -w0 >"$DIR/admin.token"
chmod 600 "$DIR/admin.token"
ADMIN_TOKEN=$(cat "$DIR/admin.token")
backends=$(printf '"127.0.0.1:%s", ' "${PORTS[@]}")
cat >"$DIR/gatehouse.toml" <<TOML
[proxy]
log_filter = "warn"
worker_threads = ${GH_WORKER_THREADS:-1}

[admin]
listen = "127.0.0.1:$ADMIN_PORT"
token_file = "$DIR/admin.token"

[[clusters]]
name = "bench"
engine = "mysql"
backends = [${backends%, }]
monitor_secret = "monitor"
health_check_interval = "1s"
pool = { size = $POOL, borrow_timeout = "30s" }

[[endpoints]]
name = "split"
listen = "127.0.0.1:$SPLIT_PORT"
cluster = "bench"
role = "split"
read_your_writes = $RYW
writer_reads = $WRITER_READS
max_replica_lag = "$MAX_LAG"
pool_mode = "transaction"
max_client_connections = 20000

[[endpoints]]
name = "rw"
listen = "127.0.0.1:$RW_PORT"
cluster = "bench"
role = "read_write"
pool_mode = "transaction"
max_client_connections = 20000

[[tenants]]
name = "$BENCH_TENANT"
databases = ["$BENCH_DB"]
secret = "owner"
mysql_native_password = "$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password --mysql)"

[[secrets]]
name = "owner"
user = "$BENCH_OWNER"
password = "$BENCH_OWNER_PW"

[[secrets]]
name = "monitor"
user = "$GH_MYSQL_USER"
password = "$GH_MYSQL_PASSWORD"
TOML
"$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
log "starting Gatehouse (split endpoint over primary + $REPLICAS replicas, pool $POOL per backend, transaction mode, read_your_writes $RYW)"
gatehouse_run "$DIR"
wait_port 127.0.0.1 "$SPLIT_PORT"
wait_port 127.0.0.1 "$ADMIN_PORT"

admin_get() { curl -s -m 2 -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:$ADMIN_PORT$1"; }
# Every backend up in the proxy, the replicas as replicas, before anything runs.
for ((i = 0; ; i++)); do
  up=$(admin_get /api/backends | jq -r '.[].backends[] | select(.up) | .backend' 2>/dev/null | sort -u | wc -l)
  ((up == ${#PORTS[@]})) && break
  ((i < 300)) || { echo "the proxy has $up of ${#PORTS[@]} backends up after 30 s" >&2; exit 1; }
  sleep 0.1
done

# routed_counts: the proxy's leases routed so far by why, from /metrics:
# "writer least_busy_reader writer_fallback writer_read_your_writes other".
routed_counts() {
  admin_get /metrics | awk '
    /^gatehouse_routed(_total)?\{/ && /cluster="bench"/ {
      r = $0; sub(/.*reason="/, "", r); sub(/".*/, "", r)
      if (r == "writer" || r == "least_busy_reader" || r == "writer_fallback" || r == "writer_read_your_writes") c[r] += $NF
      else c["other"] += $NF
    }
    END { printf "%d %d %d %d %d\n", c["writer"], c["least_busy_reader"], c["writer_fallback"], c["writer_read_your_writes"], c["other"] }'
}

# server_counts: per server "Com_select Com_insert+Com_update+Com_delete
# user_SELECT_COMMANDS user_UPDATE_COMMANDS" (the user: the bench owner, as
# sysbench direct and the proxy's pooled connections log in), all on one
# line. (Its SELECT on USER_STATISTICS counts one Com_select per server.)
server_counts() {
  local n out=""
  for n in "${SERVERS[@]}"; do
    out+=" $(my_sql "$n" "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_insert', 'Com_update', 'Com_delete'); \
      SELECT 'User', COALESCE(SUM(SELECT_COMMANDS), 0), COALESCE(SUM(UPDATE_COMMANDS), 0) \
      FROM information_schema.USER_STATISTICS WHERE USER = '$BENCH_OWNER'" |
      awk '$1 == "Com_select" { s = $2 } $1 ~ /^Com_/ && $1 != "Com_select" { w += $2 } $1 == "User" { us = $2; uu = $3 }
        END { printf "%d %d %d %d", s, w, us, uu }')"
  done
  echo "${out# }"
}

# cpus: CPU seconds of each mariadbd, then of the proxy, on one line.
cpus() {
  local p out=""
  for p in "${PIDS[@]}" "$GH_PROXY_PID"; do out+=" $(cpu_seconds "$p")"; done
  echo "${out# }"
}

# target_of NAME: sets port, user and pw for sysbench, and pid (the proxy's,
# empty for direct).
target_of() {
  case $1 in
    direct) port=$GH_MYSQL_PRIMARY_PORT user=$BENCH_OWNER pw=$BENCH_OWNER_PW pid= ;;
    split) port=$SPLIT_PORT user=$BENCH_TENANT pw=$BENCH_TENANT_PW pid=$GH_PROXY_PID ;;
    rw) port=$RW_PORT user=$BENCH_TENANT pw=$BENCH_TENANT_PW pid=$GH_PROXY_PID ;;
  esac
}

# run_one WORKLOAD THREADS TARGET ROUND: one sysbench run, appended to
# $results as (columns)
#   1 workload 2 threads 3 target 4 round 5 status 6 tps 7 transactions 8 qps
#   9 queries 10 latency_ms 11 p99_ms 12 errors 13 sysbench_reads
#   14 sysbench_writes 15-17 Com_select (primary, replica1, replica2)
#   18-20 Com_insert+update+delete (same) 21-23 mariadbd CPU s (same)
#   24 proxy CPU s ("-" direct) 25 replicas' catch-up s after the run
#   26-30 leases routed: writer least_busy_reader writer_fallback
#   writer_read_your_writes other ("-" direct) 31-33 the bench user's
#   SELECT_COMMANDS (primary, replica1, replica2) 34-36 its UPDATE_COMMANDS
#   (same) 37 busy cores 38 other cores.
run_one() {
  local w=$1 t=$2 target=$3 r=$4 port user pw pid
  target_of "$target"
  local f="$DIR/runs/$w-t$t-$target-r$r" c0 c1 k0 k1 r0 r1
  local status tps tx qps q lat err sbcpu m0 m1 t0 t1
  SB_OBSERVE=("$LOADGEN" observe --name "$target" --round "$r" --json "$f.json" --quiet --clk-tck "$TCK"
    "${OBSERVE_SERVERS[@]}")
  [ -n "$pid" ] && SB_OBSERVE+=(--watch-proxy "gatehouse=$pid" --metrics "127.0.0.1:$ADMIN_PORT"
    --metrics-token "$ADMIN_TOKEN" "${OBSERVE_METRICS[@]}")
  c0=$(server_counts) r0=$(routed_counts) k0=$(cpus)
  m0=$(machine_cpu_seconds) t0=${EPOCHREALTIME/./}
  read -r status tps tx qps q lat err sbcpu < <(sysbench_detail "$f.log" "oltp_$w" "${SB_COMMON[@]}" \
    --mysql-port="$port" --mysql-user="$user" --mysql-password="$pw" --threads="$t" --time="$SECS" \
    --percentile=99)
  SB_OBSERVE=()
  t1=${EPOCHREALTIME/./} m1=$(machine_cpu_seconds)
  k1=$(cpus) r1=$(routed_counts) c1=$(server_counts)
  local catch p99 reads writes
  catch=$(wait_replicas)
  read -r p99 reads writes < <(awk '
    $1 == "99th" { p = $3 } $1 == "read:" { r = $2 } $1 == "write:" { w = $2 }
    END { printf "%s %d %d\n", (p == "" ? 0 : p), r, w }' "$f.log")
  local deltas
  deltas=$(awk -v c0="$c0" -v c1="$c1" -v k0="$k0" -v k1="$k1" -v r0="$r0" -v r1="$r1" -v direct="$([ -z "$pid" ] && echo 1)" \
    -v m0="$m0" -v m1="$m1" -v w0="$t0" -v w1="$t1" -v sb="$sbcpu" 'BEGIN {
    split(c0, a, " "); split(c1, b, " "); split(k0, x, " "); split(k1, y, " "); split(r0, p, " "); split(r1, q, " ")
    out = ""
    for (i = 1; i <= 9; i += 4) out = out " " (b[i] - a[i])        # Com_select
    for (i = 2; i <= 10; i += 4) out = out " " (b[i] - a[i])       # Com_insert+update+delete
    for (i = 1; i <= 3; i++) out = out sprintf(" %.2f", y[i] - x[i])
    out = out (direct ? " -" : sprintf(" %.2f", y[4] - x[4]))
    for (i = 1; i <= 5; i++) out = out " " (direct ? "-" : (q[i] - p[i]))
    for (i = 3; i <= 11; i += 4) out = out " " (b[i] - a[i])       # user SELECT_COMMANDS
    for (i = 4; i <= 12; i += 4) out = out " " (b[i] - a[i])       # user UPDATE_COMMANDS
    ours = sb
    for (i = 1; i <= 4; i++) ours += y[i] - x[i]                   # the servers and the proxy (also idle)
    wall = (w1 - w0) / 1e6
    out = out sprintf(" %.2f %.2f", (m1 - m0) / wall, (m1 - m0 - ours) / wall)
    print substr(out, 2)
  }')
  # (the catch-up time sits between the CPU and the routed columns)
  local d
  read -r -a d <<<"$deltas"
  echo "$w $t $target $r $status $tps $tx $qps $q $lat $p99 $err $reads $writes ${d[*]:0:10} $catch ${d[*]:10:13}" >>"$results"
  if [ "$status" = ok ]; then
    log "$w threads=$t round=$r $target: $tps tps, $qps qps, ${lat} ms (p99 $p99), $err ignored errors; Com_select primary/replica1/replica2 ${d[0]}/${d[1]}/${d[2]}; user writes ${d[18]}/${d[19]}/${d[20]}; CPU s ${d[6]}/${d[7]}/${d[8]}, proxy ${d[9]}; routed writer/reader/fallback/ryw ${d[10]}/${d[11]}/${d[12]}/${d[13]}; replicas caught up in ${catch}s; busy cores ${d[21]} (other ${d[22]})"
  else
    log "$w threads=$t round=$r $target: FAILED ($(grep -m1 -i 'error\|fatal' "$f.log" || tail -1 "$f.log"))"
  fi
}

results="$DIR/results.txt"
: >"$results"
cells=()
for w in "${WORKLOADS[@]}"; do
  for t in "${THREADS[@]}"; do cells+=("$w $t"); done
done

sysbench_warmup "$WARMUP"
alternate_cells

# ok_sum W T TARGET COL: sum of COL over the ok runs of the cell ("-" when
# COL is "-" or there is none).
ok_sum() {
  awk -v w="$1" -v t="$2" -v tg="$3" -v col="$4" '
    $1 == w && $2 == t && $3 == tg && $5 == "ok" && $col != "-" { s += $col; n++ }
    END { if (n) printf "%d\n", s; else print "-" }' "$results"
}
# shares W T TARGET COL: each server's percentage of the sum of columns COL,
# COL+1, COL+2 (primary, replica1, replica2) over the cell's ok runs, and
# that sum: "P% R1% R2% TOTAL".
shares() {
  awk -v w="$1" -v t="$2" -v tg="$3" -v col="$4" '
    $1 == w && $2 == t && $3 == tg && $5 == "ok" { a += $col; b += $(col + 1); c += $(col + 2); n++ }
    END {
      s = a + b + c
      if (!n || s == 0) { print "- - - 0"; exit }
      printf "%.1f%% %.1f%% %.1f%% %d\n", a * 100 / s, b * 100 / s, c * 100 / s, s
    }' "$results"
}
# ok_pair W T TARGET COL: over the cell's ok runs, the sum of COL (the
# primary) and of COL+1 + COL+2 (the replicas): "PRIMARY REPLICAS".
ok_pair() {
  awk -v w="$1" -v t="$2" -v tg="$3" -v col="$4" '
    $1 == w && $2 == t && $3 == tg && $5 == "ok" { a += $col; b += $(col + 1) + $(col + 2); n++ }
    END { if (n) printf "%d %d\n", a, b; else print "- -" }' "$results"
}

report() {
  echo
  echo "Read/write split: MariaDB $MARIADB_VERSION, a primary + $REPLICAS replicas (GTID, row-based binlog), $(sysbench --version),"
  echo "$TABLES tables x $TABLE_SIZE rows, --db-ps-mode=$PS_MODE, --skip_trx=$SKIP_TRX, userstat on, $(nproc) cores"
  echo "Gatehouse: split endpoint (read_your_writes $RYW, writer_reads $WRITER_READS, max_replica_lag $MAX_LAG) over all three, transaction pooling,"
  echo "pool $POOL per backend, ${GH_WORKER_THREADS:-1} worker thread(s); targets: ${TARGETS[*]} (direct = the primary);"
  echo "${SECS}s x $ROUNDS rounds per cell, means; * = some rounds failed (mean of the others); failed = all rounds failed"
  echo "testbed: $(testbed_describe)"
  echo
  echo "Throughput, latency (ms per transaction: average, 99th percentile), sysbench's ignored errors (all rounds)"
  printf '%-10s %7s %-6s | %8s %9s %6s | %8s %8s | %5s\n' workload threads target TPS QPS "/dir" "lat avg" "lat p99" errors
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    local td
    td=$(mean_of "$w" "$t" direct 6 "%.1f")
    for target in "${TARGETS[@]}"; do
      local tp
      tp=$(mean_of "$w" "$t" "$target" 6 "%.1f")
      printf '%-10s %7s %-6s | %8s %9s %6s | %8s %8s | %5s\n' "$w" "$t" "$target" "$tp" \
        "$(mean_of "$w" "$t" "$target" 8 "%.1f")" "$(rat "$tp" "$td")" \
        "$(mean_of "$w" "$t" "$target" 10 "%.2f")" "$(mean_of "$w" "$t" "$target" 11 "%.2f")" \
        "$(sum_of "$w" "$t" "$target" 12)"
    done
  done
  echo
  if testbed_on && [ -n "$TB_SERVER_CPU" ]; then
    local readers=$REPLICAS
    [ "$WRITER_READS" = true ] && readers=$((REPLICAS + 1))
    echo "The bound on this testbed: every server has $TB_SERVER_CPU cores, so a split endpoint can serve at most ${readers}x"
    echo "direct's reads (the $readers servers that take them$([ "$WRITER_READS" = true ] || echo ", the writer not among them: BENCH_WRITER_READS=true adds it")),"
    echo "and read_write's writes stay on the one writer"
    echo
  fi
  echo "Who ran the SELECTs, over the ok runs: each server's share of its Com_select delta (every SELECT it executed: the"
  echo "proxy's health probes too), and of the bench user's SELECT_COMMANDS (sysbench's, and through the proxy also the"
  echo "proxy's own on its pooled connections: SELECT @@last_gtid after a transaction that may have written, with"
  echo "read_your_writes, and the LAST_INSERT_ID() read back after an INSERT); sysbench's reads for comparison"
  printf '%-10s %7s %-6s | %7s %8s %8s %9s | %7s %8s %8s %9s | %9s\n' workload threads target \
    primary replica1 replica2 "Com_sel" primary replica1 replica2 "user sel" "sb reads"
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    for target in "${TARGETS[@]}"; do
      local sp s1 s2 stot up u1 u2 utot
      read -r sp s1 s2 stot < <(shares "$w" "$t" "$target" 15)
      read -r up u1 u2 utot < <(shares "$w" "$t" "$target" 31)
      printf '%-10s %7s %-6s | %7s %8s %8s %9s | %7s %8s %8s %9s | %9s\n' "$w" "$t" "$target" "$sp" "$s1" "$s2" "$stot" \
        "$up" "$u1" "$u2" "$utot" "$(ok_sum "$w" "$t" "$target" 13)"
    done
  done
  echo
  echo "Leases the proxy routed over the ok runs, by why (ryw = writer_read_your_writes: no replica had replayed the"
  echo "client's last write; other = caught_up_reader: a replica asked at the lease had replayed it, or writer_as_reader: the"
  echo "writer was the least busy, with writer_reads), against sysbench's transactions"
  printf '%-10s %7s %-6s | %9s %9s %9s %9s %7s | %9s\n' workload threads target writer reader fallback ryw other "sb tx"
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    for target in "${TARGETS[@]}"; do
      [ "$target" = direct ] && continue
      printf '%-10s %7s %-6s | %9s %9s %9s %9s %7s | %9s\n' "$w" "$t" "$target" \
        "$(ok_sum "$w" "$t" "$target" 26)" "$(ok_sum "$w" "$t" "$target" 27)" "$(ok_sum "$w" "$t" "$target" 28)" \
        "$(ok_sum "$w" "$t" "$target" 29)" "$(ok_sum "$w" "$t" "$target" 30)" "$(ok_sum "$w" "$t" "$target" 7)"
    done
  done
  echo
  echo "Writes over the ok runs: Com_insert + Com_update + Com_delete on the primary and on the replicas (both summed;"
  echo "MariaDB counts the row events a replica applies, so they mirror the primary's), and the bench user's"
  echo "UPDATE_COMMANDS (INSERT, UPDATE, DELETE it ran; replication applies as no user): 0 on the replicas = the writer"
  echo "served every write; sysbench's writes for comparison"
  printf '%-10s %7s %-6s | %9s %9s | %9s %9s | %9s\n' workload threads target "Com pri" "Com repl" "user pri" "user repl" "sb writes"
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    for target in "${TARGETS[@]}"; do
      local cp cr up ur
      read -r cp cr < <(ok_pair "$w" "$t" "$target" 18)
      read -r up ur < <(ok_pair "$w" "$t" "$target" 34)
      printf '%-10s %7s %-6s | %9s %9s | %9s %9s | %9s\n' "$w" "$t" "$target" "$cp" "$cr" "$up" "$ur" \
        "$(ok_sum "$w" "$t" "$target" 14)"
    done
  done
  echo
  echo "CPU seconds per run (mariadbd of each server, the proxy; /proc/PID/stat), the replicas' catch-up after the run (s, max),"
  echo "the machine's busy cores over the runs and their part none of the benchmark's processes used (other: CPU charged to"
  echo "no process, e.g. loopback softirq work, plus any other process on the machine; a cell whose other is well above the"
  echo "rest had company on the cores, and its throughput says little)"
  printf '%-10s %7s %-6s | %7s %8s %8s %7s | %7s | %5s %5s\n' workload threads target primary replica1 replica2 proxy catchup busy other
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    for target in "${TARGETS[@]}"; do
      printf '%-10s %7s %-6s | %7s %8s %8s %7s | %7s | %5s %5s\n' "$w" "$t" "$target" \
        "$(mean_of "$w" "$t" "$target" 21 "%.2f")" "$(mean_of "$w" "$t" "$target" 22 "%.2f")" \
        "$(mean_of "$w" "$t" "$target" 23 "%.2f")" "$(mean_of "$w" "$t" "$target" 24 "%.2f")" \
        "$(awk -v w="$w" -v t="$t" -v tg="$target" '$1 == w && $2 == t && $3 == tg {
            if ($25 == "timeout") m = "timeout"; else if (m != "timeout" && $25 > m + 0) m = $25 }
            END { print (m == "" ? 0 : m) }' "$results")" \
        "$(mean_of "$w" "$t" "$target" 37 "%.2f")" "$(mean_of "$w" "$t" "$target" 38 "%.2f")"
    done
  done
  echo
  local plain="$DIR/gatehouse.plain.log"
  sed -E 's/\x1b\[[0-9;]*m//g' "$DIR/gatehouse.log" >"$plain"
  echo "Proxy log ($plain): $(grep -c ' ERROR ' "$plain" || true) ERROR lines, $(grep -c ' WARN ' "$plain" || true) WARN lines"
  testbed_report
  echo "total time $((SECONDS - started)) s; raw runs: $results, sysbench output in $DIR/runs/, proxy config $DIR/gatehouse.toml"
}
report | tee "$DIR/report.txt"

# One HTML report per workload and thread count: the targets side by side
# (direct the baseline), from the runs observe sampled.
MACHINE="$(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
pages=()
for cell in "${cells[@]}"; do
  read -r w t <<<"$cell"
  runs=()
  for ((r = 1; r <= ROUNDS; r++)); do
    for target in "${TARGETS[@]}"; do
      f="$DIR/runs/$w-t$t-$target-r$r.json"
      [ -s "$f" ] && runs+=("$f")
    done
  done
  ((${#runs[@]})) || continue
  "$LOADGEN" report --title "Read/write split: sysbench oltp_$w, $t threads (MariaDB)" \
    --out "$DIR/$w-t$t.html" --json-out "$DIR/$w-t$t.json" \
    --config "machine=$MACHINE" \
    --config "servers=MariaDB $MARIADB_VERSION, a primary and $REPLICAS replicas (GTID, row-based binlog)" \
    --config "load=$(sysbench --version) oltp_$w, $t threads, $TABLES tables of $TABLE_SIZE rows, ps-mode $PS_MODE, skip_trx $SKIP_TRX, ${SECS} s per run, $ROUNDS round(s)" \
    --config "testbed=$(testbed_describe)" \
    --config "direct=the primary, bench_owner's password" \
    --config "split=a split endpoint over the primary and both replicas, transaction pooling, pool $POOL per backend, read_your_writes $RYW, writer_reads $WRITER_READS" \
    --config "rw=a read_write endpoint over the same cluster and pool" \
    "${runs[@]}" >"$DIR/$w-t$t.txt"
  pages+=("$DIR/$w-t$t.html")
done
echo "HTML reports: ${pages[*]}"
