#!/usr/bin/env bash
# Sets up everything and runs all tests: installs missing packages, builds,
# runs ctest (BPF unit tests, unit tests, netns/veth integration tests).
# Usage: sudo scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure --timeout 600 "$@"
