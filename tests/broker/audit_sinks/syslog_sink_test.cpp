// The syslog sink against a real rsyslogd (imtcp, plain and TLS through
// rsyslog-gnutls): every line and the seal arrive in order and intact, with
// the header fields asked for; a receiver that is gone, stalled or not
// trusted makes deliver() throw within its timeout.
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "batches.h"
#include "broker/audit_sinks/syslog_sink.h"
#include "rsyslog_receiver.h"
#include "support/temp_dir.h"

namespace zn::broker::audit_sinks {
namespace {

using audit_export::ExportBatch;
using audit_export::SinkContext;
using audit_export::SinkError;
using test::make_batch;
using test::RsyslogReceiver;
using Clock = std::chrono::steady_clock;

SyslogSinkOptions options_for(const RsyslogReceiver& receiver,
                              std::chrono::milliseconds timeout = std::chrono::seconds(2)) {
  SyslogSinkOptions options;
  options.host = "127.0.0.1";
  options.port = receiver.port();
  options.timeout = timeout;
  return options;
}

SyslogSinkOptions tls_options_for(const RsyslogReceiver& receiver, const std::string& ca_file) {
  SyslogSinkOptions options = options_for(receiver);
  options.tls = true;
  options.ca_file = ca_file;
  return options;
}

// What the receiver should hold after these batches: each line, then the seal.
std::vector<std::string> messages_of(const std::vector<const ExportBatch*>& batches) {
  std::vector<std::string> out;
  for (const auto* batch : batches) {
    out.insert(out.end(), batch->lines.begin(), batch->lines.end());
    out.push_back(batch->seal_line);
  }
  return out;
}

std::vector<std::string> headers_of(const std::vector<const ExportBatch*>& batches, int facility,
                                    const std::string& app) {
  std::vector<std::string> out;
  for (const auto* batch : batches) {
    for (const auto& record : batch->records)
      out.push_back(std::to_string(facility * 8 + 6) + "|zn-host|" + app + "|" +
                    audit_export::event_category(record.event));
    out.push_back(std::to_string(facility * 8 + 5) + "|zn-host|" + app + "|audit-seal");
  }
  return out;
}

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

class SyslogSinkTest : public ::testing::Test {
 protected:
  zn::test::TempDir dir;
  SinkContext context{"zn-host", ""};
};

TEST_F(SyslogSinkTest, TcpDeliversEveryLineThenTheSealInOrderIntact) {
  RsyslogReceiver receiver(dir.file("rsyslog"));
  receiver.start();
  SyslogSink sink(options_for(receiver), context);
  const ExportBatch first = make_batch(1, 5);
  const ExportBatch second = make_batch(6, 3, 100 * 1000);  // lines of 100 kB: the framing counts octets
  sink.deliver(first);
  sink.deliver(second);  // on the same connection

  ASSERT_TRUE(receiver.wait_for_messages(10));
  EXPECT_EQ(receiver.messages(), messages_of({&first, &second}));
  EXPECT_EQ(receiver.headers(), headers_of({&first, &second}, 16, "zerod"));
}

TEST_F(SyslogSinkTest, FacilityAndAppNameAreTheConfiguredOnes) {
  RsyslogReceiver receiver(dir.file("rsyslog"));
  receiver.start();
  SyslogSinkOptions options = options_for(receiver);
  options.facility = 3;  // daemon
  options.app_name = "zn-audit";
  SyslogSink sink(options, context);
  const ExportBatch batch = make_batch(1, 4);
  sink.deliver(batch);

  ASSERT_TRUE(receiver.wait_for_messages(5));
  EXPECT_EQ(receiver.messages(), messages_of({&batch}));
  EXPECT_EQ(receiver.headers(), headers_of({&batch}, 3, "zn-audit"));
}

TEST_F(SyslogSinkTest, AStoppedReceiverFailsTheBatchWithinTheTimeoutAndARestartedOneTakesItAgain) {
  RsyslogReceiver receiver(dir.file("rsyslog"));
  receiver.start();
  SyslogSink sink(options_for(receiver, std::chrono::milliseconds(1000)), context);
  const ExportBatch first = make_batch(1, 3);
  const ExportBatch second = make_batch(4, 3);
  sink.deliver(first);
  ASSERT_TRUE(receiver.wait_for_messages(4));

  receiver.stop();
  const auto start = Clock::now();
  try {
    sink.deliver(second);
    ADD_FAILURE() << "delivered to a stopped receiver";
  } catch (const SinkError& e) {
    EXPECT_EQ(std::string(e.what()), "syslog tcp " + receiver.address() + ": connect: Connection refused");
  }
  EXPECT_LT(ms_since(start), 1500);
  EXPECT_THROW(sink.deliver(second), SinkError) << "still down: still an error";

  receiver.start();      // the same port
  sink.deliver(second);  // what the exporter does: the same batch again
  ASSERT_TRUE(receiver.wait_for_messages(8));
  EXPECT_EQ(receiver.messages(), messages_of({&first, &second}));
}

TEST_F(SyslogSinkTest, AReceiverRestartedBetweenBatchesGetsTheNextOnANewConnection) {
  RsyslogReceiver receiver(dir.file("rsyslog"));
  receiver.start();
  SyslogSink sink(options_for(receiver), context);
  const ExportBatch first = make_batch(1, 2);
  const ExportBatch second = make_batch(3, 2);
  sink.deliver(first);
  ASSERT_TRUE(receiver.wait_for_messages(3));
  receiver.stop();
  receiver.start();
  sink.deliver(second);  // the old connection is seen closed before writing, not written into
  ASSERT_TRUE(receiver.wait_for_messages(6));
  EXPECT_EQ(receiver.messages(), messages_of({&first, &second}));
}

TEST_F(SyslogSinkTest, AReceiverThatStopsReadingFailsTheWriteWithinTheTimeout) {
  RsyslogReceiver receiver(dir.file("rsyslog"));
  receiver.start();
  SyslogSink sink(options_for(receiver, std::chrono::milliseconds(1000)), context);
  sink.deliver(make_batch(1, 1));
  ASSERT_TRUE(receiver.wait_for_messages(2));

  receiver.pause();
  // 40 MB: more than both ends' socket buffers hold, so the write stalls.
  const ExportBatch big = make_batch(2, 400, 100 * 1000);
  const auto start = Clock::now();
  try {
    sink.deliver(big);
    ADD_FAILURE() << "delivered 40 MB to a receiver that reads nothing";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(receiver.port())), std::string::npos)
        << e.what();
  }
  EXPECT_LT(ms_since(start), 6000);
  receiver.resume();
}

