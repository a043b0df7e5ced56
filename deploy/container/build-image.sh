#!/usr/bin/env bash
# Builds the npf runtime image (deploy/container/Containerfile) with podman,
# offline except for Debian's package mirror:
#   1. the Debian package: scripts/package.sh (or --deb FILE);
#   2. a base root from Debian packages: mmdebstrap --variant=essential with
#      the package's Depends included, imported with `podman import` as
#      localhost/npf/base:bookworm-<hash of the package list> (kept: a rerun
#      with the same dependencies reuses it);
#   3. podman build on that base with --network=none.
# With --base IMAGE (e.g. docker.io/library/debian:bookworm-slim) step 2 is
# skipped and the build takes the dependencies from the base's apt sources.
# Tags localhost/npf/npf:<version> and prints its size; the last line is the
# image's name.
#
# Usage: deploy/container/build-image.sh [--deb FILE] [--base IMAGE]
#            [--mirror URL] [--work DIR] [--tag NAME]
#   --mirror  Debian mirror for mmdebstrap (default http://deb.debian.org/debian;
#             NPF_DEBIAN_MIRROR too)
#   --work    where the package build and the base root go (default build-image)
# podman's settings are the machine's; CONTAINERS_CONF and
# CONTAINERS_STORAGE_CONF select others (tests/container does).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)

deb="" base="" work=build-image tag=""
mirror=${NPF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
usage() { sed -n '/^# Usage:/,/^# podman/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --deb) deb=${2:?--deb FILE}; shift 2 ;;
    --base) base=${2:?--base IMAGE}; shift 2 ;;
    --mirror) mirror=${2:?--mirror URL}; shift 2 ;;
    --work) work=${2:?--work DIR}; shift 2 ;;
    --tag) tag=${2:?--tag NAME}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "build-image: unknown argument: $1" >&2; usage ;;
  esac
done
say() { echo "build-image: $*" >&2; }
die() { say "$*"; exit 1; }
for tool in podman dpkg-deb; do
  command -v "$tool" >/dev/null || die "$tool not found (apt install podman runc; scripts/deps.sh installs it)"
done
mkdir -p "$work"
work=$(cd "$work" && pwd)

# 1. The package.
if [ -z "$deb" ]; then
  say "building the Debian package in $work/package (scripts/package.sh) ..."
  "$src/scripts/package.sh" "$work/package" >"$work/package.log" 2>&1 ||
    { tail -n 40 "$work/package.log" >&2; die "scripts/package.sh failed (log: $work/package.log)"; }
  deb=$(tail -n 1 "$work/package.log")
fi
[ -f "$deb" ] || die "no package at $deb"
version=$(dpkg-deb -f "$deb" Version)
tag=${tag:-localhost/npf/npf:$version}
say "package: $deb ($(stat -c %s "$deb") bytes, version $version)"

# 2. The base, unless one was named.
if [ -z "$base" ]; then
  command -v mmdebstrap >/dev/null || die "mmdebstrap not found (apt install mmdebstrap)"
  # The package's Depends without versions or alternatives: "libbpf1 (>= 1:0.7.0), libc6 ..." -> "libbpf1,libc6,..."
  depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g' | grep -v '^$' | sort -u | paste -sd, -)
  base=localhost/npf/base:bookworm-$(printf '%s\n%s\n' "$depends" "$mirror" | sha256sum | cut -c1-12)
  if podman image exists "$base"; then
    say "base: $base (exists; its packages: $depends)"
  else
    say "base: mmdebstrap --variant=essential bookworm from $mirror with $depends (a few minutes) ..."
    # --mode=root as root, else unshare (mmdebstrap's rootless mode).
    mode=unshare; [ "$(id -u)" -eq 0 ] && mode=root
    rm -f "$work/base.tar"
    mmdebstrap --mode=$mode --variant=essential --include="$depends" \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
      bookworm "$work/base.tar" "$mirror" >"$work/mmdebstrap.log" 2>&1 ||
      { tail -n 30 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed (log: $work/mmdebstrap.log)"; }
    # An imported root has no image config: without PATH no command is found.
    podman import --quiet --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      "$work/base.tar" "$base" >/dev/null || die "podman import $work/base.tar failed"
    rm -f "$work/base.tar"
    say "base: $base imported"
  fi
  network=(--network=none --pull=never)
else
  network=(--pull=missing)
fi

# 3. The image.
ctx=$work/context
rm -rf "$ctx" && mkdir -p "$ctx"
cp "$deb" "$ctx/npf.deb"
say "podman build $tag on $base ..."
podman build --quiet "${network[@]}" -f "$src/deploy/container/Containerfile" \
  --build-arg BASE="$base" --build-arg VERSION="$version" -t "$tag" "$ctx" >"$work/build.log" 2>&1 ||
  { tail -n 30 "$work/build.log" >&2; die "podman build failed (log: $work/build.log)"; }
rm -rf "$ctx"
size=$(podman image inspect --format '{{.Size}}' "$tag")
say "image $tag: $((size / 1000000)) MB ($size bytes)"
echo "$tag"
