# bpf_object(NAME SOURCE [INCLUDES dir...]): compiles SOURCE with clang for the
# BPF target and generates NAME.skel.h with bpftool. Produces an INTERFACE
# library target NAME_skel whose include directory holds the skeleton.
find_program(BPF_CLANG clang REQUIRED)
find_program(BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
execute_process(COMMAND ${CMAKE_C_COMPILER} -print-multiarch
                OUTPUT_VARIABLE ZN_MULTIARCH OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT ZN_MULTIARCH)
  set(ZN_MULTIARCH x86_64-linux-gnu)
endif()

function(bpf_object name source)
  cmake_parse_arguments(ARG "" "" "INCLUDES;DEPENDS" ${ARGN})
  set(out_dir ${CMAKE_BINARY_DIR}/bpf)
  set(obj ${out_dir}/${name}.bpf.o)
  set(skel ${out_dir}/${name}.skel.h)
  set(inc_flags)
  foreach(dir ${ARG_INCLUDES})
    list(APPEND inc_flags -I${dir})
  endforeach()
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
    COMMAND ${BPF_CLANG} -O2 -g -target bpf -Wall -Werror
            -I/usr/include/${ZN_MULTIARCH} ${inc_flags}
            -c ${CMAKE_CURRENT_SOURCE_DIR}/${source} -o ${obj}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${source} ${ARG_DEPENDS}
    COMMENT "BPF ${name}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name} > ${skel}
    DEPENDS ${obj}
    COMMENT "BPF skeleton ${name}"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${out_dir})
endfunction()
