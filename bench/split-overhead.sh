#!/usr/bin/env bash
# What a split endpoint's classifier costs: one backend per engine and no
# replica, so a split endpoint routes every transaction to the same server
# a read_write endpoint does, and the difference between the two is the
# work of deciding (parsing each statement, the routing state) and nothing
# else. One Gatehouse serves a PostgreSQL 15 primary and a MariaDB primary
# (test kit), each through two endpoints on the same cluster, same pool:
# role = "read_write" and role = "split" (read_your_writes on, its default;
# these workloads never write, so no position is ever read).
#
# Workloads: pgbench -S (select-only; BENCH_PGBENCH_MODE: simple, extended
# or prepared) at several client counts, and sysbench oltp_point_select at
# several thread counts; targets alternated (rw split rw split) over
# several rounds. Per run: throughput (TPS; for oltp_point_select one
# SELECT per transaction), average latency, and the proxy's CPU seconds
# per 1,000 transactions (/proc/PID/stat; both endpoints live in the same
# process and the runs never overlap, so a run's CPU belongs to the
# endpoint it used; the idle engine's health checks add the same to both),
# and the leases the proxy routed, by why (writer, writer_fallback, ...:
# from /metrics), which shows the split endpoint classified: with no
# replica its reads fall back to the writer; and the machine's busy cores
# over the run (/proc/stat) with the part of them none of the benchmark's
# processes used (the server, the proxy, the client): kernel work charged
# to no process, plus any other process competing for the cores (a run
# with much more of it than its neighbours had company). Reported: split / read_write throughput against the target
# (>= 0.95) and the CPU ratio.
#
#   bench/split-overhead.sh     # pgbench 10, 100 clients; sysbench 8, 64 threads; 10 s runs, 3 rounds
#   BENCH_SECONDS=5 BENCH_ROUNDS=1 bench/split-overhead.sh
#   BENCH_WORKLOADS=pg BENCH_PGBENCH_MODE=extended bench/split-overhead.sh
#
# Knobs: BENCH_WORKLOADS (pg my), BENCH_CLIENTS (pgbench, "10 100"),
# BENCH_THREADS (sysbench, "8 64"), BENCH_SECONDS (10), BENCH_ROUNDS (3),
# BENCH_POOL (20), BENCH_PGBENCH_MODE (simple), BENCH_SCALE (pgbench scale,
# 10), BENCH_TABLES / BENCH_TABLE_SIZE (sysbench, 4 x 10,000 rows),
# BENCH_PS_MODE (sysbench --db-ps-mode, auto), BENCH_WARMUP (seconds of
# unrecorded load per endpoint first, 2), BENCH_VARIANTS (base; see
# variant_toml), GH_WORKER_THREADS (the proxy's, 1).
# Raw data under .bench/split-overhead/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
read -r -a WORKLOADS <<<"${BENCH_WORKLOADS:-pg my}"
read -r -a CLIENTS <<<"${BENCH_CLIENTS:-10 100}"
read -r -a THREADS <<<"${BENCH_THREADS:-8 64}"
read -r -a VARIANTS <<<"${BENCH_VARIANTS:-base}"
POOL=${BENCH_POOL:-20}
PGBENCH_MODE=${BENCH_PGBENCH_MODE:-simple}
SCALE=${BENCH_SCALE:-10}
TABLES=${BENCH_TABLES:-4}
TABLE_SIZE=${BENCH_TABLE_SIZE:-10000}
PS_MODE=${BENCH_PS_MODE:-auto}
WARMUP=${BENCH_WARMUP:-2}
MAX_CONNECTIONS=300
TARGETS=(rw split)
WANT=0.95
DIR="$PWD/.bench/split-overhead"
rm -rf "$DIR"
mkdir -p "$DIR/runs"
started=$SECONDS

for w in "${WORKLOADS[@]}"; do
  case $w in
    pg | my) ;;
    *) echo "unknown workload $w (pg: pgbench -S, my: sysbench oltp_point_select)" >&2; exit 2 ;;
  esac
done
case $PGBENCH_MODE in simple | extended | prepared) ;; *) echo "BENCH_PGBENCH_MODE must be simple, extended or prepared" >&2; exit 2 ;; esac

