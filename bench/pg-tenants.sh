#!/usr/bin/env bash
# Tenant connection storm: 200 tenants, each a PostgreSQL role with its own
# database. Virtual users (loadgen tenant-storm) pick a random tenant,
# connect, run SELECT current_database(), check it and disconnect, as fast as
# they can for a fixed time: directly to PostgreSQL with the tenant's own
# password (SCRAM), then through Gatehouse with a token (HS256, minted per
# tenant before the run), targets alternated (A B A B) over rounds. Per
# target: connections/s, p50/p99 connect+query latency, errors, peak backend
# connections (pg_stat_activity rows of the tenant roles whose client end is
# the proxy, or anything else for direct; `ss` maps client ports to
# processes), Gatehouse's CPU and PostgreSQL's CPU (all its processes, from
# /proc) per 1,000 connections, and the ratios GH/direct.
#
# Gatehouse: one endpoint with client_auth = "password" and
# allow_plaintext_tokens = true (tokens travel without TLS: acceptable on
# loopback for this benchmark only), transaction pooling, a pool of BENCH_POOL
# (2) connections per (backend, tenant role, database), its tenants in a
# tenant directory (JSON lines) and one [[secrets]] entry per role.
#
#   bench/pg-tenants.sh                       # 200 tenants, 50 clients, 30 s, 1 round
#   BENCH_SECONDS=10 BENCH_ROUNDS=2 bench/pg-tenants.sh
#   BENCH_TENANTS=50 BENCH_CLIENTS=100 BENCH_POOL=1 bench/pg-tenants.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

TENANTS=${BENCH_TENANTS:-200}
CLIENTS=${BENCH_CLIENTS:-50}
SECS=${BENCH_SECONDS:-30}
ROUNDS=${BENCH_ROUNDS:-1}
POOL=${BENCH_POOL:-2}
# Room for every Gatehouse pool (kept within 90% of max_connections by the
# proxy) and, separately, for the direct clients and the samplers.
MAX_CONNECTIONS=$((TENANTS * POOL * 10 / 9 + CLIENTS + 30))
((MAX_CONNECTIONS >= 300)) || MAX_CONNECTIONS=300
ISSUER=gatehouse-bench
ENDPOINT=rw
DIR="$PWD/.bench/pg-tenants"
rm -rf "$DIR"
mkdir -p "$DIR"
started=$SECONDS
TCK=$(getconf CLK_TCK)

