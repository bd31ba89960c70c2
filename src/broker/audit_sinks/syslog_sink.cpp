#include "broker/audit_sinks/syslog_sink.h"

#include <linux/sockios.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>

#include "broker/audit/event.h"
#include "userspace/net/address.h"
#include "userspace/net/unique_fd.h"

namespace zn::broker::audit_sinks {

using audit_export::ExportBatch;
using audit_export::SinkError;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSeverityNotice = 5;
constexpr int kSeverityInfo = 6;

// RFC 5424 header fields are PRINTUSASCII (33..126) with a maximum length,
// or the nil value "-".
std::string header_field(std::string_view value, size_t max_len) {
  if (value.empty()) return "-";
  std::string out(value.substr(0, max_len));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 33 || u > 126) c = '_';
  }
  return out;
}

std::string errno_text(int err) { return std::strerror(err); }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

// OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE on a
// connection the receiver closed; this one sends with MSG_NOSIGNAL, so a
// dead receiver is an error value, never a signal to the whole daemon.
int bio_write(BIO* bio, const char* data, int len) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  const ssize_t n = ::send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int bio_read(BIO* bio, char* out, int len) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  const ssize_t n = ::recv(fd, out, static_cast<size_t>(len), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

BIO_METHOD* nosigpipe_socket_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "zn syslog socket");
    if (!m || !BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
        !BIO_meth_set_ctrl(m, bio_ctrl))
      throw std::runtime_error("BIO_meth_new failed");
    return m;
  }();
  return method;
}

// The newest OpenSSL error, or what the socket said, for a failed call.
std::string tls_failure(SSL* ssl, int ret, int saved_errno) {
  const int code = SSL_get_error(ssl, ret);
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK)
    return std::string("certificate refused: ") + X509_verify_cert_error_string(verify);
  if (const unsigned long err = ERR_peek_last_error(); err != 0) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof(buf));
    return buf;
  }
  if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && saved_errno == 0))
    return "connection closed by the receiver";
  if (code == SSL_ERROR_SYSCALL) return errno_text(saved_errno);
  return "TLS error " + std::to_string(code);
}

}  // namespace

std::string syslog_message(int facility, int severity, const std::string& timestamp, const std::string& host,
                           const std::string& app_name, const std::string& msgid, const std::string& msg) {
  // No BOM before MSG: RFC 5424 allows MSG-ANY, and a receiver that parses
  // the JSON line would have to strip one.
  std::string out = "<" + std::to_string(facility * 8 + severity) + ">1 ";
  out += header_field(timestamp, 32) + ' ';
  out += header_field(host, 255) + ' ';
  out += header_field(app_name, 48) + ' ';
  out += std::to_string(::getpid()) + ' ';
  out += header_field(msgid, 32) + " - ";
  out += msg;
  return out;
}

struct SyslogSink::TlsContext {
  SSL_CTX* ctx = nullptr;
  ~TlsContext() { SSL_CTX_free(ctx); }
};

