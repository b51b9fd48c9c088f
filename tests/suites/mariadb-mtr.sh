#!/usr/bin/env bash
# MariaDB's own regression suite through Gatehouse: mysql-test-run's main
# suite in its --extern form (tests that need to start or restart a server
# of their own are skipped by mysql-test-run itself), over TCP as root, on
# fresh test-kit servers for each target:
#   direct       the server itself;
#   session      Gatehouse, an endpoint in pool_mode "session" (a pool of
#                100, more than a test opens connections at once);
#   transaction  Gatehouse, pool_mode "transaction", pool size 5.
# The suite comes from Debian's mariadb-test and mariadb-test-data packages
# of the installed server's version (apt-get download, unpacked, not
# installed; with any library mariadb-test needs that the machine lacks),
# cached outside the clone (GH_SUITES_CACHE, /var/tmp/gatehouse-suites).
# mysql-test-run finds the client programs beside mariadb-test, so the
# cache's usr/bin also links the installed MariaDB programs.
#
# Each server is first made what mysql-test-run's own bootstrap makes: root
# without a password (the tests connect as root with none), the databases
# test and mtr (mtr.add_suppression and friends), the test time zones, and
# the server defaults of the suite's default_mysqld.cnf that can be set at
# run time (latin1, MyISAM, MIXED binlog, ...). Through Gatehouse, root is
# a tenant with an empty password, backed by the server's root, allowed the
# databases the suite's files name (CREATE DATABASE, USE, connect, change_user).
# With --extern, mysql-test-run neither checks nor restarts the server after
# a failing test, whose leftovers would fail the tests after it: the tests
# run until one fails, then the rest on a fresh server (and proxy).
#
# What fails direct too, as the test kit's server is not one of
# mysql-test-run's: tests that connect to "localhost" as users they create
# (over TCP, with the server's skip-name-resolve, they are @127.0.0.1), that
# show DEFINER root@localhost, or that reach files through the server's data
# directory (outside mysql-test-run's var directory).
#
# Prints per target passed / failed / skipped, then the tests that pass
# direct (this run's or the last one's) but fail through the proxy. Each
# target's mysql-test-run output (mtr.txt), results (results.txt: "name
# pass|fail|skipped" lines) and var directory stay under SUITE_DIR
# (/var/tmp/gatehouse-mariadb-mtr/TARGET); each failing test's report (its
# part of mtr.txt, with the diff), .reject and log under TARGET/failed/.
#
#   tests/suites/mariadb-mtr.sh                       # all three targets, the whole main suite
#   tests/suites/mariadb-mtr.sh transaction           # one target
#   SUITE_TESTS="select insert 1st func_str" tests/suites/mariadb-mtr.sh direct transaction
#   tests/suites/mariadb-mtr.sh --short              # ./test's run: a sample, checked
# Knobs: SUITE_TESTS (test names of the main suite run instead of all of
# it), SUITE_POOL (5), SUITE_PARALLEL (1: mysql-test-run's workers share the
# one server and its database test, so more than one makes tests collide),
# SUITE_BUILD (release, or debug: the binaries `cargo build` made, as
# ./test uses them), SUITE_CHECK=1 (exit 1 when a test passes direct but
# fails through a target and is not among that target's known differences
# below), SUITE_TEST_TIMEOUT (minutes a test may take, 5), SUITE_PASSED_DIRECT=1
# (session and transaction run only the tests that passed direct, in this
# run or the last one).
#
# Duration (measured, 2 cores): each fresh server costs mysql-test-run's
# start, about 8 s, and a test that hangs waiting for a server restart
# (--extern cannot restart) its timeout; the whole main suite direct,
# about 460 failing tests, takes about 1.5 h with SUITE_TEST_TIMEOUT=1.
# Through the proxy with SUITE_PASSED_DIRECT=1, few fail and it runs in a
# fraction of that.
#
# Known differences, each explained in the README's "Compatibility"
# section (what a pooler cannot make like a direct session):
# ctype_cp1251, user_var: CONNECTION_ID() is the proxy's id, written in
#   as a number (no processlist row, another length in CONCAT);
# xa, lock: the server's session count does not drop when clients leave.
KNOWN_session="ctype_cp1251 user_var xa"
KNOWN_transaction="ctype_cp1251 user_var xa lock"
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_packages
# shellcheck source=bench/common.sh
source bench/common.sh

