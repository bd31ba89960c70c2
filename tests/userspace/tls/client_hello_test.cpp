// ClientHello peeking against real ClientHellos written by an OpenSSL client
// into a memory BIO, and against truncated, corrupted and random input.
#include "userspace/tls/client_hello.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/client_hello_bytes.h"

namespace zn::proxy {
namespace {

using Bytes = std::vector<std::uint8_t>;

using test::make_client_hello;

Bytes standard_hello(int max_version = 0) {
  return make_client_hello(
      {.sni = "www.example.com", .alpn = {"h2", "http/1.1"}, .max_version = max_version});
}

ClientHelloInfo peek(const Bytes& b, std::size_t max = kMaxClientHelloBytes) {
  return peek_client_hello(std::span<const std::uint8_t>(b), max);
}

ClientHelloInfo peek(std::string_view s) {
  return peek_client_hello(
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}

// Re-frame a single-record hello into records with the given payload sizes
// (the last one takes the rest).
Bytes reframe(const Bytes& hello, std::vector<std::size_t> sizes) {
  EXPECT_GE(hello.size(), 5u);
  Bytes payload(hello.begin() + 5, hello.end());
  EXPECT_EQ(payload.size(), (std::size_t{hello[3]} << 8 | hello[4]));
  Bytes out;
  std::size_t off = 0;
  for (std::size_t i = 0; off < payload.size(); ++i) {
    std::size_t n = std::min(i < sizes.size() ? sizes[i] : payload.size(), payload.size() - off);
    out.insert(out.end(), {hello[0], hello[1], hello[2], static_cast<std::uint8_t>(n >> 8),
                           static_cast<std::uint8_t>(n)});
    out.insert(out.end(), payload.begin() + off, payload.begin() + off + n);
    off += n;
  }
  return out;
}

std::size_t find(const Bytes& b, std::string_view needle) {
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  EXPECT_NE(it, b.end()) << needle;
  return static_cast<std::size_t>(it - b.begin());
}

void put16(Bytes& b, std::size_t at, std::size_t v) {
  b[at] = static_cast<std::uint8_t>(v >> 8);
  b[at + 1] = static_cast<std::uint8_t>(v);
}
std::size_t get16(const Bytes& b, std::size_t at) { return std::size_t{b[at]} << 8 | b[at + 1]; }

TEST(ClientHello, Tls13SniAndAlpn) {
  Bytes h = standard_hello();
  auto info = peek(h);
  ASSERT_EQ(info.status, HelloStatus::kOk) << to_string(info.status);
  EXPECT_EQ(info.sni, "www.example.com");
  EXPECT_FALSE(info.sni_is_ip_literal);
  EXPECT_EQ(info.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
  EXPECT_EQ(info.legacy_version, 0x0303);
  EXPECT_NE(std::find(info.supported_versions.begin(), info.supported_versions.end(), 0x0304),
            info.supported_versions.end());
  EXPECT_EQ(info.record_bytes, h.size());
  EXPECT_EQ(ERR_peek_error(), 0u) << "error queue left dirty";
}

TEST(ClientHello, Tls12Only) {
  auto info = peek(standard_hello(TLS1_2_VERSION));
  ASSERT_EQ(info.status, HelloStatus::kOk);
  EXPECT_EQ(info.sni, "www.example.com");
  EXPECT_EQ(info.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
  EXPECT_EQ(info.legacy_version, 0x0303);
  EXPECT_TRUE(info.supported_versions.empty());
}

TEST(ClientHello, Tls13Only) {
  auto info = peek(make_client_hello({.sni = "a.example", .min_version = TLS1_3_VERSION}));
  ASSERT_EQ(info.status, HelloStatus::kOk);
  EXPECT_EQ(info.sni, "a.example");
  EXPECT_EQ(info.supported_versions, (std::vector<std::uint16_t>{0x0304}));
  EXPECT_TRUE(info.alpn.empty());
}

TEST(ClientHello, NoSni) {
  auto info = peek(make_client_hello({.alpn = {"http/1.1"}}));
  ASSERT_EQ(info.status, HelloStatus::kOk);
  EXPECT_FALSE(info.sni.has_value());
  EXPECT_FALSE(info.sni_is_ip_literal);
  EXPECT_EQ(info.alpn, (std::vector<std::string>{"http/1.1"}));
}

TEST(ClientHello, IpLiteralSni) {
  for (std::string ip : {"192.0.2.1", "2001:db8::1", "::ffff:169.254.169.254", "127.1", "0x7f000001",
                         "10.0.0.1.", "foo.123"}) {
    auto info = peek(make_client_hello({.sni = ip}));
    ASSERT_EQ(info.status, HelloStatus::kOk) << ip;
    EXPECT_EQ(info.sni, ip);
    EXPECT_TRUE(info.sni_is_ip_literal) << ip;
  }
  for (std::string name : {"example.com", "1password.com", "x.0xfoo", "dead.beef"}) {
    auto info = peek(make_client_hello({.sni = name}));
    ASSERT_EQ(info.status, HelloStatus::kOk) << name;
    EXPECT_FALSE(info.sni_is_ip_literal) << name;
  }
}

TEST(ClientHello, UppercaseSniIsLowercased) {
  auto info = peek(make_client_hello({.sni = "API.Example.COM"}));
  ASSERT_EQ(info.status, HelloStatus::kOk);
  EXPECT_EQ(info.sni, "api.example.com");
}

TEST(ClientHello, EveryPrefixNeedsMore) {
  for (int v : {0, TLS1_2_VERSION}) {
    Bytes h = standard_hello(v);
    for (std::size_t n = 0; n < h.size(); ++n) {
      Bytes prefix(h.begin(), h.begin() + n);
      EXPECT_EQ(peek(prefix).status, HelloStatus::kNeedMore) << "prefix " << n;
    }
  }
}

TEST(ClientHello, SplitAcrossRecords) {
  Bytes h = standard_hello();
  std::size_t payload = h.size() - 5;
  for (std::size_t first : {std::size_t{1}, std::size_t{4}, std::size_t{40}, payload / 2, payload - 1}) {
    Bytes two = reframe(h, {first});
    ASSERT_EQ(two.size(), h.size() + 5);
    auto info = peek(two);
    ASSERT_EQ(info.status, HelloStatus::kOk) << "split at " << first;
    EXPECT_EQ(info.sni, "www.example.com");
    EXPECT_EQ(info.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
    EXPECT_EQ(info.record_bytes, two.size());
    for (std::size_t n = 0; n < two.size(); ++n)
      ASSERT_EQ(peek(Bytes(two.begin(), two.begin() + n)).status, HelloStatus::kNeedMore)
          << "split " << first << " prefix " << n;
  }
  // One byte per record: OpenSSL reassembles the handshake message.
  Bytes tiny = reframe(h, std::vector<std::size_t>(payload, 1));
  auto info = peek(tiny);
  ASSERT_EQ(info.status, HelloStatus::kOk);
  EXPECT_EQ(info.sni, "www.example.com");
}

TEST(ClientHello, BytesAfterTheHelloAreNotExamined) {
  Bytes h = standard_hello();
  Bytes more = h;
  Bytes junk = {23, 3, 3, 0, 4, 'a', 'b', 'c', 'd'};  // e.g. 0-RTT application data
  more.insert(more.end(), junk.begin(), junk.end());
  more.resize(more.size() + 20000, 0xff);  // past the bound: not ours to judge
  auto info = peek(more);
  ASSERT_EQ(info.status, HelloStatus::kOk);
  EXPECT_EQ(info.record_bytes, h.size());
}

TEST(ClientHello, NotTls) {
  EXPECT_EQ(peek("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n").status, HelloStatus::kNotTls);
  EXPECT_EQ(peek("G").status, HelloStatus::kNotTls);
  EXPECT_EQ(peek("SSH-2.0-OpenSSH_9.2\r\n").status, HelloStatus::kNotTls);
  EXPECT_EQ(peek(Bytes{0x80, 0x2e, 0x01, 0x03, 0x01}).status, HelloStatus::kNotTls);  // SSLv2
  EXPECT_EQ(peek(Bytes{0x16, 0x04}).status, HelloStatus::kNotTls);
  EXPECT_EQ(peek(Bytes{0x17, 0x03, 0x03, 0x00, 0x01, 0x00}).status, HelloStatus::kNotTls);
  EXPECT_EQ(peek(Bytes{}).status, HelloStatus::kNeedMore);
  EXPECT_EQ(peek(Bytes{0x16}).status, HelloStatus::kNeedMore);
  EXPECT_EQ(peek(Bytes{0x16, 0x03, 0x01}).status, HelloStatus::kNeedMore);
}

TEST(ClientHello, MalformedServerName) {
  const Bytes h = standard_hello();
  const std::size_t name = find(h, "www.example.com");  // 15 bytes
  ASSERT_EQ(get16(h, name - 2), 15u);
  ASSERT_EQ(get16(h, name - 5), 18u);  // ServerNameList length
  ASSERT_EQ(get16(h, name - 7), 20u);  // extension length
  auto with = [&](auto edit) {
    Bytes b = h;
    edit(b);
    return peek(b).status;
  };
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 2, 16); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 2, 0xffff); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 2, 14); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 2, 0); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 5, 19); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 5, 0xffff); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 5, 0); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { b[name - 3] = 1; }), HelloStatus::kMalformed);  // name type
  EXPECT_EQ(with([&](Bytes& b) { b[name + 3] = 0; }), HelloStatus::kMalformed);  // NUL in name
  EXPECT_EQ(with([&](Bytes& b) { b[name + 3] = '/'; }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { b[name + 3] = 0xc3; }), HelloStatus::kMalformed);
  // Extension length past the extensions block: OpenSSL rejects it.
  EXPECT_EQ(with([&](Bytes& b) { put16(b, name - 7, 0xfff0); }), HelloStatus::kMalformed);
}

