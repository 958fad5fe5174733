# mtsched-bench-presync: the cost of one successful pre-sync, thread ranks
# and (when built with MPI) MPI ranks. Included from bench/CMakeLists.txt.
add_executable(mtsched-bench-presync ${CMAKE_CURRENT_LIST_DIR}/presync.cpp)
if(MTSCHED_ENABLE_MPI)
  target_link_libraries(mtsched-bench-presync PRIVATE MtschedRuntimeMpi)
  target_compile_definitions(mtsched-bench-presync PRIVATE MTSCHED_HAVE_MPI=1)
else()
  target_link_libraries(mtsched-bench-presync PRIVATE MtschedRuntime)
endif()
target_link_libraries(mtsched-bench-presync PRIVATE ${MTSCHED_LLVM_LIBS})