# variant_toml VARIANT: the configuration a variant adds to the proxy's
# (appended to the file; the proxy restarts for each variant):
#   base      nothing: the split endpoint's classifier alone;
#   rules100  100 query rules on the split endpoints, none matching the
#             workloads' statements (each a text regex the statement is
#             checked against): what checking rules costs per statement;
#             the read_write endpoints have no rules;
#   digest    per-digest statistics on (both endpoints): what normalising,
#             timing and counting each statement costs; compared with the
#             base variant's read_write endpoint (run before it).
variant_toml() {
  case $1 in
    base) ;;
    rules100)
      local i
      for ((i = 1; i <= 100; i++)); do
        printf '\n[[rules]]\nname = "r%d"\nendpoints = ["pg_split", "my_split"]\nquery_regex = "(?i)from no_such_table_%d "\nblock = "never"\n' "$i" "$i"
      done
      ;;
    digest) printf '\n[digests]\nenabled = true\n' ;;
    *)
      echo "unknown variant $1 (base, rules100, digest)" >&2
      return 1
      ;;
  esac
}
# want_of VARIANT: the target ratio (split / read_write; digest: against base).
want_of() {
  case $1 in
    base) echo 0.95 ;;
    *) echo 0.9 ;;
  esac
}
for v in "${VARIANTS[@]}"; do variant_toml "$v" >/dev/null || exit 2; done

GH_PROXY_PID=
cleanup() {
  [ -n "$GH_PROXY_PID" ] && kill "$GH_PROXY_PID" 2>/dev/null
  [ -n "${TESTKIT:-}" ] && "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

SB_COMMON=(--mysql-host=127.0.0.1 --mysql-db="$BENCH_DB" --mysql-ssl=off --tables="$TABLES"
  --table-size="$TABLE_SIZE" --db-ps-mode="$PS_MODE" --report-interval=0)

log "starting PostgreSQL 15 and MariaDB (one server each, max_connections $MAX_CONNECTIONS), loading pgbench scale $SCALE and $TABLES x $TABLE_SIZE sysbench rows"
"$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
"$TESTKIT" up --dir "$DIR/cluster" --pg-max-connections "$MAX_CONNECTIONS" \
  --mysql --mysql-max-connections "$MAX_CONNECTIONS" >/dev/null
# shellcheck disable=SC1091
source "$DIR/cluster/cluster.env"
# PostgreSQL: the bench owner and database, pgbench's tables (as cluster_up).
PGPASSWORD=$GH_PG_PASSWORD psql -X -q -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$GH_PG_USER" -d postgres -v ON_ERROR_STOP=1 \
  -c "CREATE ROLE $BENCH_OWNER LOGIN PASSWORD '$BENCH_OWNER_PW'" -c "CREATE DATABASE $BENCH_DB OWNER $BENCH_OWNER"
PGPASSWORD=$BENCH_OWNER_PW pgbench -i -q -s "$SCALE" -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$BENCH_OWNER" "$BENCH_DB" \
  >"$DIR/pgbench-init.log" 2>&1 || { cat "$DIR/pgbench-init.log" >&2; exit 1; }
# MariaDB: the same owner and database, sysbench's tables.
"$TESTKIT" sql --dir "$DIR/cluster" "$GH_MYSQL_PRIMARY" \
  "CREATE USER '$BENCH_OWNER'@'%' IDENTIFIED BY '$BENCH_OWNER_PW'; CREATE DATABASE $BENCH_DB; \
   GRANT ALL ON $BENCH_DB.* TO '$BENCH_OWNER'@'%';" >/dev/null
sysbench oltp_point_select "${SB_COMMON[@]}" --mysql-port="$GH_MYSQL_PRIMARY_PORT" \
  --mysql-user="$BENCH_OWNER" --mysql-password="$BENCH_OWNER_PW" --threads="$TABLES" prepare \
  >"$DIR/sysbench-prepare.log" 2>&1 || { cat "$DIR/sysbench-prepare.log" >&2; exit 1; }
MARIADB_VERSION=$("$TESTKIT" sql --dir "$DIR/cluster" "$GH_MYSQL_PRIMARY" "SELECT VERSION()")
log "MariaDB $MARIADB_VERSION, $(sysbench --version), pgbench $(pgbench --version | awk '{ print $3 }')"

# Ports: per engine, the read_write and the split endpoint; the admin API.
PG_RW_PORT=$(free_port)
PG_SPLIT_PORT=$(free_port)
MY_RW_PORT=$(free_port)
MY_SPLIT_PORT=$(free_port)
ADMIN_PORT=$(free_port)
head -c 24 /dev/urandom | base64 -w0 >"$DIR/admin.token"
chmod 600 "$DIR/admin.token"
ADMIN_TOKEN=$(cat "$DIR/admin.token")
SCRAM=$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password)
MYHASH=$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password --mysql)

