# Transparent TLS proxy (namespace zn::proxy). ClientHello peeking uses
# OpenSSL's ClientHello callback over a memory BIO; leaf certificates are
# minted from the deployment CA; guest-facing and upstream TLS contexts.
# HTTP/1.1 (zn::http) is a strict parser of our own: Debian 12 packages no
# well-kept one.
find_package(OpenSSL REQUIRED)
target_sources(zn_userspace PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/proxy/byte_stream.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tls/client_hello.cpp
  ${CMAKE_CURRENT_LIST_DIR}/proxy/destination_guard.cpp
  ${CMAKE_CURRENT_LIST_DIR}/http/body.cpp
  ${CMAKE_CURRENT_LIST_DIR}/http/message.cpp
  ${CMAKE_CURRENT_LIST_DIR}/proxy/intercept.cpp
  ${CMAKE_CURRENT_LIST_DIR}/http/rewrite.cpp
  ${CMAKE_CURRENT_LIST_DIR}/http/target.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tls/leaf_certs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/net/local_addresses.cpp
  ${CMAKE_CURRENT_LIST_DIR}/net/prefix.cpp
  ${CMAKE_CURRENT_LIST_DIR}/proxy/secret_scrubber.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tls/contexts.cpp
  ${CMAKE_CURRENT_LIST_DIR}/proxy/transparent_proxy.cpp)
target_link_libraries(zn_userspace PUBLIC OpenSSL::SSL OpenSSL::Crypto)
# net/local_addresses.cpp: the kernel's local table and addresses, over netlink.
target_link_libraries(zn_userspace PRIVATE PkgConfig::LIBNL)
