# Shared pieces of the benchmark scripts and ./demo: a real cluster from the
# test kit, a Gatehouse and a PgBouncer in front of it, and pgbench runs
# whose throughput and proxy CPU are measured. Source after scripts/lib.sh.

BENCH_DB=bench
BENCH_OWNER=bench_owner
BENCH_OWNER_PW=bench-owner-pw
BENCH_TENANT=bench
BENCH_TENANT_PW=bench-tenant-pw
# sysbench_detail runs sysbench under this when a script sets it.
SB_OBSERVE=()
# shellcheck source=bench/testbed.sh
source "$(dirname "${BASH_SOURCE[0]}")/testbed.sh"

# Builds the release binaries once.
build_release() {
  log "cargo build --release"
  cargo build --release --quiet -p gatehouse -p gatehouse-testkit -p gatehouse-loadgen
  # GH_GATEHOUSE_BIN: another build of the proxy to measure (say, the
  # commit before a change), with this checkout's scripts and tools.
  GATEHOUSE="${GH_GATEHOUSE_BIN:-$CARGO_TARGET_DIR/release/gatehouse}"
  TESTKIT="$CARGO_TARGET_DIR/release/gatehouse-testkit"
  LOADGEN="$CARGO_TARGET_DIR/release/gatehouse-loadgen"
}

