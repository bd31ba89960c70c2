#include "userspace/proxy/upstream_pool.h"

#include <gtest/gtest.h>

namespace zn::proxy {
namespace {

UpstreamKey key_of(const std::string& session, const std::string& host) {
  return UpstreamKey{session, host, "stripe", 443, true};
}

// give() keeps and drops by its bounds alone: no socket is touched.
IdleUpstream idle() { return IdleUpstream{}; }

// The default keeps what a guest with four HTTP/2 connections of ten streams
// each gives back at once (the h2load figure): none of them closed, so the
// next forty streams pay no upstream handshake. Past the bound, the key's
// oldest goes and another key's connections stay.
TEST(UpstreamPool, ADefaultKeyKeepsFortyConcurrentStreamsIdle) {
  UpstreamPool pool;
  for (int i = 0; i < 40; ++i) pool.give(key_of("s1", "api.example.com"), idle());
  EXPECT_EQ(pool.size(), 40u);
  pool.give(key_of("s2", "api.example.com"), idle());
  for (int i = 0; i < 40; ++i) pool.give(key_of("s1", "api.example.com"), idle());
  EXPECT_EQ(pool.size(), UpstreamPoolConfig{}.per_key + 1);
}

TEST(UpstreamPool, PerKeyAndTotalBoundsHold) {
  UpstreamPool pool(UpstreamPoolConfig{.per_key = 3, .total = 5});
  for (int i = 0; i < 4; ++i) pool.give(key_of("s1", "a.example"), idle());
  EXPECT_EQ(pool.size(), 3u);  // the key's oldest went
  for (int i = 0; i < 3; ++i) pool.give(key_of("s2", "a.example"), idle());
  EXPECT_EQ(pool.size(), 5u);  // the oldest of all went
  EXPECT_EQ(pool.drop_session("s2"), 3u);
  EXPECT_EQ(pool.size(), 2u);
}

}  // namespace
}  // namespace zn::proxy
