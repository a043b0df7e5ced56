#!/usr/bin/env bash
# Sets up everything and runs all tests: installs missing packages, builds,
# runs ctest (BPF unit tests, unit tests, netns/veth integration tests).
# Usage: sudo scripts/test.sh [--sanitize] [extra ctest args]
#   --sanitize  build with AddressSanitizer + UBSan (NPF_SANITIZE=ON, in
#               build-sanitize/) and run the cli, dataplane, counters,
#               public, xsk, order, region, engine, ipc and daemon suites under it
set -euo pipefail
cd "$(dirname "$0")/.."

# Release: what users build (CI proves it builds with the tests, -Werror);
# the sanitizers want debug info.
build=build type=Release cmake_args=() ctest_args=()
if [ "${1:-}" = --sanitize ]; then
  shift
  build=build-sanitize type=RelWithDebInfo
  cmake_args=(-DNPF_SANITIZE=ON)
  ctest_args=(-L 'cli|dataplane|counters|public|xsk|order|region|engine|ipc|daemon')
fi

scripts/deps.sh
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" -DBUILD_TESTING=ON "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure --timeout 600 "${ctest_args[@]}" "$@"
