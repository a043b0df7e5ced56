#!/usr/bin/env bash
# The Debian package: scripts/package.sh builds it (a Release build of its own
# in tests/install/deb-build of this build tree, kept between runs so that a
# rerun only rebuilds what changed; one run at a time uses it); its control
# fields (Depends from dpkg-shlibdeps) and files; no maintainer script
# enables or starts npfd. Then it is installed with apt-get into a fresh
# Debian 12 root made by mmdebstrap (in the temporary directory), where
# npfctl, npfd and npf-recv run --version / --help and npfd.service is
# installed but disabled. The mirrors are the host's (deb.debian.org);
# NPF_DEBIAN_MIRROR and NPF_DEBIAN_SECURITY_MIRROR override them.
source "$(dirname "$0")/common.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (mmdebstrap --mode=root, chroot)"
need dpkg-deb dpkg
need dpkg-shlibdeps dpkg-dev
need mmdebstrap mmdebstrap
need flock util-linux

mirror=${NPF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${NPF_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
abi=$(sed -n 's/^#define NPF_ABI_VERSION \([0-9]*\)$/\1/p' "$NPF_SOURCE_DIR/include/npf/abi.h")

deb=$(debian_package) || exit 1

# Control fields.
dpkg-deb -I "$deb" >"$work/info" || fail "dpkg-deb -I $deb failed"
sed 's/^/  /' "$work/info"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = npf ] || fail "Package is not npf"
[ "$(field Version)" = "$NPF_VERSION" ] || fail "Version is not $NPF_VERSION"
for f in Maintainer Section Description Installed-Size; do
  [ -n "$(field "$f")" ] || fail "no $f field"
done
depends=$(field Depends)
dpkg-deb -f "$deb" Depends | tr ',' '\n' | awk '{print $1}' >"$work/depends"
for p in libbpf1 libxdp1 libsystemd0 libstdc++6 libc6; do
  grep -qxF "$p" "$work/depends" || fail "Depends lacks $p: $depends"
done
grep -q npf "$work/depends" && fail "Depends names the package itself: $depends"

# Files.
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/files"
lib=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for f in /usr/sbin/npfctl /usr/sbin/npfd /usr/sbin/npf-cni /usr/bin/npf-recv "$lib/libnpf.so.$NPF_VERSION" "$lib/libnpf.so.0" \
         "$lib/libnpf.so" "$lib/libnpf.a" /usr/include/npf/engine.h /usr/include/npf/version.h \
         "$lib/cmake/npf/npfConfig.cmake" "$lib/pkgconfig/npf.pc" "$lib/npf/npf_xdp.bpf.o" \
         /usr/lib/systemd/system/npfd.service /usr/share/doc/npf/examples/npfd.json /usr/share/doc/npf/copyright; do
  grep -qx -- "$f" "$work/files" || fail "the package has no $f"
done
grep -q '\.wants/' "$work/files" && fail "the package enables a unit: $(grep '\.wants/' "$work/files")"

# Maintainer scripts: none that enables or starts anything.
dpkg-deb -e "$deb" "$work/control"
note "control files: $(cd "$work/control" && echo *)"
for s in preinst postinst prerm postrm; do
  [ -f "$work/control/$s" ] || continue
  grep -Eq 'systemctl +(enable|start|restart)|deb-systemd-helper +enable|invoke-rc.d' "$work/control/$s" &&
    fail "$s enables or starts a service:"$'\n'"$(cat "$work/control/$s")"
done

# Install it into a clean Debian 12 and run the programs there.
chroot=$work/root
# mmdebstrap unmounts what it mounted; after a kill, whatever is left must go
# before the directory is removed.
at_exit "findmnt -Rrno TARGET '$chroot' 2>/dev/null | sort -r | xargs -r -n1 umount -l"
note "mmdebstrap bookworm from $mirror, then apt-get install ./$(basename "$deb")"
if ! mmdebstrap --mode=root --variant=apt \
    --customize-hook="copy-in $deb /tmp" \
    --customize-hook="chroot \"\$1\" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/$(basename "$deb")" \
    --customize-hook="chroot \"\$1\" npfctl --version > $work/npfctl.version" \
    --customize-hook="chroot \"\$1\" npfd --version > $work/npfd.version" \
    --customize-hook="chroot \"\$1\" npf-recv --help > $work/npf-recv.help" \
    bookworm "$chroot" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main" >"$work/mmdebstrap.log" 2>&1; then
  tail -n 40 "$work/mmdebstrap.log" >&2
  if grep -Eq "Failed to fetch|Could not resolve|Temporary failure|Connection failed|Unable to connect" \
      "$work/mmdebstrap.log"; then
    fail "mmdebstrap could not download Debian 12 from $mirror (mirror unreachable? set NPF_DEBIAN_MIRROR)"
  fi
  fail "mmdebstrap, or installing the package into its Debian 12 root, failed (log above)"
fi
grep -A3 "Setting up npf " "$work/mmdebstrap.log" | sed 's/^/  /' || true
for p in npfctl npfd; do
  [ "$(cat "$work/$p.version")" = "$p $NPF_VERSION (npf ABI $abi)" ] ||
    fail "$p --version in the Debian 12 root: '$(cat "$work/$p.version")'"
done
grep -q 'Usage:' "$work/npf-recv.help" || fail "npf-recv --help in the Debian 12 root printed no usage"
[ -f "$chroot/usr/lib/systemd/system/npfd.service" ] || fail "npfd.service is not installed in the Debian 12 root"
state=$(systemctl --root="$chroot" is-enabled npfd.service 2>&1 || true)
[ "$state" = disabled ] || fail "npfd.service is '$state' after installing the package, not disabled"
note "installed in Debian 12: $(cat "$work/npfctl.version"), $(cat "$work/npfd.version"), npfd.service $state"
note "PASS"
