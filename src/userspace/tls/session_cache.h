// Resumption of upstream TLS sessions: a client context keeps the sessions
// (TLS 1.3 tickets, TLS 1.2 sessions) its connections are given, per name
// and port, and a new connection to the same name and port offers the
// latest one, so it skips the certificate exchange and a round trip of key
// agreement. A session is only offered to the name it was verified for (the
// key is the name the certificate was checked against), and an upstream
// that declines it simply does a full handshake.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <string>

namespace zn::proxy {

// Makes a client context keep its connections' sessions, at most `capacity`
// keys (least recently used dropped). Once per context; the cache goes
// with the context.
void enable_session_resumption(SSL_CTX* ctx, size_t capacity = 1024);

// Before SSL_connect: offers the session kept for `key` ("name:port"), if
// any, and files the session this connection is given under `key`. Does
// nothing on a context without resumption. Thread-safe.
void offer_kept_session(SSL* ssl, const std::string& key);

}  // namespace zn::proxy
