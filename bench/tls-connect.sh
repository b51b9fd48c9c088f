#!/usr/bin/env bash
# What a new TLS client connection costs the proxy: Gatehouse against
# PgBouncer (Debian's), side by side in front of the same PostgreSQL 15
# primary (test kit), same pool and mode (transaction). pgbench -C -S
# (each transaction a new connection: TCP, TLS handshake, login, one
# SELECT, close) with PGSSLMODE=require against
#   gh-tls:    Gatehouse, the endpoint's tls = { cert, key }, require_tls;
#   pgb-tls:   PgBouncer, client_tls_sslmode = require with
#              client_tls_cert_file / client_tls_key_file;
# and, to tell the handshake from the rest of a connection, the same in
# plain text (PGSSLMODE=disable) against a Gatehouse without tls (gh-plain)
# and a PgBouncer with client_tls_sslmode = disable (pgb-plain). Both
# proxies present the same certificate and key (the test kit's). Clients log
# in with md5 (BENCH_AUTH=scram: SCRAM, each proxy checking a stored
# verifier, as bench/pg-transaction.sh does; pgbench's own PBKDF2 per
# connection then bounds both proxies' rates). The targets are alternated
# over rounds, a second apart. Per run: TPS (= new connections per second),
# average latency and the proxy's CPU seconds per 1,000 connections (from
# /proc; each target is its own process and the runs never overlap).
# Reported: means and medians, Gatehouse/PgBouncer ratios, and what TLS
# adds to a connection (tls minus plain) for each proxy.
#
# Last, whether the proxies resume TLS sessions: `openssl s_client
# -starttls postgres` connecting five times, each offering the session of
# the connection before, with TLS 1.3 and with TLS 1.2. pgbench's runs above
# never resume, whatever the server offers: libpq makes a new TLS context
# for every connection and offers no session (seen with a TLS terminator in
# front of PostgreSQL that sends TLS 1.3 tickets and caches TLS 1.2
# sessions: every libpq handshake a full one, every s_client one resumed).
# And whether a session is still resumed after BENCH_OTHER_CLIENTS (1,000,
# the storm's users) other clients' handshakes: whether the proxy's session
# store holds that many clients.
#
#   bench/tls-connect.sh        # 10 clients, 5 s runs, 3 rounds
#   BENCH_SECONDS=3 BENCH_ROUNDS=2 BENCH_TARGETS="gh-tls pgb-tls" bench/tls-connect.sh
#
# Knobs: BENCH_CLIENTS (10), BENCH_SECONDS (5), BENCH_ROUNDS (3),
# BENCH_POOL (20), BENCH_AUTH (md5 or scram), BENCH_TARGETS ("gh-tls
# pgb-tls gh-plain pgb-plain"), BENCH_WARMUP (2 s per target),
# BENCH_OTHER_CLIENTS (1000), GH_WORKER_THREADS (Gatehouse's, 1: PgBouncer
# runs on one thread).
# Raw data under .bench/tls-connect/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/common.sh
ensure_packages
ensure_rust
build_release

CLIENTS=${BENCH_CLIENTS:-10}
SECS=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
POOL=${BENCH_POOL:-20}
AUTH=${BENCH_AUTH:-md5}
WARMUP=${BENCH_WARMUP:-2}
OTHERS=${BENCH_OTHER_CLIENTS:-1000}
read -r -a TARGETS <<<"${BENCH_TARGETS:-gh-tls pgb-tls gh-plain pgb-plain}"
case $AUTH in md5 | scram) ;; *) echo "BENCH_AUTH must be md5 or scram" >&2; exit 2 ;; esac
for target in "${TARGETS[@]}"; do
  case $target in gh-tls | gh-plain | pgb-tls | pgb-plain) ;; *) echo "unknown target $target" >&2; exit 2 ;; esac
done
MAX_CONNECTIONS=300
DIR="$PWD/.bench/tls-connect"
rm -rf "$DIR"
mkdir -p "$DIR/runs"
started=$SECONDS
trap cleanup_proxies EXIT

log "starting PostgreSQL 15 (test kit certificates), Gatehouse and PgBouncer with and without client TLS (pool $POOL, transaction mode, $AUTH)"
GH_TESTKIT_UP_ARGS=--tls cluster_up "$DIR/cluster" 0 "$MAX_CONNECTIONS"
CERT=$DIR/cluster/tls/server.pem
KEY=$DIR/cluster/tls/server.key
MD5_TENANT="${BENCH_TENANT}_md5"
GH_USER=$BENCH_TENANT
if [ "$AUTH" = md5 ]; then
  GH_USER=$MD5_TENANT
