#!/usr/bin/env bash
# `cmake --install` of this build into a staging directory, and what must be
# there: libnpf.so with its SONAME and symlinks, exporting include/npf's API
# and nothing else, every symbol under the version node NPF_0.1 and every
# function of npf/npf.h among them; libnpf.a with the engine and the client;
# every header of include/npf plus the generated npf/version.h (usable from
# C: a C program built with npf.pc's flags prints npf_version()); the CMake
# package, which a C-only project uses (consumer_c/ with find_package(npf)
# and npf::npf builds, links and loads the staged libnpf.so) and which asks
# C++20 of C++ projects only; npf.pc; the programs (--version), the BPF
# object, npfd's unit and sample config.
source "$(dirname "$0")/common.sh"
need readelf binutils
need objdump binutils
need cmake cmake
need pkg-config pkg-config
need cc gcc

root=$work/stage
stage "$root"
lib=$root$NPF_LIBDIR
abi=$(sed -n 's/^#define NPF_ABI_VERSION \([0-9]*\)$/\1/p' "$NPF_SOURCE_DIR/include/npf/abi.h")
[ -n "$abi" ] || fail "no NPF_ABI_VERSION in include/npf/abi.h"
note "staged in $root:"
(cd "$root" && find . ! -type d | sort | sed 's/^/  /')

file_at() { [ -f "$1" ] || fail "$1 is not installed"; }

# The shared library: libnpf.so -> libnpf.so.0 -> libnpf.so.$NPF_VERSION.
major=$NPF_SOVERSION # the SONAME's number (libnpf/CMakeLists.txt)
file_at "$lib/libnpf.so.$NPF_VERSION"
[ "$(readlink "$lib/libnpf.so.$major")" = "libnpf.so.$NPF_VERSION" ] ||
  fail "$lib/libnpf.so.$major does not link to libnpf.so.$NPF_VERSION"
[ "$(readlink "$lib/libnpf.so")" = "libnpf.so.$major" ] || fail "$lib/libnpf.so does not link to libnpf.so.$major"
soname=$(readelf -d "$lib/libnpf.so.$NPF_VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libnpf.so.$major" ] || fail "SONAME of libnpf.so is '$soname', not libnpf.so.$major"

# Exports: include/npf's classes and functions (libnpf/libnpf.map), nothing else.
# (nm prints each with its version, name@@NPF_0.1, and the node itself,
# NPF_0.1: the versions are checked below.)
nm -D --defined-only "$lib/libnpf.so" | c++filt | sed -e 's/^[0-9a-f]* [A-Za-z] //' -e 's/@\{1,2\}NPF_[0-9.]*$//' |
  grep -vx 'NPF_[0-9.]*' | sort -u >"$work/exports"
note "libnpf.so exports $(wc -l <"$work/exports") symbols"
allowed='^(npf::(Engine|Flow|Client|Sender)::[^I]|npf::log::|npf_[a-z0-9_]+$|(typeinfo|typeinfo name|vtable) for npf::(Engine|Flow|Client|Sender)$'
allowed+='|npf::(toJson|toString|formatCounters|formatXdpOutcomes|errorKind|checkFlowAddress|interfaceRxDrops|measurePageRates|installSeconds|boundOfTheMoment|PageRates::~?[a-zA-Z]+)(\[abi:cxx11\])?\()'
if grep -Ev "$allowed" "$work/exports" >"$work/leaked"; then
  fail "libnpf.so exports symbols outside the public API (libnpf/libnpf.map):"$'\n'"$(cat "$work/leaked")"
fi
for s in 'npf::Engine::Engine(npf::EngineConfig const&)' 'npf::Engine::openFlow(' 'npf::Flow::post(' \
         'npf::Flow::wait(' 'npf::Flow::stats() const' 'npf::Client::Client(npf::ClientConfig const&)' \
         'npf::log::setSink(' 'npf::log::write(' 'npf_version' 'npf_abi_version'; do
  grep -qF "$s" "$work/exports" || fail "libnpf.so does not export $s"
done

# Symbol versions (libnpf/libnpf.map): every export under NPF_0.1, the only
# node so far; every function npf/npf.h and npf/version.h declare among them.
objdump -T "$lib/libnpf.so" | awk '/^[0-9a-f]+ / && !/\*UND\*/ {print $(NF-1), $NF}' >"$work/versions"
[ -s "$work/versions" ] || fail "objdump -T shows no defined symbols in libnpf.so"
if grep -v '^NPF_0\.1 ' "$work/versions" >"$work/unversioned"; then
  fail "libnpf.so exports symbols outside the version node NPF_0.1:"$'\n'"$(head -n 20 "$work/unversioned")"