# --short: the tests that found differences in Gatehouse (the handshake's
# capabilities: extended type information (mysql -i: the Rust tests), database names
# outside ASCII, LAST_INSERT_ID() in EXPLAIN) and a sample, checked
# (SUITE_CHECK=1): what ./test runs, in about two minutes.
if [ "${1:-}" = --short ]; then
  shift
  SUITE_TESTS=${SUITE_TESTS:-1st mysql-metadata type_json query_cache_innodb auto_increment ctype_collate alias bool case commit func_str having limit union update user_var variables}
  SUITE_CHECK=1
  SUITE_DIR=${SUITE_DIR:-/var/tmp/gatehouse-mariadb-mtr-short}
fi
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(direct session transaction)
POOL=${SUITE_POOL:-5}
SESSION_POOL=100
PARALLEL=${SUITE_PARALLEL:-1}
TEST_TIMEOUT=${SUITE_TEST_TIMEOUT:-5}
OUT=${SUITE_DIR:-/var/tmp/gatehouse-mariadb-mtr}
CACHE=${GH_SUITES_CACHE:-/var/tmp/gatehouse-suites}

# The installed server's full Debian version (1:10.11.19-0+deb12u1) and
# upstream version (10.11.19).
deb_version=$(dpkg-query -W -f='${Version}' mariadb-server)
upstream=${deb_version#*:}
upstream=${upstream%%-*}
SRC="$CACHE/mariadb-${deb_version#*:}"
ROOT=$SRC/root
MTR_SRC=$ROOT/usr/share/mysql/mysql-test

# fetch_suite: mariadb-test and what it needs, unpacked under $ROOT, once
# per version.
fetch_suite() {
  [ -f "$SRC/ready" ] && return 0
  log "fetching MariaDB $upstream's test suite (Debian package mariadb-test $deb_version)"
  rm -rf "$SRC"
  mkdir -p "$SRC/dl" "$ROOT"
  local apt=(apt-get -o APT::Sandbox::User=root)
  if ! (cd "$SRC/dl" && "${apt[@]}" download -qq "mariadb-test=$deb_version" 2>/dev/null); then
    # Package lists older than the installed server: refresh them.
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    (cd "$SRC/dl" && "${apt[@]}" download -qq "mariadb-test=$deb_version")
  fi
  # Of what mariadb-test depends on, mariadb-test-data (the tests, its exact
  # version) and what the machine lacks (libpcre2-posix3). Of alternatives,
  # the first.
  local deb dep missing=()
  deb=$(echo "$SRC"/dl/mariadb-test_*.deb)
  while read -r dep; do
    case $dep in mariadb-test*) missing+=("$dep"); continue ;; esac
    dpkg-query -W -f='${Status}' "${dep%%=*}" 2>/dev/null | grep -q "install ok installed" || missing+=("$dep")
  done < <(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
    awk '{ sub(/\|.*/, ""); if ($2 == "(=") { v = $3; sub(/\)$/, "", v); print $1 "=" v } else if ($1 != "") print $1 }')
  if ((${#missing[@]})); then
    (cd "$SRC/dl" && "${apt[@]}" download -qq "${missing[@]}")
  fi
  for deb in "$SRC"/dl/*.deb; do dpkg-deb -x "$deb" "$ROOT"; done
  # mysql-test-run runs the client programs from the directory of
  # mariadb-test (the installed server's, linked) and adds usr/lib to
  # LD_LIBRARY_PATH (the unpacked libraries, linked there).
  local pkg f
  for pkg in $(dpkg-query -W -f='${Package} ${Status}\n' 'mariadb-*' | awk '$NF == "installed" { print $1 }'); do
    for f in $(dpkg -L "$pkg" | grep -E '^/usr/s?bin/'); do
      [ -e "$ROOT$f" ] || [ -L "$ROOT$f" ] || { mkdir -p "$ROOT${f%/*}" && ln -s "$f" "$ROOT$f"; }
    done
  done
  find "$ROOT/usr/lib" -mindepth 2 -maxdepth 2 -path '*-linux-gnu/*.so*' -exec ln -sf {} "$ROOT/usr/lib/" \;
  [ -e "$ROOT/usr/share/mysql/charsets" ] || ln -s /usr/share/mysql/charsets "$ROOT/usr/share/mysql/charsets"
  LD_LIBRARY_PATH="$ROOT/usr/lib" "$ROOT/usr/bin/mariadb-test" --version >/dev/null
  [ -f "$MTR_SRC/mariadb-test-run.pl" ] || { echo "no mariadb-test-run.pl in $MTR_SRC" >&2; exit 1; }
  touch "$SRC/ready"
}

# tenant_databases: the databases the suite's files name (CREATE DATABASE,
# USE, a connect's or change_user's database) and the system ones, as the
# items of a TOML list (names TOML cannot hold, not UTF-8 or with quotes,
# and variables left out).
tenant_databases() {
  {
    printf '%s\n' test mtr mysql information_schema performance_schema sys
    cat "$MTR_SRC"/main/*.test "$MTR_SRC"/include/*.inc | perl -ne '
      sub name { my ($q, $w) = @_; return $w if defined $w; $q =~ s/``/`/g; return $q }
      while (/\bcreate\s+(?:database|schema)\s+(?:if\s+not\s+exists\s+)?(?:`((?:[^`]|``)+)`|(\w+))/gi) { print name($1, $2), "\n" }
      while (/(?:^|;)\s*(?:eval\s+)?use\s+(?:`((?:[^`]|``)+)`|(\w+))\s*;/gi) { print name($1, $2), "\n" }
      if (/^\s*(?:--)?\s*connect\s*\(([^)]*)\)/i) { my @a = split /\s*,\s*/, $1; print "$a[4]\n" if defined $a[4] }
      if (/^\s*(?:--)?\s*change_user\s+(.*?);?\s*$/i) { my @a = split /\s*,\s*/, $1; print "$a[2]\n" if defined $a[2] }'
  } | grep -avE '^[$]|["\\]|[[:cntrl:]]|^$' | perl -ne 'print if utf8::decode(my $c = $_)' | sort -u | awk '{ printf "%s\"%s\"", (NR > 1 ? ", " : ""), $0 }'
}

# tenant_users: the users other than root the suite's files connect as
# (connect, change_user) with a literal name, each with the password it is
# given most often, as "user<TAB>password" lines. Each becomes a tenant of
# its own, backed by the server's user of that name with that password, so
# the tests that create a user and connect as it run through the proxy too
# (a test that gives the user another password sees 1045, as a tenant
# proxy must answer).
tenant_users() {
  cat "$MTR_SRC"/main/*.test "$MTR_SRC"/include/*.inc | perl -ne '
    my @a;
    if (/^\s*(?:--)?\s*connect\s*\(([^)]*)\)/i) { @a = (split /\s*,\s*/, $1)[2, 3] }
    elsif (/^\s*(?:--)?\s*change_user\s+(.*?);?\s*$/i) { @a = (split /\s*,\s*/, $1)[0, 1] }
    next unless defined $a[0] && $a[0] =~ /^\w+$/ && $a[0] ne "root";
    my $pw = $a[1] // ""; $pw = "" if $pw =~ /^\s*$/;
    next unless $pw =~ /^\w*$/;
    $n{$a[0]}{$pw}++;
    END { for my $u (sort keys %n) { my ($best) = sort { $n{$u}{$b} <=> $n{$u}{$a} || $a cmp $b } keys %{$n{$u}}; print "$u\t$best\n" } }'
}

