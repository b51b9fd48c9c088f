#!/usr/bin/env bash
# Multi-tenant connection storm (DESIGN.md, reference experiment 1), on MySQL
# (MariaDB) or PostgreSQL, directly and through Gatehouse, alternating, on
# the same throwaway cluster: a primary and two replicas, every server with
# TLS and its shipped max_connections (MariaDB 151, PostgreSQL 100), never
# raised to fit the test.
#
# STORM_TENANTS tenants (200), each a database user with its own database
# holding mytable2 (1,000 rows: id and five random integers a..e). Each
# virtual user (gatehouse-loadgen load) picks a random tenant, connects,
# runs SELECT * FROM mytable2 WHERE id IN (five random ids), disconnects,
# thinks, and repeats; STORM_USERS users (1,000) spawned at STORM_SPAWN_RATE
# (10/s).
#   direct:    the tenant's own password over TLS, to a random replica
#              (as a DNS reader endpoint spreads connections);
#   gatehouse: a token minted for the tenant, over TLS, to a read_only
#              endpoint balanced over the two replicas (transaction pooling,
#              each tenant's backend credentials in Gatehouse's secrets).
# Once a second: both replicas' client connections and their CPU and RSS
# (/proc, the whole process tree), Gatehouse's CPU, RSS and own metrics.
# Before and after each run: the replicas' own counters of connections
# opened and Gatehouse's /metrics (snapshot, in storm-setup.sh).
# The report: a terminal table, REPORT_DIR/report.html (self-contained,
# with charts), REPORT_DIR/summary.json and each run's JSON; then, per
# target, where a request's cost goes (backend connections opened per
# successful request; through Gatehouse its opens, switches, closes and
# lease phases from /metrics, and its CPU; each tenant's p99) and the
# issue's targets, gatehouse against direct, as PASS or MISS
# (REPORT_DIR/costs.txt).
#
#   bench/storm.sh mysql                       # 200 tenants, 1,000 users, 120 s per target
#   bench/storm.sh postgres
#   bench/storm.sh mysql --server-cpu 0.3 --proxy-cpu 0.5 --client-cpu 0.6   # the testbed's hosts (bench/testbed.sh)
#   STORM_USERS=300 STORM_SECONDS=60 bench/storm.sh mysql
# Knobs: STORM_TENANTS, STORM_USERS, STORM_SPAWN_RATE, STORM_SECONDS,
# STORM_THINK_MS (1000), STORM_ROUNDS (1), STORM_MAX_CONNECTIONS (the
# engine's shipped default), STORM_POOL (Gatehouse's pool per tenant and
# replica: 20, the proxy's default, on MySQL, where the pools share each
# replica's connections and a pool's size only caps what one tenant holds
# at once; 2 on PostgreSQL, whose connections belong to one tenant's
# database), STORM_MAX_CONNECTIONS_PERCENT (90) and STORM_MAX_IDLE_PERCENT
# (50) (the proxy's pool limits), STORM_DIR (.bench/storm-ENGINE), GH_WORKER_THREADS (the
# proxy's; its default when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${1:-mysql}
# The testbed's options after the engine (bench/testbed.sh).
TESTBED_ARGS=("${@:2}")
TENANTS=${STORM_TENANTS:-200}
USERS=${STORM_USERS:-1000}
SPAWN=${STORM_SPAWN_RATE:-10}
SECS=${STORM_SECONDS:-120}
THINK=${STORM_THINK_MS:-1000}
ROUNDS=${STORM_ROUNDS:-1}
if [ "$ENGINE" = mysql ]; then POOL=${STORM_POOL:-20}; else POOL=${STORM_POOL:-2}; fi
# Gatehouse's share of each server's max_connections, and of that share how
# much may sit idle (the proxy's defaults).
MAXPCT=${STORM_MAX_CONNECTIONS_PERCENT:-90}
IDLEPCT=${STORM_MAX_IDLE_PERCENT:-50}
# shellcheck source=bench/storm-setup.sh
source bench/storm-setup.sh
SQL='SELECT * FROM mytable2 WHERE id IN ({ids:5:1000})'