TEST(ClientHello, MalformedAlpn) {
  const Bytes h = standard_hello();
  const std::size_t list = find(h, std::string_view("\x02h2\x08http/1.1", 12));
  ASSERT_EQ(get16(h, list - 2), 12u);
  auto with = [&](auto edit) {
    Bytes b = h;
    edit(b);
    return peek(b).status;
  };
  EXPECT_EQ(with([&](Bytes& b) { b[list + 3] = 9; }), HelloStatus::kMalformed);  // overruns
  EXPECT_EQ(with([&](Bytes& b) { b[list + 3] = 7; }), HelloStatus::kMalformed);  // trailer
  EXPECT_EQ(with([&](Bytes& b) { b[list] = 0; }), HelloStatus::kMalformed);      // empty name
  EXPECT_EQ(with([&](Bytes& b) { put16(b, list - 2, 13); }), HelloStatus::kMalformed);
  EXPECT_EQ(with([&](Bytes& b) { put16(b, list - 2, 0); }), HelloStatus::kMalformed);
}

TEST(ClientHello, MalformedFraming) {
  const Bytes h = standard_hello();
  Bytes b = h;
  b[5] = 2;  // handshake type ServerHello, not ClientHello
  EXPECT_EQ(peek(b).status, HelloStatus::kMalformed);
  b = h;
  put16(b, 3, 0);  // empty record
  EXPECT_EQ(peek(b).status, HelloStatus::kMalformed);
  b = h;
  put16(b, 3, 16385);  // record overflow
  EXPECT_EQ(peek(b).status, HelloStatus::kMalformed);
  b = h;
  b[6] = 0xff;  // handshake length way beyond the record, then junk
  b[7] = 0xff;
  EXPECT_NE(peek(b).status, HelloStatus::kOk);
  // A non-handshake record in the middle of the hello.
  Bytes two = reframe(h, {40});
  two[5 + 40] = 23;
  EXPECT_EQ(peek(two).status, HelloStatus::kMalformed);
  two = reframe(h, {40});
  two[5 + 40 + 1] = 2;  // second record, bad version major
  EXPECT_EQ(peek(two).status, HelloStatus::kMalformed);
  // Handshake message shorter than the record says it is.
  b = h;
  std::size_t hs_len = (std::size_t{b[6]} << 16) | (std::size_t{b[7]} << 8) | b[8];
  hs_len -= 10;
  b[7] = static_cast<std::uint8_t>(hs_len >> 8);
  b[8] = static_cast<std::uint8_t>(hs_len);
  EXPECT_EQ(peek(b).status, HelloStatus::kMalformed);
}

