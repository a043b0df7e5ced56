#!/usr/bin/env bash
# The npf demo: sets up everything on a fresh machine and shows npf_xdp on a
# veth pair between two fresh network namespaces.
#
#   sudo scripts/demo.sh [--mode native|skb] [--build-dir DIR]
#
# Installs missing packages (scripts/deps.sh demo), mounts bpffs, builds npfctl,
# npf-recv and npfd, attaches npf_xdp to the receiving veth, sends traffic from
# the peer namespace with stock tools (ping, socat), receives into a cold
# region (npf-recv), runs npfd in a "pod" and on the "node" with unprivileged
# clients, shows status, counters and flows, detaches.
# The namespaces, the veth pair and the pins are removed on every exit path.
# Exits non-zero if any step fails (including a counter that does not match
# the packets sent).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

MODE=native
BUILD=build
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) MODE=${2:?--mode needs native or skb}; shift 2 ;;
    --build-dir) BUILD=${2:?--build-dir needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case "$MODE" in native|skb) ;; *) echo "demo: --mode must be native or skb" >&2; exit 2 ;; esac
case "$BUILD" in /*) BUILD_DIR=$BUILD ;; *) BUILD_DIR=$ROOT/$BUILD ;; esac

# Names are unique per run (pid); a run killed before its cleanup is swept by
# the next one. Interface names stay under 15 characters; pins are keyed by
# network namespace (/sys/fs/bpf/npf/netns-<inode>/<ifname>).
TAG=npfdemo-$$
NS_RX=$TAG-rx
NS_TX=$TAG-tx
NS_POD2=$TAG-pod2 # a second "pod" for npfd's node mode
IF_RX=npfd$$r
IF_TX=npfd$$t
IF_POD2=npfd$$p   # renamed eth0 inside NS_POD2
IF_TX2=npfd$$u    # its peer in NS_TX
# 198.18.0.0/15 (benchmarking range) only; the namespaces are private, so
# fixed addresses cannot clash with anything.
ADDR_RX=198.18.0.1
ADDR_TX=198.18.0.2
ADDR_POD2=198.18.0.5
ADDR_TX2=198.18.0.6
PORT_OTHER=7000 # UDP port that is not a flow
PORT_FLOW=5000  # UDP port made a flow with `npfctl flow add`
COUNT=5         # datagrams per UDP step

NPFCTL=$BUILD_DIR/loader/npfctl
NPF_RECV=$BUILD_DIR/apps/npf-recv
NPF_SEND=$BUILD_DIR/apps/npf-send
NPFD=$BUILD_DIR/apps/npfd
PORT_NPFD=5001  # UDP port an unprivileged client opens through npfd
PIN_ROOT=/sys/fs/bpf/npf
PIN_DIR=      # this run's pin directory, once its namespace exists
PIN_DIR2=     # the second pod's (npfd's node mode)
POD_MNT=0     # the pod's private mount of WORK/pod is up
WORK=
CREATED_PIN_ROOT=0
ATTACHED=0
BG_PIDS=()      # background processes in the namespaces; cleanup() stops them
BG_PID=
LISTENER_PID=

step() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }
die() { printf '\ndemo: FAILED: %s\n' "$*" >&2; exit 1; }
in_rx() { nsenter --net="/run/netns/$NS_RX" "$@"; }
in_tx() { nsenter --net="/run/netns/$NS_TX" "$@"; }
# Shows the command, then runs it in the rx namespace.
show_rx() {
  local rc=0
  local shown="$*"
  printf '    [%s] $ %s\n' "$NS_RX" "${shown//$ROOT\//}"
  in_rx "$@" 2>&1 | sed 's/^/    /' || rc=$?
  [ "$rc" = 0 ] || die "'$*' in $NS_RX failed (exit $rc)"
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  step "cleaning up"
  stop_all_bg
  if [ "$ATTACHED" = 1 ] && [ -e "/run/netns/$NS_RX" ]; then
    in_rx "$NPFCTL" detach "$IF_RX" 2>&1 | sed 's/^/    /'
  fi
  if [ "$POD_MNT" = 1 ]; then
    umount "$WORK/pod/mnt" 2>/dev/null
    umount -l "$WORK/pod" && note "removed the pod's mount namespace"
  fi
  for ns in "$NS_RX" "$NS_TX" "$NS_POD2"; do
    [ -e "/run/netns/$ns" ] && ip netns del "$ns" && note "deleted namespace $ns"
  done
  if [ -n "$PIN_DIR2" ] && [ -e "$PIN_DIR2" ]; then
    note "removing leftover pins $PIN_DIR2"
    rm -rf "${PIN_DIR2:?}"
    rmdir "${PIN_DIR2%/*}" 2>/dev/null
  fi
  if [ -n "$PIN_DIR" ] && [ -e "$PIN_DIR" ]; then
    note "removing leftover pins $PIN_DIR"
    rm -rf "${PIN_DIR:?}"
    rmdir "${PIN_DIR%/*}" 2>/dev/null
  fi
  [ "$CREATED_PIN_ROOT" = 1 ] && rmdir "$PIN_ROOT" 2>/dev/null
  [ -n "$WORK" ] && rm -rf "$WORK"
  local left
  left=$(ip netns list | grep -c "^$TAG-" || true)
  if [ "$left" != 0 ] || { [ -n "$PIN_DIR" ] && [ -e "$PIN_DIR" ]; }; then
    echo "demo: cleanup left namespaces or pins behind (ip netns list; ls $PIN_ROOT)" >&2
    [ "$rc" = 0 ] && rc=1
  else
    note "no namespaces or pins left"
  fi
  if [ "$rc" = 0 ]; then
    printf '\n==> demo finished\n'
  fi
  exit "$rc"
}

# Namespaces and pins of earlier runs that died before their cleanup.
sweep_stale() {
  local ns pid p
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^npfdemo-[0-9]+-(rx|tx|pod2)$' || true); do
    pid=${ns#npfdemo-}
    pid=${pid%-*}
    kill -0 "$pid" 2>/dev/null && continue
    # Processes that run has left in its namespace (its socat listener).
    for p in $(ip netns pids "$ns"); do
      kill "$p" 2>/dev/null && note "stopped process $p left in $ns"
    done
    ip netns del "$ns" && note "removed namespace $ns of an earlier run"
    for d in "$PIN_ROOT"/netns-*/"npfd${pid}r"; do
      [ -d "$d" ] || continue
      rm -rf "$d" && rmdir "${d%/*}" 2>/dev/null
      note "removed pins $d of an earlier run"
    done
    umount "/tmp/npfdemo-$pid/pod/mnt" 2>/dev/null
    umount -l "/tmp/npfdemo-$pid/pod" 2>/dev/null
    rm -rf "/tmp/npfdemo-$pid"
  done
}