log "storm: $TENANTS tenants, $USERS users spawned at $SPAWN/s, think ${THINK} ms, ${SECS} s per target, $ROUNDS round(s)"
for ((round = 1; round <= ROUNDS; round++)); do
  for target in direct gatehouse; do
    if [ "$target" = direct ]; then args=("${direct[@]}"); else args=("${through[@]}"); fi
    log "round $round: $target"
    snapshot "$target-$round.before"
    "${TB_CLIENT[@]}" "$LOADGEN" load --name "$target" --round "$round" "${args[@]}" "${common[@]}" --sql "$SQL" \
      --json "$DIR/runs/$target-$round.json" | tee "$DIR/runs/$target-$round.txt"
    snapshot "$target-$round.after"
    # Let the servers close what the run left (TIME_WAIT, exiting backends).
    sleep 5
  done
done

runs=()
for ((round = 1; round <= ROUNDS; round++)); do
  runs+=("$DIR/runs/direct-$round.json" "$DIR/runs/gatehouse-$round.json")
done
"$LOADGEN" report --title "Multi-tenant connection storm ($ENGINE)" \
  --out "$DIR/report.html" --json-out "$DIR/summary.json" \
  --config "testbed=$(testbed_describe)" \
  --config "engine=$ENGINE" --config "servers=a primary and two replicas, TLS, max_connections $MAXCONN" \
  --config "tenants=$TENANTS (a user, a database and mytable2 of 1,000 rows each)" \
  --config "direct=the tenant's password over TLS, a random replica per connection" \
  --config "gatehouse=a token per tenant over TLS, read_only endpoint over both replicas, transaction pooling, pool $POOL per tenant and replica, max_connections_percent $MAXPCT, max_idle_percent $IDLEPCT" \
  --config "load=$USERS users at $SPAWN/s, connect-query-disconnect, think ${THINK} ms, ${SECS} s per target, $ROUNDS round(s)" \
  "${runs[@]}" | tee "$DIR/summary.txt"
log "report: $DIR/report.html"

# replicas_delta TARGET COL: the replicas' counter in column COL of
# replica_counters (2: opened, 3: failed), after minus before each of
# TARGET's runs, summed over replicas and rounds ("-" when the engine
# keeps no such counter).
replicas_delta() {
  local r
  for ((r = 1; r <= ROUNDS; r++)); do
    awk -v c="$2" 'FNR == NR { b[$1] = $c; next } { print ($c == "-" || b[$1] == "-" ? "-" : $c - b[$1]) }' \
      "$DIR/runs/$1-$r.before.replicas" "$DIR/runs/$1-$r.after.replicas"
  done | awk '$1 == "-" { dash = 1 } { s += $1 } END { if (dash) print "-"; else print s + 0 }'
}

# metric_delta TARGET NAME [LABEL="VALUE"]: how much a Gatehouse counter
# grew over TARGET's runs, summed over its labels and the rounds; "n/a"
# when the proxy does not export it or a page could not be read (a series
# absent before a run is 0: the proxy shows a backend's once it is used).
metric_delta() {
  local target=$1 r after before
  shift
  for ((r = 1; r <= ROUNDS; r++)); do
    after=$(metric_total "$DIR/runs/$target-$r.after.metrics" "$@")
    before=$(metric_total "$DIR/runs/$target-$r.before.metrics" "$@")
    [ "$before" = n/a ] && before=0
    [ -s "$DIR/runs/$target-$r.before.metrics" ] || before=n/a
    echo "$after $before"
  done | awk '$1 == "n/a" || $2 == "n/a" { na = 1 } { s += $1 - $2 } END { if (na) print "n/a"; else printf "%.6f\n", s }'
}

# quot A B [SCALE]: A × SCALE / B to four significant digits ("1.000",
# "0.002528", "99.48", "1102"); "n/a" when either is not a number or B is 0.
quot() {
  awk -v a="$1" -v b="$2" -v k="${3:-1}" 'BEGIN {
    if (a !~ /^-?[0-9.]+$/ || b !~ /^-?[0-9.]+$/ || b == 0) { print "n/a"; exit }
    s = sprintf("%#.4g", a * k / b); sub(/\.$/, "", s); print s }'
}