# cluster_up DIR [PG_REPLICAS] [MAX_CONNECTIONS] [SCALE]: starts PostgreSQL,
# creates the benchmark owner and database, and loads pgbench's tables
# (scale 10 unless SCALE is given). GH_TESTKIT_UP_ARGS: more options of
# `gatehouse-testkit up` (say, --mysql, or --tls for servers that take TLS).
cluster_up() {
  local dir=$1 replicas=${2:-0} maxconn=${3:-300} scale=${4:-10}
  "$TESTKIT" down --dir "$dir" >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  "$TESTKIT" up --dir "$dir" --pg-replicas "$replicas" --pg-max-connections "$maxconn" ${GH_TESTKIT_UP_ARGS:-} \
    $(testbed_up_args) >/dev/null
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  testbed_hosts "$dir"
  export PGPASSWORD="$GH_PG_PASSWORD"
  local su=(psql -X -q -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$GH_PG_USER" -d postgres -v ON_ERROR_STOP=1)
  "${su[@]}" -c "CREATE ROLE $BENCH_OWNER LOGIN PASSWORD '$BENCH_OWNER_PW'"
  "${su[@]}" -c "CREATE DATABASE $BENCH_DB OWNER $BENCH_OWNER"
  PGPASSWORD=$BENCH_OWNER_PW pgbench -i -q -s "$scale" -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$BENCH_OWNER" "$BENCH_DB" >/dev/null 2>&1
  unset PGPASSWORD
}

# pg_replicas_caught_up ROWS PORT...: waits (60 s at most) until each
# replica on PORT has replayed the primary's WAL as of now, then checks that
# the bench owner sees ROWS rows in pgbench_accounts there.
pg_replicas_caught_up() {
  local rows=$1 lsn p i seen
  shift
  local su=(psql -X -q -At -h 127.0.0.1 -U "$GH_PG_USER" -d postgres)
  lsn=$(PGPASSWORD=$GH_PG_PASSWORD "${su[@]}" -p "$GH_PG_PRIMARY_PORT" -c "SELECT pg_current_wal_lsn()")
  for p in "$@"; do
    for ((i = 0; i < 600; i++)); do
      [ "$(PGPASSWORD=$GH_PG_PASSWORD "${su[@]}" -p "$p" -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn")" = t ] && break
      sleep 0.1
    done
    seen=$(PGPASSWORD=$BENCH_OWNER_PW psql -X -q -At -h 127.0.0.1 -p "$p" -U "$BENCH_OWNER" -d "$BENCH_DB" \
      -c "SELECT count(*) FROM pgbench_accounts")
    [ "$seen" = "$rows" ] || { echo "replica on port $p has $seen rows in pgbench_accounts, not $rows" >&2; exit 1; }
  done
}

# start_gatehouse DIR POOL_SIZE MODE [ENGINE]: writes a config (one
# read_write endpoint, the bench tenant) and starts the proxy in front of the
# PostgreSQL primary, or with ENGINE=mysql the MariaDB primary. Sets
# GH_PROXY_PID and GH_PROXY_PORT. GH_MAX_CLIENTS: the endpoint's
# max_client_connections (20,000); GH_CLUSTER_TOML: lines added to the
# cluster's table; GH_ENDPOINT_TOML: lines added to the endpoint's table
# (say, its tls); GH_EXTRA_TOML: sections added at the end; GH_PROXY_WRAP:
# a command the proxy runs under (say, valgrind and its options; split on
# spaces, the proxy's pid is still GH_PROXY_PID when the command execs it).
start_gatehouse() {
  local dir=$1 pool=$2 mode=$3 engine=${4:-postgres}
  GH_PROXY_PORT=$(free_port)
  local backend_port auth monitor_user monitor_pw
  if [ "$engine" = mysql ]; then
    backend_port=$GH_MYSQL_PRIMARY_PORT monitor_user=$GH_MYSQL_USER monitor_pw=$GH_MYSQL_PASSWORD
    auth="mysql_native_password = \"$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password --mysql)\""
  else
    backend_port=$GH_PG_PRIMARY_PORT monitor_user=$GH_PG_USER monitor_pw=$GH_PG_PASSWORD
    auth="scram_verifier = \"$(printf '%s' "$BENCH_TENANT_PW" | "$GATEHOUSE" hash-password)\""
  fi
  cat >"$dir/gatehouse.toml" <<TOML
[proxy]
log_filter = "warn"
worker_threads = ${GH_WORKER_THREADS:-1}

[[clusters]]
name = "bench"
engine = "$engine"
backends = ["127.0.0.1:$backend_port"]
monitor_secret = "monitor"
pool = { size = $pool, borrow_timeout = "30s" }
${GH_CLUSTER_TOML:-}

[[endpoints]]
name = "rw"
listen = "127.0.0.1:$GH_PROXY_PORT"
cluster = "bench"
role = "read_write"
pool_mode = "$mode"
max_client_connections = ${GH_MAX_CLIENTS:-20000}
${GH_ENDPOINT_TOML:-}

[[tenants]]
name = "$BENCH_TENANT"
databases = ["$BENCH_DB"]
secret = "owner"
$auth

[[secrets]]
name = "owner"
user = "$BENCH_OWNER"
password = "$BENCH_OWNER_PW"

[[secrets]]
name = "monitor"
user = "$monitor_user"
password = "$monitor_pw"
${GH_EXTRA_TOML:-}
TOML
  "$GATEHOUSE" check-config "$dir/gatehouse.toml" >/dev/null
  gatehouse_run "$dir"
  wait_port 127.0.0.1 "$GH_PROXY_PORT"
}

# gatehouse_run DIR: starts `gatehouse run` on DIR/gatehouse.toml in the
# background, its log in DIR/gatehouse.log, under GH_PROXY_WRAP (a command
# split on spaces: valgrind, or the testbed's proxy host); sets
# GH_PROXY_PID (the wrapper execs the proxy, so the pid is the proxy's).
gatehouse_run() {
  local dir=$1 wrap=()
  read -r -a wrap <<<"${GH_PROXY_WRAP:-}"
  "${wrap[@]}" "$GATEHOUSE" run --config "$dir/gatehouse.toml" >"$dir/gatehouse.log" 2>&1 &
  GH_PROXY_PID=$!
}

# start_pgbouncer DIR POOL_SIZE MODE: PgBouncer (Debian package) with the
# same pool size and mode, SCRAM to clients like Gatehouse. It refuses to run
# as root, so it runs as the postgres user. Sets PGB_PID and PGB_PORT.
# GH_PGBOUNCER_INI: lines added to its [pgbouncer] section; GH_PROXY_WRAP
# as for start_gatehouse.
start_pgbouncer() {
  local dir=$1 pool=$2 mode=$3
  PGB_PORT=$(free_port)
  local pdir="$dir/pgbouncer"
  mkdir -p "$pdir"
  printf '"%s" "%s"\n' "$BENCH_OWNER" "$BENCH_OWNER_PW" >"$pdir/userlist.txt"
  cat >"$pdir/pgbouncer.ini" <<INI
[databases]
$BENCH_DB = host=127.0.0.1 port=$GH_PG_PRIMARY_PORT dbname=$BENCH_DB

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $pdir/userlist.txt
pool_mode = $mode
default_pool_size = $pool
max_client_conn = 20000
server_reset_query = DISCARD ALL
logfile = $pdir/pgbouncer.log
pidfile = $pdir/pgbouncer.pid
log_connections = 0
log_disconnections = 0
${GH_PGBOUNCER_INI:-}
INI
  local run=() wrap=()
  read -r -a wrap <<<"${GH_PROXY_WRAP:-}"
  run=("${wrap[@]}" pgbouncer "$pdir/pgbouncer.ini")
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres "$pdir"
    run=(runuser -u postgres -- "${run[@]}")
  fi
  "${run[@]}" >"$pdir/stdout.log" 2>&1 &
  wait_port 127.0.0.1 "$PGB_PORT"
  # (It may listen before it writes its pid file: slowly, under valgrind.)
  local i
  for ((i = 0; i < 100; i++)); do [ -s "$pdir/pgbouncer.pid" ] && break; sleep 0.1; done
  PGB_PID=$(cat "$pdir/pgbouncer.pid")
}

# pgbench_run PORT USER PASSWORD CLIENTS SECONDS [EXTRA...]: prints
# "TPS TRANSACTIONS" (select-only, no vacuum).
pgbench_run() {
  local port=$1 user=$2 pw=$3 clients=$4 secs=$5
  shift 5
  local jobs=$((clients < 2 ? 1 : 2)) out
  out=$(PGPASSWORD=$pw pgbench -n -S -T "$secs" -c "$clients" -j "$jobs" "$@" \
    -h 127.0.0.1 -p "$port" -U "$user" "$BENCH_DB" 2>&1) || { echo "pgbench failed: $out" >&2; echo "0 0"; return; }
  local tps tx
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -1)
  tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  echo "${tps:-0} ${tx:-0}"
}

