# The Debian package: `cpack -G DEB` in a build tree gives dragstrip_VERSION_ARCH.deb with
# everything `cmake --install` installs (tools, man pages, the libraries with their CMake
# and pkg-config files) under /usr, and what an administrator needs to run xftpd: its
# systemd unit, /etc/xftpd.conf and a logrotate snippet. Those three have absolute
# destinations, so they are a component of their own left out of a plain `cmake
# --install`, which must never write to /etc of the machine that builds.
set(DS_DEB_DIR ${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian)
install(FILES ${DS_DEB_DIR}/xftpd.service DESTINATION /lib/systemd/system
  COMPONENT system EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/docs/xftpd.conf.example DESTINATION /etc
  RENAME xftpd.conf COMPONENT system EXCLUDE_FROM_ALL)
install(FILES ${DS_DEB_DIR}/xftpd.logrotate DESTINATION /etc/logrotate.d
  RENAME xftpd COMPONENT system EXCLUDE_FROM_ALL)

set(CPACK_PACKAGE_NAME dragstrip)
set(CPACK_PACKAGE_VENDOR dragstrip)
set(CPACK_PACKAGE_CONTACT "dragstrip maintainers <maintainers@dragstrip.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "tools that move bytes as fast as a machine allows: ttcp, blast/sink, stripe, xftp/xftpd, tach")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# One package holding every component: the unnamed one (all the install rules without a
# COMPONENT) and the system files above.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified system)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# Depends: from the libraries the built binaries load (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS logrotate)
# conffiles: kept when the package is removed, and asked about on an upgrade once
# changed. The scripts run ldconfig (the package holds shared libraries) and tell a
# running systemd of the unit.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${DS_DEB_DIR}/conffiles ${DS_DEB_DIR}/postinst
  ${DS_DEB_DIR}/prerm ${DS_DEB_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
