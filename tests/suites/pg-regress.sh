#!/usr/bin/env bash
# PostgreSQL's own regression suite through Gatehouse: the installcheck form
# (pg_regress --use-existing, the source's parallel_schedule, 10
# connections), run as the bootstrap superuser on a fresh test-kit server
# for each target:
#   direct       the server itself;
#   session      Gatehouse, an endpoint in pool_mode "session";
#   transaction  Gatehouse, pool_mode "transaction", pool size 5.
# What it needs comes from Debian's packages and is cached outside the
# clone (GH_SUITES_CACHE, /var/tmp/gatehouse-suites: the servers run as
# their own user, which must read the suite's data files, load its library
# and write its output files, so neither lives under /root): the suite's SQL and
# expected files from the source package of the installed server's version
# (apt-get source, through a deb-src list of the script's own), and the
# suite's C functions (regress.so) compiled against that version's server
# headers (postgresql-server-dev, unpacked, not installed).
#
# Prints per target passed / failed, then the tests that pass direct but
# fail through the proxy; each target's results and regression.diffs stay
# under SUITE_DIR (/var/tmp/gatehouse-pg-regress/TARGET).
#
#   tests/suites/pg-regress.sh                       # all three targets, the whole schedule
#   tests/suites/pg-regress.sh transaction           # one target
#   SUITE_TESTS="test_setup date guc" tests/suites/pg-regress.sh direct transaction
#   tests/suites/pg-regress.sh --short               # ./test's run: a sample, checked
# Knobs: SUITE_TESTS (a list run in order instead of the schedule; the
# first should be test_setup), SUITE_POOL (5), SUITE_CONNECTIONS (10),
# PG_BIN (the server's bin directory; /usr/lib/postgresql/15/bin),
# SUITE_BUILD (release, or debug: the binaries `cargo build` made, as
# ./test uses them), SUITE_CHECK=1 (exit 1 when a test passes direct but
# fails through a target and is not among that target's known differences
# below, or when a target's run did not complete).
#
# SUITE_PG=17: the same suite against PostgreSQL 17's servers (those of
# scripts/pg17/setup.sh; PG_BIN is theirs), differentially. PostgreSQL
# 17's own suite cannot be had here: Debian 12 packages only 15, and the
# source repository's snapshot is larger than what can be fetched (881 MB,
# 500 MB at most). So the installed version's suite runs on the 17 server
# direct first (many of its tests then differ from their expected files:
# 17's output, and regress.so built for 15 does not load into 17), and
# what direct printed becomes the expected output of every other target:
# `session` and `transaction` through Gatehouse, and `again`, the server
# direct once more, which shows what differs from run to run by itself.
# A test counts as passing a target when its output is the direct one.
#
# Known differences, each explained in the README's "Compatibility"
# section (what a pooler cannot make like a direct session):
# temp (both modes): PREPARE TRANSACTION after current_schema() on a
#   connection whose temporary schema an earlier session created (the
#   schema outlives DISCARD ALL; a reconnect of the same client, `\c -`,
#   gets the connection back in session mode);
KNOWN_session="temp"
# constraints, sequence: currval()/lastval() after a nextval() in an
#   earlier transaction (the sequence's last value is per connection);
# triggers: the suite's C functions keep state in backend memory (refint's
#   plan cache, ttdummy's switch);
# guc: LOAD 'plpgsql' on a connection where another client's session
#   loaded plpgsql already (a library stays loaded);
# stats: pg_stat_database.sessions counts backend sessions, which a new
#   client session through a pool does not open.
KNOWN_transaction="constraints sequence triggers guc temp stats"
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_packages
# shellcheck source=bench/common.sh
source bench/common.sh

# --short: the tests that found differences in Gatehouse (startup
# parameters and resets: date, time, timestamp, timestamptz, horology,
# guc; planner settings: gin, spgist; currval, temporary schemas) and a
# sample, checked (SUITE_CHECK=1): what ./test runs, in about 40 s.
if [ "${1:-}" = --short ]; then
  shift
  SUITE_TESTS=${SUITE_TESTS:-test_setup date time timetz timestamp timestamptz interval horology guc gin spgist sequence temp prepare transactions select_into}
  SUITE_CHECK=1
  SUITE_DIR=${SUITE_DIR:-/var/tmp/gatehouse-pg-regress-short}
fi
TARGETS=("$@")
POOL=${SUITE_POOL:-5}
CONNS=${SUITE_CONNECTIONS:-10}
OUT=${SUITE_DIR:-/var/tmp/gatehouse-pg-regress}
CACHE=${GH_SUITES_CACHE:-/var/tmp/gatehouse-suites}