# ratio A B: A/B with two decimals ("-" when B is zero).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
mean() { awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n; else print 0 }'; }

# pgbench_detail OUTFILE PORT USER PASSWORD CLIENTS SECONDS [EXTRA...]: like
# pgbench_run, but keeps pgbench's output in OUTFILE and prints
# "STATUS TPS TRANSACTIONS LATENCY_MS", STATUS being "ok", or "failed" when
# pgbench exited non-zero (e.g. clients aborted on errors) or processed
# nothing.
pgbench_detail() {
  local outfile=$1 port=$2 user=$3 pw=$4 clients=$5 secs=$6
  shift 6
  local jobs=$((clients < 2 ? 1 : 2)) status=ok
  PGPASSWORD=$pw pgbench -n -S -T "$secs" -c "$clients" -j "$jobs" "$@" \
    -h 127.0.0.1 -p "$port" -U "$user" "$BENCH_DB" >"$outfile" 2>&1 || status=failed
  local tps tx lat
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$outfile" | head -1)
  tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$outfile" | head -1)
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$outfile" | head -1)
  [ "${tx:-0}" -gt 0 ] || status=failed
  echo "$status ${tps:-0} ${tx:-0} ${lat:-0}"
}

# pgbench_measured N TARGET ROUND PID LOGFILE PORT USER PASSWORD SECONDS
# [EXTRA...]: one pgbench_detail run of N clients with the CPU the proxy
# PID used around it (/proc), appended to $results as "pg N TARGET ROUND
# status tps transactions latency_ms proxy_cpu_s proxy_cpu_s_per_1k_tx" and
# logged.
pgbench_measured() {
  local n=$1 target=$2 r=$3 pid=$4 f=$5 port=$6 user=$7 pw=$8 secs=$9
  shift 9
  local cpu0 cpu1 status tps tx lat cpu cpuk
  cpu0=$(cpu_seconds "$pid")
  read -r status tps tx lat < <(pgbench_detail "$f" "$port" "$user" "$pw" "$n" "$secs" "$@")
  cpu1=$(cpu_seconds "$pid")
  read -r cpu cpuk < <(awk -v a="$cpu0" -v b="$cpu1" -v t="$tx" 'BEGIN {
    printf "%.3f %s\n", b - a, (t > 0 ? sprintf("%.4f", (b - a) * 1000 / t) : "-") }')
  echo "pg $n $target $r $status $tps $tx $lat $cpu $cpuk" >>"$results"
  if [ "$status" = ok ]; then
    log "n=$n round=$r $target: $tps tps, $lat ms, proxy CPU $cpuk s/1000 tx"
  else
    log "n=$n round=$r $target: FAILED ($(grep -m1 -i 'error\|fatal\|abort' "$f" || tail -1 "$f"))"
  fi
}

