#!/usr/bin/env bash
# The node model in podman: deploy/k8s/daemonset.yaml's pod template runs as a
# Pod in a network namespace that stands for the node (eth0, a veth from a
# peer namespace), with the manifest's securityContext: its init container
# installs npf-cni into the node's CNI directories, npfd and npf-pods (npf-cni
# watch) run. Two pods from deploy/k8s/client-pod.yaml (uid 65534, no
# capability, no volume, the client seccomp profile, their own network
# namespaces) are set up as a runtime sets up a pod: the installed npf-cni,
# run as the node's chained CNI plugin with the pod's namespace, name and
# address, gives each its listener @npf before its containers start. Each
# client pod receives its own flow, sent to its own address and routed to the
# node's eth0, byte for byte.
# What the test changes (tests/container/render.py): the DaemonSet's template
# becomes a Pod (podman plays no DaemonSet) in the node namespace instead of
# hostNetwork, with restartPolicy OnFailure (podman 4.3 restarts init
# containers under Always); the node's /run/npf, CNI directories and npf-cni's
# records are directories of the test's; the client pods get their own names and ports,
# restart on failure only, write to a directory of the test's and stop after
# 1024 datagrams.
source "$(dirname "$0")/../common/shell.sh"
source "$(dirname "$0")/podman.sh"
pod_test

run=$work/run-npf cni_bin=$work/cni-bin cni_conf=$work/cni-conf cni_state=$work/cni-state
mkdir -p "$run" "$cni_bin" "$cni_conf" "$cni_state"
# The cluster's CNI, which npf-cni is chained after.
echo '{"cniVersion": "1.0.0", "name": "podnet", "plugins": [{"type": "bridge", "bridge": "cni0"}]}' \
  >"$cni_conf/10-podnet.conflist"
k8s=$NPF_SOURCE_DIR/deploy/k8s
npfd=npfd-$$
# OnFailure: podman 4.3 gives init containers the pod's restartPolicy, and
# would run install-cni again and again under Always.
"$(dirname "$0")/render.py" "$k8s/daemonset.yaml" --daemonset --name "$npfd" --restart OnFailure \
  --hostpath "/run/npf=$run" --hostpath "/opt/cni/bin=$cni_bin" --hostpath "/etc/cni/net.d=$cni_conf" \
  --hostpath "/var/lib/npf/cni=$cni_state" >"$work/npfd.yaml" || fail "render.py failed"
play "$work/npfd.yaml"

# The node: npfd's pod's network namespace, with eth0 a veth from a peer
# namespace (the rest of the network).
node_ns=npfcnode$$
pod_eth0 "$npfd" "$node_ns"
start_pod "$npfd" "$work/npfd.yaml"
check_probes "$k8s/daemonset.yaml" npfd "$node_ns" "$addr_in"
check_security "$npfd-npfd" 0 "$(caps_of "$k8s/daemonset.yaml" npfd)" npfd.json
check_security "$npfd-npf-pods" 0 "$(caps_of "$k8s/daemonset.yaml" npf-pods)" RuntimeDefault

# The init container put npf-cni on the node: the binary, last in the chain.
[ -x "$cni_bin/npf-cni" ] || fail "install-cni left no npf-cni in the CNI plugin directory"$'\n'"$(pod_logs)"
chain=$(jq -r '[.plugins[].type] | join(",")' "$cni_conf/10-podnet.conflist")
[ "$chain" = bridge,npf-cni ] || fail "the node's chain is $chain after install-cni, not bridge,npf-cni"
note "install-cni: $("$cni_bin/npf-cni" --version) in the plugin directory, chain $chain"

