// What the proxy's relays and exchanges share for socket I/O: one read size
// (a TLS record's worth) and the completion token that returns an error as
// a value instead of throwing it.
#pragma once

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>
#include <cstddef>

namespace zn::proxy {

// One TLS record's plaintext at most (RFC 8446 5.1): a read of this size
// hands the codec at most one record's worth at a time.
inline constexpr size_t kReadChunk = 16384;

// co_await op(..., as_tuple) -> (error_code, result...).
inline constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);

}  // namespace zn::proxy