SAMPLER_PID=
GH_PROXY_PID=
cleanup() {
  [ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null
  [ -n "$GH_PROXY_PID" ] && kill "$GH_PROXY_PID" 2>/dev/null
  "$TESTKIT" down --dir "$DIR/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "starting PostgreSQL 15 (max_connections $MAX_CONNECTIONS)"
"$TESTKIT" up --dir "$DIR/cluster" --pg-max-connections "$MAX_CONNECTIONS" >/dev/null
# shellcheck disable=SC1091
source "$DIR/cluster/cluster.env"
PG_PORT=$GH_PG_PRIMARY_PORT
su_psql() { PGPASSWORD=$GH_PG_PASSWORD psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U "$GH_PG_USER" -d postgres -v ON_ERROR_STOP=1 "$@"; }

tenant() { printf 't%03d' "$1"; }

log "creating $TENANTS tenant roles (SCRAM passwords pw-tNNN) and databases, 50 per psql session"
for ((first = 0; first < TENANTS; first += 50)); do
  for ((i = first; i < first + 50 && i < TENANTS; i++)); do
    t=$(tenant "$i")
    echo "CREATE ROLE $t LOGIN PASSWORD 'pw-$t';"
    echo "CREATE DATABASE $t OWNER $t;"
  done | su_psql -f - &
done
wait

# Gatehouse: one secret per role, the tenants (token logins) in a directory.
GH_PROXY_PORT=$(free_port)
head -c 48 /dev/urandom | base64 -w0 >"$DIR/token-hs256.secret"
chmod 600 "$DIR/token-hs256.secret"
: >"$DIR/tenants.jsonl"
{
  cat <<TOML
[proxy]
log_filter = "warn"
worker_threads = ${GH_WORKER_THREADS:-1}
tenant_directory = "tenants.jsonl"

[tokens]
issuer = "$ISSUER"
hs256_secret_file = "$DIR/token-hs256.secret"

[[clusters]]
name = "bench"
engine = "postgres"
backends = ["127.0.0.1:$PG_PORT"]
monitor_secret = "monitor"
pool = { size = $POOL, borrow_timeout = "10s" }

[[endpoints]]
name = "$ENDPOINT"
listen = "127.0.0.1:$GH_PROXY_PORT"
cluster = "bench"
role = "read_write"
pool_mode = "transaction"
client_auth = "password"
allow_plaintext_tokens = true
max_client_connections = 20000

[[secrets]]
name = "monitor"
user = "$GH_PG_USER"
password = "$GH_PG_PASSWORD"
TOML
  for ((i = 0; i < TENANTS; i++)); do
    t=$(tenant "$i")
    printf '\n[[secrets]]\nname = "%s"\nuser = "%s"\npassword = "pw-%s"\n' "$t" "$t" "$t"
    printf '{"name":"%s","databases":["%s"],"secret":"%s","token":true}\n' "$t" "$t" "$t" >>"$DIR/tenants.jsonl"
  done
} >"$DIR/gatehouse.toml"
"$GATEHOUSE" check-config "$DIR/gatehouse.toml" >/dev/null
log "starting Gatehouse (pool $POOL per tenant, transaction mode, ${GH_WORKER_THREADS:-1} worker thread(s))"
"$GATEHOUSE" run --config "$DIR/gatehouse.toml" >"$DIR/gatehouse.log" 2>&1 &
GH_PROXY_PID=$!
wait_port 127.0.0.1 "$GH_PROXY_PORT"

DATA_DIR=$(su_psql -At -c "SHOW data_directory")
POSTMASTER_PID=$(head -1 "$DATA_DIR/postmaster.pid")

# pg_cpu: CPU seconds of PostgreSQL: the postmaster with its reaped children
# (ended backends) plus every live child (one cat for all of them).
pg_cpu() {
  # shellcheck disable=SC2046
  cat "/proc/$POSTMASTER_PID/stat" $(ps -o pid= --ppid "$POSTMASTER_PID" | sed 's|^ *\(.*\)$|/proc/\1/stat|') 2>/dev/null |
    awk -v t="$TCK" '{ sub(/^.*\) /, ""); s += $12 + $13 + $14 + $15 } END { printf "%.3f\n", s / t }'
}

# sampler FILE: every 0.5 s, "phase round pg_cpu_s proxy other proxy_busy
# other_busy" until the phase file says "done". Backends of the tenant roles
# (counted only while a phase runs) whose client end is Gatehouse's process
# or anything else; busy = not idle. One psql session (a coprocess) serves
# all samples, so sampling costs no connection storm of its own.
sampler() {
  local out=$1 phase round counts rows
  coproc MON { PGPASSWORD=$GH_PG_PASSWORD psql -X -q -At -F: -h 127.0.0.1 -p "$PG_PORT" -U "$GH_PG_USER" -d postgres 2>&1; }
  while :; do
    read -r phase round <"$DIR/phase" 2>/dev/null || phase=idle
    [ "$phase" = done ] && break
    counts="0 0 0 0"
    if [ "$phase" != idle ]; then
      printf '%s\n' "SELECT client_port, (state <> 'idle')::int FROM pg_stat_activity WHERE usename ~ '^t[0-9]+\$';" \
        "SELECT 'END';" >&"${MON[1]}"
      rows=
      while IFS= read -r -t 10 line <&"${MON[0]}"; do
        [ "$line" = END ] && break
        rows+="$line "
      done
      counts=$(ss -Htnp state established "( dport = :$PG_PORT )" |
        awk -v gh="$GH_PROXY_PID" -v rows="$rows" '
          { n = split($3, a, ":"); if (match($0, /pid=[0-9]+/)) owner[a[n]] = substr($0, RSTART + 4, RLENGTH - 4) }
          END {
            n = split(rows, r, " ")
            for (i = 1; i <= n; i++) {
              split(r[i], f, ":")
              if ((f[1] in owner) && owner[f[1]] == gh) { p++; pb += f[2] } else { o++; ob += f[2] }
            }
            printf "%d %d %d %d\n", p, o, pb, ob
          }')
    fi
    echo "$phase ${round:--} $(pg_cpu) $counts" >>"$out"
    sleep 0.5
  done
  echo "done - $(pg_cpu) 0 0 0 0" >>"$out"
  echo '\q' >&"${MON[1]}"
}

echo idle >"$DIR/phase"
: >"$DIR/samples.txt"
sampler "$DIR/samples.txt" &
SAMPLER_PID=$!

log "tenant storm: $TENANTS tenants, $CLIENTS clients, ${SECS}s per target x $ROUNDS round(s)"
status=0
"$LOADGEN" tenant-storm --tenants "$TENANTS" --clients "$CLIENTS" --seconds "$SECS" --rounds "$ROUNDS" \
  --target "direct=host=127.0.0.1 port=$PG_PORT user={tenant} dbname={tenant}" \
  --target-password "direct=pw-{tenant}" \
  --target "gatehouse=host=127.0.0.1 port=$GH_PROXY_PORT user={tenant} dbname={tenant}" \
  --target-token "gatehouse=$ISSUER,$ENDPOINT,$DIR/token-hs256.secret" \
  --target-pid "gatehouse=$GH_PROXY_PID" --clk-tck "$TCK" \
  --phase-file "$DIR/phase" --json "$DIR/storm.json" >"$DIR/storm.txt" 2>"$DIR/storm.log" || status=$?
echo done >"$DIR/phase"
wait "$SAMPLER_PID" 2>/dev/null || true
SAMPLER_PID=
cat "$DIR/storm.log" >&2
((status == 0)) || log "loadgen exited with status $status (too many errors, see below)"

# peak TARGET COLUMN: the maximum of a samples column during TARGET's phases.
peak() { awk -v t="$1" -v c="$2" '$1 == t && $c > m { m = $c } END { print m + 0 }' "$DIR/samples.txt"; }
# pg_cpu_of TARGET: PostgreSQL CPU seconds during TARGET's phases (from the
# sample before each phase to the first one after it).
pg_cpu_of() {
  awk -v t="$1" '
    { if ($1 == t && prev != t) start = pcpu; if ($1 != t && prev == t) s += $3 - start; prev = $1; pcpu = $3 }
    END { printf "%.3f\n", s }' "$DIR/samples.txt"
}
# field TARGET N: column N of TARGET's row in the loadgen table.
field() { awk -v t="$1" -v n="$2" '$1 == t && NF == 9 { print $n; exit }' "$DIR/storm.txt"; }

report() {
  local t n pgc
  echo
  echo "Tenant connection storm: $TENANTS tenants (own role and database each), $CLIENTS clients, ${SECS}s per target x $ROUNDS round(s)"
  echo "direct: SCRAM with per-tenant passwords; gatehouse: HS256 tokens as the password WITHOUT TLS"
  echo "(allow_plaintext_tokens = true, loopback benchmark only), transaction pooling, pool $POOL per tenant."
  echo "Latency = connect + SELECT current_database(); peak be = max sampled backends of the tenant roles"
  echo "(busy = not idle); CPU in ms per 1,000 successful connections."
  echo
  printf '%-10s %9s %8s %8s %7s %8s %8s %9s %9s\n' target conn/s p50_ms p99_ms errors "peak be" "busy be" "GH CPU" "PG CPU"
  declare -A row
  for t in direct gatehouse; do
    local col=5 bcol=7
    [ "$t" = gatehouse ] && col=4 bcol=6
    pgc=$(pg_cpu_of "$t")
    # successful connections = attempts - errors
    n=$(awk -v a="$(field "$t" 3)" -v e="$(field "$t" 4)" 'BEGIN { print a - e }')
    row[$t.rate]=$(field "$t" 2)
    row[$t.p50]=$(field "$t" 6)
    row[$t.p99]=$(field "$t" 7)
    row[$t.err]=$(field "$t" 4)
    row[$t.be]=$(peak "$t" "$col")
    row[$t.busy]=$(peak "$t" "$bcol")
    row[$t.gh]=$(field "$t" 9)
    row[$t.pg]=$(awk -v s="$pgc" -v n="${n:-0}" 'BEGIN { if (n > 0) printf "%.1f", s * 1e6 / n; else print "-" }')
    printf '%-10s %9s %8s %8s %7s %8s %8s %9s %9s\n' "$t" "${row[$t.rate]}" "${row[$t.p50]}" "${row[$t.p99]}" \
      "${row[$t.err]}" "${row[$t.be]}" "${row[$t.busy]}" "${row[$t.gh]}" "${row[$t.pg]}"
  done
  printf '%-10s %9s %8s %8s %7s %8s %8s %9s %9s\n' GH/direct "$(rat "${row[gatehouse.rate]}" "${row[direct.rate]}")" \
    "$(rat "${row[gatehouse.p50]}" "${row[direct.p50]}")" "$(rat "${row[gatehouse.p99]}" "${row[direct.p99]}")" - \
    "$(rat "${row[gatehouse.be]}" "${row[direct.be]}")" "$(rat "${row[gatehouse.busy]}" "${row[direct.busy]}")" - \
    "$(rat "${row[gatehouse.pg]}" "${row[direct.pg]}")"
  if grep -q '^errors:' "$DIR/storm.txt"; then
    echo
    grep '^errors:' "$DIR/storm.txt"
  fi
  echo
  echo "total time $((SECONDS - started)) s; loadgen output: $DIR/storm.txt, $DIR/storm.json; samples: $DIR/samples.txt"
}
report | tee "$DIR/report.txt"
