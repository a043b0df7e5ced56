#!/usr/bin/env bash
# The node model in podman: deploy/k8s/daemonset.yaml's pod template runs as a
# Pod in a network namespace that stands for the node (eth0, a veth from a
# peer namespace), with the manifest's securityContext; two pods from
# deploy/k8s/client-pod.yaml (uid 65534, no capability, the client seccomp
# profile, their own network namespaces) connect through the socket
# directory both mount. Each client pod receives its own flow, byte for byte,
# and nothing of the other's.
# What the test changes (tests/container/render.py): the DaemonSet's template
# becomes a Pod (podman plays no DaemonSet) in the node namespace instead of
# hostNetwork; the node's /run/npf is a directory of the test's; the client
# pods get their own names and ports, restart on failure only, write to a
# directory of the test's and stop after 1024 datagrams.
source "$(dirname "$0")/../common/shell.sh"
source "$(dirname "$0")/podman.sh"
pod_test

run=$work/run-npf
mkdir -p "$run"
k8s=$NPF_SOURCE_DIR/deploy/k8s
npfd=npfd-$$
"$(dirname "$0")/render.py" "$k8s/daemonset.yaml" --daemonset --name "$npfd" --hostpath "/run/npf=$run" \
  >"$work/npfd.yaml" || fail "render.py failed"
play "$work/npfd.yaml"

# The node: npfd's pod's network namespace, with eth0 a veth from a peer
# namespace (the rest of the network).
node_ns=npfcnode$$
pod_eth0 "$npfd" "$node_ns"
start_pod "$npfd" "$work/npfd.yaml"
check_probes "$k8s/daemonset.yaml" npfd "$node_ns" "$addr_in"
check_security "$npfd-npfd" 0 "$(caps_of "$k8s/daemonset.yaml" npfd)" npfd.json

declare -A port=([a]=9000 [b]=9001)
for c in a b; do
  mkdir -p "$work/out-$c" && chmod 0777 "$work/out-$c"
  "$(dirname "$0")/render.py" "$k8s/client-pod.yaml" --name "npf-client-$c-$$" --hostpath "/run/npf=$run" \
    --restart OnFailure --mount "app:/out=$work/out-$c" \
    --args "app=[\"eth0\", \"${port[$c]}\", \"--connect\", \"/run/npf/npfd.sock\", \"-o\", \"/out/received\", \"-n\", \"1024\", \"--ready-fd\", \"1\"]" \
    >"$work/client-$c.yaml" || fail "render.py failed"
  play "$work/client-$c.yaml"
  start_pod "npf-client-$c-$$" "$work/client-$c.yaml"
done
for c in a b; do
  await_log "npf-client-$c-$$-app" -x ready || fail "client pod $c did not get ready"
  check_security "npf-client-$c-$$-app" 65534 "" npf-client.json
done

for c in a b; do
  head -c $((1 << 20)) /dev/urandom >"$work/in-$c"
  nsenter --net="/run/netns/$peer_ns" socat -u -b 1024 "FILE:$work/in-$c" "UDP:$addr_in:${port[$c]}" ||
    fail "socat could not send to $addr_in:${port[$c]}"
done
for c in a b; do
  rc=$(timeout 60 podman wait "npf-client-$c-$$-app") || fail "client pod $c did not exit within 60 s"$'\n'"$(pod_logs)"
  [ "$rc" -eq 0 ] || fail "client pod $c exited $rc"$'\n'"$(pod_logs)"
  cmp -s "$work/in-$c" "$work/out-$c/received" ||
    fail "client pod $c received $(stat -c %s "$work/out-$c/received" 2>/dev/null || echo no) bytes, not its 1 MiB"$'\n'"$(pod_logs)"
done
note "two client pods each received their own 1 MiB (1024 datagrams) byte for byte through the node's npfd"
note "PASS"
