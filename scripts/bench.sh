#!/usr/bin/env bash
# One command: dependencies, build, npf-bench (all scenarios), plots.
#   scripts/bench.sh                 full run into build-bench/results/<date>
#   scripts/bench.sh --quick         < 60 s smoke run
#   scripts/bench.sh -s cold -d 3    any npf-bench options
# Needs root (namespaces, XDP, AF_XDP, userfaultfd). Cleans up after itself:
# the namespaces and veths npf-bench creates are removed when it exits.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NPF_BENCH_BUILD:-$root/build-bench}
out=${NPF_BENCH_OUT:-$build/results/$(date +%Y%m%d-%H%M%S)}

if [[ $(id -u) -ne 0 ]]; then
  echo "bench.sh: needs root" >&2
  exit 1
fi
"$root/scripts/deps.sh"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
make -C "$build" -j2 npf-bench >/dev/null
mkdir -p "$out"
echo "bench.sh: results in $out"
"$build/bench/npf-bench" -o "$out" "$@" | tee "$out/tables.txt"
