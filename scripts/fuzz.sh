#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ on nightly for SECONDS each
# (default 60), one after the other, and fails if any target crashed or
# broke an invariant. Not part of ./test: CI replays the committed corpus
# on stable instead (crates/fuzz-harness/tests/fuzz_corpus.rs).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   FUZZ_RUNS=10000000 scripts/fuzz.sh 1800   # each: 10 M executions or 30 min
#
# FUZZ_SANITIZER=none builds without AddressSanitizer (default: address).
# The fuzzed crates forbid unsafe code, so what ASan adds is a check on
# their dependencies' unsafe code; without it a target runs about 8 times
# faster, and panics, overflows (debug assertions stay on), hangs and
# runaway allocations are still caught.
#
# FUZZ_RUNS stops a target after that many executions (whichever of it and
# SECONDS comes first). The summary gives each target's executions, its
# rate, and how long it would take to reach FUZZ_RUNS (or 10 M) at that
# rate: the bound this machine puts on a target that did not get there.
# Each run starts from the committed seeds (fuzz/corpus/TARGET) and grows
# a local corpus in fuzz/corpus-gen/TARGET (ignored by git), so later runs
# go on from where earlier ones stopped. A crashing input lands in
# fuzz/artifacts/TARGET/; `cargo +nightly fuzz run TARGET FILE` replays it.
# Keep it as fuzz/regressions/TARGET/NAME once the bug is fixed, so the
# stable replay checks it from then on. Logs: ${TMPDIR:-/tmp}/gatehouse-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$HOME/.cargo/bin:$PATH"
# cargo-fuzz builds into fuzz/target: a shared CARGO_TARGET_DIR would mix
# sanitizer builds into the stable ones.
unset CARGO_TARGET_DIR

seconds=${1:-60}
shift || true
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2; }

log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

if ! rustup toolchain list | grep -q '^nightly'; then
  log "installing the nightly toolchain"
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
  log "installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

if (($# > 0)); then
  targets=("$@")
else
  mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

logs="${TMPDIR:-/tmp}/gatehouse-fuzz"
mkdir -p "$logs"
log "building ${#targets[@]} targets"
san=${FUZZ_SANITIZER:-address}
(cd fuzz && nice cargo +nightly fuzz build --sanitizer "$san")

failed=()
want=${FUZZ_RUNS:-10000000}
echo "sanitizer: $san" >"$logs/summary.txt"
printf '%-24s %8s %12s %10s %8s %12s\n' target seconds executions "execs/s" edges "s for $want" >>"$logs/summary.txt"
for t in "${targets[@]}"; do
  log "$t: ${seconds}s"
  mkdir -p "fuzz/corpus-gen/$t"
  status=0
  # New inputs go to the first corpus directory, never to the committed one.
  (cd fuzz && nice cargo +nightly fuzz run --sanitizer "$san" "$t" "$root/fuzz/corpus-gen/$t" "$root/fuzz/corpus/$t" -- \
    -max_total_time="$seconds" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} -timeout=10 -print_final_stats=1) >"$logs/$t.log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)
  took=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logs/$t.log" | tail -1)
  edges=$(grep -o 'cov: [0-9]*' "$logs/$t.log" | tail -1 | cut -d' ' -f2)
  need=$(awk -v r="${took:-0}" -v want="$want" 'BEGIN { if (r > 0) printf "%.0f", want / r; else print "?" }')
  printf '%-24s %8s %12s %10s %8s %12s\n' "$t" "$seconds" "${runs:-?}" "${took:-?}" "${edges:-?}" "$need" >>"$logs/summary.txt"
  if ((status != 0)); then
    failed+=("$t")
    grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written to' "$logs/$t.log" >&2 || tail -20 "$logs/$t.log" >&2
  fi
done

cat "$logs/summary.txt"
if ((${#failed[@]})); then
  echo "crashed: ${failed[*]} (logs in $logs, inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "no crash in ${#targets[@]} targets"