# The installed server's full Debian version (15.18-0+deb12u1) and major:
# the suite's. The servers' major (PG_BIN's) is the same but with SUITE_PG.
server_pkg=$(dpkg-query -W -f='${Package}\n' 'postgresql-[0-9]*' 2>/dev/null | grep -E '^postgresql-[0-9]+$' | head -1)
major=${server_pkg#postgresql-}
DIFFERENTIAL=0
case ${SUITE_PG:-$major} in
  "$major") PG_BIN=${PG_BIN:-/usr/lib/postgresql/$major/bin} ;;
  17)
    PG_BIN=$(scripts/pg17/setup.sh)
    DIFFERENTIAL=1
    OUT=${SUITE_DIR:-/var/tmp/gatehouse-pg-regress-17}
    ;;
  *) echo "SUITE_PG=$SUITE_PG: only $major (Debian's) and 17 (scripts/pg17) are here" >&2; exit 2 ;;
esac
server_version=$("$PG_BIN/postgres" --version | awk '{ print $3 }')
deb_version=$(dpkg-query -W -f='${Version}' "postgresql-$major")
upstream=${deb_version%%-*}
SRC="$CACHE/pg-$upstream"
REGRESS="$SRC/postgresql-$upstream/src/test/regress"
PG_REGRESS=/usr/lib/postgresql/$major/lib/pgxs/src/test/regress/pg_regress

# fetch_suite: the suite's files and regress.so, once per version.
fetch_suite() {
  [ -f "$SRC/dlpath/regress.so" ] && [ -f "$REGRESS/parallel_schedule" ] && return 0
  log "fetching PostgreSQL $upstream's regression suite (Debian source package $deb_version)"
  mkdir -p "$SRC/apt/lists/partial" "$SRC/dl" "$SRC/dlpath"
  # A list of our own with deb-src beside deb for every source the machine
  # uses (deb822 .sources files or one-line lists): its apt state is not touched.
  local list="$SRC/apt/sources.list"
  {
    awk '/^URIs:/ { sub(/^URIs: */, ""); u = $0 } /^Suites:/ { sub(/^Suites: */, ""); s = $0 }
         /^Components:/ { sub(/^Components: */, ""); c = $0 }
         /^$/ { flush() } END { flush() }
         function flush(   n, i, a) { if (u != "" && s != "") { n = split(s, a, " ")
           for (i = 1; i <= n; i++) { print "deb " u " " a[i] " " c; print "deb-src " u " " a[i] " " c } }
           u = s = c = "" }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
    grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed 'p; s/^deb /deb-src /' || true
  } >"$list"
  local apt=(-o "Dir::Etc::SourceList=$list" -o Dir::Etc::SourceParts=- -o "Dir::State::Lists=$SRC/apt/lists"
    -o "Dir::Cache::Archives=$SRC/dl" -o APT::Sandbox::User=root)
  apt-get "${apt[@]}" update -qq >/dev/null
  (cd "$SRC/dl" && apt-get "${apt[@]}" source --download-only -qq "postgresql-$major=$deb_version" >/dev/null)
  tar -xjf "$SRC/dl/postgresql-${major}_$upstream.orig.tar.bz2" -C "$SRC" "postgresql-$upstream/src/test/regress"
  # The server headers of the same version, unpacked (not installed: the
  # package would pull a compiler toolchain of its own).
  (cd "$SRC/dl" && apt-get "${apt[@]}" download -qq "postgresql-server-dev-$major=$deb_version" 2>/dev/null)
  dpkg-deb -x "$SRC/dl/postgresql-server-dev-${major}_${deb_version}_amd64.deb" "$SRC/dev"
  gcc -O2 -fPIC -shared -I"$SRC/dev/usr/include/postgresql/$major/server" -I"$SRC/dev/usr/include/postgresql" \
    "$REGRESS/regress.c" -o "$SRC/dlpath/regress.so"
  # The suite loads contrib's autoinc and refint from the same directory.
  ln -sf "/usr/lib/postgresql/$major/lib/autoinc.so" "$SRC/dlpath/autoinc.so"
  ln -sf "/usr/lib/postgresql/$major/lib/refint.so" "$SRC/dlpath/refint.so"
  chmod -R a+rX "$CACHE"
}

