#!/usr/bin/env bash
# Builds the Debian package npf_<version>_<arch>.deb: a Release build without
# tests (-DBUILD_TESTING=OFF), prefix /usr, in its own build directory, then
# cpack. Prints the .deb's path on the last line.
# Usage: scripts/package.sh [BUILD_DIR]     (default build-package)
# Install it with: sudo apt-get install ./npf_<version>_<arch>.deb
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build-package}
scripts/deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build "$build" -j"$(nproc)"
log=$(cd "$build" && cpack -G DEB) || { echo "$log" >&2; echo "package: cpack failed" >&2; exit 1; }
echo "$log"
# "CPack: - package: /path/npf_0.1.0_amd64.deb generated."
deb=$(sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' <<<"$log")
[ -f "$deb" ] || { echo "package: cpack named no .deb" >&2; exit 1; }
echo "$deb"