# tenants_toml: a tenant and a secret for each of tenant_users.
tenants_toml() {
  local user pw
  while IFS=$'\t' read -r user pw; do
    cat <<TOML

[[tenants]]
name = "$user"
databases = [$DATABASES]
secret = "$user"
mysql_native_password = "$(printf '%s' "$pw" | "$GATEHOUSE" hash-password --mysql)"

[[secrets]]
name = "$user"
user = "$user"
password = "$pw"
TOML
  done < <(tenant_users)
}

# prepare_server: what mysql-test-run's bootstrap does to the servers it
# installs, which --extern leaves to us (its mysql_install_db()), and its
# default_mysqld.cnf's settings that a running server takes.
prepare_server() {
  local my=(mariadb --no-defaults -h 127.0.0.1 -P "$GH_MYSQL_PRIMARY_PORT" -u root)
  "${my[@]}" -p"$GH_MYSQL_PASSWORD" -N -B -e \
    "SELECT CONCAT('ALTER USER ', QUOTE(user), '@', QUOTE(host), ' IDENTIFIED BY '''';') FROM mysql.user WHERE user = 'root' AND authentication_string <> ''" |
    "${my[@]}" -p"$GH_MYSQL_PASSWORD"
  "${my[@]}" <<'SQL'
CREATE DATABASE IF NOT EXISTS test CHARACTER SET latin1 COLLATE latin1_swedish_ci;
CREATE DATABASE mtr CHARACTER SET latin1;
SET GLOBAL character_set_server = latin1, collation_server = latin1_swedish_ci,
  default_storage_engine = MyISAM, binlog_format = MIXED, log_bin_trust_function_creators = 1,
  local_infile = 1, connect_timeout = 60, key_buffer_size = 1048576, sort_buffer_size = 262144,
  max_heap_table_size = 1048576, use_stat_tables = PREFERABLY, histogram_type = JSON_HB,
  binlog_direct_non_transactional_updates = 1, slave_net_timeout = 120;
SQL
  "${my[@]}" mysql </usr/share/mysql/mysql_test_data_timezone.sql
  # mtr_warnings.sql and mtr_check.sql are in mariadb-test's dialect
  # ("delimiter ||;", "--" lines): the client's, as sql_to_bootstrap() does.
  local f
  for f in mtr_warnings mtr_check; do
    perl -ne 'BEGIN { $d = ";" }
      if (/^delimiter (.*?)\s*$/i) { ($n = $1) =~ s/\Q$d\E$//; $d = $n; print "DELIMITER $n\n"; next }
      next if /^\s*--/; s/\x27\@HOSTNAME\@\x27/localhost/; print' "$MTR_SRC/include/$f.sql" | "${my[@]}" mtr
  done
}

# proxy MODE: Gatehouse in front of the server, one endpoint in MODE, root
# as its one tenant. Sets port and proxy_pid.
proxy() {
  local mode=$1 dir=$OUT/$1 size=$POOL
  [ "$mode" = transaction ] || size=$SESSION_POOL
  port=$(free_port)
  cat >"$dir/gatehouse.toml" <<TOML
[proxy]
log_filter = "warn"

[[clusters]]
name = "mtr"
engine = "mysql"
backends = ["127.0.0.1:$GH_MYSQL_PRIMARY_PORT"]
monitor_secret = "root"
pool = { size = $size, borrow_timeout = "60s" }

[[endpoints]]
name = "mtr"
listen = "127.0.0.1:$port"
cluster = "mtr"
role = "read_write"
pool_mode = "$mode"

[[tenants]]
name = "root"
databases = [$DATABASES]
secret = "root"
mysql_native_password = "$(printf '' | "$GATEHOUSE" hash-password --mysql)"

[[secrets]]
name = "root"
user = "root"
password = ""
$TENANTS
TOML
  "$GATEHOUSE" check-config "$dir/gatehouse.toml" >/dev/null
  "$GATEHOUSE" run --config "$dir/gatehouse.toml" >>"$dir/gatehouse.log" 2>&1 &
  proxy_pid=$!
  wait_port 127.0.0.1 "$port"
}

# overlay DIR: a tree under DIR to run mysql-test-run from: links to the
# cached one, but with a main/ of its own (links to the tests and results),
# since mariadb-test writes a failing test's .reject beside its .result.
overlay() {
  local o=$1 d e
  for d in usr usr/share usr/share/mysql usr/share/mysql/mysql-test; do
    mkdir -p "$o/$d"
    for e in "$ROOT/$d"/*; do
      case ${e#"$ROOT/"} in
        usr/share | usr/share/mysql | usr/share/mysql/mysql-test | usr/share/mysql/mysql-test/main) ;;
        *) ln -s "$e" "$o/$d/" ;;
      esac
    done
  done
  mkdir "$o/usr/share/mysql/mysql-test/main"
  ln -s "$MTR_SRC"/main/* "$o/usr/share/mysql/mysql-test/main/"
}

# keep_failures TARGET: each failing test's part of mtr.txt (its diff or
# error), .reject and log, under TARGET/failed/.
keep_failures() {
  local dir=$OUT/$1 name status test
  mkdir -p "$dir/failed"
  awk -v out="$dir/failed" '
    match($0, /^main\.[^ ]+( \047[^\047]*\047)? +(w[0-9]+ +)?\[ [a-z-]+ \]/) {
      if (f != "") close(f)
      f = ""
      if ($0 ~ /\[ (retry-)?(exp-)?fail \]/) { n = $1; if ($2 ~ /^\047/) n = n "," substr($2, 2, length($2) - 2); f = out "/" n ".txt" }
    }
    /^-{70,}$/ { if (f != "") close(f); f = "" }
    f != "" { print > f }' "$dir/mtr.txt"
  while read -r name status; do
    [ "$status" = fail ] || continue
    test=${name#main.}
    test=${test%%,*}
    [ ! -f "$dir/mtr/usr/share/mysql/mysql-test/main/$test.reject" ] ||
      cp "$dir/mtr/usr/share/mysql/mysql-test/main/$test.reject" "$dir/failed/$name.reject"
    [ ! -f "$dir/var/log/$test.log" ] || cp "$dir/var/log/$test.log" "$dir/failed/$name.log"
  done <"$dir/results.txt"
}

# stop_target: the proxy and the server of the target being run, if any.
stop_target() {
  [ -z "${proxy_pid:-}" ] || { kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null || true; }
  proxy_pid=""
  [ -z "${cluster_dir:-}" ] || "$TESTKIT" down --dir "$cluster_dir" >/dev/null 2>&1 || true
  cluster_dir=""
}
trap stop_target EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_target TARGET: a fresh server (the target's previous one, if any,
# stopped and removed) made ready for the suite and, for a proxy target,
# Gatehouse in front of it. Sets port.
start_target() {
  local t=$1 dir=$OUT/$1
  stop_target
  rm -rf "$dir/cluster"
  cluster_dir=$dir/cluster
  "$TESTKIT" up --dir "$cluster_dir" --no-pg --mysql --mysql-max-connections 300 >/dev/null
  # shellcheck disable=SC1091
  source "$cluster_dir/cluster.env"
  prepare_server
  port=$GH_MYSQL_PRIMARY_PORT
  [ "$t" = direct ] || proxy "$t"
}

# mtr DIR ARGS...: mysql-test-run, main suite, against the server or proxy
# on $port, from DIR's overlay, with DIR/var as its var directory.
mtr() {
  local dir=$1
  shift
  (cd "$dir/mtr/usr/share/mysql/mysql-test" &&
    perl ./mariadb-test-run.pl --extern host=127.0.0.1 --extern port="$port" --extern protocol=tcp --user=root \
      --suite=main --parallel="$PARALLEL" --testcase-timeout="$TEST_TIMEOUT" --suite-timeout=2880 \
      --vardir="$dir/var" "$@")
}

# test_names FILE: the tests of mysql-test-run's output FILE ("main.x" or,
# for a combination, "main.x 'innodb'"), as it takes them back: main.x,innodb.
test_names() {
  awk '/^main\./ { n = $1; if ($2 ~ /^\047/) n = n "," substr($2, 2, length($2) - 2); print n }' "$1"
}

# run_target TARGET: the suite against a fresh server. With --extern,
# mysql-test-run neither checks nor restarts the server after a failing
# test, whose leftovers (tables, global variables, users) would fail the
# tests after it: the tests run until one fails (--max-test-fail=1), then
# the rest on a fresh server (and proxy), as its own servers are restarted
# after a failure. TARGET/results.txt holds "name pass|fail|skipped" lines.
run_target() {
  local t=$1 dir=$OUT/$1
  rm -rf "$dir"
  mkdir -p "$dir"
  overlay "$dir/mtr"
  start_target "$t"
  local what=()
  if [ -n "${SUITE_TESTS:-}" ]; then
    # shellcheck disable=SC2206
    what=($SUITE_TESTS)
  fi
  mtr "$dir" --dry-run "${what[@]}" >"$dir/dry-run.txt" 2>&1 ||
    { echo "mysql-test-run --dry-run failed: $dir/dry-run.txt" >&2; exit 1; }
  test_names "$dir/dry-run.txt" >"$dir/tests.txt"
  if [ "${SUITE_PASSED_DIRECT:-0}" = 1 ] && [ "$t" != direct ] && [ -f "$OUT/direct/results.txt" ]; then
    # Only what passed direct: all that can show a difference the proxy makes.
    awk 'NR == FNR { if ($2 == "pass") ok[$1] = 1; next } ok[$1]' "$OUT/direct/results.txt" "$dir/tests.txt" >"$dir/tests.passed"
    mv "$dir/tests.passed" "$dir/tests.txt"
  fi
  local todo=() rounds=0 before started=$SECONDS
  mapfile -t todo <"$dir/tests.txt"
  : >"$dir/mtr.txt"
  : >"$dir/results.txt"
  log "$t: mysql-test-run, ${#todo[@]} tests"
  while ((${#todo[@]})); do
    if ((rounds++)); then
      log "$t: a fresh server for the ${#todo[@]} tests left"
      start_target "$t"
    fi
    before=$(wc -l <"$dir/results.txt")
    mtr "$dir" --force --max-test-fail=1 "${todo[@]}" >>"$dir/mtr.txt" 2>&1 || true
    # "main.select   [ pass ]  123", "main.x 'innodb'   w1 [ fail ]  ...",
    # "[ skipped ]  reason", "[ disabled ]  reason".
    awk 'match($0, /^main\.[^ ]+( \047[^\047]*\047)? +(w[0-9]+ +)?\[ [a-z-]+ \]/) {
           n = $1; if ($2 ~ /^\047/) n = n "," substr($2, 2, length($2) - 2)
           r = substr($0, RSTART, RLENGTH); sub(/.*\[ /, "", r); sub(/ \]$/, "", r)
           print n, (r == "pass" ? "pass" : (r == "skipped" || r == "disabled") ? "skipped" : "fail") }' \
      "$dir/mtr.txt" >"$dir/results.txt"
    mapfile -t todo < <(awk 'NR == FNR { done[$1] = 1; next } !($1 in done)' "$dir/results.txt" "$dir/tests.txt")
    if (($(wc -l <"$dir/results.txt") == before)); then
      log "$t: mysql-test-run ran none of the ${#todo[@]} tests left; see $dir/mtr.txt"
      break
    fi
  done
  stop_target
  keep_failures "$t"
  printf '%-12s %4d passed %4d failed %4d skipped %4d not run (%d servers, %d min)\n' "$t" "$(grep -c ' pass$' "$dir/results.txt")" \
    "$(grep -c ' fail$' "$dir/results.txt")" "$(grep -c ' skipped$' "$dir/results.txt")" "${#todo[@]}" "$rounds" \
    $(((SECONDS - started + 59) / 60)) |
    tee "$dir/summary.txt"
}

for t in "${TARGETS[@]}"; do
  case $t in direct | session | transaction) ;; *) echo "unknown target $t" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
# One run at a time per output directory (each target's is removed first).
exec 9>"$OUT/.lock"
flock -n 9 || { echo "another run is using $OUT" >&2; exit 1; }
if [ "${SUITE_BUILD:-release}" = debug ]; then
  cargo build --quiet -p gatehouse -p gatehouse-testkit
  GATEHOUSE=$CARGO_TARGET_DIR/debug/gatehouse
  TESTKIT=$CARGO_TARGET_DIR/debug/gatehouse-testkit
else
  build_release
fi
fetch_suite
DATABASES=$(tenant_databases)
TENANTS=$(tenants_toml)
for t in "${TARGETS[@]}"; do run_target "$t"; done

echo
echo "MariaDB $upstream mysql-test-run, main suite ($([ -n "${SUITE_TESTS:-}" ] && echo "SUITE_TESTS" || echo "all"), --extern; results in $OUT)"
for t in "${TARGETS[@]}"; do cat "$OUT/$t/summary.txt"; done
if [ -f "$OUT/direct/results.txt" ]; then
  for t in "${TARGETS[@]}"; do
    [ "$t" != direct ] || continue
    worse=$(awk 'NR == FNR { if ($2 == "pass") ok[$1] = 1; next } $2 == "fail" && ok[$1] { printf "%s ", $1 }' \
      "$OUT/direct/results.txt" "$OUT/$t/results.txt")
    echo "passing direct, failing through Gatehouse ($t): ${worse:-none} (reports: $OUT/$t/failed/)"
    known_var=KNOWN_$t
    unexpected=""
    for name in $worse; do
      case " ${!known_var} " in *" ${name#main.} "*) ;; *) unexpected+="$name " ;; esac
    done
    if [ -n "$unexpected" ]; then
      echo "  not among the known differences ($t): $unexpected"
      check_failed=1
    fi
  done
fi
for t in "${TARGETS[@]}"; do
  # A run that ended early (no test ran at all) reports nothing.
  if ! [ -s "$OUT/$t/results.txt" ]; then
    echo "  $t: mysql-test-run ran no test: $(tail -3 "$OUT/$t/mtr.txt" 2>/dev/null | tr '\n' ' ')"
    check_failed=1
  fi
done
if [ "${SUITE_CHECK:-0}" = 1 ] && [ "${check_failed:-0}" = 1 ]; then
  exit 1
fi
