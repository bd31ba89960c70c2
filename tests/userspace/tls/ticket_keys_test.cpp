// Guest-facing TLS resumption in real handshakes over a BIO pair (no
// network): a guest resumes its own sandbox's session for the same name, by
// ticket (TLS 1.3 and 1.2) or by session id (TLS 1.2 without tickets); never
// another sandbox's, never for another name; a ticket survives one key
// rotation (and is re-issued under the new key) but not two.
#include "userspace/tls/ticket_keys.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "broker/identity/deployment_ca.h"
#include "support/temp_dir.h"
#include "support/tls_bio_pair.h"
#include "userspace/tls/contexts.h"
#include "userspace/tls/leaf_certs.h"

namespace zn::proxy {
namespace {

using SessionPtr = std::unique_ptr<SSL_SESSION, OpensslDeleter<SSL_SESSION, SSL_SESSION_free>>;

struct Resumption {
  bool ok = false;          // both sides finished the handshake
  bool reused = false;      // the server resumed the offered session
  SessionPtr session;       // what the client may offer next time
  bool new_ticket = false;  // the server issued a ticket this time
};

// Drives both sides to the end of the handshake, then lets the client read
// what the server sent after it (TLS 1.3 sends its tickets there).
Resumption pump(SSL* client, SSL* server) {
  const bool ok = test::handshake_over_bio_pair(client, server);
  char byte;
  for (int i = 0; i < 4; ++i) (void)SSL_read(client, &byte, 1);  // takes the tickets, no data
  // Ended cleanly, as a client that keeps its session does: OpenSSL marks
  // the session of an SSL freed without sending close_notify unresumable.
  SSL_shutdown(client);
  SSL_shutdown(server);
  ERR_clear_error();
  Resumption out;
  out.ok = ok;
  out.reused = SSL_session_reused(server) == 1;
  out.session.reset(SSL_get1_session(client));
  out.new_ticket = out.session && SSL_SESSION_has_ticket(out.session.get()) == 1;
  return out;
}

class TicketKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca = broker::ensure_deployment_ca(dir.file("ca"), "test deployment CA");
    leaves = std::make_unique<LeafCertAuthority>(ca.cert, ca.key);
    server_ctx = make_guest_facing_ctx();
    enable_guest_resumption(server_ctx.get());
  }

  // One guest connection of sandbox `session` to `host`, offering `resume`.
  Resumption connect(const std::string& session, const std::string& host, SSL_SESSION* resume = nullptr,
                     int version = TLS1_3_VERSION, bool client_tickets = true) {
    SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx.get()), leaves->ca_cert());
    SSL_CTX_set_min_proto_version(client_ctx.get(), version);
    SSL_CTX_set_max_proto_version(client_ctx.get(), version);
    if (!client_tickets) SSL_CTX_set_options(client_ctx.get(), SSL_OP_NO_TICKET);
    SslPtr client(SSL_new(client_ctx.get()));
    SSL_set_tlsext_host_name(client.get(), host.c_str());
    SSL_set1_host(client.get(), host.c_str());
    if (resume) {
      EXPECT_EQ(SSL_set_session(client.get(), resume), 1);
    }
    SslPtr server(SSL_new(server_ctx.get()));
    use_leaf(server.get(), *leaves->leaf_for(host), leaves->ca_cert());
    bind_guest_session(server.get(), session, host);
    return pump(client.get(), server.get());
  }

  test::TempDir dir;
  broker::DeploymentCaPaths ca;
  std::unique_ptr<LeafCertAuthority> leaves;
  SslCtxPtr server_ctx;
};

TEST_F(TicketKeysTest, AGuestResumesItsOwnSessionForTheSameName) {
  for (int version : {TLS1_3_VERSION, TLS1_2_VERSION}) {
    Resumption first = connect("s1", "api.github.com", nullptr, version);
    ASSERT_TRUE(first.ok) << version;
    EXPECT_FALSE(first.reused);
    ASSERT_TRUE(first.new_ticket) << version;
    Resumption second = connect("s1", "api.github.com", first.session.get(), version);
    ASSERT_TRUE(second.ok) << version;
    EXPECT_TRUE(second.reused) << version;
  }
}

// TLS 1.3: every resumption ends with a ticket never seen before (a ticket
// is used once, and its flight acknowledges the guest's Finished at once).
TEST_F(TicketKeysTest, ATls13ResumptionEndsWithAFreshTicket) {
  Resumption first = connect("s1", "api.github.com");
  ASSERT_TRUE(first.new_ticket);
  const unsigned char* bytes = nullptr;
  size_t length = 0;
  SSL_SESSION_get0_ticket(first.session.get(), &bytes, &length);
  const std::string first_ticket(reinterpret_cast<const char*>(bytes), length);
  Resumption second = connect("s1", "api.github.com", first.session.get());
  ASSERT_TRUE(second.reused);
  ASSERT_TRUE(second.session);
  SSL_SESSION_get0_ticket(second.session.get(), &bytes, &length);
  const std::string second_ticket(reinterpret_cast<const char*>(bytes), length);
  EXPECT_FALSE(second_ticket.empty());
  EXPECT_NE(second_ticket, first_ticket);
  EXPECT_TRUE(connect("s1", "api.github.com", second.session.get()).reused);
}

