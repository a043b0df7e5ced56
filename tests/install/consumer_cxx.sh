#!/usr/bin/env bash
# consumer_cxx/, an application outside this tree, configured and built with
# find_package(npf) against this build's install staged in a temporary
# directory, then run as root: in a fresh namespace it opens an engine on one
# end of a veth pair and receives a 1 MiB file socat sends from the other
# end's namespace as 1024 datagrams, byte for byte; first linked to
# libnpf.so (from the staging directory), then to libnpf.a.
source "$(dirname "$0")/common.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, XDP, AF_XDP)"
for t in ip:iproute2 nsenter:util-linux ethtool:ethtool socat:socat; do need "${t%%:*}" "${t#*:}"; done
mountpoint -q /sys/fs/bpf || fail "bpffs is not mounted on /sys/fs/bpf (mount -t bpf bpf /sys/fs/bpf)"

root=$work/stage
stage "$root"
lib=$root$NPF_LIBDIR
cmake -S "$(dirname "$0")/consumer_cxx" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$root$NPF_PREFIX" \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "configuring consumer_cxx failed"; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building consumer_cxx against the staged libnpf failed"; }
libs=$(LD_LIBRARY_PATH=$lib ldd "$work/consumer/consumer")
grep -qF "$lib/libnpf.so" <<<"$libs" || fail "consumer does not load the staged libnpf.so: $libs"

veth_pair
port=9000

head -c $((1 << 20)) /dev/urandom >"$work/in"

# receive BINARY: runs it on if_rx, sends the file once it is ready.
receive() {
  local bin=$1 out=$work/$1.out pid rc=0
  LD_LIBRARY_PATH=$lib in_rx "$work/consumer/$bin" "$if_rx" $port "$work/in" >"$out" 2>&1 &
  pid=$!
  at_exit "kill $pid 2>/dev/null"
  await_line "$out" $pid -x ready || { wait $pid || true; fail "$bin did not get ready:"$'\n'"$(cat "$out")"; }
  in_tx socat -u -b 1024 "FILE:$work/in" "UDP:$addr_rx:$port" || fail "socat could not send to $addr_rx:$port"
  wait $pid || rc=$?
  [ $rc -eq 0 ] || fail "$bin exited $rc:"$'\n'"$(cat "$out")"
  note "$bin: $(tail -n 1 "$out")"
}
receive consumer
receive consumer_static
note "PASS"
