// Certificates for the TLS receivers, made with the openssl command: a CA and
// a server certificate it signs for 127.0.0.1 and localhost.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace zn::broker::test {

struct TestPki {
  std::string ca_cert;
  std::string server_cert;
  std::string server_key;
};

inline void run_openssl(const std::string& args, const std::string& log) {
  const std::string command = "openssl " + args + " >>" + log + " 2>&1";
  if (std::system(command.c_str()) != 0)
    throw std::runtime_error("failed: " + command + " (see " + log + ")");
}

// Files under dir, named after prefix ("a" -> dir/a-ca.pem, dir/a-server.pem, ...).
inline TestPki make_test_pki(const std::string& dir, const std::string& prefix) {
  const std::string base = dir + "/" + prefix;
  const std::string log = base + "-openssl.log";
  TestPki pki{base + "-ca.pem", base + "-server.pem", base + "-server.key"};
  run_openssl(
      "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=zn-test-" + prefix +
          "-ca -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign" +
          " -keyout " + base + "-ca.key -out " + pki.ca_cert,
      log);
  run_openssl("req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost -keyout " +
                  pki.server_key + " -out " + base + "-server.csr",
              log);
  const std::string ext = base + "-server.ext";
  const std::string write_ext =
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > " + ext;
  if (std::system(write_ext.c_str()) != 0) throw std::runtime_error("cannot write " + ext);
  run_openssl("x509 -req -days 2 -in " + base + "-server.csr -CA " + pki.ca_cert + " -CAkey " + base +
                  "-ca.key -CAcreateserial -extfile " + ext + " -out " + pki.server_cert,
              log);
  return pki;
}

}  // namespace zn::broker::test
