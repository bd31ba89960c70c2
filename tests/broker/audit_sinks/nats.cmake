# The NATS JetStream sink and its reader against a real nats-server started
# by each test on 127.0.0.1 (a free port, a store in a temp dir). No root.
add_executable(nats_sink_tests ${CMAKE_CURRENT_LIST_DIR}/nats_sink_test.cpp)
target_link_libraries(nats_sink_tests PRIVATE zn_audit_sinks zn_gtest_main)
gtest_discover_tests(nats_sink_tests PROPERTIES LABELS unit)
