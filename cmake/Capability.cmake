# One static library per capability folder of src/ (issue 10).
#
#   zn_capability(<target> SOURCES ... [PUBLIC deps...] [PRIVATE deps...])
#
# called from the folder's own CMakeLists.txt. Sources include each other and
# lower capabilities by their path under src/ ("userspace/net/address.h"). A
# target exports only its own folder: the include root it publishes is a
# staging directory under the build tree holding one symlink,
# <stage>/<folder> -> the folder, so a file can only include headers of the
# capabilities it links. An include from a folder that is not a declared
# dependency fails to compile, and scripts/check_includes.py keeps the
# declared dependencies pointing downward.
function(zn_capability target)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "zn_capability(${target}): no SOURCES")
  endif()
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  set(stage ${PROJECT_BINARY_DIR}/include/${target})
  get_filename_component(parent ${stage}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${stage}/${folder} SYMBOLIC)

  add_library(${target} STATIC ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC ${stage})
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC} PRIVATE ${ARG_PRIVATE})
endfunction()
