# ZN_SANITIZE (set in the top CMakeLists.txt): builds every C and C++ target
# under sanitizers, for scripts/sanitize.sh. Values:
#   ""                   none (the default)
#   "address,undefined"  ASan + UBSan; any UBSan finding aborts, so a test fails
#                        rather than printing a warning nobody reads
#   "thread"             TSan (cannot be combined with ASan)
# The BPF objects are not affected: cmake/BpfObject.cmake compiles them with
# its own clang command for the bpf target, which these options never reach.
# Must be included before any add_subdirectory: add_compile_options applies to
# the targets defined after it.
set(_zn_sanitize_values "" "address,undefined" "thread")
set_property(CACHE ZN_SANITIZE PROPERTY STRINGS ${_zn_sanitize_values})
if(NOT ZN_SANITIZE IN_LIST _zn_sanitize_values)
  message(FATAL_ERROR "ZN_SANITIZE=${ZN_SANITIZE}: one of '', 'address,undefined', 'thread'")
endif()

if(ZN_SANITIZE STREQUAL "")
  return()
endif()
if(ZN_FUZZ)
  # The fuzz targets bring their own -fsanitize=fuzzer,address,undefined.
  message(FATAL_ERROR "ZN_SANITIZE and ZN_FUZZ are separate builds (scripts/sanitize.sh, scripts/fuzz.sh)")
endif()

set(_zn_sanitize_flags -fsanitize=${ZN_SANITIZE})
if(ZN_SANITIZE STREQUAL "address,undefined")
  list(APPEND _zn_sanitize_flags -fno-sanitize-recover=undefined)
endif()
# Frame pointers: whole stacks in reports (the fast unwinder follows them).
add_compile_options(${_zn_sanitize_flags} -fno-omit-frame-pointer)
add_link_options(${_zn_sanitize_flags})
# ASan+UBSan executables linked as position-dependent: as PIEs, the metadata
# the instrumentation emits (global descriptors, UBSan type and source
# records) is millions of relative relocations, 77 MB in proxy_tests, applied
# at every start: 0.58 s per test process against 0.32 s without, and ctest
# starts one process per test (some 1,300 in the ASan run). ASan and LSan work
# the same on either.
if(ZN_SANITIZE STREQUAL "address,undefined")
  add_link_options(-no-pie)
endif()
# GCC's flow-based warnings misfire on sanitizer-instrumented code (the GCC
# manual: "sanitizers tend to increase the rate of false positive warnings,
# most notably those around -Wmaybe-uninitialized"). Seen with GCC 12 under
# ZN_WERROR: maybe-uninitialized inside std::regex, and mismatched-new-delete
# on Asio's coroutine frames (aligned_alloc paired with the frame's own
# operator delete, which frees them with free). The normal build keeps both.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-Wno-maybe-uninitialized $<$<COMPILE_LANGUAGE:CXX>:-Wno-mismatched-new-delete>)
  # -Wtsan: TSan does not model std::atomic_thread_fence, and Asio's
  # handler invocation uses one (asio/detail/std_fenced_block.hpp). Our code
  # uses none, and Asio hands work between threads through mutex-guarded
  # queues, which TSan does see.
  if(ZN_SANITIZE STREQUAL "thread")
    add_compile_options(-Wno-tsan)
  endif()
endif()
