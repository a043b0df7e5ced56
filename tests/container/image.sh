#!/usr/bin/env bash
# The runtime image (deploy/container/build-image.sh): built from this tree's
# Debian package on a base made from Debian packages (mmdebstrap, podman
# import), with no network during the build. Its programs run in it as the
# image's default user (65534) and print this build's version; the XDP
# object is in it. The other container tests run this image.
source "$(dirname "$0")/../common/shell.sh"
source "$(dirname "$0")/podman.sh"
podman_env
for t in mmdebstrap:mmdebstrap dpkg-deb:dpkg flock:util-linux; do need "${t%%:*}" "${t#*:}"; done

npf_image
[ "$image" = "localhost/npf/npf:$NPF_VERSION" ] || fail "build-image.sh named the image $image"
abi=$(sed -n 's/^#define NPF_ABI_VERSION \([0-9]*\)$/\1/p' "$NPF_SOURCE_DIR/include/npf/abi.h")
run() { podman run --rm --network none --read-only "$image" "$@"; }
[ "$(run id -u)" = 65534 ] || fail "the image's default user is not 65534: $(run id -u)"
for p in npfd npfctl npf-recv npf-cni; do
  v=$(run "$p" --version 2>&1) || fail "$p --version failed in the image: $v"
  case $p in npf-recv) [[ $v == "npf-recv $NPF_VERSION"* ]] ;; *) [ "$v" = "$p $NPF_VERSION (npf ABI $abi)" ] ;; esac ||
    fail "$p --version in the image: '$v'"
  note "in the image: $v"
done
obj=$(run sh -c 'ls /usr/lib/*/npf/npf_xdp.bpf.o') || fail "the image has no npf_xdp.bpf.o"
note "XDP object: $obj"
size=$(podman image inspect --format '{{.Size}}' "$image")
note "image $image: $((size / 1000000)) MB"
note "PASS"