# write_config VARIANT: the proxy's configuration: a cluster per engine (its
# one server), a read_write and a split endpoint on each, one tenant for
# both engines; then the variant's additions.
write_config() {
  local endpoints="" e
  for e in "pg rw $PG_RW_PORT read_write" "pg split $PG_SPLIT_PORT split" \
    "my rw $MY_RW_PORT read_write" "my split $MY_SPLIT_PORT split"; do
    local cluster name port role
    read -r cluster name port role <<<"$e"
    endpoints+="
[[endpoints]]
name = \"${cluster}_$name\"
listen = \"127.0.0.1:$port\"
cluster = \"$cluster\"
role = \"$role\"
pool_mode = \"transaction\"
max_client_connections = 20000
"
  done
  cat >"$DIR/gatehouse.toml" <<TOML
[proxy]
log_filter = "warn"
worker_threads = ${GH_WORKER_THREADS:-1}

[admin]
listen = "127.0.0.1:$ADMIN_PORT"
token_file = "$DIR/admin.token"

[[clusters]]
name = "pg"
engine = "postgres"
backends = ["127.0.0.1:$GH_PG_PRIMARY_PORT"]
monitor_secret = "monitor_pg"
pool = { size = $POOL, borrow_timeout = "30s" }

[[clusters]]
name = "my"
engine = "mysql"
backends = ["127.0.0.1:$GH_MYSQL_PRIMARY_PORT"]
monitor_secret = "monitor_my"
pool = { size = $POOL, borrow_timeout = "30s" }
$endpoints
[[tenants]]
name = "$BENCH_TENANT"
databases = ["$BENCH_DB"]
secret = "owner"
scram_verifier = "$SCRAM"
mysql_native_password = "$MYHASH"

[[secrets]]
name = "owner"
user = "$BENCH_OWNER"
password = "$BENCH_OWNER_PW"

[[secrets]]
name = "monitor_pg"
user = "$GH_PG_USER"
password = "$GH_PG_PASSWORD"

[[secrets]]
name = "monitor_my"
user = "$GH_MYSQL_USER"
password = "$GH_MYSQL_PASSWORD"
$(variant_toml "$1")
TOML
  "$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
}

# start_proxy VARIANT: the proxy with the variant's configuration; waits
# until every endpoint and the admin API listen. Sets GH_PROXY_PID.
start_proxy() {
  write_config "$1"
  cp "$DIR/gatehouse.toml" "$DIR/gatehouse-$1.toml"
  "$GATEHOUSE" run --config "$DIR/gatehouse.toml" >"$DIR/gatehouse-$1.log" 2>&1 &
  GH_PROXY_PID=$!
  local p
  for p in "$PG_RW_PORT" "$PG_SPLIT_PORT" "$MY_RW_PORT" "$MY_SPLIT_PORT" "$ADMIN_PORT"; do wait_port 127.0.0.1 "$p"; done
}

stop_proxy() {
  kill "$GH_PROXY_PID" 2>/dev/null || true
  wait "$GH_PROXY_PID" 2>/dev/null || true
  GH_PROXY_PID=
}

# routed_counts: the proxy's leases routed so far by why, all clusters,
# from /metrics: "writer least_busy_reader writer_fallback
# writer_read_your_writes other".
routed_counts() {
  curl -s -m 2 -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '
    /^gatehouse_routed(_total)?\{/ {
      r = $0; sub(/.*reason="/, "", r); sub(/".*/, "", r)
      if (r == "writer" || r == "least_busy_reader" || r == "writer_fallback" || r == "writer_read_your_writes") c[r] += $NF
      else c["other"] += $NF
    }
    END { printf "%d %d %d %d %d\n", c["writer"], c["least_busy_reader"], c["writer_fallback"], c["writer_read_your_writes"], c["other"] }'
}

# The servers' processes, for their CPU: the postmaster (its backends are
# its children) and mariadbd.
PG_PID=$(head -1 "$GH_PG0_DIR/data/postmaster.pid")
MY_PID=$(cat "$GH_MY0_DIR/mariadbd.pid")
TCK=$(getconf CLK_TCK)

# tree_cpu PID: CPU seconds (user+system) of the process, of its live
# children and of its reaped ones (cutime+cstime).
tree_cpu() {
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v t="$TCK" -v want="$1" '
    { pid = $1; sub(/^.*\) /, ""); c = $12 + $13 + $14 + $15
      if (pid == want || $2 == want) s += c }
    END { printf "%.2f\n", s / t }'
}