# summary_of TARGET KEY: a value of the report's summary.json for TARGET
# (its values, else its own fields), "n/a" when null.
summary_of() {
  jq -r --arg t "$1" --arg k "$2" '.targets[] | select(.target == $t) | (.values[$k] // .[$k]) // "n/a"' \
    "$DIR/summary.json"
}

# costs TARGET: where TARGET's successful requests' cost went.
costs() {
  local t=$1 requests failures ok opened failed counted
  requests=$(summary_of "$t" requests) failures=$(summary_of "$t" failures)
  ok=$((requests - failures))
  opened=$(replicas_delta "$t" 2) failed=$(replicas_delta "$t" 3)
  echo "$t: $ok successful requests ($failures failed)"
  if [ "$ENGINE" = mysql ]; then
    counted="Connections + Connection_errors_max_connections - Aborted_connects"
  else
    counted="pg_stat_database.sessions"
  fi
  echo "  replicas' connections opened ($counted): $opened, $(quot "$opened" "$ok") per successful request;" \
    "failed to open: $failed"
  if [ "$t" = direct ]; then
    echo "  (a direct request opens one connection by construction; above 1: the samplers' and the counters' own)"
    if [ "$ENGINE" = postgres ]; then
      echo "  (PostgreSQL counts sessions that reached a database: connections refused for want of a slot are not in either number)"
    fi
  else
    local opens switches closes wait waits phase secs n
    opens=$(metric_delta "$t" gatehouse_database_connections_setup_succeeded_total)
    switches=$(metric_delta "$t" gatehouse_database_connections_switched_total)
    closes=$(metric_delta "$t" gatehouse_database_connections_closed_total)
    wait=$(metric_delta "$t" gatehouse_lease_wait_seconds_sum)
    waits=$(metric_delta "$t" gatehouse_lease_wait_seconds_count)
    echo "  Gatehouse's /metrics, growth over the run (summed over engine, cluster and backend, the primary's included):"
    echo "    opened (database_connections_setup_succeeded): ${opens%.*}, $(quot "$opens" "$ok") per successful request"
    echo "    switched to another tenant's pool (COM_CHANGE_USER or a reset): ${switches%.*}, $(quot "$switches" "$ok") per successful request;" \
      "opens per switch $(quot "$opens" "$switches")"
    echo "    closed: ${closes%.*}"
    echo "    lease wait: $(quot "$wait" 1) s over ${waits%.*} leases, mean $(quot "$wait" "$waits" 1000) ms"
    for phase in place open switch; do
      secs=$(metric_delta "$t" gatehouse_database_lease_phase_seconds_total "phase=\"$phase\"")
      n=$(metric_delta "$t" gatehouse_database_lease_phases_total "phase=\"$phase\"")
      printf '      %-7s %s leases, mean %s ms, %s %% of the lease wait\n' "$phase:" "${n%.*}" \
        "$(quot "$secs" "$n" 1000)" "$(quot "$secs" "$wait" 100)"
    done
    echo "  Gatehouse CPU: $(quot "$(summary_of "$t" proxy_cpu_core_s_per_1k)" 1) core-s per 1,000 successful requests"
    # Where the hop's time goes on one request's path: the proxy's CPU for
    # it (the client's TLS handshake and login mostly, which direct spends
    # in the server) and the mean lease wait (switches, opens, places).
    awk -v cpu="$(summary_of "$t" proxy_cpu_core_s_per_1k)" -v w="$wait" -v n="$waits" 'BEGIN {
      if (cpu !~ /^[0-9.e+-]+$/ || n + 0 <= 0) exit
      printf "  on a request'"'"'s path: the proxy'"'"'s CPU %.2f ms (TLS handshake and login, which direct spends in the server) + the mean lease wait %.2f ms\n", cpu, 1000 * w / n }'
  fi
  bound "$t" "$ok"
  echo "  per tenant ($(summary_of "$t" tenants_with_p99) with a successful request): p99 median $(quot "$(summary_of "$t" tenant_p99_median_ms)" 1) ms," \
    "worst $(quot "$(summary_of "$t" tenant_p99_worst_ms)" 1) ms ($(summary_of "$t" tenant_p99_worst));" \
    "$(summary_of "$t" tenants_p99_over_twice_overall) over twice the p99 of all ($(quot "$(summary_of "$t" p99_ms)" 1) ms)"
}