TEST_F(SyslogSinkTest, NothingListeningFailsAtOnce) {
  // A bound socket that never listens: its port refuses, and no one else takes it meanwhile.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t len = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &len);
  SyslogSinkOptions options;
  options.host = "127.0.0.1";
  options.port = ntohs(address.sin_port);
  SyslogSink sink(options, context);
  try {
    sink.deliver(make_batch(1, 1));
    ADD_FAILURE() << "delivered to nothing";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
  ::close(fd);
}

class SyslogTlsTest : public SyslogSinkTest {
 protected:
  void SetUp() override {
    pki = test::make_test_pki(dir.path().string(), "a");
    receiver = std::make_unique<RsyslogReceiver>(dir.file("rsyslog"), pki);
    receiver->start();
  }
  test::TestPki pki;
  std::unique_ptr<RsyslogReceiver> receiver;
};

TEST_F(SyslogTlsTest, DeliversOverTlsToTheReceiverTheCaVouchesFor) {
  SyslogSink sink(tls_options_for(*receiver, pki.ca_cert), context);  // the certificate's IP 127.0.0.1
  const ExportBatch first = make_batch(1, 5);
  const ExportBatch second = make_batch(6, 2, 50 * 1000);
  sink.deliver(first);
  sink.deliver(second);
  ASSERT_TRUE(receiver->wait_for_messages(9));
  EXPECT_EQ(receiver->messages(), messages_of({&first, &second}));
  EXPECT_EQ(receiver->headers(), headers_of({&first, &second}, 16, "zerod"));
}

TEST_F(SyslogTlsTest, ChecksTheCertificateAgainstServerName) {
  SyslogSinkOptions options = tls_options_for(*receiver, pki.ca_cert);
  options.server_name = "localhost";
  SyslogSink sink(options, context);
  const ExportBatch batch = make_batch(1, 2);
  sink.deliver(batch);
  ASSERT_TRUE(receiver->wait_for_messages(3));
  EXPECT_EQ(receiver->messages(), messages_of({&batch}));

  options.server_name = "other.example";
  SyslogSink misnamed(options, context);
  try {
    misnamed.deliver(batch);
    ADD_FAILURE() << "accepted a certificate for another name";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("certificate"), std::string::npos) << e.what();
  }
}

TEST_F(SyslogTlsTest, RefusesACertificateFromAnotherCa) {
  const test::TestPki other = test::make_test_pki(dir.path().string(), "b");
  SyslogSink sink(tls_options_for(*receiver, other.ca_cert), context);
  try {
    sink.deliver(make_batch(1, 2));
    ADD_FAILURE() << "accepted a certificate from another CA";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("certificate"), std::string::npos) << e.what();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(receiver->messages().empty());
}

TEST_F(SyslogTlsTest, AStalledHandshakeTimesOut) {
  receiver->pause();  // the kernel still accepts the connection; no one answers the hello
  SyslogSinkOptions options = tls_options_for(*receiver, pki.ca_cert);
  options.timeout = std::chrono::milliseconds(500);
  SyslogSink sink(options, context);
  const auto start = Clock::now();
  try {
    sink.deliver(make_batch(1, 1));
    ADD_FAILURE() << "a handshake nobody answered succeeded";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  EXPECT_LT(ms_since(start), 1500);
  receiver->resume();
}

}  // namespace
}  // namespace zn::broker::audit_sinks
