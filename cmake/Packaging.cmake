# The Debian package, built by CPack (scripts/package.sh runs it):
#
#   cpack --config build/CPackConfig.cmake      # -> mtsched_<version>_amd64.deb
#
# It holds everything `cmake --install` installs (MtschedInstall.cmake: the
# tools, the headers, the static libraries, the CMake package, the MPI
# plugin) and, from here, the PyTorch importer (python/mtsched_torch in
# Python's dist-packages, scripts/mtsched-import as bin/mtsched-import), the
# examples (share/mtsched/examples) and the docs (share/doc/mtsched, with
# LICENSE as Debian's copyright file). Configure with
# -DCMAKE_INSTALL_PREFIX=/usr so that the paths are Debian's.
#
# Depends lists what the tools need (dpkg-shlibdeps on them, when the
# package is made: libc6, libstdc++6, libgcc-s1, whatever the LLVM linked in
# pulls). Not MPI, whose plugin is opened only by MPI ranks and says so when
# MPI is missing, and not CUDA, NVRTC, cuBLAS or NCCL, which the GPU backend
# opens on demand: those are Suggests.
#
# Included from the top-level CMakeLists.txt after MtschedInstall.

# Debian's python3 reads /usr/lib/python3/dist-packages.
set(MTSCHED_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
  "Where the PyTorch importer (mtsched_torch) is installed, under the prefix")

install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/mtsched_torch
  DESTINATION ${MTSCHED_INSTALL_PYTHONDIR}
  PATTERN "__pycache__" EXCLUDE
  PATTERN "*.pyc" EXCLUDE)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/mtsched-import
  DESTINATION ${CMAKE_INSTALL_BINDIR})
# mtsched-import's helper (which python3 has torch).
install(FILES ${PROJECT_SOURCE_DIR}/scripts/torch-python.sh
  DESTINATION ${CMAKE_INSTALL_DATADIR}/mtsched)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/mtsched/examples)
install(FILES ${PROJECT_SOURCE_DIR}/README.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/
  DESTINATION ${CMAKE_INSTALL_DOCDIR}
  FILES_MATCHING PATTERN "*.md" PATTERN "*.png" PATTERN "*.svg")
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE
  DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mtsched)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "The mtsched developers")
set(CPACK_PACKAGE_CONTACT "The mtsched developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "compiler scheduler and autotuner for ML graphs (mtsched-opt)")
set(CPACK_PACKAGE_DESCRIPTION
  "mtsched reads a textual graph IR, lowers it into buffers with candidate
kernels and collective algorithms, schedules and fuses them, and autotunes
every choice with identical decisions on every rank, on a GPU or on its
simulator. Tools (mtsched-opt, mtsched-lab, mtsched-calibrate), C++
headers, static libraries and a CMake package, the PyTorch importer
(mtsched-import), the MPI ranks' plugin, examples and documentation.
License: Apache-2.0 WITH LLVM-exception.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# Executables and the plugin only (cmake --install --strip); the static
# libraries keep their symbols.
set(CPACK_STRIP_FILES TRUE)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
  "libopenmpi3, openmpi-bin, python3-torch, python3-numpy, llvm-${LLVM_VERSION_MAJOR}-dev")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

# CPack's own CPACK_DEBIAN_PACKAGE_SHLIBDEPS would run dpkg-shlibdeps on the
# MPI plugin too and make Open MPI a dependency: run it on the tools only,
# when the package is made (cpack reads this file then).
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/CPackProjectConfig.cmake CONTENT "
if(CPACK_GENERATOR STREQUAL \"DEB\" AND NOT CPACK_DEBIAN_PACKAGE_DEPENDS)
  set(_dir \"${PROJECT_BINARY_DIR}/CPackShlibdeps\")
  file(MAKE_DIRECTORY \"\${_dir}/debian\")
  file(WRITE \"\${_dir}/debian/control\" \"\")
  execute_process(COMMAND dpkg-shlibdeps -O
      \"-e$<TARGET_FILE:mtsched-opt>\"
      \"-e$<TARGET_FILE:mtsched-lab>\"
      \"-e$<TARGET_FILE:mtsched-calibrate>\"
    WORKING_DIRECTORY \"\${_dir}\"
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES \"shlibs:Depends=([^\\n]*)\")
    message(FATAL_ERROR \"dpkg-shlibdeps failed (apt-get install dpkg-dev): \${_err}\")
  endif()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS \"\${CMAKE_MATCH_1}\")
  message(STATUS \"mtsched: Depends: \${CPACK_DEBIAN_PACKAGE_DEPENDS}\")
endif()
")
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/CPackProjectConfig.cmake)

include(CPack)