# port_of ENGINE TARGET: the endpoint's port.
port_of() {
  case "$1 $2" in
    "pg rw") echo "$PG_RW_PORT" ;;
    "pg split") echo "$PG_SPLIT_PORT" ;;
    "my rw") echo "$MY_RW_PORT" ;;
    "my split") echo "$MY_SPLIT_PORT" ;;
  esac
}

# load ENGINE N SECONDS PORT OUTFILE: one run of the engine's workload
# with N clients (pgbench) or threads (sysbench); prints "STATUS TPS
# TRANSACTIONS LATENCY_MS CLIENT_CPU_S".
load() {
  local engine=$1 n=$2 secs=$3 port=$4 out=$5
  if [ "$engine" = pg ]; then
    local TIMEFORMAT='%U %S'
    { time pgbench_detail "$out" "$port" "$BENCH_TENANT" "$BENCH_TENANT_PW" "$n" "$secs" -M "$PGBENCH_MODE" >"$out.res"; } 2>"$out.time"
    echo "$(cat "$out.res") $(awk '{ print $1 + $2 }' "$out.time")"
  else
    local status tps tx _qps _q lat _err cpu
    read -r status tps tx _qps _q lat _err cpu < <(sysbench_detail "$out" oltp_point_select "${SB_COMMON[@]}" \
      --mysql-port="$port" --mysql-user="$BENCH_TENANT" --mysql-password="$BENCH_TENANT_PW" --threads="$n" --time="$secs")
    echo "$status $tps $tx $lat $cpu"
  fi
}

# run_one VARIANT ENGINE N TARGET ROUND: one run, appended to $results as
# "variant/engine n target round status tps transactions latency_ms
# proxy_cpu_s proxy_cpu_s_per_1k_tx routed_writer routed_reader
# routed_fallback routed_ryw routed_other busy_cores other_cores".
run_one() {
  local v=$1 engine=$2 n=$3 target=$4 r=$5
  local f="$DIR/runs/$v-$engine-n$n-$target-r$r" port cpu0 cpu1 r0 r1 status tps tx lat ccpu
  local spid=$PG_PID sv0 sv1 m0 m1 t0 t1
  [ "$engine" = my ] && spid=$MY_PID
  port=$(port_of "$engine" "$target")
  r0=$(routed_counts) cpu0=$(cpu_seconds "$GH_PROXY_PID")
  sv0=$(tree_cpu "$spid") m0=$(machine_cpu_seconds) t0=${EPOCHREALTIME/./}
  read -r status tps tx lat ccpu < <(load "$engine" "$n" "$SECS" "$port" "$f.log")
  t1=${EPOCHREALTIME/./} m1=$(machine_cpu_seconds) sv1=$(tree_cpu "$spid")
  cpu1=$(cpu_seconds "$GH_PROXY_PID") r1=$(routed_counts)
  local rest
  rest=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$tx" -v r0="$r0" -v r1="$r1" -v m0="$m0" -v m1="$m1" \
    -v s0="$sv0" -v s1="$sv1" -v c="$ccpu" -v w0="$t0" -v w1="$t1" 'BEGIN {
    split(r0, p, " "); split(r1, q, " ")
    printf "%.2f %s", b - a, (t > 0 ? sprintf("%.4f", (b - a) * 1000 / t) : "-")
    for (i = 1; i <= 5; i++) printf " %d", q[i] - p[i]
    wall = (w1 - w0) / 1e6
    printf " %.2f %.2f\n", (m1 - m0) / wall, (m1 - m0 - (b - a) - (s1 - s0) - c) / wall
  }')
  echo "$v/$engine $n $target $r $status $tps $tx $lat $rest" >>"$results"
  local cpuk busy other
  read -r _ cpuk _ _ _ _ _ busy other <<<"$rest"
  if [ "$status" = ok ]; then
    log "$v $engine n=$n round=$r $target: $tps tps, ${lat} ms, proxy CPU $cpuk s/1000 tx; routed writer/reader/fallback/ryw/other $(cut -d' ' -f3-7 <<<"$rest" | tr ' ' /); busy cores $busy (other $other)"
  else
    log "$v $engine n=$n round=$r $target: FAILED ($(grep -m1 -i 'error\|fatal\|abort' "$f.log" || tail -1 "$f.log"))"
  fi
}