fi
# The pools' connections to PostgreSQL in plain text for both proxies
# (PgBouncer's server_tls_sslmode defaults to disable).
for mode in tls plain; do
  mkdir -p "$DIR/gh-$mode" "$DIR/pgb-$mode/pgbouncer"
  endpoint=
  pgb_ini="client_tls_sslmode = disable"
  if [ "$mode" = tls ]; then
    endpoint="tls = { cert = \"$CERT\", key = \"$KEY\" }
require_tls = true"
    # PgBouncer runs as postgres: its copies of the files, in its directory.
    cp "$CERT" "$KEY" "$DIR/pgb-$mode/pgbouncer/"
    pgb_ini="client_tls_sslmode = require
client_tls_cert_file = $DIR/pgb-$mode/pgbouncer/server.pem
client_tls_key_file = $DIR/pgb-$mode/pgbouncer/server.key"
  fi
  GH_CLUSTER_TOML='backend_tls = "disable"' GH_ENDPOINT_TOML=$endpoint GH_EXTRA_TOML=$(md5_tenant_toml "$MD5_TENANT") \
    start_gatehouse "$DIR/gh-$mode" "$POOL" transaction
  add_target "gh-$mode"
  GH_PGBOUNCER_INI=$pgb_ini start_pgbouncer "$DIR/pgb-$mode" "$POOL" transaction
  if [ "$AUTH" = md5 ]; then
    pgbouncer_use_md5 "$DIR/pgb-$mode"
  else
    pgbouncer_use_verifier "$DIR/pgb-$mode"
  fi
  TARGET_PID[pgb-$mode]=$PGB_PID
  TARGET_PORT[pgb-$mode]=$PGB_PORT
  PROXY_PIDS+=("$PGB_PID")
done
PGB_VERSION=$(pgbouncer --version | sed -n '1s/^PgBouncer \([0-9.]*\).*/\1/p')

# run_one TARGET ROUND SECONDS: one pgbench -C -S run of CLIENTS clients
# through TARGET, measured by pgbench_measured into $results.
run_one() {
  local target=$1 r=$2 secs=$3 user=$BENCH_OWNER pw=$BENCH_OWNER_PW
  local -x PGSSLMODE=disable
  case $target in *-tls) PGSSLMODE=require ;; esac
  case $target in gh-*) user=$GH_USER pw=$BENCH_TENANT_PW ;; esac
  pgbench_measured "$CLIENTS" "$target" "$r" "${TARGET_PID[$target]}" "$DIR/runs/$target-r$r.log" \
    "${TARGET_PORT[$target]}" "$user" "$pw" "$secs" -C
}

# The warm-ups (round 0) are kept apart from the results.
results="$DIR/warmup.txt"
: >"$results"
for target in "${TARGETS[@]}"; do
  run_one "$target" 0 "$WARMUP"
done
results="$DIR/results.txt"
: >"$results"
for ((r = 1; r <= ROUNDS; r++)); do
  for target in "${TARGETS[@]}"; do
    sleep 1
    run_one "$target" "$r" "$SECS"
  done
done

# resumed PORT VERSION: of five connections to PORT (SSLRequest first) with
# TLS VERSION (tls1_3, tls1_2), each offering the session the one before it
# got (s_client -sess_in / -sess_out), how many the server resumed, "R of
# 5". Each s_client's input stays open half a second so that it reads the
# server's TLS 1.3 tickets, which come after the handshake (`s_client
# -reconnect` reconnects before reading them: it shows TLS 1.2 only).
resumed() {
  local port=$1 v=$2 i n=0 out sess="$DIR/session-$1-$2.pem" offer=()
  rm -f "$sess"
  for ((i = 0; i <= 5; i++)); do
    out=$(sleep 0.5 | timeout 10 openssl s_client -starttls postgres -connect "127.0.0.1:$port" "-$v" \
      "${offer[@]}" -sess_out "$sess" 2>&1) || true
    if ((i > 0)) && grep -q '^Reused,' <<<"$out"; then n=$((n + 1)); fi
    offer=(-sess_in "$sess")
  done
  echo "$n of 5"
}

