#!/usr/bin/env bash
# deploy/k8s/sidecar-pod.yaml in podman (kube play), with the manifest's own
# securityContext: npfd (uid 0, the manifest's capabilities, its seccomp
# profile, read-only root) and the app (uid 65534, no capability, the client
# seccomp profile) in one pod whose network namespace has eth0, a veth from a
# peer namespace. 1 MiB sent from the peer reaches the app byte for byte, the
# app running the data path itself (npfd delegates eth0: delegated mode).
# What the test changes (tests/container/render.py): npfd, a native sidecar,
# becomes a regular container (podman 4.3 has no native sidecars); the pod
# restarts on failure only; the app writes to a directory of the test's and
# stops after 1024 datagrams (with the manifest's page size, region and budget).
source "$(dirname "$0")/../common/shell.sh"
source "$(dirname "$0")/podman.sh"
pod_test

out=$work/out
mkdir -p "$out" && chmod 0777 "$out"
pod=npf-sidecar-$$
"$(dirname "$0")/render.py" "$NPF_SOURCE_DIR/deploy/k8s/sidecar-pod.yaml" --native-sidecars --name "$pod" \
  --restart OnFailure --mount "app:/out=$out" \
  --args 'app=["eth0", "9000", "--connect", "/run/npf/npfd.sock", "--client-mode", "delegated", "--page-size", "2M", "--region", "256M", "--budget", "64M", "--spill-dir", "/var/tmp", "-o", "/out/received", "-n", "1024", "--ready-fd", "1"]' \
  >"$work/pod.yaml" || fail "render.py failed"
play "$work/pod.yaml"

# The pod's eth0: a veth from a peer namespace, in place before npfd starts.
pod_ns=npfcpod$$
pod_eth0 "$pod" "$pod_ns"
start_pod "$pod" "$work/pod.yaml"

await_log "$pod-app" -x ready || fail "the app did not get ready"
check_probes "$NPF_SOURCE_DIR/deploy/k8s/sidecar-pod.yaml" npfd "$pod_ns" "$addr_in"
check_security "$pod-npfd" 0 "$(caps_of "$NPF_SOURCE_DIR/deploy/k8s/sidecar-pod.yaml" npfd)" npfd.json
check_security "$pod-app" 65534 "" npf-client.json

head -c $((1 << 20)) /dev/urandom >"$work/in"
nsenter --net="/run/netns/$peer_ns" socat -u -b 1024 "FILE:$work/in" "UDP:$addr_in:9000" ||
  fail "socat could not send to $addr_in:9000"
rc=$(timeout 60 podman wait "$pod-app") || fail "the app did not exit within 60 s"$'\n'"$(pod_logs)"
[ "$rc" -eq 0 ] || fail "the app exited $rc"$'\n'"$(pod_logs)"
cmp -s "$work/in" "$out/received" ||
  fail "the app received $(stat -c %s "$out/received" 2>/dev/null || echo no) bytes, not the 1 MiB sent"$'\n'"$(pod_logs)"
has_log "$pod-app" "npfd delegated eth0: this process runs its data path" ||
  fail "the app did not run eth0's data path itself (delegated mode)"$'\n'"$(pod_logs)"
has_log "$pod-npfd" "runs the data path of eth0" ||
  fail "npfd did not delegate eth0"$'\n'"$(pod_logs)"
note "1024 datagrams (1 MiB) from a veth peer reached the app container byte for byte, the app running eth0's data path on the sockets the npfd sidecar handed it"
note "PASS"
