// The network sinks' config checks: each bad field named by its JSON path,
// unknown fields refused, token files checked (and never quoted), and good
// configs made into sinks without connecting anywhere.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "broker/audit_sinks/sink_factory.h"
#include "support/temp_dir.h"
#include "test_pki.h"
#include "token_file.h"

namespace zn::broker::audit_sinks {
namespace {

using nlohmann::json;

constexpr const char* kPath = "$.audit_sinks[2]";
constexpr const char* kToken = "zn-T0ken-5ecret-9f8e7d6c";

class SinkFactoryTest : public ::testing::Test {
 protected:
  // The message check_network_sink throws for `config`, or "" when it passes.
  static std::string error_of(const json& config) {
    try {
      check_network_sink(config, kPath);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
  json syslog(json fields) const {
    json config = {{"type", "syslog"}, {"address", "127.0.0.1:6514"}, {"transport", "tcp"}};
    if (!fields.is_null()) config.update(fields);
    return config;
  }
  json http(json fields) const {
    json config = {{"type", "http"},
                   {"url", "https://logs.example:8088/services/collector/event"},
                   {"shape", "splunk_hec"},
                   {"token_file", token}};
    if (!fields.is_null()) config.update(fields);
    return config;
  }

  zn::test::TempDir dir;
  std::string token = test::write_token_file(dir.file("token"), kToken);
  test::TestPki pki = test::make_test_pki(dir.path().string(), "a");
};

TEST_F(SinkFactoryTest, KnowsSyslogAndHttp) {
  EXPECT_TRUE(is_network_sink_type("syslog"));
  EXPECT_TRUE(is_network_sink_type("http"));
  EXPECT_FALSE(is_network_sink_type("file"));
  EXPECT_FALSE(is_network_sink_type("Syslog"));
}

TEST_F(SinkFactoryTest, GoodConfigsPassAndMakeSinksWithoutConnecting) {
  const json good[] = {
      syslog({}),
      syslog({{"address", "[::1]:6514"},
              {"transport", "tls"},
              {"ca_file", pki.ca_cert},
              {"server_name", "logs.example"},
              {"facility", "auth"},
              {"app_name", "zerod-a"},
              {"timeout_ms", 2000}}),
      syslog({{"address", "logs.example:514"}, {"facility", 23}, {"transport", "tls"}}),
      http({}),
      http({{"shape", "datadog"}, {"ca_file", pki.ca_cert}, {"timeout_ms", 100}}),
      http({{"url", "http://127.0.0.1:9880/ingest?tag=zn"}, {"shape", "json_lines"}}),
      http({{"url", "http://[::1]:9880/"}, {"shape", "json_lines"}, {"token_file", token}}),
  };
  for (const auto& config : good) {
    EXPECT_EQ(error_of(config), "") << config.dump();
    EXPECT_NE(make_network_sink(config, kPath, {"zn-host", dir.path().string()}), nullptr) << config.dump();
  }
}

TEST_F(SinkFactoryTest, SyslogOptionsAreTheConfiguredOnesOrTheDefaults) {
  const SyslogSinkOptions defaults = syslog_sink_options(syslog({}), kPath);
  EXPECT_EQ(defaults.host, "127.0.0.1");
  EXPECT_EQ(defaults.port, 6514);
  EXPECT_FALSE(defaults.tls);
  EXPECT_EQ(defaults.facility, 16);
  EXPECT_EQ(defaults.app_name, "zerod");
  EXPECT_EQ(defaults.timeout, std::chrono::milliseconds(5000));

  const SyslogSinkOptions set = syslog_sink_options(syslog({{"address", "[fd00::1]:10514"},
                                                            {"transport", "tls"},
                                                            {"ca_file", pki.ca_cert},
                                                            {"server_name", "siem"},
                                                            {"facility", "daemon"},
                                                            {"app_name", "zn"},
                                                            {"timeout_ms", 750}}),
                                                    kPath);
  EXPECT_EQ(set.host, "fd00::1");
  EXPECT_EQ(set.port, 10514);
  EXPECT_TRUE(set.tls);
  EXPECT_EQ(set.ca_file, pki.ca_cert);
  EXPECT_EQ(set.server_name, "siem");
  EXPECT_EQ(set.facility, 3);
  EXPECT_EQ(set.app_name, "zn");
  EXPECT_EQ(set.timeout, std::chrono::milliseconds(750));
}

TEST_F(SinkFactoryTest, HttpOptionsReadTheTokenWithoutItsNewline) {
  const HttpSinkOptions options = http_sink_options(http({{"shape", "datadog"}}), kPath);
  EXPECT_EQ(options.shape, HttpShape::kDatadog);
  EXPECT_TRUE(options.token.equals(kToken));
  EXPECT_EQ(options.timeout, std::chrono::milliseconds(10000));
  EXPECT_EQ(http_sink_options(http({{"url", "http://127.0.0.1/"}, {"shape", "json_lines"}}), kPath).shape,
            HttpShape::kJsonLines);
}

struct BadConfig {
  const char* why;
  json config;
  std::string error;  // the whole message, or its start when it ends in "..."
};

void expect_error(const std::string& got, const BadConfig& bad) {
  if (bad.error.ends_with("..."))
    EXPECT_TRUE(got.starts_with(bad.error.substr(0, bad.error.size() - 3))) << bad.why << ": " << got;
  else
    EXPECT_EQ(got, bad.error) << bad.why;
}

TEST_F(SinkFactoryTest, EveryBadFieldIsNamedByItsPath) {
  std::ofstream(dir.file("not-pem")) << "not a certificate\n";
  const std::string missing = dir.file("missing");
  const std::string p = kPath;
  const BadConfig bad[] = {
      {"not an object", json::array(), p + ": must be an object"},
      {"no type", json{{"address", "x:1"}}, p + ".type: required"},
      {"type not a string", json{{"type", 7}}, p + ".type: must be a string"},
      {"unknown type", json{{"type", "kafka"}},
       p + ".type: unknown network sink type \"kafka\" (known: syslog, http..."},
      {"unknown field", syslog({{"port", 514}}), p + ".port: unknown field"},
      // zerod strips the exporter's fields first: a misspelt one is not ignored.
      {"exporter field left in", syslog({{"filter", json::object()}}), p + ".filter: unknown field"},
      {"no address",
       [&] {
         auto c = syslog({});
         c.erase("address");
         return c;
       }(),
       p + ".address: required"},
      {"address not a string", syslog({{"address", 514}}), p + ".address: must be a non-empty string"},
      {"empty address", syslog({{"address", ""}}), p + ".address: must be a non-empty string"},
      {"no port", syslog({{"address", "logs.example"}}), p + ".address: must be HOST:PORT"},
      {"bare IPv6", syslog({{"address", "::1:514"}}),
       p + ".address: an IPv6 address goes in brackets: [::1]:514"},
      {"bad IPv6", syslog({{"address", "[fe80::zz]:514"}}),
       p + ".address: \"fe80::zz\" is not an IPv6 address"},
      {"unclosed bracket", syslog({{"address", "[::1:514"}}), p + ".address: must be HOST:PORT, with..."},
      {"bad host", syslog({{"address", "logs example:514"}}),
       p + ".address: \"logs example\" is not a host name or address"},
      {"port 0", syslog({{"address", "127.0.0.1:0"}}), p + ".address: the port must be 1 .. 65535"},
      {"port too big", syslog({{"address", "127.0.0.1:65536"}}), p + ".address: the port must be 1 .. 65535"},
      {"port not a number", syslog({{"address", "127.0.0.1:syslog"}}),
       p + ".address: the port must be 1 .. 65535"},
      {"no transport",
       [&] {
         auto c = syslog({});
         c.erase("transport");
         return c;
       }(),
       p + ".transport: required"},
      {"udp", syslog({{"transport", "udp"}}), p + ".transport: must be \"tcp\" or \"tls\""},
      {"ca_file without tls", syslog({{"ca_file", pki.ca_cert}}),
       p + ".ca_file: only with \"transport\": \"tls\""},
      {"server_name without tls", syslog({{"server_name", "x"}}),
       p + ".server_name: only with \"transport\": \"tls\""},
      {"ca_file missing", syslog({{"transport", "tls"}, {"ca_file", missing}}),
       p + ".ca_file: " + missing + ": No such file or directory"},
      {"ca_file a directory", syslog({{"transport", "tls"}, {"ca_file", dir.path().string()}}),
       p + ".ca_file: " + dir.path().string() + ": not a regular file"},
      {"ca_file not PEM", syslog({{"transport", "tls"}, {"ca_file", dir.file("not-pem")}}),
       p + ".ca_file: " + dir.file("not-pem") + ": no PEM certificate in it"},
      {"bad server_name", syslog({{"transport", "tls"}, {"server_name", "a b"}}),
       p + ".server_name: \"a b\" is not a host name or address"},
      {"unknown facility", syslog({{"facility", "local8"}}), p + ".facility: must be a facility name..."},
      {"facility 24", syslog({{"facility", 24}}), p + ".facility: must be a facility name..."},
      {"facility -1", syslog({{"facility", -1}}), p + ".facility: must be a facility name..."},
      {"facility as a numeric string", syslog({{"facility", "3"}}),
       p + ".facility: must be a facility name..."},
      {"app_name with a space", syslog({{"app_name", "zero d"}}),
       p + ".app_name: must be 1 .. 48 printable..."},
      {"app_name too long", syslog({{"app_name", std::string(49, 'a')}}),
       p + ".app_name: must be 1 .. 48 printable..."},
      {"timeout 0", syslog({{"timeout_ms", 0}}), p + ".timeout_ms: must be an integer from 100 to 600000"},
      {"timeout too long", syslog({{"timeout_ms", 600001}}),
       p + ".timeout_ms: must be an integer from 100 to 600000"},
      {"timeout as a string", syslog({{"timeout_ms", "5000"}}),
       p + ".timeout_ms: must be an integer from 100 to 600000"},
      {"timeout fractional", syslog({{"timeout_ms", 1500.5}}),
       p + ".timeout_ms: must be an integer from 100 to 600000"},

      {"http unknown field", http({{"method", "PUT"}}), p + ".method: unknown field"},
      {"no url",
       [&] {
         auto c = http({});
         c.erase("url");
         return c;
       }(),
       p + ".url: required"},
      {"ftp url", http({{"url", "ftp://logs.example/"}}), p + ".url: must be http:// or https://"},
      {"no scheme", http({{"url", "logs.example:8088/x"}}), p + ".url: must be http:// or https://"},
      {"not a url", http({{"url", "https://exa mple/"}}), p + ".url: is not a valid URL"},
      {"credentials in the url", http({{"url", "https://user:pw@logs.example/"}}),
       p + ".url: must not carry credentials: the token goes in token_file"},
      {"no shape",
       [&] {
         auto c = http({});
         c.erase("shape");
         return c;
       }(),
       p + ".shape: required"},
      {"unknown shape", http({{"shape", "loki"}}),
       p + ".shape: must be \"json_lines\", \"splunk_hec\" or \"datadog\""},
      {"splunk without token",
       [&] {
         auto c = http({});
         c.erase("token_file");
         return c;
       }(),
       p + ".token_file: required for shape \"splunk_hec\""},
      {"datadog without token",
       [&] {
         auto c = http({{"shape", "datadog"}});
         c.erase("token_file");
         return c;
       }(),
       p + ".token_file: required for shape \"datadog\""},
      {"token file missing", http({{"token_file", missing}}),
       p + ".token_file: " + missing + ": No such file or directory"},
      {"ca_file with http://", http({{"url", "http://127.0.0.1/"}, {"ca_file", pki.ca_cert}}),
       p + ".ca_file: only for an https:// url"},
      {"http timeout", http({{"timeout_ms", 99}}), p + ".timeout_ms: must be an integer from 100 to 600000"},
  };
  for (const auto& b : bad) expect_error(error_of(b.config), b);
}

TEST_F(SinkFactoryTest, ATokenFileOthersCanReadIsRefusedWithoutQuotingIt) {
  for (mode_t mode : {0644, 0640, 0604, 0620}) {
    test::write_token_file(token, kToken, mode);
    const std::string error = error_of(http({}));
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", mode);
    EXPECT_EQ(error, std::string(kPath) + ".token_file: " + token + ": mode " + octal +
                         " lets group or others at it; it must be 0600 or 0400");
    EXPECT_EQ(error.find(kToken), std::string::npos);
  }
  test::write_token_file(token, kToken, 0400);
  EXPECT_EQ(error_of(http({})), "");
}

TEST_F(SinkFactoryTest, ATokenFileOwnedBySomeoneElseIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file away";
  ASSERT_EQ(::chown(token.c_str(), 12345, 12345), 0);
  EXPECT_EQ(error_of(http({})), std::string(kPath) + ".token_file: " + token +
                                    ": owned by uid 12345, not by root or by this process's uid");
}

TEST_F(SinkFactoryTest, ATokenMustBeOneLineOfPrintableCharacters) {
  const std::string bad_tokens[] = {"", "two words", "line1\nline2", "tab\there", "ctl\x01x"};
  for (const auto& bad : bad_tokens) {
    test::write_token_file(token, bad);
    const std::string error = error_of(http({}));
    EXPECT_TRUE(error.starts_with(std::string(kPath) + ".token_file: " + token + ": ")) << error;
    EXPECT_TRUE(bad.empty() || error.find(bad) == std::string::npos) << error;
  }
  EXPECT_EQ(error_of(http({})).substr(error_of(http({})).rfind(": ") + 2),
            "the token must be one line of printable characters without spaces");
  test::write_token_file(token, "");
  EXPECT_TRUE(error_of(http({})).ends_with(": empty"));
  std::ofstream(token) << std::string(5000, 'k');
  EXPECT_TRUE(error_of(http({})).ends_with(": longer than 4096 bytes"));
}

TEST_F(SinkFactoryTest, ATokenFileThatIsASymlinkIsRefused) {
  const std::string link = dir.file("token-link");
  ASSERT_EQ(::symlink(token.c_str(), link.c_str()), 0);
  const std::string error = error_of(http({{"token_file", link}}));
  EXPECT_TRUE(error.starts_with(std::string(kPath) + ".token_file: " + link + ": ")) << error;
}

TEST_F(SinkFactoryTest, ATokenFileThatIsAFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = dir.file("token-fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(http({{"token_file", fifo}})),
            std::string(kPath) + ".token_file: " + fifo + ": not a regular file");
}

}  // namespace
}  // namespace zn::broker::audit_sinks
