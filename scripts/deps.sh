#!/usr/bin/env bash
# Installs the Debian packages npf needs (idempotent), by purpose:
#   build  what CMake needs to configure and build everything but the tests
#   demo   build + what scripts/demo.sh runs (ping, socat, nsenter, setpriv, jq)
#   all    demo + the tests: GoogleTest; trafgen (netsniff-ng), tcpdump, nc;
#          packaging: dpkg-dev (dpkg-shlibdeps, for the .deb's Depends), file
#          (cpack finds the binaries with it), mmdebstrap (tests/install, the
#          image's base); containers: podman with runc and catatonit (its pod
#          pause image), jq (deploy/seccomp/generate.sh), python3-yaml
#          (tests/container renders the manifests), libcap2-bin (capsh), curl
#          (probes); node and npm (tests/deploy validates the manifests
#          against the Kubernetes schemas); gnuplot (npf-bench --plot).
# Usage: scripts/deps.sh [build|demo|all]   (default all; as root; does
#        nothing when all are present)
set -euo pipefail

what=${1:-all}
build=(
  build-essential cmake pkg-config
  clang llvm libbpf-dev libxdp-dev bpftool libelf-dev zlib1g-dev
  libcli11-dev nlohmann-json3-dev liburing-dev prometheus-cpp-dev libsystemd-dev
)
demo=(iproute2 ethtool iputils-ping socat util-linux jq)
tests=(
  git googletest libgtest-dev xdp-tools
  netcat-openbsd netsniff-ng tcpdump gnuplot-nox systemd
  dpkg-dev file mmdebstrap
  podman runc catatonit python3-yaml libcap2-bin curl
)
case "$what" in
  build) pkgs=("${build[@]}") ;;
  demo) pkgs=("${build[@]}" "${demo[@]}") ;;
  all)
    pkgs=("${build[@]}" "${demo[@]}" "${tests[@]}")
    # node and npm from wherever they came (Debian's, or another repository's
    # nodejs that carries its own npm): Debian's only when there is no npm.
    command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
    ;;
  *) echo "deps: unknown set '$what' (build, demo or all)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]}; run as root to install them" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
