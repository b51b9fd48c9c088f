#!/usr/bin/env bash
# drivers/run java DRIVER MODE: DRIVER is connectorj (MySQL Connector/J) or
# pgjdbc, both through HikariCP; MODE is default (the driver's defaults) or
# prepared (Connector/J: useServerPrepStmts=true&cachePrepStmts=true;
# pgjdbc: prepareThreshold=1). Built by drivers/setup java.
set -euo pipefail
driver=${1:?usage: drivers/run java connectorj|pgjdbc default|prepared}
mode=${2:-default}
case "$driver" in
  connectorj) main=gatehouse.drivers.ConnectorJ ;;
  pgjdbc) main=gatehouse.drivers.PgJdbc ;;
  *) echo "java has no driver '$driver' (connectorj, pgjdbc)" >&2; exit 2 ;;
esac
case "$mode" in
  default | prepared) ;;
  *) echo "unknown mode '$mode' (default, prepared)" >&2; exit 2 ;;
esac
cache="${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/java"
[ -f "$cache/.built" ] || { echo "the Java programs are not built: run drivers/setup java" >&2; exit 1; }
exec java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.showDateTime=true \
  -cp "$cache/build/classes:$cache/lib/*" "$main" "$mode"
