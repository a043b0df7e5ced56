#!/usr/bin/env bash
# Writes npf's seccomp profiles (deploy/seccomp/{npf-client,npfd}.json) from a
# container runtime's default profile, so that each is that default plus
# exactly what npf needs:
#   npf-client.json  userfaultfd(2), only with UFFD_USER_MODE_ONLY (bit 0 of its
#                    flags): npf::Client's region. The defaults deny
#                    userfaultfd (podman) or allow it only with
#                    CAP_SYS_PTRACE (Docker, containerd); in user-mode-only
#                    form it needs no capability.
#   npfd.json        the same, and bpf(2) for a process without
#                    CAP_SYS_ADMIN (the defaults gate bpf on CAP_SYS_ADMIN,
#                    older than CAP_BPF; the kernel still checks CAP_BPF,
#                    CAP_NET_ADMIN, CAP_PERFMON).
# Install them in the kubelet's seccomp directory (/var/lib/kubelet/seccomp):
# the manifests name them as localhostProfile npf-client.json and npfd.json.
# The shipped files come from containers-common 0.50.1 (Debian 12's podman
# 4.3, /usr/share/containers/seccomp.json). Regenerate from your runtime's
# default to keep its other choices: the input must be in the
# Docker/containers-common format (a "syscalls" list of rules).
# Usage: deploy/seccomp/generate.sh [DEFAULT_PROFILE] [OUT_DIR]
set -euo pipefail
in=${1:-/usr/share/containers/seccomp.json}
out=${2:-$(dirname "$0")}
command -v jq >/dev/null || { echo "generate: jq not found (apt install jq)" >&2; exit 1; }
[ -r "$in" ] || { echo "generate: cannot read the default profile $in" >&2; exit 1; }
mkdir -p "$out"

# Every rule that names one of $names loses it (rules left with no name go);
# then the rules in $add are appended.
filter='
  .syscalls |= (map(.names -= $names | select(.names | length > 0)) + $add)'
uffd='{"names": ["userfaultfd"], "action": "SCMP_ACT_ALLOW",
       "args": [{"index": 0, "value": 1, "valueTwo": 1, "op": "SCMP_CMP_MASKED_EQ"}],
       "comment": "npf: userfaultfd(UFFD_USER_MODE_ONLY) only, which needs no capability"}'
bpf='{"names": ["bpf"], "action": "SCMP_ACT_ALLOW",
      "comment": "npf: npfd loads npf_xdp and its maps with CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON, not CAP_SYS_ADMIN"}'

jq --argjson names '["userfaultfd"]' --argjson add "[$uffd]" "$filter" "$in" >"$out/npf-client.json"
jq --argjson names '["userfaultfd", "bpf"]' --argjson add "[$uffd, $bpf]" "$filter" "$in" >"$out/npfd.json"
echo "generate: wrote $out/npf-client.json and $out/npfd.json from $in"
