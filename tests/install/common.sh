# Sourced by the install tests: tests/common/shell.sh, and staging this
# build's install. The environment comes from CMakeLists.txt (NPF_BUILD_DIR,
# NPF_PREFIX, NPF_LIBDIR, ...: the build's install paths).
source "$(dirname "${BASH_SOURCE[0]}")/../common/shell.sh"

# stage DIR: `cmake --install` of this build with DESTDIR=DIR: the files land in
# DIR$NPF_PREFIX, DIR$NPF_LIBDIR, ... (cmake --install also rewrites the build
# tree's install_manifest.txt, as every install does).
stage() {
  DESTDIR="$1" cmake --install "$NPF_BUILD_DIR" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "cmake --install $NPF_BUILD_DIR (DESTDIR=$1) failed"; }
}

# veth_pair: two namespaces joined by a veth pair, names unique to this run
# ($ns_rx, $ns_tx, $if_rx, $if_tx), a /30 of 198.18.0.0/15 ($addr_rx,
# $addr_tx); tx checksum offload off on both ends (the sender then writes
# full UDP checksums, which npf verifies); IPv6 off. in_rx / in_tx run a
# command in either namespace. All of it, and what an engine or npfd on
# $if_rx leaves if it dies (its XDP program, pins, stats directory), is
# removed at exit. Needs $root, the staged install (for npfctl).
in_rx() { nsenter --net="/run/netns/$ns_rx" "$@"; }
in_tx() { nsenter --net="/run/netns/$ns_tx" "$@"; }
veth_pair() {
  id=$$
  ns_rx=npfinst${id}r ns_tx=npfinst${id}t if_rx=npfi${id}r if_tx=npfi${id}t
  n=$((id % 16384))
  net=198.$((18 + n / 8192)).$(((n / 64) % 128)).
  addr_rx=$net$(((n % 64) * 4 + 1)) addr_tx=$net$(((n % 64) * 4 + 2))
  for ns in "$ns_rx" "$ns_tx"; do
    ip netns add "$ns" || fail "ip netns add $ns failed"
    at_exit "ip netns del $ns"
  done
  ino=$(stat -L -c %i "/run/netns/$ns_rx")
  at_exit "rm -rf /sys/fs/bpf/npf/netns-$ino/$if_rx /run/npf/netns-$ino/$if_rx"
  at_exit "in_rx '$root$NPF_SBINDIR/npfctl' detach --force $if_rx >/dev/null 2>&1"
  ip link add "$if_rx" netns "$ns_rx" type veth peer name "$if_tx" netns "$ns_tx" || fail "ip link add veth failed"
  for side in rx tx; do
    ns=ns_$side ifc=if_$side addr=addr_$side
    in_$side sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
    in_$side ip link set lo up
    in_$side ip link set "${!ifc}" up || fail "ip link set ${!ifc} up in ${!ns} failed"
    in_$side ip addr add "${!addr}/30" dev "${!ifc}" || fail "ip addr add ${!addr} in ${!ns} failed"
    in_$side ethtool -K "${!ifc}" tx off >/dev/null || fail "ethtool -K ${!ifc} tx off failed"
  done
}
