# Audit trail: event model, hash chain, secret redaction, SQLite store, log.
find_package(SQLite3 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(OpenSSL REQUIRED)

target_sources(zn_broker PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/audit_event.cpp
  ${CMAKE_CURRENT_LIST_DIR}/audit_chain.cpp
  ${CMAKE_CURRENT_LIST_DIR}/audit_redact.cpp
  ${CMAKE_CURRENT_LIST_DIR}/audit_store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/audit_log.cpp)
target_link_libraries(zn_broker PUBLIC
  SQLite::SQLite3 nlohmann_json::nlohmann_json OpenSSL::Crypto Threads::Threads)