# Value of one npf_stats counter (xdp.NAME), summed over CPUs by npfctl.
counter() {
  in_rx "$NPFCTL" stats "$IF_RX" | awk -v k="xdp.$1" '$1 == k { print $2; found = 1 } END { exit !found }'
}

# counter NAME went up by exactly WANT since BEFORE.
expect_delta() {
  local name=$1 before=$2 want=$3 now
  now=$(counter "$name") || die "npfctl stats $IF_RX has no counter xdp.$name"
  if [ $((now - before)) -ne "$want" ]; then
    die "xdp.$name went from $before to $now, expected +$want"
  fi
  note "xdp.$name: $before -> $now (+$want, as expected)"
}

# Starts CMD in the rx namespace in the background; its pid is BG_PID, and
# cleanup() stops it if stop_bg has not.
bg_rx() {
  nsenter --net="/run/netns/$NS_RX" "$@" &
  BG_PID=$!
  BG_PIDS+=("$BG_PID")
}

stop_bg() {
  local pid=$1 i
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for i in "${!BG_PIDS[@]}"; do
    [ "${BG_PIDS[$i]}" = "$pid" ] && unset 'BG_PIDS[i]'
  done
  return 0
}

stop_all_bg() {
  local pid
  for pid in "${BG_PIDS[@]}"; do
    stop_bg "$pid"
  done
}

