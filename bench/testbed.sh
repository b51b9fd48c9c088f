# The testbed options every experiment script takes (sourced by
# bench/common.sh): hosts of their own on this machine, from the test kit
# (crates/testkit/src/testbed.rs). Each database server, the proxy and the
# load generator can get a CPU budget of its own (a cgroup v1 CPU quota),
# and the database servers a latency from the client side (a delaying
# relay in front of each; this kernel has no netem). The kit refuses
# budgets that add up to more than the machine's cores.
#
#   --server-cpu CORES   each database server's budget
#   --proxy-cpu CORES    the proxy's (Gatehouse, PgBouncer)
#   --client-cpu CORES   the load generator's (pgbench, sysbench, loadgen)
#   --net-cpu CORES      the latency relays' (default 0.25 with a latency)
#   --az-latency DUR     round trip between the client side (load
#                        generator and proxy) and every database server,
#                        e.g. 0.5ms
#   --az-jitter DUR      each chunk's one-way delay varies by up to this
#
# Without any of them a script runs as before, every process sharing the
# machine's cores.

TB_SERVER_CPU=
TB_PROXY_CPU=
TB_CLIENT_CPU=
TB_NET_CPU=
TB_LATENCY=
TB_JITTER=
TB_CLUSTER=
# Commands the load generator runs under: "${TB_CLIENT[@]}" pgbench ...
TB_CLIENT=()

testbed_usage() {
  sed -n '/^#   --/p' "$(dirname "${BASH_SOURCE[0]}")/testbed.sh" | sed 's/^# //'
}

# testbed_options "$@": takes the testbed options; anything else is an
# error (the scripts' other knobs are environment variables).
testbed_options() {
  local opt val
  while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
      -h | --help) echo "testbed options:"; testbed_usage; exit 0 ;;
      --*=*) val=${opt#*=} opt=${opt%%=*}; shift ;;
      *)
        [ $# -ge 2 ] || { echo "$opt needs a value" >&2; exit 2; }
        val=$2
        shift 2
        ;;
    esac
    case $opt in
      --server-cpu) TB_SERVER_CPU=$val ;;
      --proxy-cpu) TB_PROXY_CPU=$val ;;
      --client-cpu) TB_CLIENT_CPU=$val ;;
      --net-cpu) TB_NET_CPU=$val ;;
      --az-latency) TB_LATENCY=$val ;;
      --az-jitter) TB_JITTER=$val ;;
      *) echo "unknown option: $opt" >&2; echo "testbed options:" >&2; testbed_usage >&2; exit 2 ;;
    esac
  done
}

testbed_on() { [ -n "$TB_SERVER_CPU$TB_PROXY_CPU$TB_CLIENT_CPU$TB_LATENCY" ]; }

# testbed_up_args: the options of `gatehouse-testkit up` for the testbed.
testbed_up_args() {
  testbed_on || return 0
  local a=(--testbed)
  [ -n "$TB_SERVER_CPU" ] && a+=(--server-cpu "$TB_SERVER_CPU")
  [ -n "$TB_LATENCY" ] && a+=(--az-latency "$TB_LATENCY")
  [ -n "$TB_JITTER" ] && a+=(--az-jitter "$TB_JITTER")
  [ -n "$TB_NET_CPU" ] && a+=(--net-cpu "$TB_NET_CPU")
  echo "${a[@]}"
}

# testbed_hosts CLUSTER_DIR: after the cluster is up, makes the proxy and
# the load generator hosts of its testbed (GH_PROXY_WRAP, TB_CLIENT).
testbed_hosts() {
  TB_CLUSTER=$1
  testbed_on || return 0
  if [ -n "$TB_PROXY_CPU" ]; then
    GH_PROXY_WRAP="$TESTKIT host --dir $TB_CLUSTER --name proxy --cpu $TB_PROXY_CPU --"
  fi
  if [ -n "$TB_CLIENT_CPU" ]; then
    TB_CLIENT=("$TESTKIT" host --dir "$TB_CLUSTER" --name client --cpu "$TB_CLIENT_CPU" --)
  fi
}

# testbed_describe: one line for a report's configuration.
testbed_describe() {
  if ! testbed_on; then
    echo "none: servers, proxy and load generator share the machine's $(nproc) cores"
    return
  fi
  local d="hosts of their own on $(nproc) cores:"
  d+=" each database server ${TB_SERVER_CPU:-unlimited} cores,"
  d+=" proxy ${TB_PROXY_CPU:-unlimited},"
  d+=" load generator ${TB_CLIENT_CPU:-unlimited}"
  if [ -n "$TB_LATENCY" ]; then
    d+=", client side to database servers ${TB_LATENCY} round trip"
    [ -n "$TB_JITTER" ] && d+=" (jitter ${TB_JITTER})"
    d+=" through relays on ${TB_NET_CPU:-0.25} cores"
  fi
  echo "$d"
}

# testbed_report: each host's budget and the CPU it used so far.
testbed_report() {
  [ -n "$TB_CLUSTER" ] && testbed_on || return 0
  "$TESTKIT" hosts --dir "$TB_CLUSTER"
}