results="$DIR/results.txt"
: >"$results"
cells=()
for engine in "${WORKLOADS[@]}"; do
  if [ "$engine" = pg ]; then
    for n in "${CLIENTS[@]}"; do cells+=("$engine $n"); done
  else
    for n in "${THREADS[@]}"; do cells+=("$engine $n"); done
  fi
done

for v in "${VARIANTS[@]}"; do
  log "variant $v: starting Gatehouse (read_write and split endpoints per engine, pool $POOL, transaction mode)"
  start_proxy "$v"
  # A short unrecorded run per engine and endpoint first: the pools open,
  # both sides warm their caches.
  if ((WARMUP > 0)); then
    for engine in "${WORKLOADS[@]}"; do
      for target in "${TARGETS[@]}"; do
        read -r status _ < <(load "$engine" 8 "$WARMUP" "$(port_of "$engine" "$target")" "$DIR/runs/$v-warmup-$engine-$target.log")
        [ "$status" = ok ] || log "warm-up of $engine $target failed: $(grep -m1 -i 'error\|fatal\|abort' "$DIR/runs/$v-warmup-$engine-$target.log" || true)"
      done
    done
  fi
  for cell in "${cells[@]}"; do
    read -r engine n <<<"$cell"
    for ((r = 1; r <= ROUNDS; r++)); do
      for target in "${TARGETS[@]}"; do
        sleep 1
        run_one "$v" "$engine" "$n" "$target" "$r"
      done
    done
  done
  stop_proxy
done

# target_note RATIO [WANT]: the target ratio, met or not.
target_note() {
  awk -v r="$1" -v want="${2:-$WANT}" 'BEGIN {
    if (r !~ /^[0-9.]+$/) print "(>= " want "x: -)"; else if (r >= want) print "(>= " want "x: met)"; else print "(>= " want "x: MISSED)" }'
}
# sum_of CELL_A CELL_B TARGET COL: sum of COL over the cell's ok runs.
sum_of() { awk -v a="$1" -v b="$2" -v tg="$3" -v col="$4" '$1 == a && $2 == b && $3 == tg && $5 == "ok" { s += $col } END { print s + 0 }' "$results"; }
label() {
  case $1 in
    pg) echo "pgbench -S -M $PGBENCH_MODE" ;;
    my) echo "sysbench point_select" ;;
  esac
}

