# The Debian package (CPack, DEB): npf_<version>_<arch>.deb with everything
# `cmake --install` installs. scripts/package.sh builds it (prefix /usr).
# Depends comes from dpkg-shlibdeps over the package's binaries; no maintainer
# script enables or starts npfd.service.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME npf)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "network page-fault tolerance for Ethernet: UDP into pageable memory (XDP, AF_XDP, userfaultfd)")
set(CPACK_PACKAGE_DESCRIPTION
    "An XDP program steers each datagram of a flow to an AF_XDP socket: into the\n\
application's ordinary, pageable memory when its pages are resident, else to a\n\
small pinned backup ring while a userfaultfd pager makes them resident.\n\
Contains libnpf (shared and static, headers, CMake and pkg-config files),\n\
npfctl, npfd with its systemd unit (not enabled), npf-recv, and the XDP\n\
program's object file.")
set(NPF_PACKAGE_MAINTAINER "npf maintainers <maintainers@users.noreply.a-seed-f523c492.example>"
    CACHE STRING "the .deb's Maintainer field")
set(NPF_PACKAGE_HOMEPAGE "" CACHE STRING "the .deb's Homepage field (none if empty)")
set(CPACK_PACKAGE_CONTACT "${NPF_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${NPF_PACKAGE_MAINTAINER}")
if(NPF_PACKAGE_HOMEPAGE)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${NPF_PACKAGE_HOMEPAGE}")
endif()
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends: dpkg-shlibdeps (libbpf1, libxdp1, libsystemd0, libstdc++6, libc6, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# A shlibs file for libnpf.so.0 (and the ldconfig trigger), so that
# dpkg-shlibdeps resolves npf-recv's use of it to this package.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_STRIP_FILES ON)
include(CPack)