TEST(ClientHello, TooLarge) {
  // A real ClientHello bigger than 16 KiB (a huge ALPN list).
  std::vector<std::string> protos(70, std::string(250, 'p'));
  Bytes big = make_client_hello({.sni = "www.example.com", .alpn = protos});
  ASSERT_GT(big.size(), kMaxClientHelloBytes);
  EXPECT_EQ(peek(big).status, HelloStatus::kTooLarge);
  // Its first record's header alone already tells.
  EXPECT_EQ(peek(Bytes(big.begin(), big.begin() + 5)).status, HelloStatus::kTooLarge);
  // Many small records adding up past the bound.
  Bytes h = standard_hello();
  Bytes tiny = reframe(h, std::vector<std::size_t>(h.size(), 1));
  EXPECT_EQ(peek(tiny, 1000).status, HelloStatus::kTooLarge);
  EXPECT_EQ(peek(Bytes(tiny.begin(), tiny.begin() + 990), 1000).status, HelloStatus::kNeedMore);
  EXPECT_EQ(peek(tiny).status, HelloStatus::kOk);  // within the default bound
  EXPECT_EQ(peek(h, h.size()).status, HelloStatus::kOk);
  EXPECT_EQ(peek(h, h.size() - 1).status, HelloStatus::kTooLarge);
}