# bound TARGET OK: the machine's CPU (every process: servers, proxy, load
# generator, the kernel's loopback work) per successful request over
# TARGET's runs, the most successful requests a second the machine's cores
# allow at that cost, and the mean latency a closed loop of USERS users
# thinking THINK ms then has at best (Little's law: N = X (R + Z)).
bound() {
  local t=$1 ok=$2 r
  for ((r = 1; r <= ROUNDS; r++)); do
    [ -s "$DIR/runs/$t-$r.before.stat" ] && [ -s "$DIR/runs/$t-$r.after.stat" ] || return 0
  done
  for ((r = 1; r <= ROUNDS; r++)); do
    paste "$DIR/runs/$t-$r.before.stat" "$DIR/runs/$t-$r.after.stat"
  done | awk -v ok="$ok" -v cores="$(nproc)" -v hz="$(getconf CLK_TCK)" -v users="$USERS" -v think="$THINK" '
    { n = NF / 2; busy = 0; idle = 0
      for (i = 3; i <= n; i++) { d = $(n + i) - $i; if (i == 6 || i == 7) idle += d; else if (i <= 10) busy += d }
      secs += $(n + 1) - $1; b += busy / hz; all += (busy + idle) / hz }
    END { if (ok <= 0 || secs <= 0) exit
      per = b / ok; max = cores / per; r = users / max - think / 1000
      printf "  machine: %.2f of %d cores busy, %.3f core-ms per successful request: at most %.0f successful requests/s on %d cores,\n", b / secs, cores, per * 1000, max, cores
      printf "    where %d users thinking %d ms wait at least %.0f ms a request on average\n", users, think, (r > 0 ? r : 0) * 1000 }'
}

# goal LABEL VALUE OP LIMIT: one of the issue's targets, PASS or MISS.
goal() {
  awk -v label="$1" -v v="$2" -v op="$3" -v lim="$4" 'BEGIN {
    ok = v ~ /^[0-9.e+-]+$/ && (op == "<=" ? v + 0 <= lim + 0 : op == ">=" ? v + 0 >= lim + 0 : v + 0 == lim + 0)
    shown = v ~ /^[0-9.e+-]+$/ ? sprintf(op == "=" ? "%d" : "%#.3gx", v) : v
    printf "  %-46s %-2s %-5s %8s  %s\n", label, op, lim (op == "=" ? "" : "x"), shown, ok ? "PASS" : "MISS" }'
}

ratio_of() { jq -r --arg k "$1" '.targets[] | select(.target == "gatehouse") | .ratios[$k] // "n/a"' "$DIR/summary.json"; }

{
  echo
  echo "Where a storm request's cost goes ($ROUNDS round(s) summed)"
  costs direct
  costs gatehouse
  echo
  # The demo's load (users arriving at 50/s, thinking 50 ms) overloads
  # direct connections; the default load (10/s, 1 s) does not, and its
  # targets are latency and the replicas' CPU alone.
  if [ "$SPAWN" -ge 50 ] && [ "$THINK" -le 50 ]; then
    echo "The issue's targets at the demo's load, gatehouse against direct in this run (ratio gatehouse/direct)"
    goal "successful requests/s" "$(ratio_of succeeded_per_second)" ">=" 1.5
    goal "p99 of successful requests" "$(ratio_of p99_ms)" "<=" 1.5
    goal "replicas' CPU per successful request" "$(ratio_of backend_cpu_core_s_per_1k)" "<=" 0.35
    goal "failures through gatehouse" "$(summary_of gatehouse failures)" "=" 0
    goal "replicas' peak client connections" "$(ratio_of backend_connections_peak)" "<=" 0.1
  else
    echo "The issue's targets at the default load, gatehouse against direct in this run (ratio gatehouse/direct)"
    goal "p99 of successful requests" "$(ratio_of p99_ms)" "<=" 1.2
    goal "replicas' CPU per successful request" "$(ratio_of backend_cpu_core_s_per_1k)" "<=" 0.35
    goal "failures through gatehouse" "$(summary_of gatehouse failures)" "=" 0
  fi
  testbed_report
} | tee "$DIR/costs.txt"
