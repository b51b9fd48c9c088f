#!/usr/bin/env bash
# drivers/setup java: builds the Connector/J and pgjdbc programs with Maven
# and copies the jars pinned in pom.xml into $GH_DRIVERS_CACHE/java/lib
# (outside the clone; Maven's own repository is its default ~/.m2). The
# build runs only when pom.xml, this script or a source file changed since
# the last one (their hash is kept in $GH_DRIVERS_CACHE/java/.built).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${GH_DRIVERS_CACHE:-$HOME/.cache/gatehouse-drivers}/java"
for tool in java javac mvn; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (Java 17 and Maven are needed)" >&2; exit 1; }
done
mkdir -p "$cache"
want=$(cd "$here" && find pom.xml setup.sh src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ -f "$cache/.built" ] && [ "$(cat "$cache/.built")" = "$want" ] &&
  [ -d "$cache/build/classes/gatehouse" ] && [ -d "$cache/lib" ]; then
  exit 0
fi
rm -rf "$cache/.built" "$cache/build" "$cache/lib"
# jansi.noreset: Debian's Maven 3.8 prints colour resets even in batch mode.
MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -q -B -f "$here/pom.xml" -DbuildDir="$cache/build" -DlibDir="$cache/lib" \
  compile dependency:copy-dependencies
echo "$want" >"$cache/.built"
