# Governed DNS responder (namespace zn::dns): ldns for the wire format,
# c-ares for upstream resolution, standalone Asio for the event loop.
pkg_check_modules(LDNS REQUIRED IMPORTED_TARGET GLOBAL ldns)
pkg_check_modules(CARES REQUIRED IMPORTED_TARGET GLOBAL libcares)
find_package(spdlog REQUIRED)

target_sources(zn_userspace PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/net/address.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dns/static_resolver.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dns/ares_resolver.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dns/message.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dns/query_handler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/net/transparent_socket.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dns/responder.cpp)
# ASIO_STANDALONE: the header-only standalone Asio (libasio-dev), no Boost.
target_compile_definitions(zn_userspace PRIVATE ASIO_STANDALONE ASIO_NO_DEPRECATED)
target_link_libraries(zn_userspace PUBLIC Threads::Threads
  PRIVATE PkgConfig::LDNS PkgConfig::CARES spdlog::spdlog)
