# The CMake package of the installed libraries: find_package(dragstrip [COMPONENTS stripe])
# gives ds::dragstrip (static) and ds::dragstrip_shared, and with the stripe component
# ds::dsstripe and ds::dsstripe_shared.
include(CMakePackageConfigHelpers)
set(DS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dragstrip)
install(EXPORT dragstripTargets NAMESPACE ds:: DESTINATION ${DS_CMAKE_DIR})
configure_package_config_file(cmake/dragstripConfig.cmake.in
  ${CMAKE_BINARY_DIR}/dragstripConfig.cmake INSTALL_DESTINATION ${DS_CMAKE_DIR})
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/dragstripConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/dragstripConfig.cmake
  ${CMAKE_BINARY_DIR}/dragstripConfigVersion.cmake DESTINATION ${DS_CMAKE_DIR})
