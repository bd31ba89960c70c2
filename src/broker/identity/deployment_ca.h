// The deployment CA: the certificate guests trust so the proxy can terminate
// TLS for intercepted hosts. Made on first start (ECDSA P-256), kept under
// the state dir (key 0600), reused afterwards; only the certificate is ever
// handed out.
#pragma once

#include <string>

namespace zn::broker {

struct DeploymentCaPaths {
  std::string cert;  // PEM, 0644: give this to guests
  std::string key;   // PEM, 0600: never leaves the host
};

// Loads the CA in dir, or creates it. Throws std::runtime_error; refuses a
// key file readable by group or others.
DeploymentCaPaths ensure_deployment_ca(const std::string& dir,
                                       const std::string& common_name = "zeroness deployment CA");

}  // namespace zn::broker
