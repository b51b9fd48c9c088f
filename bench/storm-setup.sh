# The multi-tenant storm's set-up, shared by bench/storm.sh and
# bench/saturation.sh (source it after scripts/lib.sh and bench/common.sh,
# with ENGINE, TENANTS, USERS, SPAWN, SECS, THINK, POOL, MAXPCT, IDLEPCT and
# optionally STORM_DIR / STORM_MAX_CONNECTIONS set): a primary and two
# replicas with TLS and their shipped max_connections, the tenants (a user,
# a database and mytable2 each), Gatehouse with a read_only endpoint over
# both replicas, and the load's arguments: `common` (the load but its
# SQL, the sampling), `direct` and `through` (each target's connection strings and
# credentials). Sets DIR, REPLICAS, GH_PROXY_PID, GH_PROXY_PORT,
# GH_ADMIN_PORT, MAXCONN, and a trap that stops the proxy and the servers;
# defines snapshot (the replicas' connection counters and Gatehouse's
# /metrics, to take differences around a run). It checks ENGINE, installs
# what is missing and builds the binaries first. TESTBED_ARGS: the
# caller's testbed options (bench/testbed.sh), applied to the servers, the
# proxy and the load generator (TB_CLIENT).
case "$ENGINE" in
mysql | postgres) ;;
*)
  echo "usage: $0 mysql|postgres" >&2
  exit 2
  ;;
esac
source scripts/lib.sh
source bench/common.sh
testbed_options "${TESTBED_ARGS[@]}"
ensure_packages
ensure_rust
build_release

if [ "$ENGINE" = mysql ]; then
  MAXCONN=${STORM_MAX_CONNECTIONS:-151}
else
  MAXCONN=${STORM_MAX_CONNECTIONS:-100}
fi
ISSUER=gatehouse-storm
ENDPOINT=ro
DIR=${STORM_DIR:-$PWD/.bench/storm-$ENGINE}
rm -rf "$DIR"
mkdir -p "$DIR/runs"
TCK=$(getconf CLK_TCK)

