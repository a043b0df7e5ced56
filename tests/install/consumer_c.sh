#!/usr/bin/env bash
# consumer_c/, a C application outside this tree, configured and built with
# pkg-config (npf.pc) against this build's install staged in a temporary
# directory, then run through the staged npfd as uid 65534 (no privileges):
# npfd serves one end of a veth pair in a fresh namespace, the consumer
# connects to it, and socat sends a 1 MiB file from the other end's
# namespace as 1024 datagrams: the consumer's output must be the file, byte
# for byte.
source "$(dirname "$0")/common.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, npfd)"
for t in ip:iproute2 nsenter:util-linux ethtool:ethtool socat:socat setpriv:util-linux pkg-config:pkg-config; do
  need "${t%%:*}" "${t#*:}"
done
mountpoint -q /sys/fs/bpf || fail "bpffs is not mounted on /sys/fs/bpf (mount -t bpf bpf /sys/fs/bpf)"

root=$work/stage
stage "$root"
# npf.pc names the install's prefix; the sysroot puts the staging directory
# in front of its -I and -L paths.
export PKG_CONFIG_PATH=$root$NPF_LIBDIR/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
cmake -S "$(dirname "$0")/consumer_c" -B "$work/consumer" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "configuring consumer_c (pkg-config npf) failed"; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building consumer_c against the staged libnpf failed"; }
lib=$root$NPF_LIBDIR
libs=$(LD_LIBRARY_PATH=$lib ldd "$work/consumer/consumer")
grep -qF "$lib/libnpf.so" <<<"$libs" || fail "consumer does not load the staged libnpf.so: $libs"
# uid 65534 reads the program and the library and writes its output here.
chmod 0755 "$work"

veth_pair
port=9000
cat >"$work/npfd.json" <<EOF
{"ifaces": ["$if_rx"], "socket": "$work/npfd.sock", "socket_group": "nogroup", "spill_dir": "/var/tmp",
 "clients": [{"uid": 65534, "ports": ["$port"], "region_bytes": 4194304, "resident_bytes": 4194304, "flows": 1}]}
EOF
LD_LIBRARY_PATH=$lib in_rx "$root$NPF_SBINDIR/npfd" -c "$work/npfd.json" >"$work/npfd.log" 2>&1 &
npfd=$!
at_exit "kill $npfd 2>/dev/null; wait $npfd 2>/dev/null"
await_line "$work/npfd.log" $npfd "^npfd: serving" || fail "npfd did not get ready:"$'\n'"$(cat "$work/npfd.log")"

head -c $((1 << 20)) /dev/urandom >"$work/in"
touch "$work/out" "$work/ready" && chmod 0666 "$work/out" "$work/ready"
LD_LIBRARY_PATH=$lib in_rx setpriv --reuid=65534 --regid=65534 --clear-groups \
  sh -c 'exec "$0" "$@" --ready-fd 3 3>"'"$work/ready"'"' \
  "$work/consumer/consumer" "$work/npfd.sock" $port 1024 "$work/out" 2>"$work/consumer.err" &
pid=$!
at_exit "kill $pid 2>/dev/null"
await_line "$work/ready" $pid -x ready ||
  { wait $pid || true; fail "consumer did not get ready:"$'\n'"$(cat "$work/consumer.err")"$'\n'"$(cat "$work/npfd.log")"; }
in_tx socat -u -b 1024 "FILE:$work/in" "UDP:$addr_rx:$port" || fail "socat could not send to $addr_rx:$port"
rc=0
wait $pid || rc=$?
[ $rc -eq 0 ] || fail "consumer exited $rc:"$'\n'"$(cat "$work/consumer.err")"$'\n'"$(cat "$work/npfd.log")"
cmp -s "$work/in" "$work/out" || fail "the consumer's output ($(stat -c %s "$work/out") bytes) differs from the 1 MiB sent"
note "1024 datagrams (1 MiB) byte for byte through npfd as uid 65534"
note "PASS"
