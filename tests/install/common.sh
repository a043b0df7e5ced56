# Sourced by the install tests: failing with a message, a temporary directory
# ($work) removed at exit with whatever else a test registers (at_exit), and
# staging this build's install. The environment comes from CMakeLists.txt
# (NPF_BUILD_DIR, NPF_PREFIX, NPF_LIBDIR, ...: the build's install paths).
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

# stage DIR: `cmake --install` of this build with DESTDIR=DIR: the files land in
# DIR$NPF_PREFIX, DIR$NPF_LIBDIR, ... (cmake --install also rewrites the build
# tree's install_manifest.txt, as every install does).
stage() {
  DESTDIR="$1" cmake --install "$NPF_BUILD_DIR" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "cmake --install $NPF_BUILD_DIR (DESTDIR=$1) failed"; }
}