# prepare_database: what pg_regress does to a database it creates, since
# --use-existing leaves that to us (its create_database()).
prepare_database() {
  local su=(psql -X -q -h 127.0.0.1 -p "$GH_PG_PRIMARY_PORT" -U "$GH_PG_USER" -d postgres -v ON_ERROR_STOP=1)
  PGPASSWORD=$GH_PG_PASSWORD "${su[@]}" <<SQL
CREATE DATABASE regression TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C';
ALTER DATABASE regression SET lc_messages TO 'C';
ALTER DATABASE regression SET lc_monetary TO 'C';
ALTER DATABASE regression SET lc_numeric TO 'C';
ALTER DATABASE regression SET lc_time TO 'C';
ALTER DATABASE regression SET bytea_output TO 'hex';
ALTER DATABASE regression SET timezone_abbreviations TO 'Default';
SQL
}

# proxy MODE: Gatehouse in front of the server, one endpoint in MODE, the
# superuser as its one tenant. Sets port.
proxy() {
  local mode=$1 dir=$OUT/$1
  port=$(free_port)
  cat >"$dir/gatehouse.toml" <<TOML
[proxy]
log_filter = "warn"

[[clusters]]
name = "regress"
engine = "postgres"
backends = ["127.0.0.1:$GH_PG_PRIMARY_PORT"]
monitor_secret = "superuser"
pool = { size = $POOL, borrow_timeout = "60s" }

[[endpoints]]
name = "regress"
listen = "127.0.0.1:$port"
cluster = "regress"
role = "read_write"
pool_mode = "$mode"

[[tenants]]
name = "$GH_PG_USER"
databases = ["regression", "postgres"]
secret = "superuser"
scram_verifier = "$(printf '%s' "$GH_PG_PASSWORD" | "$GATEHOUSE" hash-password)"

[[secrets]]
name = "superuser"
user = "$GH_PG_USER"
password = "$GH_PG_PASSWORD"
TOML
  "$GATEHOUSE" check-config "$dir/gatehouse.toml" >/dev/null
  "$GATEHOUSE" run --config "$dir/gatehouse.toml" >"$dir/gatehouse.log" 2>&1 &
  proxy_pid=$!
  wait_port 127.0.0.1 "$port"
}

# run_target TARGET: a fresh server, then the suite; TARGET/results.txt
# holds "name ok|failed" lines.
run_target() {
  local t=$1 dir=$OUT/$1
  rm -rf "$dir"
  mkdir -p "$dir"
  # The server writes the suite's output files (COPY TO) beside the results.
  mkdir -p "$dir/results"
  chmod 1777 "$OUT" "$dir" "$dir/results"
  cluster_dir=$dir/cluster
  "$TESTKIT" up --dir "$cluster_dir" --pg-bindir "$PG_BIN" --pg-max-connections 100 >/dev/null
  # shellcheck disable=SC1091
  source "$cluster_dir/cluster.env"
  prepare_database
  proxy_pid=""
  port=$GH_PG_PRIMARY_PORT
  case $t in session | transaction) proxy "$t" ;; esac
  # Differentially, the targets after direct expect what direct printed.
  local inputdir=$REGRESS
  if [ "$DIFFERENTIAL" = 1 ] && [ "$t" != direct ]; then
    inputdir=$dir/suite
    mkdir -p "$inputdir/expected"
    local f
    for f in "$REGRESS"/*; do
      [ "${f##*/}" = expected ] || ln -s "$f" "$inputdir/${f##*/}"
    done
    cp "$OUT/direct/results/"*.out "$inputdir/expected/"
    chmod -R a+rX "$inputdir"
  fi
  local what=(--schedule="$REGRESS/parallel_schedule")
  if [ -n "${SUITE_TESTS:-}" ]; then
    # shellcheck disable=SC2206
    what=($SUITE_TESTS)
  fi
  log "$t: pg_regress on port $port"
  set +e
  PGPASSWORD=$GH_PG_PASSWORD "$PG_REGRESS" --use-existing --host=127.0.0.1 --port="$port" --user="$GH_PG_USER" \
    --dbname=regression --inputdir="$inputdir" --outputdir="$dir" --bindir="$(dirname "$(command -v psql)")" \
    --dlpath="$SRC/dlpath" --max-connections="$CONNS" "${what[@]}" >"$dir/pg_regress.txt" 2>&1
  set -e
  [ -z "$proxy_pid" ] || { kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null || true; }
  "$TESTKIT" down --dir "$cluster_dir" >/dev/null 2>&1 || true
  # "test NAME ... ok 12 ms", "     NAME ... FAILED 30 ms", "... failed (ignored)".
  awk '/ \.\.\. / { for (i = 1; i <= NF; i++) if ($i == "...") { name = $(i - 1); r = $(i + 1) }
         print name, (r == "ok" ? "ok" : "failed") }' "$dir/pg_regress.txt" >"$dir/results.txt"
  printf '%-12s %4d passed %4d failed\n' "$t" "$(grep -c ' ok$' "$dir/results.txt")" \
    "$(grep -c ' failed$' "$dir/results.txt")" | tee "$dir/summary.txt"
}

