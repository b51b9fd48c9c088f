#!/usr/bin/env bash
# drivers/run cli mysql default: GH_WORKERS concurrent `mysql` clients, each
# running GH_ITERATIONS sessions of the scenario in drivers/README.md (text
# protocol): insert then LAST_INSERT_ID(), ROW_COUNT() and @@identity; an
# autocommit-off transaction that starts table-less; an error inside a
# transaction; a tracked variable; churn that leaves a temporary table, a
# user variable and an open transaction behind.
set -euo pipefail
[ "${1:-}" = mysql ] || { echo "cli has one driver: mysql" >&2; exit 2; }
t="t_${GH_TAG}"
my() { mysql --no-defaults --skip-ssl -h "$GH_HOST" -P "$GH_PORT" -u "$GH_USER" "-p$GH_PASSWORD" -N -B "$GH_DATABASE" "$@"; }
fail() { echo "FAILED worker $1: $2" >&2; exit 1; }

my -e "DROP TABLE IF EXISTS $t; CREATE TABLE $t (id BIGINT AUTO_INCREMENT PRIMARY KEY, worker INT NOT NULL, n INT NOT NULL, note VARCHAR(64))"

worker() {
  local w=$1 i out expect a b
  for ((i = 0; i < GH_ITERATIONS; i++)); do
    # 1. The generated id, ROW_COUNT() and @@identity of this session's own insert.
    out=$(my -e "INSERT INTO $t (worker, n) VALUES ($w, $i); SELECT LAST_INSERT_ID(), ROW_COUNT(), @@identity = LAST_INSERT_ID(); SELECT worker, n FROM $t WHERE id = LAST_INSERT_ID()")
    read -r id rc same <<<"$(sed -n 1p <<<"$out")"
    [ "$rc" = 1 ] && [ "$same" = 1 ] || fail "$w" "after insert: LAST_INSERT_ID, ROW_COUNT, identity-equal = '$id $rc $same'"
    [ "$(sed -n 2p <<<"$out")" = "$w	$i" ] || fail "$w" "row $id is '$(sed -n 2p <<<"$out")', expected '$w	$i'"
    # 2. autocommit off: the transaction starts table-less and stays on one backend.
    out=$(my -e "SET autocommit = 0; SELECT CONNECTION_ID(); INSERT INTO $t (worker, n, note) VALUES ($w, $i, 'ac0'); SELECT COUNT(*) FROM $t WHERE worker = $w AND n = $i AND note = 'ac0'; SELECT CONNECTION_ID(); COMMIT; SELECT @@autocommit")
    a=$(sed -n 1p <<<"$out") b=$(sed -n 3p <<<"$out")
    [ "$a" = "$b" ] || fail "$w" "autocommit-off transaction moved from backend $a to $b"
    [ "$(sed -n 2p <<<"$out")" = 1 ] && [ "$(sed -n 4p <<<"$out")" = 0 ] || fail "$w" "autocommit-off transaction: '$out'"
    # 3. An error inside a transaction, then ROLLBACK: the row is gone.
    # (statements sent one by one, --force going on past the error)
    out=$(printf '%s\n' "BEGIN;" "INSERT INTO $t (worker, n, note) VALUES ($w, $i, 'rb');" \
      "INSERT INTO $t (id, worker, n) VALUES ($id, 0, 0);" "ROLLBACK;" \
      "SELECT COUNT(*) FROM $t WHERE worker = $w AND n = $i AND note = 'rb';" | my --force 2>/dev/null || true)
    [ "$out" = 0 ] || fail "$w" "rolled-back row visible: '$out'"
    # 5. A tracked variable, read back after other statements.
    expect="+0$((i % 10)):00"
    out=$(my -e "SET time_zone = '$expect'; SELECT 1; SELECT @@time_zone")
    [ "$(sed -n 2p <<<"$out")" = "$expect" ] || fail "$w" "time_zone is '$(sed -n 2p <<<"$out")', expected '$expect'"
    # 8. Churn: leave state behind, then a fresh session sees none of it.
    my -e "CREATE TEMPORARY TABLE tmp_$GH_TAG (x INT); SET @leak = $w; SET autocommit = 0; INSERT INTO $t (worker, n, note) VALUES ($w, $i, 'leaked')"
    out=$(my -e "SELECT @leak IS NULL, @@in_transaction, @@autocommit, (SELECT COUNT(*) FROM $t WHERE note = 'leaked'); SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'tmp_$GH_TAG'")
    [ "$out" = "$(printf '1\t0\t1\t0\n0')" ] || fail "$w" "state left behind by the previous session: '$out'"
  done
}

pids=()
for ((w = 1; w <= GH_WORKERS; w++)); do
  worker "$w" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ "$status" = 0 ] || exit 1
echo "$GH_TAG: $GH_WORKERS workers x $GH_ITERATIONS iterations, $((GH_WORKERS * GH_ITERATIONS * 7)) checks passed"
