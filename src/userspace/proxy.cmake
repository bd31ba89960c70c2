# Transparent TLS proxy (namespace zn::proxy). ClientHello peeking uses
# OpenSSL's ClientHello callback over a memory BIO.
find_package(OpenSSL REQUIRED)
target_sources(zn_userspace PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/client_hello.cpp
  ${CMAKE_CURRENT_LIST_DIR}/transparent_proxy.cpp)
target_link_libraries(zn_userspace PUBLIC OpenSSL::SSL OpenSSL::Crypto)
