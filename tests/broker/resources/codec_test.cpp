#include <gtest/gtest.h>

#include <string>

#include "broker/resources/base64.h"
#include "broker/resources/store.h"
#include "broker/resources/utf8.h"

namespace zn::broker {
namespace {

TEST(Base64, RoundTripsAndIsStrict) {
  for (const std::string& s : {std::string(), std::string("f"), std::string("fo"), std::string("foo"),
                               std::string("foob"), std::string("\0\xff\x10", 3)}) {
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back.has_value()) << s;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  for (const char* bad : {"Zm8", "Zm9=", "Z===", "Zm8=Zm8=", "Zm 8=", "Zm8_", "=Zm8", "Zg=a"})
    EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
}

TEST(Utf8, AcceptsWhatJsonCanCarry) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("ascii"));
  EXPECT_TRUE(valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  for (const char* bad :
       {"\xff", "\xc3", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"})
    EXPECT_FALSE(valid_utf8(bad)) << bad;
}

TEST(StoreError, CodesAreStable) {
  EXPECT_EQ(to_string(StoreError::kNotFound), "not_found");
  EXPECT_EQ(to_string(StoreError::kReadOnly), "read_only");
  EXPECT_EQ(to_string(StoreError::kQuotaExceeded), "quota_exceeded");
  EXPECT_EQ(to_string(StoreError::kTooLarge), "too_large");
  EXPECT_EQ(to_string(StoreError::kBadRequest), "bad_request");
  EXPECT_EQ(to_string(StoreError::kLimitExceeded), "limit_exceeded");
  EXPECT_EQ(to_string(StoreError::kForbidden), "forbidden");
  EXPECT_EQ(to_string(StoreError::kInternal), "internal");
}

}  // namespace
}  // namespace zn::broker
