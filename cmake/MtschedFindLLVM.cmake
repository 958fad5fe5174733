# Finds LLVM 19 or newer (its CMake package) and checks the version.
#
# LLVM's version file accepts only an exact major.minor match, so no version
# is asked of find_package; instead, when the user has not chosen an LLVM
# (LLVM_DIR or LLVM_ROOT, as a CMake or environment variable), the newest
# LLVM >= 19 is hinted: the llvm-config named by MTSCHED_LLVM_CONFIG (as the
# scripts do), else the newest of llvm-config-NN / llvm-config on PATH and
# /usr/lib/llvm-NN/bin/llvm-config. Debian keeps several LLVMs side by side,
# and CMake's own search could otherwise pick an older one first.

set(MTSCHED_MIN_LLVM_MAJOR 19)

function(mtsched_llvm_hint out)
  set(candidates)
  if(DEFINED ENV{MTSCHED_LLVM_CONFIG})
    set(candidates "$ENV{MTSCHED_LLVM_CONFIG}")
  else()
    set(dirs $ENV{PATH})
    if(NOT CMAKE_HOST_WIN32)
      string(REPLACE ":" ";" dirs "${dirs}")
    endif()
    file(GLOB llvm_bins LIST_DIRECTORIES true /usr/lib/llvm-[0-9]*/bin)
    foreach(dir IN LISTS dirs llvm_bins)
      file(GLOB found "${dir}/llvm-config-[0-9]*" "${dir}/llvm-config")
      list(APPEND candidates ${found})
    endforeach()
  endif()

  set(best_version 0)
  set(best_cmakedir "")
  foreach(config IN LISTS candidates)
    execute_process(COMMAND "${config}" --version
      OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE rc ERROR_QUIET)
    if(NOT rc EQUAL 0 OR NOT version MATCHES "^([0-9]+)\\.[0-9]+")
      continue()
    endif()
    if(CMAKE_MATCH_1 LESS MTSCHED_MIN_LLVM_MAJOR OR NOT version VERSION_GREATER best_version)
      continue()
    endif()
    execute_process(COMMAND "${config}" --cmakedir
      OUTPUT_VARIABLE cmakedir OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND EXISTS "${cmakedir}/LLVMConfig.cmake")
      set(best_version "${version}")
      set(best_cmakedir "${cmakedir}")
    endif()
  endforeach()
  if(DEFINED ENV{MTSCHED_LLVM_CONFIG} AND NOT best_cmakedir)
    message(FATAL_ERROR "MTSCHED_LLVM_CONFIG='$ENV{MTSCHED_LLVM_CONFIG}' is not the "
                        "llvm-config of an LLVM ${MTSCHED_MIN_LLVM_MAJOR} or newer")
  endif()
  set(${out} "${best_cmakedir}" PARENT_SCOPE)
endfunction()

set(_mtsched_llvm_hint "")
if(NOT LLVM_DIR AND NOT LLVM_ROOT AND NOT DEFINED ENV{LLVM_DIR}
   AND NOT DEFINED ENV{LLVM_ROOT})
  mtsched_llvm_hint(_mtsched_llvm_hint)
endif()
# Where CMake globs (e.g. /usr/lib/llvm-*), newest first.
if(NOT DEFINED CMAKE_FIND_PACKAGE_SORT_ORDER)
  set(CMAKE_FIND_PACKAGE_SORT_ORDER NATURAL)
  set(CMAKE_FIND_PACKAGE_SORT_DIRECTION DEC)
endif()

find_package(LLVM REQUIRED CONFIG HINTS ${_mtsched_llvm_hint})
if(LLVM_VERSION_MAJOR LESS MTSCHED_MIN_LLVM_MAJOR)
  message(FATAL_ERROR
    "mtsched needs LLVM ${MTSCHED_MIN_LLVM_MAJOR} or newer; found "
    "${LLVM_PACKAGE_VERSION} in ${LLVM_DIR}. Point LLVM_DIR at a newer one, "
    "e.g. -DLLVM_DIR=$(llvm-config-${MTSCHED_MIN_LLVM_MAJOR} --cmakedir), "
    "in a fresh build directory")
endif()
message(STATUS "Using LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")
