# Shared set-up for ./test, ./demo and bench/*: installs what the project
# needs on a fresh Debian machine and builds the workspace.
# Source it; it defines functions and exports CARGO_TARGET_DIR.

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/gatehouse-target}"
export PATH="$HOME/.cargo/bin:$PATH"
# A CI run builds a fresh clone once: incremental state would only fill
# the shared target directory (13 GB of it after a few runs).
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi

GH_PACKAGES=(postgresql-15 postgresql-client-15 mariadb-server mariadb-client pgbouncer sysbench openssl chromium jq curl dpkg-dev gcc bzip2)

log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

# Installs the Debian packages that are missing.
ensure_packages() {
  local missing=()
  for p in "${GH_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    # The packages' own services must not start: the test kit runs its own servers.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  PG_BIN=/usr/lib/postgresql/15/bin
  export PG_BIN
  [ -x "$PG_BIN/postgres" ] || { echo "PostgreSQL 15 not found in $PG_BIN" >&2; exit 1; }
}

# Makes sure a Rust toolchain with rustfmt and clippy is there.
ensure_rust() {
  if ! command -v cargo >/dev/null; then
    echo "cargo not found: install Rust (rustup) first" >&2
    exit 1
  fi
  rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt >/dev/null 2>&1 || true
}

# Waits until host:port accepts TCP connections (up to $3 seconds, default 30).
wait_port() {
  local host=$1 port=$2 limit=${3:-30} i
  for ((i = 0; i < limit * 10; i++)); do
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on $host:$port after ${limit}s" >&2
  return 1
}

# A free TCP port below the ephemeral range.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# CPU seconds (user+system) a process has used so far, from /proc/PID/stat.
cpu_seconds() {
  local pid=$1 tck
  tck=$(getconf CLK_TCK)
  awk -v t="$tck" '{ printf "%.3f\n", ($14 + $15) / t }' "/proc/$pid/stat"
}

# CPU seconds a process has used so far in user space and in the kernel
# ("user system"), from /proc/PID/stat (the kernel samples the split per
# tick: over seconds of a busy proxy it is accurate to a few percent).
cpu_split() {
  local pid=$1 tck
  tck=$(getconf CLK_TCK)
  awk -v t="$tck" '{ printf "%.3f %.3f\n", $14 / t, $15 / t }' "/proc/$pid/stat"
}
