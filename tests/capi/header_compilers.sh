#!/usr/bin/env bash
# npf/npf.h as the compilers its users have build it: npf_opts_check.c
# (NPF_OPTS: sz, the fields named, every other byte zero) compiled with GCC
# and clang as C99, C11 and C17 (-Wall -Wextra -Werror -pedantic), at -O0 and
# -O2, and as C++20 with g++ and clang++, each run. Only the header: no
# libnpf. clang comes with the build's dependencies (scripts/deps.sh).
source "$(dirname "$0")/../common/shell.sh"
need gcc gcc
need g++ g++
need clang clang

src=$NPF_SOURCE_DIR/tests/capi/npf_opts_check.c
flags=(-Wall -Wextra -Werror -pedantic -I"$NPF_SOURCE_DIR/include" -DNPF_OPTS_CHECK_MAIN)
clangxx=clang++
command -v "$clangxx" >/dev/null || clangxx=
runs=0

# check COMPILER ARGS...: builds $src with them and runs it.
check() {
  local what="$*" bin=$work/check
  "$@" "${flags[@]}" -o "$bin" "$src" >"$work/build.log" 2>&1 ||
    fail "$what: npf_opts_check.c does not build:"$'\n'"$(cat "$work/build.log")"
  "$bin" >"$work/run.log" 2>&1 || fail "$what: npf_opts_check failed:"$'\n'"$(cat "$work/run.log")"
  runs=$((runs + 1))
}

for cc in gcc clang; do
  for std in c99 c11 c17; do
    for opt in -O0 -O2; do check "$cc" -std=$std $opt -x c; done
  done
done
for cxx in g++ $clangxx; do
  for opt in -O0 -O2; do check "$cxx" -std=c++20 $opt -x c++; done
done
[ -n "$clangxx" ] || note "clang++ not found: C++ checked with g++ only"
note "$runs builds of npf_opts_check.c ran clean"
note "PASS"
