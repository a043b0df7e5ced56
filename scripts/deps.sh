#!/usr/bin/env bash
# Installs the Debian packages npf needs to build, test, package and run
# (idempotent). Packaging: dpkg-dev (dpkg-shlibdeps, for the .deb's Depends),
# file (cpack finds the binaries with it), mmdebstrap (tests/install, the
# image's base). Containers: podman with runc and catatonit (its pod pause
# image), jq (deploy/seccomp/generate.sh, the seccomp check), python3-yaml
# (tests/container renders the manifests), libcap2-bin (capsh), curl (probes).
# Usage: scripts/deps.sh        (as root; does nothing when all are present)
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config git
  clang llvm libbpf-dev libxdp-dev xdp-tools bpftool libelf-dev zlib1g-dev
  libcli11-dev nlohmann-json3-dev googletest libgtest-dev liburing-dev prometheus-cpp-dev
  iproute2 ethtool iputils-ping netcat-openbsd socat netsniff-ng tcpdump util-linux gnuplot-nox
  libsystemd-dev systemd
  dpkg-dev file mmdebstrap
  podman runc catatonit jq python3-yaml libcap2-bin curl
)

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
