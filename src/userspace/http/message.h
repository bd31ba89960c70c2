// Strict HTTP/1.1 head parsing (RFC 9112) for the intercepting proxy.
//
// The proxy terminates TLS from an untrusted guest, decides each request from
// policy and re-generates the framing it forwards. A request the parser
// accepts must therefore have exactly one reading: anything RFC 9112 lets a
// recipient "handle leniently" (obs-fold, bare LF, duplicate or conflicting
// Content-Length/Transfer-Encoding, whitespace before the colon, ...) is
// rejected instead, so no upstream can see a different message boundary.
//
// Parse errors are results, not exceptions: a guest sending garbage is the
// normal hot path of a hostile connection. The error text never quotes header
// values (they may carry credentials the guest smuggled in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zn::http {

struct HttpLimits {
  // Request/status line plus header fields, including the CRLF ending each
  // line and the empty line ending the head: a head of exactly this many bytes
  // is accepted, one more is 431.
  size_t max_head_bytes = 16384;
  size_t max_headers = 100;
  // A chunk-size line, extensions included, CRLF excluded.
  size_t max_chunk_line = 1024;
  // The whole trailer section after the last chunk, CRLFs included.
  size_t max_trailer_bytes = 4096;
};

struct Header {
  std::string name;   // as received (case preserved)
  std::string value;  // leading and trailing OWS removed
};

enum class BodyFraming {
  kNone,
  kContentLength,
  kChunked,
  kUntilClose,  // responses only: the body ends when the server closes
};

struct RequestHead {
  std::string method;  // 1*[A-Z]
  std::string target;  // origin-form, verbatim (normalise with http_target.h)
  int version_minor = 1;
  std::vector<Header> headers;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;  // valid with kContentLength
  std::string host;             // the single Host value, verbatim (empty: HTTP/1.0 without Host)
  bool keep_alive = false;
  bool expect_continue = false;  // "Expect: 100-continue" on an HTTP/1.1 request
  bool upgrade = false;          // an Upgrade header or a Connection "upgrade" token

  // First header with this name (ASCII case-insensitive), or nullptr.
  const std::string* find(std::string_view name) const;
};

struct ResponseHead {
  int status = 0;
  int version_minor = 1;
  std::string reason;
  std::vector<Header> headers;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  bool keep_alive = false;

  const std::string* find(std::string_view name) const;
};

enum class ParseState { kNeedMore, kDone, kError };

struct ParseResult {
  ParseState state = ParseState::kNeedMore;
  // With kDone: bytes of the head, final CRLFCRLF included; the body (or the
  // next pipelined request) starts there.
  size_t consumed = 0;
  // With kError: the status to answer with (400, 417, 431, 501, 505; always
  // 502 for responses).
  int error_status = 0;
  std::string error;  // short reason for logs; never contains header values
};

// Both parsers are pure functions of `buf` (the bytes received so far on the
// connection, starting at the head). They may be called again with a longer
// buffer after kNeedMore; a prefix of a valid head never yields kError, and a
// prefix of an invalid one yields kNeedMore or the same error status. `out` is
// reset on every call and only meaningful with kDone.
ParseResult parse_request_head(std::string_view buf, const HttpLimits& limits, RequestHead& out);
ParseResult parse_response_head(std::string_view buf, const HttpLimits& limits, bool request_was_head,
                                ResponseHead& out);

// Field-line syntax shared with the chunked trailer section (http1_body.cpp).
// 0-15 for a hex digit (either case), -1 otherwise.
int hex_value(char c);
// tchar per RFC 9110 5.6.2.
bool is_tchar(unsigned char c);
// `line` is one field line without its CRLF. Returns nullptr and fills `out`,
// or a static reason: obs-fold, missing colon, empty or non-token name
// (which includes whitespace before the colon), CTL/DEL in the value.
const char* parse_field_line(std::string_view line, Header& out);
// Content-Length: 1*DIGIT, at most 2^53. No sign, whitespace or list: a
// value another parser could read differently is exactly what smuggling
// needs.
bool parse_content_length(std::string_view v, uint64_t& out);
// Host (and HTTP/2 :authority): uri-host [ ":" port ], an IPv6 literal in
// brackets or a reg-name of the characters DNS names and IPv4 addresses use.
// No userinfo, percent-encoding or sub-delims.
bool valid_host(std::string_view v);
// ASCII case-insensitive equality (header names, tokens).
bool iequals(std::string_view a, std::string_view b);

}  // namespace zn::http