# cni_add POD NETNS ADDR: the runtime's ADD of the chained plugin for POD:
# CNI_ARGS as the kubelet's runtime sets them, the conflist's entry with the
# bridge's result as prevResult, the node's paths as the test maps them.
cni_add() {
  local conf
  conf=$(jq -c --arg a "$3/24" --arg run "$run" --arg state "$cni_state" \
    '.plugins[-1] + {cniVersion, name, socket: ($run + "/pods.sock"), state_dir: $state,
      prevResult: {cniVersion, ips: [{address: $a, interface: 0}]}}' "$cni_conf/10-podnet.conflist")
  CNI_COMMAND=ADD CNI_CONTAINERID="$(podman pod inspect -f '{{.InfraContainerID}}' "$1")" \
    CNI_NETNS="/run/netns/$2" CNI_IFNAME=eth0 CNI_PATH="$cni_bin" \
    CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=npf-apps;K8S_POD_NAME=$1;K8S_POD_UID=uid-$1" \
    "$cni_bin/npf-cni" <<<"$conf" >"$work/cni-$1.out" 2>"$work/cni-$1.err" ||
    fail "npf-cni ADD for $1 failed: $(cat "$work/cni-$1.out" "$work/cni-$1.err")"
  jq -e --arg a "$3/24" '.ips[0].address == $a' "$work/cni-$1.out" >/dev/null ||
    fail "npf-cni ADD for $1 did not pass the previous result on: $(cat "$work/cni-$1.out")"
}

# The pods' addresses, routed by the peer through the node's eth0.
declare -A port=([a]=9000 [b]=9001) ip=([a]=198.19.254.10 [b]=198.19.254.11)
nsenter --net="/run/netns/$peer_ns" ip route add 198.19.254.0/24 via "$addr_in" dev peer0 ||
  fail "no route to the pods' addresses in the peer"
for c in a b; do
  mkdir -p "$work/out-$c" && chmod 0777 "$work/out-$c"
  pod=npf-client-$c-$$
  "$(dirname "$0")/render.py" "$k8s/client-pod.yaml" --name "$pod" \
    --restart OnFailure --mount "app:/out=$work/out-$c" \
    --args "app=[\"eth0\", \"${port[$c]}\", \"--connect\", \"@npf\", \"-o\", \"/out/received\", \"-n\", \"1024\", \"--ready-fd\", \"1\"]" \
    >"$work/client-$c.yaml" || fail "render.py failed"
  play "$work/client-$c.yaml"
  pod_netns "$pod" "npfcpod$c$$"
  cni_add "$pod" "npfcpod$c$$" "${ip[$c]}"
  start_pod "$pod" "$work/client-$c.yaml"
done
for c in a b; do
  await_log "npf-client-$c-$$-app" -x ready || fail "client pod $c did not get ready"
  check_security "npf-client-$c-$$-app" 65534 "" npf-client.json
done

# Pod b receives now; pod a after npfd restarts (a rolling update, a crash):
# the pods' listeners die with npfd, npf-pods hands every recorded pod to the
# new npfd, and pod a's app, which lost npfd and is restarted by its pod
# (OnFailure, in the same pod network namespace), connects through its
# listener again.
receive() { # receive POD: 1 MiB sent to the pod's address arrives whole
  local c=$1 rc
  head -c $((1 << 20)) /dev/urandom >"$work/in-$c"
  nsenter --net="/run/netns/$peer_ns" socat -u -b 1024 "FILE:$work/in-$c" "UDP:${ip[$c]}:${port[$c]}" ||
    fail "socat could not send to ${ip[$c]}:${port[$c]}"
  rc=$(timeout 60 podman wait "npf-client-$c-$$-app") || fail "client pod $c did not exit within 60 s"$'\n'"$(pod_logs)"
  [ "$rc" -eq 0 ] || fail "client pod $c exited $rc"$'\n'"$(pod_logs)"
  cmp -s "$work/in-$c" "$work/out-$c/received" ||
    fail "client pod $c received $(stat -c %s "$work/out-$c/received" 2>/dev/null || echo no) bytes, not its 1 MiB"$'\n'"$(pod_logs)"
}
receive b
note "client pod b, with its own listener from npf-cni and no volume, received its 1 MiB (1024 datagrams, sent to the pod's address) byte for byte through the node's npfd"

readies() { podman logs "npf-client-$1-$$-app" 2>/dev/null | grep -cx ready; }
podman restart "$npfd-npfd" >/dev/null || fail "podman restart $npfd-npfd failed"$'\n'"$(pod_logs)"
for ((i = 0; i < 600; i++)); do [ "$(readies a)" -ge 2 ] && break; sleep 0.1; done
[ "$(readies a)" -ge 2 ] || fail "client pod a did not get ready again after npfd restarted"$'\n'"$(pod_logs)"
receive a
note "npfd restarted: npf-pods handed the pods to the new npfd, client pod a's app reconnected through its listener and received its 1 MiB byte for byte"
note "PASS"