// TLS 1.2 without tickets: the session id, from the server's cache.
TEST_F(TicketKeysTest, ATls12ClientWithoutTicketsResumesBySessionId) {
  Resumption first = connect("s1", "api.github.com", nullptr, TLS1_2_VERSION, false);
  ASSERT_TRUE(first.ok);
  ASSERT_TRUE(first.session);
  EXPECT_FALSE(first.new_ticket);
  EXPECT_TRUE(connect("s1", "api.github.com", first.session.get(), TLS1_2_VERSION, false).reused);
  // Bound the same way as tickets: another sandbox's connection does not.
  Resumption other = connect("s2", "api.github.com", first.session.get(), TLS1_2_VERSION, false);
  EXPECT_TRUE(other.ok);
  EXPECT_FALSE(other.reused);
}

TEST_F(TicketKeysTest, AnotherSandboxCannotResumeIt) {
  for (int version : {TLS1_3_VERSION, TLS1_2_VERSION}) {
    Resumption first = connect("s1", "api.github.com", nullptr, version);
    ASSERT_TRUE(first.ok);
    // Other sessions, near spellings included: a full handshake, which
    // still succeeds.
    for (const std::string session : {"s2", "S1", "s1 ", "", "s1\napi.github.com"}) {
      Resumption other = connect(session, "api.github.com", first.session.get(), version);
      EXPECT_TRUE(other.ok) << session;
      EXPECT_FALSE(other.reused) << session << " " << version;
    }
  }
}

TEST_F(TicketKeysTest, ASessionIsNotResumedForAnotherName) {
  for (int version : {TLS1_3_VERSION, TLS1_2_VERSION}) {
    Resumption first = connect("s1", "api.github.com", nullptr, version);
    ASSERT_TRUE(first.ok);
    Resumption other = connect("s1", "uploads.github.com", first.session.get(), version);
    EXPECT_TRUE(other.ok);
    EXPECT_FALSE(other.reused) << version;
    // Positive control: the same name still resumes.
    EXPECT_TRUE(connect("s1", "api.github.com", first.session.get(), version).reused) << version;
  }
}

TEST_F(TicketKeysTest, ATicketSurvivesOneRotationAndIsReissuedButNotTwo) {
  TicketKeys* keys = ticket_keys_of(server_ctx.get());
  ASSERT_NE(keys, nullptr);
  Resumption first = connect("s1", "api.github.com", nullptr, TLS1_2_VERSION);
  ASSERT_TRUE(first.ok);
  keys->rotate();
  Resumption after_one = connect("s1", "api.github.com", first.session.get(), TLS1_2_VERSION);
  EXPECT_TRUE(after_one.reused);
  // Under the previous key: re-issued under the current one, which resumes
  // after the next rotation where the first ticket no longer does.
  ASSERT_TRUE(after_one.new_ticket);
  keys->rotate();
  Resumption stale = connect("s1", "api.github.com", first.session.get(), TLS1_2_VERSION);
  EXPECT_TRUE(stale.ok);
  EXPECT_FALSE(stale.reused);
  EXPECT_TRUE(connect("s1", "api.github.com", after_one.session.get(), TLS1_2_VERSION).reused);
}

TEST_F(TicketKeysTest, TicketsFromAnotherProcessAreNotHonoured) {
  Resumption first = connect("s1", "api.github.com");
  ASSERT_TRUE(first.ok);
  // A context of its own (another zerod, or this one restarted): new keys.
  server_ctx = make_guest_facing_ctx();
  enable_guest_resumption(server_ctx.get());
  Resumption again = connect("s1", "api.github.com", first.session.get());
  EXPECT_TRUE(again.ok);
  EXPECT_FALSE(again.reused);
}

TEST_F(TicketKeysTest, NoEarlyDataAndOneTicketAHandshake) {
  EXPECT_EQ(SSL_CTX_get_max_early_data(server_ctx.get()), 0u);
  EXPECT_EQ(SSL_CTX_get_num_tickets(server_ctx.get()), 1u);
  EXPECT_FALSE(SSL_CTX_get_options(server_ctx.get()) & SSL_OP_NO_TICKET);
  // Without it, the context keeps its old behaviour: no resumption.
  SslCtxPtr plain = make_guest_facing_ctx();
  EXPECT_EQ(ticket_keys_of(plain.get()), nullptr);
  EXPECT_TRUE(SSL_CTX_get_options(plain.get()) & SSL_OP_NO_TICKET);
}

}  // namespace
}  // namespace zn::proxy
