// open_on_one_port: with port 0 a clash on the picked number is retried
// (everything opened is closed first); a fixed port, any other failure, or
// a clash every time is thrown.
#include <gtest/gtest.h>

#include <cerrno>
#include <system_error>

#include "userspace/net/transparent_socket.h"

namespace zn::net {
namespace {

std::system_error clash() { return std::system_error(EADDRINUSE, std::generic_category(), "bind"); }

TEST(OpenOnOnePort, APickedNumberHeldElsewhereIsPickedAgain) {
  int opens = 0, closes = 0;
  const uint16_t port = open_on_one_port(
      0,
      [&](uint16_t wanted) -> uint16_t {
        EXPECT_EQ(wanted, 0);
        if (++opens < 3) throw clash();
        return 4242;
      },
      [&] { ++closes; });
  EXPECT_EQ(port, 4242);
  EXPECT_EQ(opens, 3);
  EXPECT_EQ(closes, 2);
}

TEST(OpenOnOnePort, AFixedPortInUseAnotherFailureOrAClashEveryTimeIsThrown) {
  int opens = 0, closes = 0;
  auto clashing = [&](uint16_t) -> uint16_t {
    ++opens;
    throw clash();
  };
  auto count_close = [&] { ++closes; };
  EXPECT_THROW(open_on_one_port(53, clashing, count_close), std::system_error);
  EXPECT_EQ(opens, 1);
  EXPECT_EQ(closes, 1);
  opens = closes = 0;
  EXPECT_THROW(open_on_one_port(0, clashing, count_close), std::system_error);
  EXPECT_EQ(opens, 16);
  EXPECT_EQ(closes, 16);
  opens = closes = 0;
  auto denied = [&](uint16_t) -> uint16_t {
    ++opens;
    throw std::system_error(EACCES, std::generic_category(), "bind");
  };
  EXPECT_THROW(open_on_one_port(0, denied, count_close), std::system_error);
  EXPECT_EQ(opens, 1);
  // Positive control: a fixed port that opens is returned as it is.
  EXPECT_EQ(open_on_one_port(
                53, [](uint16_t wanted) { return wanted; }, count_close),
            53);
}

}  // namespace
}  // namespace zn::net
