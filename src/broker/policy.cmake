find_package(nlohmann_json REQUIRED)
target_sources(zn_broker PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/compiled_policy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/datapath_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_pattern.cpp
  ${CMAKE_CURRENT_LIST_DIR}/path_pattern.cpp
  ${CMAKE_CURRENT_LIST_DIR}/policy_parser.cpp)
target_link_libraries(zn_broker PUBLIC nlohmann_json::nlohmann_json)
target_sources(zn_broker PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/session_registry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/session_state_file.cpp)