GH_PROXY_PID=
cleanup() {
  [ -n "$GH_PROXY_PID" ] && kill "$GH_PROXY_PID" 2>/dev/null && wait "$GH_PROXY_PID" 2>/dev/null
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

tenant() { printf 't%03d' "$1"; }

if [ "$ENGINE" = mysql ]; then
  log "starting MariaDB: a primary and two replicas, TLS, max_connections $MAXCONN"
  "$TESTKIT" up --dir "$DIR/cluster" --no-pg --mysql-replicas 2 --mysql-max-connections "$MAXCONN" --tls $(testbed_up_args) >/dev/null
  # shellcheck disable=SC1091
  source "$DIR/cluster/cluster.env"
  testbed_hosts "$DIR/cluster"
  PRIMARY_PORT=$GH_MYSQL_PRIMARY_PORT
  SU_USER=$GH_MYSQL_USER SU_PW=$GH_MYSQL_PASSWORD
  su_sql() { mariadb -h 127.0.0.1 -P "$PRIMARY_PORT" -u "$SU_USER" -p"$SU_PW" --skip-ssl -N -B "$@"; }
  log "creating $TENANTS tenants: user tNNN (password pw-tNNN), database tNNN, mytable2 of 1,000 rows"
  for ((first = 0; first < TENANTS; first += 50)); do
    for ((i = first; i < first + 50 && i < TENANTS; i++)); do
      t=$(tenant "$i")
      echo "CREATE DATABASE $t;"
      echo "CREATE USER '$t'@'%' IDENTIFIED BY 'pw-$t';"
      echo "GRANT ALL ON $t.* TO '$t'@'%';"
      echo "CREATE TABLE $t.mytable2 (id INT PRIMARY KEY, a INT, b INT, c INT, d INT, e INT);"
      echo "INSERT INTO $t.mytable2 SELECT seq, FLOOR(RAND() * 1000000), FLOOR(RAND() * 1000000), FLOOR(RAND() * 1000000), FLOOR(RAND() * 1000000), FLOOR(RAND() * 1000000) FROM $t.seq_1_to_1000;"
    done | su_sql &
  done
  wait
else
  log "starting PostgreSQL 15: a primary and two replicas, TLS, max_connections $MAXCONN"
  "$TESTKIT" up --dir "$DIR/cluster" --pg-replicas 2 --pg-max-connections "$MAXCONN" --tls $(testbed_up_args) >/dev/null
  # shellcheck disable=SC1091
  source "$DIR/cluster/cluster.env"
  testbed_hosts "$DIR/cluster"
  PRIMARY_PORT=$GH_PG_PRIMARY_PORT
  SU_USER=$GH_PG_USER SU_PW=$GH_PG_PASSWORD
  su_sql() { PGPASSWORD=$SU_PW psql -X -q -At -h 127.0.0.1 -p "$PRIMARY_PORT" -U "$SU_USER" -v ON_ERROR_STOP=1 "$@"; }
  log "creating $TENANTS tenants: role tNNN (SCRAM password pw-tNNN), database tNNN, mytable2 of 1,000 rows"
  for ((first = 0; first < TENANTS; first += 50)); do
    (
      for ((i = first; i < first + 50 && i < TENANTS; i++)); do
        t=$(tenant "$i")
        echo "CREATE ROLE $t LOGIN PASSWORD 'pw-$t';"
        echo "CREATE DATABASE $t OWNER $t;"
      done | su_sql -d postgres -f -
      for ((i = first; i < first + 50 && i < TENANTS; i++)); do
        t=$(tenant "$i")
        su_sql -d "$t" -c "SET ROLE $t; CREATE TABLE mytable2 (id int PRIMARY KEY, a int, b int, c int, d int, e int);
          INSERT INTO mytable2 SELECT g, (random() * 1e6)::int, (random() * 1e6)::int, (random() * 1e6)::int,
            (random() * 1e6)::int, (random() * 1e6)::int FROM generate_series(1, 1000) g;"
      done
    ) &
  done
  wait
fi
"$TESTKIT" status --dir "$DIR/cluster" >"$DIR/servers.txt"
# Replicas: name port pid, from the kit's status table and pid files.
mapfile -t REPLICAS < <(awk '$3 == "replica" { split($4, a, ":"); print $1, a[2] }' "$DIR/servers.txt")
((${#REPLICAS[@]} == 2)) || {
  cat "$DIR/servers.txt" >&2
  echo "expected two replicas" >&2
  exit 1
}
replica_pid() {
  if [ "$ENGINE" = mysql ]; then
    head -1 "$DIR/cluster/$1/mariadbd.pid"
  else
    head -1 "$DIR/cluster/$1/data/postmaster.pid"
  fi
}

log "waiting for both replicas to have every tenant's table"
last=$(tenant $((TENANTS - 1)))
for r in "${REPLICAS[@]}"; do
  read -r name port <<<"$r"
  for ((i = 0; i < 120; i++)); do
    if [ "$ENGINE" = mysql ]; then
      n=$(mariadb -h 127.0.0.1 -P "$port" -u "$SU_USER" -p"$SU_PW" --skip-ssl -N -B -e "SELECT COUNT(*) FROM $last.mytable2" 2>/dev/null || true)
    else
      n=$(PGPASSWORD=$SU_PW psql -X -At -h 127.0.0.1 -p "$port" -U "$SU_USER" -d "$last" -c "SELECT count(*) FROM mytable2" 2>/dev/null || true)
    fi
    [ "$n" = 1000 ] && break
    sleep 0.5
  done
  [ "$n" = 1000 ] || {
    echo "$name never had $last.mytable2" >&2
    exit 1
  }
done

log "configuring Gatehouse: read_only endpoint over both replicas, tokens over TLS, $TENANTS tenants in a directory"
GH_PROXY_PORT=$(free_port)
GH_ADMIN_PORT=$(free_port)
head -c 48 /dev/urandom | base64 -w0 >"$DIR/token-hs256.secret"
chmod 600 "$DIR/token-hs256.secret"
backends="\"127.0.0.1:$PRIMARY_PORT\""
for r in "${REPLICAS[@]}"; do
  read -r _ port <<<"$r"
  backends+=", \"127.0.0.1:$port\""
done
: >"$DIR/tenants.jsonl"
{
  cat <<TOML
[proxy]
log_filter = "warn"
${GH_WORKER_THREADS:+worker_threads = $GH_WORKER_THREADS}
tenant_directory = "tenants.jsonl"

[admin]
listen = "127.0.0.1:$GH_ADMIN_PORT"

[tokens]
issuer = "$ISSUER"
hs256_secret_file = "$DIR/token-hs256.secret"

[[clusters]]
name = "storm"
engine = "$ENGINE"
backends = [$backends]
monitor_secret = "monitor"
pool = { size = $POOL, borrow_timeout = "10s", max_connections_percent = $MAXPCT, max_idle_percent = $IDLEPCT }

[[endpoints]]
name = "$ENDPOINT"
listen = "127.0.0.1:$GH_PROXY_PORT"
cluster = "storm"
role = "read_only"
pool_mode = "transaction"
client_auth = "password"
tls = { cert = "$DIR/cluster/tls/server.pem", key = "$DIR/cluster/tls/server.key" }
max_client_connections = 20000

[[secrets]]
name = "monitor"
user = "$SU_USER"
password = "$SU_PW"
TOML
  for ((i = 0; i < TENANTS; i++)); do
    t=$(tenant "$i")
    printf '\n[[secrets]]\nname = "%s"\nuser = "%s"\npassword = "pw-%s"\n' "$t" "$t" "$t"
    printf '{"name":"%s","databases":["%s"],"secret":"%s","token":true}\n' "$t" "$t" "$t" >>"$DIR/tenants.jsonl"
  done
} >"$DIR/gatehouse.toml"
"$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
gatehouse_run "$DIR"
wait_port 127.0.0.1 "$GH_PROXY_PORT"

# The same load and the same sampling for both targets.
common=(--tenants "$TENANTS" --users "$USERS" --spawn-rate "$SPAWN" --seconds "$SECS" --think-ms "$THINK"
  --connect-each --tls-ca "$GH_TLS_CA" --clk-tck "$TCK" --max-failure-rate 1
  --watch-proxy "gatehouse=$GH_PROXY_PID" --metrics "127.0.0.1:$GH_ADMIN_PORT")
direct=()
for r in "${REPLICAS[@]}"; do
  read -r name port <<<"$r"
  common+=(--watch "$name=$(replica_pid "$name")")
  if [ "$ENGINE" = mysql ]; then
    common+=(--count-connections "$name=mysql://$SU_USER:$SU_PW@127.0.0.1:$port/")
    direct+=(--target "mysql://{tenant}:pw-{tenant}@127.0.0.1:$port/{tenant}")
  else
    common+=(--count-connections "$name=host=127.0.0.1 port=$port user=$SU_USER password=$SU_PW dbname=postgres")
    direct+=(--target "host=127.0.0.1 port=$port user={tenant} password=pw-{tenant} dbname={tenant}")
  fi
done
if [ "$ENGINE" = mysql ]; then
  through=(--target "mysql://{tenant}@127.0.0.1:$GH_PROXY_PORT/{tenant}")
else
  through=(--target "host=127.0.0.1 port=$GH_PROXY_PORT user={tenant} dbname={tenant}")
fi
through+=(--token "$ISSUER,$ENDPOINT,$DIR/token-hs256.secret")

# replica_counters: a line per replica, "NAME OPENED FAILED", by its own
# counters since it started: OPENED the connections that logged in, FAILED
# those that did not (refused, bad credentials, dropped during the login).
# MariaDB: Aborted_connects are the failed ones; Connections counts every
# connection given a thread, those refused after it with 1040 included,
# but not those refused at once (Connection_errors_max_connections), hence
# OPENED = Connections + Connection_errors_max_connections - Aborted_connects.
# PostgreSQL: pg_stat_database's sessions, summed over its databases (a
# connection refused for want of a slot never reaches one), and FAILED "-":
# no counter of those. Each count includes the connection that reads it. A
# replica that does not answer gets "NAME - -".
replica_counters() {
  local r name port status
  for r in "${REPLICAS[@]}"; do
    read -r name port <<<"$r"
    if [ "$ENGINE" = mysql ]; then
      status=$(mariadb -h 127.0.0.1 -P "$port" -u "$SU_USER" -p"$SU_PW" --skip-ssl -N -B -e "SHOW GLOBAL STATUS
        WHERE Variable_name IN ('Connections', 'Aborted_connects', 'Connection_errors_max_connections')") || status=
      awk -v name="$name" 'NF { v[$1] = $2; n++ } END {
        failed = v["Aborted_connects"]
        if (n) print name, v["Connections"] + v["Connection_errors_max_connections"] - failed, failed + 0
        else print name, "-", "-" }' <<<"$status"
    else
      PGPASSWORD=$SU_PW psql -X -At -F ' ' -h 127.0.0.1 -p "$port" -U "$SU_USER" -d postgres \
        -c "SELECT '$name', coalesce(sum(sessions), 0), '-' FROM pg_stat_database" || echo "$name - -"
    fi
  done
}

# snapshot NAME: the replicas' counters (replica_counters) into
# $DIR/runs/NAME.replicas and Gatehouse's /metrics page into
# $DIR/runs/NAME.metrics (empty when it did not answer).
snapshot() {
  # The machine's CPU time (user nice system idle iowait irq softirq steal,
  # in clock ticks) and the time, for the bound a run meets (storm.sh).
  echo "$(date +%s.%N) $(head -1 /proc/stat)" >"$DIR/runs/$1.stat"
  replica_counters >"$DIR/runs/$1.replicas"
  curl -fsS --max-time 5 "http://127.0.0.1:$GH_ADMIN_PORT/metrics" >"$DIR/runs/$1.metrics" 2>/dev/null ||
    : >"$DIR/runs/$1.metrics"
}