# A UDP listener (socat) in the rx namespace, writing each datagram to a
# file; its pid is LISTENER_PID.
start_listener() {
  local port=$1
  : >"$WORK/rx-$port"
  bg_rx socat -u "UDP4-RECV:$port,bind=$ADDR_RX,reuseaddr" "OPEN:$WORK/rx-$port,append"
  LISTENER_PID=$BG_PID
  for _ in $(seq 50); do
    in_rx ss -Hunl "sport = :$port" | grep -q . && return 0
    sleep 0.1
  done
  die "socat did not start listening on $ADDR_RX:$port"
}

stop_listener() {
  stop_bg "$LISTENER_PID"
}

# Sends COUNT one-line datagrams from the tx namespace with socat.
send_udp() {
  local port=$1 i
  for i in $(seq "$COUNT"); do
    echo "npf demo datagram $i to port $port" | in_tx socat -u - "UDP4-SENDTO:$ADDR_RX:$port"
  done
  note "sent $COUNT datagrams from $NS_TX to $ADDR_RX:$port (socat)"
}

# Waits until the listener on PORT has all COUNT datagrams.
expect_received() {
  local port=$1 got=0
  for _ in $(seq 30); do
    got=$(wc -l <"$WORK/rx-$port")
    [ "$got" -ge "$COUNT" ] && break
    sleep 0.1
  done
  [ "$got" -eq "$COUNT" ] || die "the listener on port $port received $got of $COUNT datagrams"
  note "socat listener in $NS_RX received $got/$COUNT datagrams on port $port:"
  sed 's/^/      | /' "$WORK/rx-$port"
}

# Command prefixes (no spaces in these paths) for background processes, so
# that $! is the program itself (nsenter execs it): the pod (the rx namespace
# and the pod's own mount of /run/npf), the rx namespace, the second pod.
in_pod() { $ENTER_POD "$@"; }
in_pod2() { $ENTER_POD2 "$@"; }

# start_npfd NAME CONFIG ENTER [ARGS...]: npfd in the background (ENTER: a
# prefix above, "" = the host's namespaces), waits for its ready line.
start_npfd() {
  local name=$1 config=$2 enter=$3
  shift 3
  $enter "$NPFD" --config "$config" "$@" >"$WORK/$name-npfd.out" 2>"$WORK/$name-npfd.log" &
  BG_PID=$!
  BG_PIDS+=("$BG_PID")
  eval "NPFD_PID_$name=$BG_PID"
  for _ in $(seq 100); do
    grep -q '^npfd: serving' "$WORK/$name-npfd.out" && break
    kill -0 "$BG_PID" 2>/dev/null || { cat "$WORK/$name-npfd.log" >&2; die "npfd exited before it was ready"; }
    sleep 0.1
  done
  grep -q '^npfd: serving' "$WORK/$name-npfd.out" || die "npfd did not come up"
  sed 's/^/    /' "$WORK/$name-npfd.out"
}

stop_npfd() {
  local name=$1 pid
  eval "pid=\$NPFD_PID_$name"
  note "npfd's log:"
  sed 's/^/      /' "$WORK/$name-npfd.log"
  kill -TERM "$pid"
  wait "$pid" || die "npfd exited with $? on SIGTERM"
  stop_bg "$pid"
}

# start_client NAME IFACE PORT SOCKET "EXTRA ARGS" ENTER: npf-recv --connect as
# uid 65534 receiving 1 MiB (1024 datagrams) into WORK/NAME.out; NAME.in is
# the stream send_stream sends.
start_client() {
  local name=$1 iface=$2 port=$3 sock=$4 extra=$5 enter=$6
  head -c $((1024 * 1024)) /dev/urandom >"$WORK/$name.in"
  touch "$WORK/$name.out" && chown 65534:65534 "$WORK/$name.out"
  printf '    $ setpriv --reuid=65534 --regid=65534 --clear-groups npf-recv %s %s --connect %s--count 1024 %s-o %s.out\n' \
    "$iface" "$port" "${sock:+${sock##*/} }" "${extra:+$extra }" "$name"
  # shellcheck disable=SC2086 # extra is a list of options
  $enter timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups "$NPF_RECV" "$iface" "$port" \
    --connect ${sock:+"$sock"} --count 1024 $extra -o "$WORK/$name.out" --ready-fd 3 \
    3>"$WORK/$name.ready" 2> >(sed 's/^/    /' >&2) &
  BG_PID=$!
  BG_PIDS+=("$BG_PID")
  eval "CLIENT_PID_${name//-/_}=$BG_PID"
}

