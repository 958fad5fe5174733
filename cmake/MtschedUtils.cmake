# Helpers shared by the CMakeLists.txt files.

# Sets OUT to every target of TYPE (STATIC_LIBRARY, EXECUTABLE, ...) defined
# in DIR and the directories below it, so that install rules and
# check-mtsched pick up new libraries and test binaries on their own. DIR
# must have been added (add_subdirectory) already.
function(mtsched_collect_targets out dir type)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  set(result)
  foreach(target IN LISTS targets)
    get_target_property(target_type ${target} TYPE)
    if(target_type STREQUAL type)
      list(APPEND result ${target})
    endif()
  endforeach()
  foreach(subdir IN LISTS subdirs)
    mtsched_collect_targets(sub_result "${subdir}" ${type})
    list(APPEND result ${sub_result})
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()