// One TCP (or TLS over TCP) connection to the receiver, non-blocking, every
// wait bounded by a deadline.
class SyslogSink::Connection {
 public:
  Connection(const SyslogSinkOptions& options, SSL_CTX* tls, std::string where)
      : where_(std::move(where)), timeout_(options.timeout) {
    const auto deadline = Clock::now() + timeout_;
    connect_tcp(options.host, options.port, deadline);
    if (tls) handshake(tls, options.server_name.empty() ? options.host : options.server_name, deadline);
  }
  ~Connection() {
    if (ssl_) {
      ERR_clear_error();
      SSL_shutdown(ssl_.get());  // one try at close_notify; never waits
    }
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // False when the receiver closed or reset the connection since the last
  // batch. A syslog receiver never sends data; TLS may (session tickets),
  // which is read and dropped here.
  bool alive() {
    pollfd p{fd_.get(), POLLIN | POLLRDHUP, 0};
    const int n = ::poll(&p, 1, 0);
    if (n < 0) return false;
    if (n == 0) return true;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return false;
    char scratch[4096];
    for (;;) {
      if (ssl_) {
        ERR_clear_error();
        const int r = SSL_read(ssl_.get(), scratch, sizeof(scratch));
        if (r > 0) continue;
        return SSL_get_error(ssl_.get(), r) == SSL_ERROR_WANT_READ;
      }
      const ssize_t r = ::recv(fd_.get(), scratch, sizeof(scratch), MSG_DONTWAIT);
      if (r > 0) continue;
      return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }

  // Writes everything; fails when no byte could be written for `timeout`.
  void write_all(std::string_view data) {
    auto deadline = Clock::now() + timeout_;
    while (!data.empty()) {
      const size_t chunk = std::min<size_t>(data.size(), INT_MAX);
      ssize_t n;
      short want = POLLOUT;
      if (ssl_) {
        ERR_clear_error();
        errno = 0;
        const int r = SSL_write(ssl_.get(), data.data(), static_cast<int>(chunk));
        const int saved_errno = errno;
        n = r;
        if (r <= 0) {
          const int code = SSL_get_error(ssl_.get(), r);
          if (code == SSL_ERROR_WANT_READ)
            want = POLLIN;
          else if (code != SSL_ERROR_WANT_WRITE)
            fail("write: " + tls_failure(ssl_.get(), r, saved_errno));
        }
      } else {
        n = ::send(fd_.get(), data.data(), chunk, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          fail("write: " + errno_text(errno));
      }
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        deadline = Clock::now() + timeout_;
        continue;
      }
      if (!wait_for(want, deadline))
        fail("write: no progress for " + std::to_string(timeout_.count()) + " ms (" +
             std::to_string(data.size()) + " bytes left)");
    }
  }

  // Returns once the receiver's TCP stack acknowledged every byte written.
  void wait_acknowledged() {
    const auto deadline = Clock::now() + timeout_;
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
      int unacknowledged = 0;
      if (::ioctl(fd_.get(), SIOCOUTQ, &unacknowledged) != 0) fail("SIOCOUTQ: " + errno_text(errno));
      if (unacknowledged == 0) return;
      pollfd p{fd_.get(), 0, 0};
      if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP)))
        fail("connection lost with " + std::to_string(unacknowledged) +
             " bytes unacknowledged: " + socket_error());
      if (Clock::now() >= deadline)
        fail(std::to_string(unacknowledged) + " bytes not acknowledged within " +
             std::to_string(timeout_.count()) + " ms");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw SinkError(where_ + ": " + what); }

  std::string socket_error() const {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    return err ? errno_text(err) : "closed by the receiver";
  }

  // False on timeout; POLLERR and POLLHUP count as ready (the next call says why).
  bool wait_for(short events, Clock::time_point deadline) const {
    for (;;) {
      pollfd p{fd_.get(), events, 0};
      const int n = ::poll(&p, 1, remaining_ms(deadline));
      if (n > 0) return true;
      if (n == 0) return false;
      if (errno != EINTR) fail("poll: " + errno_text(errno));
    }
  }

  void connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    // getaddrinfo cannot be given a deadline; the resolver's own timeouts
    // (resolv.conf) bound it. An IP literal never reaches a resolver.
    if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
      fail(std::string("resolve: ") + ::gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);
    std::string last_error = "no address";
    for (const addrinfo* ai = found; ai; ai = ai->ai_next) {
      net::UniqueFd fd(
          ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd) {
        last_error = errno_text(errno);
        continue;
      }
      fd_ = std::move(fd);
      if (::connect(fd_.get(), ai->ai_addr, ai->ai_addrlen) == 0) return;
      if (errno != EINPROGRESS) {
        last_error = errno_text(errno);
        continue;
      }
      if (!wait_for(POLLOUT, deadline))
        fail("connect: timed out after " + std::to_string(timeout_.count()) + " ms");
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) return;
      last_error = errno_text(err);
    }
    fd_.reset();
    fail("connect: " + last_error);
  }

  void handshake(SSL_CTX* ctx, const std::string& name, Clock::time_point deadline) {
    ssl_.reset(SSL_new(ctx));
    BIO* bio = ssl_ ? BIO_new(nosigpipe_socket_method()) : nullptr;
    if (!bio) fail("TLS: out of memory");
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd_.get())));
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl_.get(), bio, bio);
    bool named;
    if (net::IpAddress::parse(name)) {
      named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), name.c_str()) == 1;
    } else {
      SSL_set_hostflags(ssl_.get(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      named = SSL_set_tlsext_host_name(ssl_.get(), name.c_str()) == 1 &&
              SSL_set1_host(ssl_.get(), name.c_str()) == 1;
    }
    if (!named) fail("TLS: cannot check the certificate against \"" + name + "\"");
    for (;;) {
      ERR_clear_error();
      errno = 0;
      const int r = SSL_connect(ssl_.get());
      const int saved_errno = errno;
      if (r == 1) return;
      const int code = SSL_get_error(ssl_.get(), r);
      short want;
      if (code == SSL_ERROR_WANT_READ)
        want = POLLIN;
      else if (code == SSL_ERROR_WANT_WRITE)
        want = POLLOUT;
      else
        fail("TLS handshake: " + tls_failure(ssl_.get(), r, saved_errno));
      if (!wait_for(want, deadline))
        fail("TLS handshake: timed out after " + std::to_string(timeout_.count()) + " ms");
    }
  }

  std::string where_;
  std::chrono::milliseconds timeout_;
  net::UniqueFd fd_;
  struct SslFree {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };
  // Freed by its own destructor, so also when the constructor throws.
  std::unique_ptr<SSL, SslFree> ssl_;
};

