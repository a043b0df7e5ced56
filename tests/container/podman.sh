# Sourced by the container tests (after tests/common/shell.sh): podman with
# settings of this build's own, never the machine's, and a "node" of network
# namespaces this run creates.
#
# podman_env: CONTAINERS_CONF and CONTAINERS_STORAGE_CONF pointing at files in
# $NPF_BUILD_DIR/tests/container/podman: the runtime runc (crun refuses the
# hybrid cgroup layout of some hosts), cgroupfs, no default ulimits (podman
# 4.3's defaults exceed what a nested or restricted host allows), storage in
# the build tree (the image and its base are kept between runs). One
# container test at a time uses it (ctest RESOURCE_LOCK).
podman_env() {
  command -v podman >/dev/null || skip "podman not installed (apt install podman runc; scripts/deps.sh installs them)"
  command -v runc >/dev/null || skip "runc not installed (apt install runc)"
  [ "$(id -u)" -eq 0 ] || skip "needs root (rootful podman, network namespaces, XDP)"
  local dir=$NPF_BUILD_DIR/tests/container/podman
  mkdir -p "$dir/storage" "$dir/run"
  cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = []
log_driver = "k8s-file"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$dir/events.log"
EOF
  cat >"$dir/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$dir/storage"
runroot = "$dir/run"
EOF
  export CONTAINERS_CONF=$dir/containers.conf CONTAINERS_STORAGE_CONF=$dir/storage.conf
  podman info >"$work/podman-info" 2>&1 || { cat "$work/podman-info" >&2; skip "podman cannot run here (podman info failed)"; }
  # What a killed run left in this storage (it is the container tests' alone).
  podman pod rm -af >/dev/null 2>&1 || true
  podman volume prune -f >/dev/null 2>&1 || true
}

# npf_image: builds (or rebuilds, reusing the base and the package build)
# the runtime image with deploy/container/build-image.sh from this tree's
# Debian package; sets $image.
npf_image() {
  local deb
  deb=$(debian_package) || fail "could not build the Debian package"
  "$NPF_SOURCE_DIR/deploy/container/build-image.sh" --deb "$deb" --work "$NPF_BUILD_DIR/tests/container/image" \
    >"$work/image.out" 2>"$work/image.err" || { cat "$work/image.err" >&2; fail "build-image.sh failed"; }
  sed 's/^/  /' "$work/image.err"
  image=$(tail -n 1 "$work/image.out")
}

# netns_with NAME: a network namespace named NAME, removed at exit (with what
# podman left in it).
netns_with() {
  ip netns add "$1" || fail "ip netns add $1 failed"
  at_exit "ip netns del $1"
  nsenter --net="/run/netns/$1" ip link set lo up
}

# wire NS_A IF_A ADDR_A NS_B IF_B ADDR_B: a veth pair between two namespaces,
# a /30 each side, checksum offload off (the sender writes full UDP
# checksums, which npf verifies), IPv6 off, static neighbours.
wire() {
  local tmp=npfc$$
  ip link add "${tmp}a" netns "$1" type veth peer name "${tmp}b" netns "$4" || fail "ip link add veth failed"
  nsenter --net="/run/netns/$1" ip link set "${tmp}a" name "$2"
  nsenter --net="/run/netns/$4" ip link set "${tmp}b" name "$5"
  local ns ifc addr peer mac
  for side in "$1 $2 $3 $6" "$4 $5 $6 $3"; do
    read -r ns ifc addr peer <<<"$side"
    nsenter --net="/run/netns/$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
    nsenter --net="/run/netns/$ns" ip addr add "$addr/30" dev "$ifc"
    nsenter --net="/run/netns/$ns" ip link set "$ifc" up
    nsenter --net="/run/netns/$ns" ethtool -K "$ifc" tx off >/dev/null
  done
  mac_a=$(nsenter --net="/run/netns/$1" ip -br link show dev "$2" | awk '{print $3}')
  mac_b=$(nsenter --net="/run/netns/$4" ip -br link show dev "$5" | awk '{print $3}')
  nsenter --net="/run/netns/$1" ip neigh replace "$6" lladdr "$mac_b" dev "$2"
  nsenter --net="/run/netns/$4" ip neigh replace "$3" lladdr "$mac_a" dev "$5"
}

# subnet: a /30 of 198.18.0.0/15 for this run: $addr_in (.1) and $addr_out (.2).
subnet() {
  local n=$(($$ % 16384))
  local net=198.$((18 + n / 8192)).$(((n / 64) % 128)).
  addr_in=$net$(((n % 64) * 4 + 1)) addr_out=$net$(((n % 64) * 4 + 2))
}