# await_client NAME WHAT: the client started as NAME posted its buffers.
await_client() {
  local name=$1 pid
  eval "pid=\$CLIENT_PID_${name//-/_}"
  await_ready "$name" "$pid" "$2"
}

# await_ready NAME PID WHAT: npf-recv NAME (pid PID) wrote its ready line
# (--ready-fd: every buffer posted, so datagrams sent from now on find one).
# A datagram sent before that finds no buffer (xdp.drop_rnr): npf-recv would
# wait for it until its timeout.
await_ready() {
  local name=$1 pid=$2 what=$3
  for _ in $(seq 300); do
    grep -qx ready "$WORK/$name.ready" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || die "$what exited before it was ready"
    sleep 0.1
  done
  die "$what did not post its buffers within 30 s"
}

# tx_dropped IFACE: packets the sending end of a veth pair (in NS_TX) dropped:
# the only place a datagram is lost before XDP on the other end sees it.
tx_dropped() {
  in_tx ip -s -j link show dev "$1" | jq '.[0].stats64.tx.dropped'
}

# send_stream NAME ADDR PORT TXIF: NAME.in as 1024 datagrams from NS_TX (its
# interface TXIF), none of them dropped before the receiver's XDP.
send_stream() {
  local name=$1 addr=$2 port=$3 txif=$4 before
  printf '    $ socat -u -b 1024 FILE:%s.in UDP4-SENDTO:%s:%s   (from %s; 1 MiB = 1024 datagrams)\n' \
    "$name" "$addr" "$port" "$NS_TX"
  before=$(tx_dropped "$txif")
  in_tx socat -u -b 1024 "FILE:$WORK/$name.in" "UDP4-SENDTO:$addr:$port"
  expect_no_tx_drops "$txif" "$before"
}

# expect_no_tx_drops TXIF BEFORE: TXIF's tx_dropped is still BEFORE.
expect_no_tx_drops() {
  local dropped
  dropped=$(($(tx_dropped "$1") - $2))
  [ "$dropped" -eq 0 ] || die "the sender's $1 dropped $dropped datagrams before XDP saw them (the receiving veth's ring was full): no receiver can get them"
}

# expect_stream NAME WHO: the client exited 0 with its stream byte for byte.
expect_stream() {
  local name=$1 who=$2 pid
  eval "pid=\$CLIENT_PID_${name//-/_}"
  wait "$pid" || die "$who (npf-recv --connect) failed (exit $?)"
  stop_bg "$pid"
  cmp "$WORK/$name.in" "$WORK/$name.out" || die "$who: its output differs from what socat sent"
  note "$who received its 1 MiB byte for byte"
}

# ---------------------------------------------------------------------------