SyslogSink::SyslogSink(SyslogSinkOptions options, audit_export::SinkContext context)
    : options_(std::move(options)), context_(std::move(context)) {}

SyslogSink::~SyslogSink() = default;

std::string SyslogSink::where() const {
  const bool v6 = options_.host.find(':') != std::string::npos;
  return std::string("syslog ") + (options_.tls ? "tls " : "tcp ") + (v6 ? "[" : "") + options_.host +
         (v6 ? "]" : "") + ":" + std::to_string(options_.port);
}

std::string SyslogSink::frame(const ExportBatch& batch) const {
  std::string out;
  const auto append = [&out](const std::string& message) {
    out += std::to_string(message.size());
    out += ' ';
    out += message;
  };
  for (size_t i = 0; i < batch.lines.size(); ++i) {
    const bool has_record = i < batch.records.size();
    const std::string category = has_record ? audit_export::event_category(batch.records[i].event) : "";
    const std::string ts = has_record ? batch.records[i].ts : "";
    append(syslog_message(options_.facility, kSeverityInfo, ts, context_.host, options_.app_name, category,
                          batch.lines[i]));
  }
  if (!batch.seal_line.empty())
    append(syslog_message(options_.facility, kSeverityNotice,
                          format_audit_ts(std::chrono::system_clock::now()), context_.host, options_.app_name,
                          "audit-seal", batch.seal_line));
  return out;
}

SSL_CTX* SyslogSink::tls_context() {
  if (!options_.tls) return nullptr;
  if (tls_) return tls_->ctx;
  auto tls = std::make_unique<TlsContext>();
  tls->ctx = SSL_CTX_new(TLS_client_method());
  if (!tls->ctx) throw SinkError(where() + ": SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(tls->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(tls->ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(tls->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  ERR_clear_error();
  const bool loaded = options_.ca_file.empty()
                          ? SSL_CTX_set_default_verify_paths(tls->ctx) == 1
                          : SSL_CTX_load_verify_file(tls->ctx, options_.ca_file.c_str()) == 1;
  ERR_clear_error();
  // Not kept on failure: the next batch tries the file again, once fixed.
  if (!loaded) throw SinkError(where() + ": cannot load the CA certificates " + options_.ca_file);
  tls_ = std::move(tls);
  return tls_->ctx;
}

void SyslogSink::deliver(const ExportBatch& batch) {
  const std::string frames = frame(batch);
  try {
    if (connection_ && !connection_->alive()) connection_.reset();
    if (!connection_) connection_ = std::make_unique<Connection>(options_, tls_context(), where());
    connection_->write_all(frames);
    connection_->wait_acknowledged();
  } catch (const SinkError&) {
    connection_.reset();
    throw;
  } catch (const std::exception& e) {  // out of memory and the like: still a batch to try again
    connection_.reset();
    throw SinkError(where() + ": " + e.what());
  }
}

void SyslogSink::close() { connection_.reset(); }

}  // namespace zn::broker::audit_sinks