# kept_after PORT N: whether a client's TLS 1.3 session is still resumed
# at PORT after N other clients' full handshakes (N users of the storm
# connecting in turn): "yes" or "no". Shows whether the server's session
# store is large enough (two tickets per handshake, for Gatehouse).
kept_after() {
  local port=$1 n=$2 sess="$DIR/session-$1-kept.pem" out
  sleep 0.5 | timeout 10 openssl s_client -starttls postgres -connect "127.0.0.1:$port" -tls1_3 -sess_out "$sess" \
    >/dev/null 2>&1 || true
  # xargs gives each s_client /dev/null as its input: it closes once connected.
  seq "$n" | xargs -P 4 -I{} timeout 10 openssl s_client -starttls postgres -connect "127.0.0.1:$port" -tls1_3 \
    >/dev/null 2>&1 || true
  out=$(sleep 0.5 | timeout 10 openssl s_client -starttls postgres -connect "127.0.0.1:$port" -tls1_3 -sess_in "$sess" 2>&1) ||
    true
  if grep -q '^Reused,' <<<"$out"; then echo yes; else echo no; fi
}

report() {
  local n=$CLIENTS t g b
  echo
  echo "New TLS client connections: pgbench -C -S, $n clients, $AUTH, through Gatehouse (${GH_WORKER_THREADS:-1} worker thread(s))"
  echo "and PgBouncer $PGB_VERSION in front of one PostgreSQL 15 (pool $POOL, transaction mode); tls = PGSSLMODE=require to the"
  echo "proxy, plain = disable; $(nproc) cores; ${SECS}s x $ROUNDS rounds (targets alternated); * = some rounds failed"
  echo
  printf '%-6s | %10s %10s %7s | %10s %10s %7s | %10s %10s %7s\n' client "TPS GH" "TPS PgB" GH/PgB \
    "CPU GH" "CPU PgB" GH/PgB "med GH" "med PgB" GH/PgB
  for t in tls plain; do
    [[ " ${TARGETS[*]} " == *" gh-$t "* || " ${TARGETS[*]} " == *" pgb-$t "* ]] || continue
    local tg tb cg cb mg mb
    tg=$(mean_of pg "$n" "gh-$t" 6 "%.0f") tb=$(mean_of pg "$n" "pgb-$t" 6 "%.0f")
    cg=$(mean_of pg "$n" "gh-$t" 10 "%.3f") cb=$(mean_of pg "$n" "pgb-$t" 10 "%.3f")
    mg=$(median_of pg "$n" "gh-$t" 10 "%.3f") mb=$(median_of pg "$n" "pgb-$t" 10 "%.3f")
    printf '%-6s | %10s %10s %7s | %10s %10s %7s | %10s %10s %7s\n' "$t" "$tg" "$tb" "$(rat "$tg" "$tb")" \
      "$cg" "$cb" "$(rat "$cg" "$cb")" "$mg" "$mb" "$(rat "$mg" "$mb")"
  done
  echo "(TPS: new connections per second; CPU: the proxy's CPU seconds per 1,000 new connections, mean and median of the rounds)"
  echo
  echo "What TLS adds to a new connection, proxy CPU seconds per 1,000 (tls - plain, means):"
  for p in gh pgb; do
    [[ " ${TARGETS[*]} " == *" $p-tls "* && " ${TARGETS[*]} " == *" $p-plain "* ]] || continue
    g=$(mean_of pg "$n" "$p-tls" 10 "%.4f") b=$(mean_of pg "$n" "$p-plain" 10 "%.4f")
    t=$(awk -v a="${g%\*}" -v b="${b%\*}" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/) printf "%.3f", a - b; else print "-" }')
    printf '  %-9s %s - %s = %s\n' "$([ "$p" = gh ] && echo Gatehouse || echo PgBouncer)" "$g" "$b" "$t"
  done
  echo
  echo "TLS session resumption: openssl s_client -starttls postgres, five connections each offering the last one's session,"
  echo "how many resumed:"
  for p in gh pgb; do
    [ -n "${TARGET_PORT[$p-tls]:-}" ] || continue
    printf '  %-9s TLS 1.3: %s, TLS 1.2: %s; a TLS 1.3 session still resumed after %s other clients: %s\n' \
      "$([ "$p" = gh ] && echo Gatehouse || echo PgBouncer)" "$(resumed "${TARGET_PORT[$p-tls]}" tls1_3)" \
      "$(resumed "${TARGET_PORT[$p-tls]}" tls1_2)" "$OTHERS" "$(kept_after "${TARGET_PORT[$p-tls]}" "$OTHERS")"
  done
  echo "  (pgbench's connections never resume: libpq builds a new TLS context for each connection and offers no session)"
  echo
  echo "total time $((SECONDS - started)) s; raw runs: $results, pgbench output in $DIR/runs/, configs in $DIR/{gh,pgb}-*/"
}
report | tee "$DIR/report.txt"
