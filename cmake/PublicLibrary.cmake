# The installed form of an in-tree library. The tools and unit tests link the in-tree
# library, whose internal functions (stripe_*, crc32c_*, vb_*) are global so that tests
# can reach them; what other programs link exports only the ds_ API. ds_ is kept for the
# names the installed headers declare (tests/integration/library_symbols.sh checks both
# ways), so a private function shared between files has no ds_ prefix:
#   ${target}_static  a static archive of one object, partially linked from the library's
#                     objects, in which objcopy has made every symbol but ds_* local;
#   ${target}_shared  a shared library whose version script exports only ds_*.
# Both are named lib${target} on disk and go into the export set dragstripTargets as
# ds::${target} and ds::${target}_shared.
#
# ds_public_library(TARGET [DEFINES d...] STATIC_LINK l... SHARED_LINK l...)
#   DEFINES      compile definitions the public headers depend on
#   STATIC_LINK  what a program linking the static archive must link too
#   SHARED_LINK  what the shared library itself links
function(ds_public_library target)
  cmake_parse_arguments(P "" "" "DEFINES;STATIC_LINK;SHARED_LINK" ${ARGN})
  set(merged ${CMAKE_CURRENT_BINARY_DIR}/${target}_merged.o)
  set(public ${CMAKE_CURRENT_BINARY_DIR}/${target}_public.o)
  add_custom_command(OUTPUT ${public}
    COMMAND ${CMAKE_LINKER} -r -o ${merged} $<TARGET_OBJECTS:${target}>
    COMMAND ${CMAKE_OBJCOPY} --wildcard --keep-global-symbol=ds_* ${merged} ${public}
    DEPENDS ${target} $<TARGET_OBJECTS:${target}>
    COMMAND_EXPAND_LISTS
    COMMENT "lib${target}.a: keeping only the ds_ symbols global")
  add_library(${target}_static STATIC ${public})
  add_library(${target}_shared SHARED $<TARGET_OBJECTS:${target}>)
  foreach(lib ${target}_static ${target}_shared)
    set_target_properties(${lib} PROPERTIES OUTPUT_NAME ${target} LINKER_LANGUAGE C
      ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/public
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/public)
    target_include_directories(${lib} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_compile_definitions(${lib} INTERFACE ${P_DEFINES})
  endforeach()
  set_target_properties(${target}_static PROPERTIES EXPORT_NAME ${target})
  target_link_libraries(${target}_static INTERFACE ${P_STATIC_LINK})
  set_target_properties(${target}_shared PROPERTIES EXPORT_NAME ${target}_shared
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/ds_symbols.map
    INSTALL_RPATH "$ORIGIN") # libdsstripe.so finds libdragstrip.so beside it
  target_link_options(${target}_shared PRIVATE
    -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/ds_symbols.map)
  target_link_libraries(${target}_shared PUBLIC ${P_SHARED_LINK})
  install(TARGETS ${target}_static ${target}_shared EXPORT dragstripTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# ds_pkg_config(NAME): configures NAME.pc.in beside the caller into an installed NAME.pc
# whose prefix is found from the file's own place (${pcfiledir}), so an installed tree
# can move.
function(ds_pkg_config name)
  file(RELATIVE_PATH DS_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
       ${CMAKE_INSTALL_PREFIX})
  string(REGEX REPLACE "/$" "" DS_PC_TO_PREFIX "${DS_PC_TO_PREFIX}")
  configure_file(${name}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${name}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${name}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