if [ "${SUITE_BUILD:-release}" = debug ]; then
  cargo build --quiet -p gatehouse -p gatehouse-testkit
  GATEHOUSE=$CARGO_TARGET_DIR/debug/gatehouse
  TESTKIT=$CARGO_TARGET_DIR/debug/gatehouse-testkit
else
  build_release
fi
if ((${#TARGETS[@]} == 0)); then
  TARGETS=(direct session transaction)
  [ "$DIFFERENTIAL" = 0 ] || TARGETS+=(again)
fi
for t in "${TARGETS[@]}"; do
  case $t in
    direct | session | transaction) ;;
    again) [ "$DIFFERENTIAL" = 1 ] || { echo "the target again is SUITE_PG=17's" >&2; exit 2; } ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
done
fetch_suite
mkdir -p "$OUT"
for t in "${TARGETS[@]}"; do
  if [ "$DIFFERENTIAL" = 1 ] && [ "$t" != direct ] && ! ls "$OUT/direct/results/"*.out >/dev/null 2>&1; then
    echo "$t expects direct's output: run the target direct first" >&2
    exit 2
  fi
  run_target "$t"
done

echo
echo "PostgreSQL $upstream regression suite on PostgreSQL $server_version ($([ -n "${SUITE_TESTS:-}" ] && echo "SUITE_TESTS" || echo parallel_schedule), $CONNS connections; results in $OUT)"
for t in "${TARGETS[@]}"; do cat "$OUT/$t/summary.txt"; done
if [ "$DIFFERENTIAL" = 1 ]; then
  # Every target after direct compared with direct's output; `again`'s
  # differences are the server's own from run to run.
  noise=""
  [ -f "$OUT/again/results.txt" ] && noise=$(awk '$2 == "failed" { printf "%s ", $1 }' "$OUT/again/results.txt")
  echo "differing direct from run to run (again): ${noise:-none}"
  for t in session transaction; do
    [ -f "$OUT/$t/results.txt" ] || continue
    differ=$(awk -v noise=" $noise" '$2 == "failed" && index(noise, " " $1 " ") == 0 { printf "%s ", $1 }' "$OUT/$t/results.txt")
    echo "differing from direct through Gatehouse ($t): ${differ:-none} (diffs: $OUT/$t/regression.diffs)"
    known_var=KNOWN_$t
    unexpected=""
    for name in $differ; do
      case " ${!known_var} " in *" $name "*) ;; *) unexpected+="$name " ;; esac
    done
    if [ -n "$unexpected" ]; then
      echo "  not among the known differences ($t): $unexpected"
      check_failed=1
    fi
  done
elif [ -f "$OUT/direct/results.txt" ]; then
  for t in session transaction; do
    [ -f "$OUT/$t/results.txt" ] || continue
    worse=$(awk 'NR == FNR { if ($2 == "ok") ok[$1] = 1; next } $2 == "failed" && ok[$1] { printf "%s ", $1 }' \
      "$OUT/direct/results.txt" "$OUT/$t/results.txt")
    echo "passing direct, failing through Gatehouse ($t): ${worse:-none} (diffs: $OUT/$t/regression.diffs)"
    known_var=KNOWN_$t
    unexpected=""
    for name in $worse; do
      case " ${!known_var} " in *" $name "*) ;; *) unexpected+="$name " ;; esac
    done
    if [ -n "$unexpected" ]; then
      echo "  not among the known differences ($t): $unexpected"
      check_failed=1
    fi
  done
fi
for t in "${TARGETS[@]}"; do
  # A run that ended early (a crash, a refused login) reports few tests.
  if ! grep -qE 'tests? (passed|failed)' "$OUT/$t/pg_regress.txt" 2>/dev/null; then
    echo "  $t: pg_regress did not complete: $(tail -3 "$OUT/$t/pg_regress.txt" | tr '\n' ' ')"
    check_failed=1
  fi
done
if [ "${SUITE_CHECK:-0}" = 1 ] && [ "${check_failed:-0}" = 1 ]; then
  exit 1
fi