# use_shipped_image: the image the container_image test built, under the name
# the manifests give it (their registry.example.com/npf/npf:VERSION), so that
# kube play finds it without pulling. Sets $image.
use_shipped_image() {
  image=localhost/npf/npf:$NPF_VERSION
  podman image exists "$image" || fail "no image $image: the container_image test builds it (ctest -L container)"
  local shipped
  shipped=$(sed -n 's/^ *image: *//p' "$NPF_SOURCE_DIR"/deploy/k8s/*.yaml | sort -u)
  [ "$(wc -l <<<"$shipped")" -eq 1 ] || fail "the manifests name more than one image: $shipped"
  [ "${shipped##*:}" = "$NPF_VERSION" ] || fail "the manifests name $shipped, not version $NPF_VERSION"
  podman tag "$image" "$shipped" || fail "podman tag $image $shipped failed"
}

# pod_test: what a test of pods needs: podman_env, the tools that wire and
# feed the pods, the host's bpffs (the manifests mount it), the image.
pod_test() {
  podman_env
  local t
  for t in ip:iproute2 nsenter:util-linux ethtool:ethtool socat:socat curl:curl capsh:libcap2-bin jq:jq; do
    need "${t%%:*}" "${t#*:}"
  done
  mountpoint -q /sys/fs/bpf || fail "bpffs is not mounted on /sys/fs/bpf (mount -t bpf bpf /sys/fs/bpf)"
  use_shipped_image
}

# play FILE: podman kube play FILE, created but not started, with no network
# of podman's (--network none: each pod gets a network namespace with only
# lo, which start_pod can wire first), and the shipped seccomp profiles
# (deploy/seccomp, laid out as the kubelet's seccomp directory). podman 4.3
# makes each emptyDir a named volume, owned by the first container that
# mounts it: it gets the kubelet's mode for an emptyDir, 0777. Its pods,
# containers and volumes go at exit.
play() {
  at_exit "podman kube down '$1' >/dev/null 2>&1; podman volume prune -f >/dev/null 2>&1"
  podman kube play --start=false --network none --seccomp-profile-root "$NPF_SOURCE_DIR/deploy/seccomp" "$1" \
    >"$work/play.log" 2>&1 || fail "podman kube play $1 failed:"$'\n'"$(cat "$work/play.log")"
  local v
  for v in $("$(dirname "${BASH_SOURCE[0]}")/manifest.py" empty-dirs "$1"); do
    chmod 0777 "$(podman volume inspect -f '{{.Mountpoint}}' "$v")" || fail "no volume $v for the emptyDir $v"
  done
}

# pod_netns POD NAME: starts POD's infra container and names its network
# namespace NAME (/run/netns/NAME, a bind mount removed at exit), so that
# wire can give the pod an interface before its containers start.
pod_netns() {
  local infra pid
  infra=$(podman pod inspect -f '{{.InfraContainerID}}' "$1") || fail "no pod $1"
  podman start "$infra" >/dev/null || fail "podman start of $1's infra container failed"
  pid=$(podman inspect -f '{{.State.Pid}}' "$infra")
  touch "/run/netns/$2" && mount --bind "/proc/$pid/ns/net" "/run/netns/$2" || fail "cannot name $1's network namespace"
  at_exit "umount /run/netns/$2; rm -f /run/netns/$2"
}

# pod_eth0 POD NAME: POD's network namespace named NAME (pod_netns) gets
# eth0, a veth from a peer namespace ($peer_ns, its end peer0), with the
# addresses of subnet: the pod $addr_in, the peer $addr_out. What npf leaves
# pinned for that namespace goes at exit.
pod_eth0() {
  subnet
  peer_ns=npfcpeer$$
  pod_netns "$1" "$2"
  netns_with "$peer_ns"
  wire "$2" eth0 "$addr_in" "$peer_ns" peer0 "$addr_out"
  at_exit "rm -rf /sys/fs/bpf/npf/netns-$(stat -L -c %i "/run/netns/$2")"
}

# start_pod POD FILE: starts every container of POD (played from FILE). Its
# removal is registered again here, to run before what the namespaces of the
# test (registered after play) leave.
start_pod() {
  at_exit "podman kube down '$2' >/dev/null 2>&1"
  podman pod start "$1" >"$work/start.log" 2>&1 || fail "podman pod start $1 failed:"$'\n'"$(cat "$work/start.log")"$'\n'"$(pod_logs)"
}

# pod_logs: the last lines of every container's log (the test's storage
# holds only this test's), for failure messages.
pod_logs() {
  local c
  for c in $(podman ps -a --format '{{.Names}}' | grep -v -- '-infra$'); do
    echo "--- $c: $(podman inspect -f '{{.State.Status}}, exit {{.State.ExitCode}}' "$c")"
    podman logs "$c" 2>&1 | tail -n 20
  done
}

# await_log CONTAINER GREP_ARGS...: true once the container's log has a line
# grep matches (a ready line), false after 60 s.
# has_log CONTAINER GREP_ARGS...: the container's log has such a line now.
has_log() {
  local c=$1
  shift
  # Not `podman logs | grep -q`: under pipefail, grep quitting at the match
  # can fail podman logs with SIGPIPE, and the pipeline with it.
  grep -qs "$@" <<<"$(podman logs "$c" 2>&1)"
}

await_log() {
  local c=$1 i
  shift
  for ((i = 0; i < 600; i++)); do
    has_log "$c" "$@" && return 0
    sleep 0.1
  done
  echo "no line matching '$*' in the log of $c:" >&2
  pod_logs >&2
  return 1
}

# caps_of MANIFEST CONTAINER: the capabilities a manifest's container adds.
caps_of() {
  "$(dirname "${BASH_SOURCE[0]}")/manifest.py" caps "$@"
}

# check_security CONTAINER UID "CAPS" PROFILE: the runtime applied the
# manifest's securityContext to the container's process: its uid, exactly
# the capabilities CAPS (names without CAP_, effective and bounding), a
# seccomp filter from deploy/seccomp/PROFILE (RuntimeDefault: the runtime's
# own, whatever its rules), a read-only root, no new privileges.
check_security() {
  local c=$1 uid=$2 caps=$3 profile=$4 pid status want got
  pid=$(podman inspect -f '{{.State.Pid}}' "$c") || fail "no container $c"
  status=$(cat "/proc/$pid/status")
  [ "$(awk '/^Uid:/ {print $3}' <<<"$status")" = "$uid" ] || fail "$c runs as uid $(awk '/^Uid:/ {print $3}' <<<"$status"), not $uid"
  want=$(for x in $caps; do echo "cap_${x,,}"; done | sort | paste -sd, -)
  for set in CapEff CapBnd; do
    got=$(capsh --decode="$(awk "/^$set:/ {print \$2}" <<<"$status")" | sed 's/^0x[0-9a-f]*=\{0,1\}//' | tr ',' '\n' | sort | paste -sd, -)
    [ "$got" = "$want" ] || fail "$c: $set is {$got}, the manifest gives {$want}"
  done
  [ "$(awk '/^Seccomp:/ {print $2}' <<<"$status")" = 2 ] || fail "$c runs without a seccomp filter"
  [ "$(awk '/^NoNewPrivs:/ {print $2}' <<<"$status")" = 1 ] || fail "$c may gain privileges (allowPrivilegeEscalation)"
  # The filter runc installed (the container's OCI config) has the profile's
  # own rules, the ones the runtime's default lacks.
  local oci
  oci=$(podman inspect -f '{{.StaticDir}}' "$c")/config.json
  [ "$profile" = RuntimeDefault ] || jq -e --slurpfile p "$NPF_SOURCE_DIR/deploy/seccomp/$profile" '.linux.seccomp.syscalls as $have
      | [$p[0].syscalls[] | select(.comment | startswith("npf:")) | {names, action, args}]
      | length > 0 and all(. as $r | $have | any({names, action, args} == $r))' "$oci" >/dev/null ||
    fail "$c: the seccomp filter runc installed lacks the rules of deploy/seccomp/$profile"
  [ "$(podman inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$c")" = true ] || fail "$c's root is writable"
  note "$c: uid $uid, capabilities {$want}, seccomp $profile, read-only root, no new privileges"
}

# huge_pages N: at least N free 2 MiB pages in the kernel's pool, raising
# vm.nr_hugepages by what is missing; given back at exit.
huge_pages() {
  local total free want
  total=$(cat /proc/sys/vm/nr_hugepages)
  free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
  [ "$free" -ge "$1" ] && return 0
  want=$((total + $1 - free))
  echo "$want" >/proc/sys/vm/nr_hugepages
  at_exit "echo $total >/proc/sys/vm/nr_hugepages"
  [ "$(cat /proc/sys/vm/nr_hugepages)" -ge "$want" ] || skip "the kernel has no $1 free 2 MiB pages (vm.nr_hugepages)"
}

# check_probes MANIFEST CONTAINER NETNS POD_ADDR: every httpGet probe the
# manifest gives CONTAINER, asked the way the kubelet asks it (its host, else
# the pod's address; its port, by number or by the container's port name)
# from inside the pod's network namespace, answers 200 within 60 s (the
# readiness of a starting npfd is an event to wait for).
check_probes() {
  local kind host port path body n=0 i
  while read -r kind host port path; do
    [ "$host" = - ] && host=$4
    for ((i = 0; i < 600; i++)); do
      body=$(nsenter --net="/run/netns/$3" curl -sS --max-time 5 -o - -w ' %{http_code}' "http://$host:$port$path" 2>&1) || true
      [ "${body##* }" = 200 ] && break
      sleep 0.1
    done
    [ "${body##* }" = 200 ] || fail "$2's $kind (GET http://$host:$port$path) answered: $body"$'\n'"$(pod_logs)"
    note "$2's $kind: GET http://$host:$port$path: 200 ${body% *}"
    n=$((n + 1))
  done < <("$(dirname "${BASH_SOURCE[0]}")/manifest.py" probes "$1" "$2")
  [ $n -gt 0 ] || fail "the manifest gives $2 no httpGet probe"
}