# rss_kib PID: a process's resident set size in KiB (VmRSS).
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# raise_fd_limit PID: raises a running process's soft open-file limit to
# its hard limit. PgBouncer started through runuser gets the PAM default
# soft limit (1024), too few for many clients. Runs prlimit as the process's
# owner: the same user needs no capability for this.
raise_fd_limit() {
  local pid=$1 hard owner
  hard=$(awk '/^Max open files/ { print $5 }' "/proc/$pid/limits")
  owner=$(stat -c %U "/proc/$pid")
  if [ "$owner" = "$(id -un)" ]; then
    prlimit --pid "$pid" --nofile="$hard:$hard"
  else
    runuser -u "$owner" -- prlimit --pid "$pid" --nofile="$hard:$hard"
  fi
}

# pgbouncer_use_verifier DIR: replaces the plain-text password in PgBouncer's
# auth_file (from start_pgbouncer) with the bench owner's SCRAM verifier from
# the server, as Gatehouse stores a verifier for its tenant: PgBouncer then
# runs no PBKDF2 per client login, and logs into the server with the client's
# SCRAM keys (pass-through). Reloads PgBouncer's configuration.
pgbouncer_use_verifier() {
  local pdir=$1/pgbouncer verifier
  verifier=$(PGPASSWORD=$GH_PG_PASSWORD psql -X -Atq -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$GH_PG_USER" -d postgres \
    -c "SELECT rolpassword FROM pg_authid WHERE rolname = '$BENCH_OWNER'")
  case $verifier in
    SCRAM-SHA-256*) ;;
    *) echo "no SCRAM verifier for $BENCH_OWNER on the server" >&2; return 1 ;;
  esac
  printf '"%s" "%s"\n' "$BENCH_OWNER" "$verifier" >"$pdir/userlist.txt"
  kill -HUP "$PGB_PID"
  sleep 0.5
}

# pgbouncer_use_md5 DIR: PgBouncer (from start_pgbouncer) asks clients for
# md5 (auth_type md5, the password in plain text in its auth_file, which it
# also uses for SCRAM to the server). Reloads PgBouncer's configuration.
pgbouncer_use_md5() {
  local pdir=$1/pgbouncer
  printf '"%s" "%s"\n' "$BENCH_OWNER" "$BENCH_OWNER_PW" >"$pdir/userlist.txt"
  sed -i 's/^auth_type = .*/auth_type = md5/' "$pdir/pgbouncer.ini"
  kill -HUP "$PGB_PID"
  sleep 0.5
}

# md5_tenant_toml NAME: a Gatehouse tenant NAME (for GH_EXTRA_TOML) stored
# with an md5 hash of the bench tenant's password: the same database and
# backend credentials as the bench tenant, md5 between client and proxy.
md5_tenant_toml() {
  cat <<TOML

[[tenants]]
name = "$1"
databases = ["$BENCH_DB"]
secret = "owner"
md5_hash = "md5$(printf '%s%s' "$BENCH_TENANT_PW" "$1" | md5sum | cut -d' ' -f1)"
TOML
}