[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (XDP, bpffs, network namespaces): sudo $0" >&2; exit 1; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
WORK=/tmp/$TAG
ENTER_POD="nsenter --net=/run/netns/$NS_RX --mount=$WORK/pod/mnt"
ENTER_RX="nsenter --net=/run/netns/$NS_RX"
ENTER_POD2="nsenter --net=/run/netns/$NS_POD2"
rm -rf "$WORK"
mkdir -m 700 "$WORK"

step "checking packages (scripts/deps.sh demo: what the demo builds and runs)"
scripts/deps.sh demo
note "all packages present"

step "checking bpffs at /sys/fs/bpf"
if mountpoint -q /sys/fs/bpf; then
  note "mounted"
else
  mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs at /sys/fs/bpf"
  note "mounted bpffs at /sys/fs/bpf"
fi
[ -d "$PIN_ROOT" ] || CREATED_PIN_ROOT=1
sweep_stale

step "building npfctl, npf-recv and npfd in $BUILD/ (log: $BUILD/demo-build.log)"
mkdir -p "$BUILD_DIR"
# A build dir of its own is configured without the tests (no GoogleTest
# needed); one the tests configured keeps them.
testing=()
[ -f "$BUILD_DIR/CMakeCache.txt" ] || testing=(-DBUILD_TESTING=OFF)
if ! { cmake -S . -B "$BUILD_DIR" "${testing[@]}" && cmake --build "$BUILD_DIR" --target npfctl npf-recv npf-send npfd -j"$(nproc)"; } \
    >"$BUILD_DIR/demo-build.log" 2>&1; then
  tail -n 30 "$BUILD_DIR/demo-build.log" >&2
  die "build failed (full log: $BUILD/demo-build.log)"
fi
note "built $BUILD/loader/npfctl ($("$NPFCTL" --version))"

step "creating namespaces $NS_RX, $NS_TX and veth pair $IF_RX <-> $IF_TX"
ip netns add "$NS_RX"
ip netns add "$NS_TX"
# No IPv6 (no router solicitations, no MLD) and static neighbours (no ARP):
# the only packets on the wire are the ones this demo sends, so every counter
# below can be checked exactly.
for ns in "$NS_RX" "$NS_TX"; do
  nsenter --net="/run/netns/$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip link add "$IF_RX" netns "$NS_RX" type veth peer name "$IF_TX" netns "$NS_TX"
in_rx ip addr add "$ADDR_RX/30" dev "$IF_RX"
in_tx ip addr add "$ADDR_TX/30" dev "$IF_TX"
in_rx ip link set lo up
in_tx ip link set lo up
in_rx ip link set "$IF_RX" up
in_tx ip link set "$IF_TX" up
# The local stack leaves UDP checksums to a veth's tx offload, which never
# computes them; npf verifies checksums, so the sender writes full ones.
in_tx ethtool -K "$IF_TX" tx off >/dev/null
MAC_RX=$(in_rx ip -br link show dev "$IF_RX" | awk '{print $3}')
MAC_TX=$(in_tx ip -br link show dev "$IF_TX" | awk '{print $3}')
in_tx ip neigh replace "$ADDR_RX" lladdr "$MAC_RX" dev "$IF_TX"
in_rx ip neigh replace "$ADDR_TX" lladdr "$MAC_TX" dev "$IF_RX"
note "$NS_RX: $IF_RX $ADDR_RX/30 ($MAC_RX)   $NS_TX: $IF_TX $ADDR_TX/30 ($MAC_TX)"
# npf keys its pins by network namespace (the nsfs inode): /sys/fs/bpf/npf/netns-N/IF.
PIN_DIR="$PIN_ROOT/netns-$(stat -L -c %i "/run/netns/$NS_RX")/$IF_RX"

step "attaching npf to $IF_RX in $NS_RX (mode $MODE)"
printf '    $ nsenter --net=/run/netns/%s %s attach %s --mode %s\n' "$NS_RX" "$BUILD/loader/npfctl" "$IF_RX" "$MODE"
if in_rx "$NPFCTL" attach "$IF_RX" --mode "$MODE" 2>&1 | sed 's/^/    /'; then
  ATTACHED=1
elif [ "$MODE" = native ]; then
  note "native mode failed; falling back to skb (generic) mode"
  MODE=skb
  if in_rx "$NPFCTL" attach "$IF_RX" --mode skb 2>&1 | sed 's/^/    /'; then
    ATTACHED=1
  fi
fi
[ "$ATTACHED" = 1 ] || die "npfctl attach $IF_RX failed (see above)"
xdp_line=$(in_rx ip link show dev "$IF_RX" | grep 'prog/xdp') || die "ip link shows no XDP program on $IF_RX"
note "ip link: ${xdp_line#"${xdp_line%%[! ]*}"}"

step "npfctl status"
show_rx "$NPFCTL" status

step "ping: ICMP is not UDP, so npf passes it to the kernel (xdp.pass_not_udp)"
before=$(counter pass_not_udp)
printf '    $ ping -c 3 %s   (from %s)\n' "$ADDR_RX" "$NS_TX"
in_tx ping -c 3 -i 0.2 -W 2 "$ADDR_RX" | sed 's/^/    /' ||
  die "ping $ADDR_RX from $NS_TX failed while npf is attached"
expect_delta pass_not_udp "$before" 3

step "UDP to port $PORT_OTHER (not a flow): passed to the kernel stack (xdp.pass_no_flow)"
before=$(counter pass_no_flow)
start_listener "$PORT_OTHER"
send_udp "$PORT_OTHER"
expect_received "$PORT_OTHER"
stop_listener
expect_delta pass_no_flow "$before" "$COUNT"

step "npfctl flow add $IF_RX $PORT_FLOW"
show_rx "$NPFCTL" flow add "$IF_RX" "$PORT_FLOW"

step "UDP to flow port $PORT_FLOW, no AF_XDP socket bound: npf fails open to the kernel (xdp.pass_no_socket)"
before=$(counter pass_no_socket)
before_consumed=$(in_rx "$NPFCTL" flow list "$IF_RX" | awk -v p="$PORT_FLOW" '$2 == p { print $5 }')
start_listener "$PORT_FLOW"
send_udp "$PORT_FLOW"
expect_received "$PORT_FLOW"
stop_listener
expect_delta pass_no_socket "$before" "$COUNT"
consumed=$(in_rx "$NPFCTL" flow list "$IF_RX" | awk -v p="$PORT_FLOW" '$2 == p { print $5 }')
[ "$consumed" = "$before_consumed" ] || die "flow $PORT_FLOW consumed posts without a socket ($before_consumed -> $consumed)"
note "no posted buffer consumed (CONSUMED stays $consumed)"

step "npf-recv: a file sent by socat lands in a cold, pageable region, byte for byte"
head -c $((2048 * 1024)) /dev/urandom >"$WORK/send.bin"
before_p=$(counter redir_primary)
before_b=$(counter redir_backup)
# nice -n -5: socat sends from the same CPUs, flat out; at equal weight the
# scheduler lets its slice delay npf's threads now and then, by milliseconds
# (docs/architecture.md, "What the default wake-up policy costs").
# --reserve 8M: 8 MiB of free pages allocated at start, as a huge page
# pool is; the region stays cold (nothing resident, every first datagram of
# a page takes the fault path), but its installs take these pages instead of
# fresh ones from the kernel, which on a VM with free page reporting put the
# pager milliseconds behind the burst in some runs (docs/BENCHMARKS.md).
note "npf-recv runs at nice -5: socat shares this machine's CPUs with it (latency: docs/architecture.md)"
note "--reserve 8M: free pages set aside at start for the cold region's first installs (it stays cold)"
printf '    $ nice -n -5 npf-recv %s %s --cold --region 64M --reserve 8M --count 2048 -o out.bin   (in %s)\n' "$IF_RX" "$PORT_FLOW" "$NS_RX"
bg_rx timeout 60 nice -n -5 "$NPF_RECV" "$IF_RX" "$PORT_FLOW" --cold --region 64M --reserve 8M --count 2048 -o "$WORK/recv.bin" \
  --ready-fd 3 3>"$WORK/recv.ready" 2> >(sed 's/^/    /' >&2)
RECV_PID=$BG_PID
await_ready recv "$RECV_PID" npf-recv
printf '    $ socat -u -b 1024 FILE:send.bin UDP4-SENDTO:%s:%s   (from %s; 2 MiB = 2048 datagrams)\n' \
  "$ADDR_RX" "$PORT_FLOW" "$NS_TX"
before_drops=$(tx_dropped "$IF_TX")
in_tx socat -u -b 1024 "FILE:$WORK/send.bin" "UDP4-SENDTO:$ADDR_RX:$PORT_FLOW"
expect_no_tx_drops "$IF_TX" "$before_drops"
wait "$RECV_PID" || die "npf-recv failed (exit $?)"
stop_bg "$RECV_PID"
cmp "$WORK/send.bin" "$WORK/recv.bin" || die "npf-recv's output differs from what socat sent"
note "npf-recv's output equals the 2 MiB socat sent, byte for byte"
p=$(( $(counter redir_primary) - before_p ))
b=$(( $(counter redir_backup) - before_b ))
[ $((p + b)) -eq 2048 ] || die "XDP steered $p + $b datagrams, expected 2048"
note "XDP steered $b datagrams to the backup ring (page not resident) and $p to the primary ring"

step "npf-send with credits: a 16 MiB file into a cold region, paced by what the receiver has posted"
head -c $((16 << 20)) /dev/urandom >"$WORK/credits.bin"
count=$(( ((16 << 20) + 1399) / 1400 ))
before_rnr=$(counter drop_rnr)
note "npf-recv --credits grants the sender what it has buffers posted for; npf-send sends no more (docs/architecture.md, Credits)"
printf '    $ npf-recv %s %s --cold --region 64M --credits --count %s -o out.bin   (in %s)\n' "$IF_RX" "$PORT_FLOW" "$count" "$NS_RX"
bg_rx timeout 60 "$NPF_RECV" "$IF_RX" "$PORT_FLOW" --cold --region 64M --credits --count "$count" -o "$WORK/credits.out" \
  --ready-fd 3 3>"$WORK/credits.ready" 2> >(sed 's/^/    /' >&2)
RECV_PID=$BG_PID
await_ready credits "$RECV_PID" npf-recv
printf '    $ npf-send %s %s -i credits.bin   (from %s; 1400-byte datagrams)\n' "$ADDR_RX" "$PORT_FLOW" "$NS_TX"
in_tx "$NPF_SEND" "$ADDR_RX" "$PORT_FLOW" -i "$WORK/credits.bin" 2> >(sed 's/^/    /' >&2) || die "npf-send failed (exit $?)"
wait "$RECV_PID" || die "npf-recv --credits failed (exit $?)"
stop_bg "$RECV_PID"
cmp "$WORK/credits.bin" "$WORK/credits.out" || die "npf-recv's output differs from what npf-send sent"
rnr=$(( $(counter drop_rnr) - before_rnr ))
[ "$rnr" -eq 0 ] || die "$rnr datagrams found no posted buffer (drop_rnr): the sender overran its credit"
note "16 MiB through a cold region byte for byte: $count datagrams, none dropped for want of a buffer (xdp.drop_rnr +0)"

step "npfd in a pod: npfd and two unprivileged clients (uid 65534) in one pod"
note "the pod: $NS_RX (its interface $IF_RX) and its own /run/npf (a tmpfs in a mount namespace"
note "of its own, as an emptyDir); npfd listens on its default socket /run/npf/npfd.sock there"
chmod 755 "$WORK"
mkdir "$WORK/pod"
mount --bind "$WORK/pod" "$WORK/pod" && POD_MNT=1
mount --make-private "$WORK/pod"
touch "$WORK/pod/mnt"
unshare --mount="$WORK/pod/mnt" --propagation private \
  sh -c 'mkdir -p /run/npf && mount -t tmpfs -o mode=0755,size=4m npf-pod /run/npf' ||
  die "cannot make the pod's mount namespace"
cat >"$WORK/npfd.json" <<EOF_CFG
{"ifaces": ["$IF_RX"], "socket_group": "nogroup",
 "clients": [{"uid": 65534, "ports": ["$PORT_NPFD-$((PORT_NPFD + 1))"], "region_bytes": 134217728, "resident_bytes": 8388608}]}
EOF_CFG
sed 's/^/    /' "$WORK/npfd.json"
note "the rule's limits are totals over all its clients' connections (here: two clients)"
printf '    [%s + its /run/npf] $ npfd --config npfd.json\n' "$NS_RX"
start_npfd pod "$WORK/npfd.json" "$ENTER_POD"
start_client pod-a "$IF_RX" "$PORT_NPFD" "" "--budget 4M" "$ENTER_POD"
start_client pod-b "$IF_RX" $((PORT_NPFD + 1)) "" "--cold --region 16M --budget 2M" "$ENTER_POD"
await_client pod-a "the warm client"
await_client pod-b "the cold client"
send_stream pod-a "$ADDR_RX" "$PORT_NPFD" "$IF_TX"
send_stream pod-b "$ADDR_RX" $((PORT_NPFD + 1)) "$IF_TX"
expect_stream pod-a "the warm client"
expect_stream pod-b "the cold client (a 16 MiB region, 2 MiB resident)"
in_pod test -S /run/npf/npfd.sock || die "no socket in the pod's /run/npf"
if [ "$(stat -c %d:%i /run/npf/npfd.sock 2>/dev/null)" = "$(in_pod stat -c %d:%i /run/npf/npfd.sock)" ]; then
  die "the pod's socket is visible outside the pod"
fi
note "the socket is in the pod's /run/npf only; npfctl in the pod shows npfd's numbers"
note "(its snapshot, rewritten every 500 ms):"
for _ in $(seq 50); do
  ok=$(in_pod "$NPFCTL" stats "$IF_RX" | awk '$1 == "engine.completed_ok" { print $2 }')
  [ "${ok:-0}" -ge 2048 ] && break
  sleep 0.1
done
[ "${ok:-0}" -ge 2048 ] || die "npfctl stats in the pod: engine.completed_ok is ${ok:-missing}, expected 2048"
note "  engine.completed_ok $ok (both clients' 1024 datagrams)"
stop_npfd pod
note "npfd stopped on SIGTERM; the program stays attached (npfctl attached it)"

step "npfd on the node: one npfd in the host's namespace serves two pods' interfaces"
ip netns add "$NS_POD2"
nsenter --net="/run/netns/$NS_POD2" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip link add "$IF_POD2" netns "$NS_POD2" type veth peer name "$IF_TX2" netns "$NS_TX"
in_pod2 ip link set "$IF_POD2" name eth0
in_pod2 ip addr add "$ADDR_POD2/30" dev eth0
in_tx ip addr add "$ADDR_TX2/30" dev "$IF_TX2"
in_pod2 ip link set lo up
in_pod2 ip link set eth0 up
in_tx ip link set "$IF_TX2" up
in_tx ethtool -K "$IF_TX2" tx off >/dev/null
in_tx ip neigh replace "$ADDR_POD2" lladdr "$(in_pod2 ip -br link show dev eth0 | awk '{print $3}')" dev "$IF_TX2"
in_pod2 ip neigh replace "$ADDR_TX2" lladdr "$(in_tx ip -br link show dev "$IF_TX2" | awk '{print $3}')" dev eth0
PIN_DIR2="$PIN_ROOT/netns-$(stat -L -c %i "/run/netns/$NS_POD2")/eth0"
note "pod 1: $NS_RX ($IF_RX $ADDR_RX)   pod 2: $NS_POD2 (eth0 $ADDR_POD2)   both fed from $NS_TX"
printf '    [host] $ npfd --config npfd.json --iface %s:%s --iface %s:eth0 --socket node.sock\n' \
  "$NS_RX" "$IF_RX" "$NS_POD2"
start_npfd node "$WORK/npfd.json" "" --iface "$NS_RX:$IF_RX" --iface "$NS_POD2:eth0" --socket "$WORK/node.sock"
in_pod2 ip link show dev eth0 | grep -q 'prog/xdp' || die "npfd did not attach to eth0 in $NS_POD2"
note "npfd entered $NS_POD2 and attached npf_xdp to its eth0 (and took over $IF_RX's, which npfctl attached)"
# Both pods' clients on the same port: each pod's interface is its own.
start_client node-1 "$IF_RX" "$PORT_NPFD" "$WORK/node.sock" "--budget 4M" "$ENTER_RX"
start_client node-2 eth0 "$PORT_NPFD" "$WORK/node.sock" "--cold --region 16M --budget 2M" "$ENTER_POD2"
await_client node-1 "pod 1's client"
await_client node-2 "pod 2's client"
send_stream node-1 "$ADDR_RX" "$PORT_NPFD" "$IF_TX"
send_stream node-2 "$ADDR_POD2" "$PORT_NPFD" "$IF_TX2"
expect_stream node-1 "pod 1's client"
expect_stream node-2 "pod 2's client (port $PORT_NPFD too: its own eth0)"
stop_npfd node
in_pod2 ip link show dev eth0 | grep -q 'prog/xdp' && die "npfd left its program on eth0 in $NS_POD2"
[ ! -e "$PIN_DIR2" ] || die "npfd left pins $PIN_DIR2"
note "npfd stopped: it detached what it attached (pod 2's eth0); $IF_RX keeps npfctl's program"

step "npfctl stats $IF_RX"
show_rx "$NPFCTL" stats "$IF_RX"

step "npfctl flow list $IF_RX"
show_rx "$NPFCTL" flow list "$IF_RX"

step "detaching npf from $IF_RX"
show_rx "$NPFCTL" detach "$IF_RX"
ATTACHED=0
if in_rx ip link show dev "$IF_RX" | grep -q 'prog/xdp'; then
  die "$IF_RX still has an XDP program after detach"
fi
[ ! -e "$PIN_DIR" ] || die "pins $PIN_DIR still exist after detach"
note "$IF_RX has no XDP program and $PIN_DIR is gone"
