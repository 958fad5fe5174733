# Install rules: the tools, the public headers (with the generated
# mtsched/Config/Version.h) and the static libraries, exported for
# find_package(mtsched) as mtsched::<Name> (MtschedIR -> mtsched::IR):
#
#   <prefix>/bin/mtsched-opt, mtsched-lab, mtsched-calibrate
#   <prefix>/include/mtsched/...
#   <prefix>/lib/libMtsched*.a
#   <prefix>/lib/mtsched/libmtsched_mpi.so (the MPI plugin, when built with
#     MPI: lib/Runtime/CMakeLists.txt installs it)
#   <prefix>/lib/cmake/mtsched/mtschedConfig.cmake (+ Version, Targets)
#
# Included from the top-level CMakeLists.txt after lib/ and tools/; every
# library under lib/ and every executable under tools/ is picked up.
include(CMakePackageConfigHelpers)

set(MTSCHED_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mtsched)

mtsched_collect_targets(MTSCHED_LIBRARIES ${PROJECT_SOURCE_DIR}/lib STATIC_LIBRARY)
# Libraries for the build's own tests (MtschedRuntimeMpi) stay out.
foreach(lib IN LISTS MTSCHED_LIBRARIES)
  get_target_property(no_install ${lib} MTSCHED_NO_INSTALL)
  if(no_install)
    list(REMOVE_ITEM MTSCHED_LIBRARIES ${lib})
  endif()
endforeach()
mtsched_collect_targets(MTSCHED_TOOLS ${PROJECT_SOURCE_DIR}/tools EXECUTABLE)

foreach(lib IN LISTS MTSCHED_LIBRARIES)
  string(REGEX REPLACE "^Mtsched" "" name ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${name})
  # The same names inside this build, for a project that adds mtsched with
  # add_subdirectory instead of find_package.
  add_library(mtsched::${name} ALIAS ${lib})
  # The build tree's include directories are global (include_directories);
  # a consumer gets the installed ones from the target.
  target_include_directories(${lib} INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(NOT LLVM_ENABLE_RTTI)
    target_compile_options(${lib} INTERFACE $<INSTALL_INTERFACE:-fno-rtti>)
  endif()
endforeach()

install(TARGETS ${MTSCHED_LIBRARIES} ${MTSCHED_TOOLS}
  EXPORT mtschedTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mtsched
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(FILES ${PROJECT_BINARY_DIR}/include/mtsched/Config/Version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mtsched/Config)

install(EXPORT mtschedTargets
  NAMESPACE mtsched::
  DESTINATION ${MTSCHED_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mtschedConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/mtschedConfig.cmake
  INSTALL_DESTINATION ${MTSCHED_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/mtschedConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/mtschedConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/mtschedConfigVersion.cmake
  DESTINATION ${MTSCHED_INSTALL_CMAKEDIR})
