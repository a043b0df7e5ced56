# Sourced by the shell-driven tests (tests/install, tests/container): failing
# with a message, skipping (exit 77), a temporary directory ($work) removed at
# exit with whatever else a test registers (at_exit), and waiting for a line.
set -euo pipefail

name=$(basename "$0" .sh)
fail() { echo "$name: FAIL: $*" >&2; exit 1; }
note() { echo "$name: $*"; }
skip() { echo "$name: SKIPPED: $*"; exit 77; }
need() { command -v "$1" >/dev/null || fail "$1 not found (Debian package $2; scripts/deps.sh installs it)"; }

# Cleanup steps, run last registered first, at any exit (INT and TERM exit too).
cleanups=()
at_exit() { cleanups+=("$1"); }
run_cleanups() {
  local i
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[i]}" || true; done
}
trap run_cleanups EXIT
trap 'exit 130' INT TERM

work=$(mktemp -d "${TMPDIR:-/tmp}/npf-$name.XXXXXX")
at_exit "rm -rf --one-file-system '$work'"

# await_line FILE PID GREP_ARGS...: true once FILE has a line that grep -qs
# GREP_ARGS matches, false if PID exits first or 30 s pass (a ready line, not
# a sleep).
await_line() {
  local file=$1 pid=$2 i
  shift 2
  for ((i = 0; i < 300; i++)); do
    grep -qs "$@" "$file" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -qs "$@" "$file"
}


# debian_package: builds this tree's Debian package with scripts/package.sh (a
# Release build of its own in tests/install/deb-build of this build tree, kept
# between runs so that a rerun only rebuilds what changed; one test at a time
# uses it), copies it into $work and prints its path. Needs NPF_SOURCE_DIR,
# NPF_BUILD_DIR, NPF_VERSION.
debian_package() {
  local pkgbuild=$NPF_BUILD_DIR/tests/install/deb-build deb
  mkdir -p "$(dirname "$pkgbuild")"
  (
    flock 9
    note "building the package in $pkgbuild (scripts/package.sh)" >&2
    "$NPF_SOURCE_DIR/scripts/package.sh" "$pkgbuild" >"$work/package.log" 2>&1 ||
      { tail -n 40 "$work/package.log" >&2; fail "scripts/package.sh failed"; }
    deb=$(tail -n 1 "$work/package.log")
    [ "$(basename "$deb")" = "npf_${NPF_VERSION}_$(dpkg --print-architecture).deb" ] ||
      fail "unexpected package name: $deb"
    cp "$deb" "$work/"
  ) 9>"$pkgbuild.lock" || return 1
  deb=$work/npf_${NPF_VERSION}_$(dpkg --print-architecture).deb
  note "$(basename "$deb"): $(stat -c %s "$deb") bytes" >&2
  echo "$deb"
}