# sysbench_detail OUTFILE ARGS...: runs `sysbench ARGS... run` with its
# output in OUTFILE and prints "STATUS TPS TRANSACTIONS QPS QUERIES
# LATENCY_MS ERRORS CLIENT_CPU_S" from its summary and sysbench's own CPU
# seconds (user+system), STATUS being "ok", or "failed" when sysbench exited
# non-zero (a thread hit an error it does not ignore) or counted no
# transaction. With SB_OBSERVE set (an array: `gatehouse-loadgen observe`
# and its options), sysbench runs under it with a report every second and
# its latency histogram, and the client CPU includes the sampler's.
sysbench_detail() {
  local outfile=$1 status=ok TIMEFORMAT='%U %S'
  shift
  if ((${#SB_OBSERVE[@]})); then
    { time "${SB_OBSERVE[@]}" --log "$outfile" -- "${TB_CLIENT[@]}" sysbench "$@" --report-interval=1 --histogram=on run \
      >"$outfile.observe" 2>&1; } 2>"$outfile.time" || status=failed
  else
    { time "${TB_CLIENT[@]}" sysbench "$@" run >"$outfile" 2>&1; } 2>"$outfile.time" || status=failed
  fi
  awk -v status="$status" -v cpu="$(awk '{ print $1 + $2 }' "$outfile.time")" '
    $1 == "transactions:" { tx = $2; tps = $3; sub(/^\(/, "", tps) }
    $1 == "queries:" { q = $2; qps = $3; sub(/^\(/, "", qps) }
    $1 == "ignored" && $2 == "errors:" { err = $3 }
    $1 == "avg:" && !lat { lat = $2 }
    END {
      if (tx + 0 == 0) status = "failed"
      printf "%s %s %s %s %s %s %s %s\n", status, tps + 0, tx + 0, qps + 0, q + 0, lat + 0, err + 0, cpu + 0
    }' "$outfile"
}

# mysql_cluster_up DIR MAX_CONNECTIONS: a MariaDB primary with the bench
# owner and database, sysbench's tables loaded directly (the caller's
# SB_COMMON and TABLES; its log in $DIR/prepare.log). Sets the GH_MYSQL_*
# and GH_MY0_* variables (cluster.env) and MY_PID (mariadbd).
mysql_cluster_up() {
  local dir=$1 max_connections=$2
  "$TESTKIT" down --dir "$dir" >/dev/null 2>&1 || true
  "$TESTKIT" up --dir "$dir" --no-pg --mysql --mysql-max-connections "$max_connections" >/dev/null
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  "$TESTKIT" sql --dir "$dir" "$GH_MYSQL_PRIMARY" \
    "CREATE USER '$BENCH_OWNER'@'%' IDENTIFIED BY '$BENCH_OWNER_PW'; CREATE DATABASE $BENCH_DB; \
     GRANT ALL ON $BENCH_DB.* TO '$BENCH_OWNER'@'%';" >/dev/null
  MY_PID=$(cat "$GH_MY0_DIR/mariadbd.pid")
  sysbench oltp_read_only "${SB_COMMON[@]}" --mysql-port="$GH_MYSQL_PRIMARY_PORT" \
    --mysql-user="$BENCH_OWNER" --mysql-password="$BENCH_OWNER_PW" --threads="$TABLES" prepare \
    >"$DIR/prepare.log" 2>&1 || { cat "$DIR/prepare.log" >&2; return 1; }
}

# machine_cpu_seconds: CPU seconds all cores have spent busy (user, nice,
# system, irq, softirq, steal) since boot, from /proc/stat.
machine_cpu_seconds() {
  local tck
  tck=$(getconf CLK_TCK)
  awk -v t="$tck" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / t }' /proc/stat
}

# mean_of CELL_A CELL_B TARGET COL FMT: mean of COL over the ok runs of a
# cell in "$results" (rows: A B TARGET ROUND ok|failed ...): "failed" when
# none was ok, a "*" suffix when some failed, "-" when COL is "-" throughout
# (a proxy figure of a direct run).
mean_of() {
  awk -v w="$1" -v t="$2" -v tg="$3" -v col="$4" -v fmt="$5" '
    $1 == w && $2 == t && $3 == tg { n++; if ($5 == "ok" && $col != "-") { ok++; s += $col } else if ($col == "-") dash++ }
    END {
      if (!n || dash == n) print "-"
      else if (!ok) print "failed"
      else printf fmt "%s\n", s / ok, (ok < n ? "*" : "")
    }' "$results"
}

# rat A B: A/B when both are numbers (a "*" suffix is ignored), else "-".
rat() {
  awk -v a="${1%\*}" -v b="${2%\*}" 'BEGIN {
    if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "-" }'
}

# sysbench_warmup SECONDS: a short unrecorded oltp_read_only run (8 threads)
# against each of TARGETS, so the proxy opens its pools and the servers warm
# their caches. Needs the caller's target_of (sets port, user, pw),
# SB_COMMON and DIR.
sysbench_warmup() {
  local secs=$1 target status
  ((secs > 0)) || return 0
  for target in "${TARGETS[@]}"; do
    target_of "$target"
    read -r status _ < <(sysbench_detail "$DIR/runs/warmup-$target.log" oltp_read_only "${SB_COMMON[@]}" \
      --mysql-port="$port" --mysql-user="$user" --mysql-password="$pw" --threads=8 --time="$secs")
    [ "$status" = ok ] || log "warm-up against $target failed: $(grep -m1 -i 'error\|fatal' "$DIR/runs/warmup-$target.log" || true)"
  done
}

# alternate_cells: each cell of the caller's cells ("workload threads"),
# ROUNDS times, the TARGETS alternated within a round (A B A B), one
# run_one WORKLOAD THREADS TARGET ROUND each, a second apart.
alternate_cells() {
  local cell w t r target
  for cell in "${cells[@]}"; do
    read -r w t <<<"$cell"
    for ((r = 1; r <= ROUNDS; r++)); do
      for target in "${TARGETS[@]}"; do
        sleep 1
        run_one "$w" "$t" "$target" "$r"
      done
    done
  done
}

# PROXY_PIDS: the proxies a script started; cleanup_proxies (its EXIT trap)
# stops them and the test kit's cluster under $DIR/cluster. TARGET_PID and
# TARGET_PORT: the proxies measured by pgbench_warm_up and
# pgbench_alternated, by target name (add_target).
PROXY_PIDS=()
declare -A TARGET_PID=() TARGET_PORT=()

# add_target NAME: the proxy start_gatehouse just started is target NAME.
add_target() {
  TARGET_PID[$1]=$GH_PROXY_PID
  TARGET_PORT[$1]=$GH_PROXY_PORT
  PROXY_PIDS+=("$GH_PROXY_PID")
}

cleanup_proxies() {
  local pid
  for pid in "${PROXY_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}

# pgbench_knobs: the knobs of the scripts that alternate pgbench over
# proxies, from the environment: SECS (BENCH_SECONDS, 10), ROUNDS
# (BENCH_ROUNDS, 3), CLIENTS (BENCH_CLIENTS, "10 100"), POOL (BENCH_POOL,
# 20), PGBENCH_MODE (BENCH_PGBENCH_MODE, simple; exits 2 unless one of
# pgbench's -M modes), SCALE (BENCH_SCALE, 10), WARMUP (BENCH_WARMUP, 2).
pgbench_knobs() {
  SECS=${BENCH_SECONDS:-10}
  ROUNDS=${BENCH_ROUNDS:-3}
  read -r -a CLIENTS <<<"${BENCH_CLIENTS:-10 100}"
  POOL=${BENCH_POOL:-20}
  PGBENCH_MODE=${BENCH_PGBENCH_MODE:-simple}
  SCALE=${BENCH_SCALE:-10}
  WARMUP=${BENCH_WARMUP:-2}
  case $PGBENCH_MODE in simple | extended | prepared) ;; *) echo "BENCH_PGBENCH_MODE must be simple, extended or prepared" >&2; exit 2 ;; esac
}

# pgbench_warm_up TARGET...: WARMUP seconds of unrecorded pgbench -S -M
# $PGBENCH_MODE (8 clients) through each TARGET (add_target), output under
# $DIR/runs/.
pgbench_warm_up() {
  local target status
  ((WARMUP > 0)) || return 0
  for target in "$@"; do
    read -r status _ < <(pgbench_detail "$DIR/runs/warmup-$target.log" "${TARGET_PORT[$target]}" "$BENCH_TENANT" "$BENCH_TENANT_PW" 8 "$WARMUP" -M "$PGBENCH_MODE")
    [ "$status" = ok ] || log "warm-up of $target failed: $(grep -m1 -i 'error\|fatal\|abort' "$DIR/runs/warmup-$target.log" || true)"
  done
}

# pgbench_alternated TARGET...: for each of CLIENTS, ROUNDS rounds of SECS
# seconds of pgbench -S -M $PGBENCH_MODE, the targets (add_target)
# alternated a second apart, each run measured by pgbench_measured into
# $results (output under $DIR/runs/).
pgbench_alternated() {
  local target n r
  for n in "${CLIENTS[@]}"; do
    for ((r = 1; r <= ROUNDS; r++)); do
      for target in "$@"; do
        sleep 1
        pgbench_measured "$n" "$target" "$r" "${TARGET_PID[$target]}" "$DIR/runs/n$n-$target-r$r.log" \
          "${TARGET_PORT[$target]}" "$BENCH_TENANT" "$BENCH_TENANT_PW" "$SECS" -M "$PGBENCH_MODE"
      done
    done
  done
}

# median_of W N TARGET COL FMT: the median of COL over the ok runs of
# (W, N, TARGET) in $results, printed with FMT ("-" when none): what one
# outlier run on a shared machine does not move.
median_of() {
  awk -v w="$1" -v t="$2" -v tg="$3" -v col="$4" '$1 == w && $2 == t && $3 == tg && $5 == "ok" && $col != "-" { print $col }' "$results" |
    sort -g | awk -v fmt="$5" '{ v[NR] = $1 } END {
      if (!NR) print "-"; else if (NR % 2) printf fmt "\n", v[(NR + 1) / 2]; else printf fmt "\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# sum_of W T TARGET COL: sum of COL over all runs of the cell in $results
# (rows "workload threads target ...").
sum_of() { awk -v w="$1" -v t="$2" -v tg="$3" -v col="$4" '$1 == w && $2 == t && $3 == tg { s += $col } END { print s + 0 }' "$results"; }

# fd_count PID: a process's open file descriptors (entries of /proc/PID/fd).
fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

# metric_total FILE NAME [LABEL="VALUE"]: the sum of a metric's samples in
# a saved /metrics page, over all labels, or those carrying LABEL="VALUE",
# with six decimals (seconds); "n/a" when the page has no such sample (a
# proxy without that metric).
metric_total() {
  awk -v name="$2" -v label="${3:-}" '
    /^#/ { next }
    {
      n = $1; sub(/\{.*/, "", n)
      if (n != name) next
      if (label != "" && index($1, label) == 0) next
      s += $NF; seen++
    }
    END { if (seen) printf "%.6f\n", s; else print "n/a" }' "$1"
}

# metric_sum FILE NAME [LABEL="VALUE"]: metric_total as a whole number (0
# when there is none), for shell arithmetic.
metric_sum() {
  local v
  v=$(metric_total "$@")
  if [ "$v" = n/a ]; then echo 0; else echo "${v%.*}"; fi
}

# raise_nofile N: raises this shell's open-file limits (hard and soft) to
# at least N, for it and the processes it starts (root may raise the hard
# limit up to fs.nr_open).
raise_nofile() {
  if (($(ulimit -Hn) < $1)); then
    ulimit -Hn "$1" 2>/dev/null || { echo "cannot raise the hard open-file limit to $1 (ulimit -Hn: $(ulimit -Hn))" >&2; return 1; }
  fi
  ulimit -Sn "$(ulimit -Hn)"
}