report() {
  echo
  echo "Split endpoint overhead: one backend per engine, no replica; endpoints read_write and split on the same cluster, pool $POOL,"
  echo "transaction mode, one Gatehouse (${GH_WORKER_THREADS:-1} worker thread(s)) for both engines; PostgreSQL 15 (pgbench scale $SCALE),"
  echo "MariaDB $MARIADB_VERSION ($TABLES x $TABLE_SIZE rows, --db-ps-mode=$PS_MODE); $(nproc) cores"
  echo "${SECS}s x $ROUNDS rounds per cell (rw split rw split ...), means; * = some rounds failed (mean of the others); failed = all failed"
  for v in "${VARIANTS[@]}"; do
    echo
    echo "Variant $v: throughput (TPS), average latency (ms), proxy CPU (s per 1,000 transactions)"
    printf '%-24s %6s | %9s %9s %6s %-15s | %7s %7s | %8s %8s %6s\n' workload n "TPS rw" "TPS split" split/rw "" "lat rw" "lat spl" "CPU rw" "CPU spl" "spl/rw"
    for cell in "${cells[@]}"; do
      read -r engine n <<<"$cell"
      local a="$v/$engine" tr ts ratio cr cs
      tr=$(mean_of "$a" "$n" rw 6 "%.0f") ts=$(mean_of "$a" "$n" split 6 "%.0f")
      cr=$(mean_of "$a" "$n" rw 10 "%.4f") cs=$(mean_of "$a" "$n" split 10 "%.4f")
      ratio=$(rat "$ts" "$tr")
      printf '%-24s %6s | %9s %9s %6s %-15s | %7s %7s | %8s %8s %6s\n' "$(label "$engine")" "$n" "$tr" "$ts" "$ratio" \
        "$(target_note "$ratio" "$(want_of "$v")")" "$(mean_of "$a" "$n" rw 8 "%.3f")" "$(mean_of "$a" "$n" split 8 "%.3f")" "$cr" "$cs" "$(rat "$cs" "$cr")"
    done
    if [ "$v" != base ] && [[ " ${VARIANTS[*]} " == *" base "* ]]; then
      echo
      echo "Variant $v against base (the same endpoint; variants run one after the other, not alternated)"
      printf '%-24s %6s | %9s %9s %6s %-15s | %9s %9s %6s\n' workload n "TPS rw" "base rw" ratio "" "TPS spl" "base spl" ratio
      for cell in "${cells[@]}"; do
        read -r engine n <<<"$cell"
        local vr br vs bs r1
        vr=$(mean_of "$v/$engine" "$n" rw 6 "%.0f") br=$(mean_of "base/$engine" "$n" rw 6 "%.0f")
        vs=$(mean_of "$v/$engine" "$n" split 6 "%.0f") bs=$(mean_of "base/$engine" "$n" split 6 "%.0f")
        r1=$(rat "$vr" "$br")
        printf '%-24s %6s | %9s %9s %6s %-15s | %9s %9s %6s\n' "$(label "$engine")" "$n" "$vr" "$br" "$r1" \
          "$(target_note "$r1" "$(want_of "$v")")" "$vs" "$bs" "$(rat "$vs" "$bs")"
      done
    fi
    echo
    echo "Variant $v: the machine's busy cores over the runs and their part none of the benchmark's processes used (other: CPU"
    echo "charged to no process, e.g. loopback softirq work, plus any other process on the machine; a cell whose other is well"
    echo "above the rest had company on the cores, and its throughput says little)"
    printf '%-24s %6s | %7s %7s | %7s %7s\n' workload n "busy rw" "busy sp" "oth rw" "oth sp"
    for cell in "${cells[@]}"; do
      read -r engine n <<<"$cell"
      local a="$v/$engine"
      printf '%-24s %6s | %7s %7s | %7s %7s\n' "$(label "$engine")" "$n" \
        "$(mean_of "$a" "$n" rw 16 "%.2f")" "$(mean_of "$a" "$n" split 16 "%.2f")" \
        "$(mean_of "$a" "$n" rw 17 "%.2f")" "$(mean_of "$a" "$n" split 17 "%.2f")"
    done
    echo
    echo "Variant $v: leases the proxy routed over the ok runs, by why, against the transactions (split with no replica: reads"
    echo "fall back to the writer, writer_fallback; ryw = writer_read_your_writes)"
    printf '%-24s %6s %-6s | %9s %9s %9s %9s %7s | %9s\n' workload n target writer reader fallback ryw other transactions
    for cell in "${cells[@]}"; do
      read -r engine n <<<"$cell"
      for target in "${TARGETS[@]}"; do
        local a="$v/$engine"
        printf '%-24s %6s %-6s | %9s %9s %9s %9s %7s | %9s\n' "$(label "$engine")" "$n" "$target" \
          "$(sum_of "$a" "$n" "$target" 11)" "$(sum_of "$a" "$n" "$target" 12)" "$(sum_of "$a" "$n" "$target" 13)" \
          "$(sum_of "$a" "$n" "$target" 14)" "$(sum_of "$a" "$n" "$target" 15)" "$(sum_of "$a" "$n" "$target" 7)"
      done
    done
    local plain="$DIR/gatehouse-$v.plain.log"
    sed -E 's/\x1b\[[0-9;]*m//g' "$DIR/gatehouse-$v.log" >"$plain"
    echo "proxy log ($plain): $(grep -c ' ERROR ' "$plain" || true) ERROR lines, $(grep -c ' WARN ' "$plain" || true) WARN lines"
  done
  echo
  echo "total time $((SECONDS - started)) s; raw runs: $results, client output in $DIR/runs/, proxy configs $DIR/gatehouse-*.toml"
}
report | tee "$DIR/report.txt"