fi
c_functions=$(sed -n 's/^[a-z].*[ *]\(npf_[a-z0-9_]*\)(.*/\1/p' "$NPF_SOURCE_DIR/include/npf/npf.h" \
  "$root$NPF_INCLUDEDIR/npf/version.h" | sort -u)
[ "$(wc -l <<<"$c_functions")" -ge 20 ] || fail "found only $(wc -l <<<"$c_functions") functions in npf/npf.h: $c_functions"
for f in $c_functions; do
  grep -qx "NPF_0.1 $f" "$work/versions" || fail "libnpf.so does not export $f as $f@@NPF_0.1"
done
note "$(wc -l <"$work/versions") symbols under NPF_0.1, $(wc -l <<<"$c_functions") of them npf/npf.h's and npf/version.h's functions"

# The static archive: every part of the engine and the client.
file_at "$lib/libnpf.a"
ar t "$lib/libnpf.a" >"$work/members"
for o in engine.cpp.o client.cpp.o version.cpp.o region.cpp.o umem.cpp.o sequencer.cpp.o channel.cpp.o \
         dataplane.cpp.o engine_stats.cpp.o log.cpp.o; do
  grep -qx "$o" "$work/members" || fail "libnpf.a has no $o"
done

# Headers: all of include/npf, and the generated version.h.
for h in "$NPF_SOURCE_DIR"/include/npf/*.h; do
  cmp -s "$h" "$root$NPF_INCLUDEDIR/npf/$(basename "$h")" || fail "include/npf/$(basename "$h") is not installed as is"
done
file_at "$root$NPF_INCLUDEDIR/npf/version.h"
grep -q "^#define NPF_VERSION_STRING \"$NPF_VERSION\"$" "$root$NPF_INCLUDEDIR/npf/version.h" ||
  fail "npf/version.h does not define NPF_VERSION_STRING \"$NPF_VERSION\""

# npf.pc, read as a package in a staging root is (PKG_CONFIG_SYSROOT_DIR).
export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
[ "$(pkg-config --modversion npf)" = "$NPF_VERSION" ] || fail "pkg-config --modversion npf is not $NPF_VERSION"
static_libs=$(pkg-config --static --libs npf)
for l in -lnpf -lbpf -lxdp; do
  grep -qw -- "$l" <<<"$static_libs" || fail "pkg-config --static --libs npf lacks $l: $static_libs"
done

# C: npf/version.h and npf/abi.h compile as C; npf_version() links from C.
cat >"$work/version.c" <<'C'
#include <stdio.h>
#include <npf/abi.h>
#include <npf/version.h>
int main(void)
{
    printf("%s %u\n", npf_version(), npf_abi_version());
    return NPF_ABI_VERSION == npf_abi_version() ? 0 : 1;
}
C
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/version" "$work/version.c" $(pkg-config --cflags --libs npf) ||
  fail "a C program with npf/version.h and npf.pc's flags does not build"
out=$(LD_LIBRARY_PATH=$lib "$work/version") || fail "the C program failed: $out"
[ "$out" = "$NPF_VERSION $abi" ] || fail "npf_version() npf_abi_version() from C: '$out', not '$NPF_VERSION $abi'"

# The CMake package.
for f in npfConfig.cmake npfConfigVersion.cmake npfTargets.cmake npfStaticTargets.cmake; do
  file_at "$lib/cmake/npf/$f"
done
# C++20 is asked of C++ projects only, by npfConfig.cmake: none in the
# exported targets, where a C-only project on CMake before 3.22 would fail
# on it ("No known features for CXX compiler").
if grep -n 'cxx_std' "$lib/cmake/npf/npfTargets.cmake" "$lib/cmake/npf/npfStaticTargets.cmake"; then
  fail "the exported targets require a C++ standard of every consumer, C-only ones too"
fi
# features LANGUAGES [LATE]: npf::npf's INTERFACE_COMPILE_FEATURES as a
# project of those languages sees them at the end of its configuration (LATE:
# it enables C++ only after find_package).
features() {
  local dir=$work/features-$1${2:+-late}
  mkdir -p "$dir"
  {
    echo "cmake_minimum_required(VERSION 3.20)"
    echo "project(npf_features LANGUAGES $1)"
    echo "find_package(npf CONFIG REQUIRED)"
    [ -z "${2:-}" ] || echo "enable_language(CXX)"
    echo 'function(show)'
    echo '  get_target_property(f npf::npf INTERFACE_COMPILE_FEATURES)'
    echo '  message(STATUS "npf::npf features: [${f}]")'
    echo 'endfunction()'
    echo 'cmake_language(DEFER CALL show)'
  } >"$dir/CMakeLists.txt"
  cmake -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$root$NPF_PREFIX" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; fail "a $1 project with find_package(npf) does not configure"; }
  sed -n 's/^-- npf::npf features: \[\(.*\)\]$/\1/p' "$dir/configure.log"
}
got=$(features C)
[ "$got" = "f-NOTFOUND" ] || fail "npf::npf asks compile features of a C-only project: '$got'"
got=$(features CXX)
[ "$got" = "cxx_std_20" ] || fail "npf::npf does not ask C++20 of a C++ project: '$got'"
got=$(features C late)
[ "$got" = "cxx_std_20" ] || fail "npf::npf does not ask C++20 of a project that enables C++ after find_package: '$got'"

# A C-only project (consumer_c/, C11 -pedantic -Werror) with find_package(npf)
# and npf::npf: configures without C++, builds, links the staged libnpf.so
# and loads it (its usage message, exit 2, needs no npfd).
consumer=$work/consumer_c
cmake -S "$(dirname "$0")/consumer_c" -B "$consumer" -DNPF_FIND=package -DCMAKE_PREFIX_PATH="$root$NPF_PREFIX" \
  >"$work/consumer_c.configure.log" 2>&1 ||
  { cat "$work/consumer_c.configure.log" >&2; fail "configuring consumer_c with find_package(npf) failed"; }
if grep -q '^CMAKE_CXX_COMPILER:' "$consumer/CMakeCache.txt"; then
  fail "consumer_c (project LANGUAGES C) has a C++ compiler configured"
fi
cmake --build "$consumer" --verbose >"$work/consumer_c.build.log" 2>&1 ||
  { cat "$work/consumer_c.build.log" >&2; fail "building consumer_c against npf::npf failed"; }
if grep -E -- '-std=(c|gnu)\+\+' "$work/consumer_c.build.log"; then
  fail "consumer_c was compiled with a C++ standard flag"
fi
libs=$(LD_LIBRARY_PATH=$lib ldd "$consumer/consumer")
grep -qF "$lib/libnpf.so" <<<"$libs" || fail "consumer_c does not load the staged libnpf.so: $libs"
rc=0
LD_LIBRARY_PATH=$lib "$consumer/consumer" >"$work/consumer_c.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q '^usage: consumer' "$work/consumer_c.out" ||
  fail "consumer_c without arguments exited $rc, not 2 with its usage: $(cat "$work/consumer_c.out")"
note "consumer_c: a C-only CMake project links npf::npf"

# The programs: --version; npf-recv runs against the staged libnpf.so.0.
for p in "$NPF_SBINDIR/npfctl" "$NPF_SBINDIR/npfd" "$NPF_SBINDIR/npf-cni"; do
  file_at "$root$p"
  want="$(basename "$p") $NPF_VERSION (npf ABI $abi)"
  got=$("$root$p" --version) || fail "$p --version failed"
  [ "$got" = "$want" ] || fail "$p --version says '$got', not '$want'"
done
recv=$root$NPF_BINDIR/npf-recv
file_at "$recv"
libs=$(LD_LIBRARY_PATH=$lib ldd "$recv")
grep -qF "libnpf.so.$major => $lib/libnpf.so.$major" <<<"$libs" ||
  fail "npf-recv does not load the staged libnpf.so.$major: $libs"
help=$(LD_LIBRARY_PATH=$lib "$recv" --help) || fail "npf-recv --help failed"
if grep -q -- --version <<<"$help"; then
  got=$(LD_LIBRARY_PATH=$lib "$recv" --version) || fail "npf-recv --version failed"
  [ "$got" = "npf-recv $NPF_VERSION (npf ABI $abi)" ] || fail "npf-recv --version says '$got'"
fi

# The BPF object, npfd's unit (not enabled: no .wants link) and sample config.
file_at "$lib/npf/npf_xdp.bpf.o"
grep -q 'Machine: *Linux BPF' <<<"$(readelf -h "$lib/npf/npf_xdp.bpf.o")" || fail "npf_xdp.bpf.o is not a BPF object"
unit=$root$NPF_PREFIX/lib/systemd/system/npfd.service
file_at "$unit"
grep -qx "ExecStart=$NPF_SBINDIR/npfd --config /etc/npf/npfd.json --foreground" "$unit" ||
  fail "npfd.service's ExecStart is not the installed npfd: $(grep ExecStart "$unit")"
grep -qx "Documentation=file://$NPF_DOCDIR/cli.md" "$unit" || fail "npfd.service's Documentation is not the installed cli.md"
file_at "$root$NPF_DOCDIR/cli.md"
wants=$(find "$root" -path '*.wants*')
[ -z "$wants" ] || fail "the install enables a unit: $wants"
file_at "$root$NPF_DOCDIR/examples/npfd.json"
file_at "$root$NPF_DOCDIR/operations.md"
file_at "$root$NPF_DOCDIR/copyright"
file_at "$root$NPF_DOCDIR/LICENSES/GPL-2.0-only.txt"
note "PASS"
