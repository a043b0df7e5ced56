#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: metadata validation, sizes, flow
# specs, checksums) with clang and ASan/UBSan in build-fuzz/ and runs each for
# SECONDS (default 60). The corpus grows in build-fuzz/tests/fuzz/corpus/<target>;
# a failing input is saved as build-fuzz/tests/fuzz/crash-<target>-*.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: meta size flowspec csum)
# Root only if packages are missing (libFuzzer's runtime is not in deps.sh:
# only fuzzing needs it).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(meta size flowspec csum)

scripts/deps.sh
for p in clang-14 libclang-rt-14-dev; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "fuzz: missing package $p; run as root to install it" >&2
      exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p"
  fi
done

build=build-fuzz
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
      -DCMAKE_CXX_COMPILER=clang++-14 -DNPF_FUZZ=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/npf_fuzz_}"

dir=$build/tests/fuzz
failed=0
printf '%-10s %10s %12s %10s %8s %8s  %s\n' target seconds execs exec/s inputs cov result
for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t"
  seeds=()
  [ -d "tests/fuzz/corpus/$t" ] && seeds=("tests/fuzz/corpus/$t")
  log=$dir/fuzz-$t.log
  rc=0
  "$dir/npf_fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$dir/crash-$t-" \
      "$dir/corpus/$t" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  inputs=$(find "$dir/corpus/$t" -type f | wc -l)
  result=ok
  if [ "$rc" -ne 0 ]; then
    result="FAILED (exit $rc, log $log)"
    failed=1
  fi
  printf '%-10s %10s %12s %10s %8s %8s  %s\n' "$t" "$secs" "${execs:-?}" \
      "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" "$inputs" "${cov:-?}" "$result"
  if [ "$rc" -ne 0 ]; then
    grep -E 'check failed|ERROR|SUMMARY|Test unit written|^ *#[0-9]+ 0x' "$log" | head -30 >&2
  fi
done
exit $failed
