#include "broker/secrets/secret.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <type_traits>

namespace zn::broker {
namespace {

constexpr std::string_view kValue = "sk_live_51HqLyjWDarjtT1zdp7dc";

// No path from a Secret to a string but reveal(), and no silent way in.
static_assert(!std::is_convertible_v<Secret, std::string>);
static_assert(!std::is_convertible_v<Secret, std::string_view>);
static_assert(!std::is_constructible_v<std::string, Secret>);
static_assert(!std::is_constructible_v<std::string_view, Secret>);
static_assert(!std::is_convertible_v<std::string_view, Secret>);
static_assert(!std::is_convertible_v<const char*, Secret>);
static_assert(!std::is_convertible_v<std::string, Secret>);

void expect_redacted(const std::string& out) {
  EXPECT_NE(out.find("<redacted>"), std::string::npos) << out;
  EXPECT_EQ(out.find(kValue), std::string::npos) << "the value leaked";
  EXPECT_EQ(out.find("sk_live"), std::string::npos) << "part of the value leaked";
}

TEST(Secret, RevealsItsValueOnlyToACallback) {
  Secret s(kValue);
  EXPECT_EQ(s.size(), kValue.size());
  EXPECT_FALSE(s.empty());
  EXPECT_TRUE(s.reveal([](std::string_view v) { return v == kValue; }));
  Secret copy = s;  // shares the pages
  EXPECT_TRUE(copy.reveal([](std::string_view v) { return v == kValue; }));
}

TEST(Secret, DefaultIsEmpty) {
  Secret s;
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.equals(""));
  EXPECT_FALSE(s.equals("x"));
  EXPECT_EQ(s.reveal([](std::string_view v) { return v.size(); }), 0u);
}

TEST(Secret, OstreamPrintsRedacted) {
  std::ostringstream os;
  os << "token=" << Secret(kValue);
  EXPECT_EQ(os.str(), "token=<redacted>");
  expect_redacted(os.str());
  expect_redacted(::testing::PrintToString(Secret(kValue)));  // gtest's own failure messages
}

TEST(Secret, FmtPrintsRedacted) {
  Secret s(kValue);
  EXPECT_EQ(fmt::format("{}", s), "<redacted>");
  EXPECT_EQ(fmt::format("[{:>12}]", s), "[  <redacted>]");
  expect_redacted(fmt::format("token {} and {}", s, s));
}

TEST(Secret, SpdlogPrintsRedacted) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("secret-test", sink);
  logger.set_pattern("%v");
  logger.info("stripe token {}", Secret(kValue));
  logger.flush();
  EXPECT_EQ(out.str(), "stripe token <redacted>\n");
  expect_redacted(out.str());
}

TEST(Secret, JsonWritesRedacted) {
  Secret s(kValue);
  nlohmann::json j = s;
  EXPECT_EQ(j, "<redacted>");
  nlohmann::json resource = {{"stripe", {{"accessToken", s}}}};
  expect_redacted(resource.dump());
  EXPECT_EQ(resource.dump(), R"({"stripe":{"accessToken":"<redacted>"}})");
}

TEST(Secret, EqualsComparesTheWholeValue) {
  Secret s(kValue);
  EXPECT_TRUE(s.equals(kValue));
  std::string other(kValue);
  other.back() = 'X';
  EXPECT_FALSE(s.equals(other));
  other = std::string(kValue);
  other.front() = 'X';
  EXPECT_FALSE(s.equals(other));
  EXPECT_FALSE(s.equals(kValue.substr(0, kValue.size() - 1)));
  EXPECT_FALSE(s.equals(std::string(kValue) + "z"));
  EXPECT_FALSE(s.equals(""));
}

}  // namespace
}  // namespace zn::broker