TEST(ClientHello, RandomInputNeverCrashes) {
  std::mt19937 rng(0x5eed);
  const Bytes seeds[] = {standard_hello(), standard_hello(TLS1_2_VERSION), reframe(standard_hello(), {60})};
  int ok = 0;
  for (int i = 0; i < 10000; ++i) {
    Bytes b;
    switch (i % 4) {
      case 0:  // pure random
        b.resize(rng() % 600);
        for (auto& x : b) x = static_cast<std::uint8_t>(rng());
        break;
      case 1: {  // random payload under a plausible record header
        std::size_t n = rng() % 600;
        b = {0x16,
             0x03,
             static_cast<std::uint8_t>(rng() % 5),
             static_cast<std::uint8_t>(n >> 8),
             static_cast<std::uint8_t>(n),
             0x01};
        b.resize(5 + n);
        for (std::size_t j = 6; j < b.size(); ++j) b[j] = static_cast<std::uint8_t>(rng());
        break;
      }
      default: {  // mutate a real hello, maybe truncate it
        b = seeds[rng() % 3];
        int flips = 1 + static_cast<int>(rng() % 8);
        for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<std::uint8_t>(rng());
        if (rng() % 4 == 0) b.resize(rng() % b.size());
      }
    }
    auto info = peek(b);
    if (info.status == HelloStatus::kOk) {
      ++ok;
      if (info.sni) {
        ASSERT_FALSE(info.sni->empty());
        for (char c : *info.sni) ASSERT_FALSE(c >= 'A' && c <= 'Z');
      }
      for (const auto& p : info.alpn) ASSERT_FALSE(p.empty());
      ASSERT_LE(info.record_bytes, b.size());
    }
    ASSERT_EQ(ERR_peek_error(), 0u);
  }
  EXPECT_GT(ok, 0);  // some mutations (e.g. in the random) still parse
}

TEST(ClientHello, ConcurrentCallers) {
  const Bytes h = standard_hello();
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto info = peek(h);
        if (info.status != HelloStatus::kOk || info.sni != "www.example.com") ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace zn::proxy
