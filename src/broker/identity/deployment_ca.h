// The deployment CA: the certificate guests trust so the proxy can terminate
// TLS for intercepted hosts. Made on first start (ECDSA P-256), kept under
// the state dir, reused afterwards; only the certificate is ever handed out.
//
// zerod keeps the key sealed under the host key (secrets/sealer.h, like the
// resources in the state file): `ca.key` holds one znsealed envelope, never a
// PEM, so a copy of the state dir without the host key cannot mint a
// certificate guests trust. In memory the PEM is opened into guarded pages
// only long enough for OpenSSL to parse it.
#pragma once

#include <openssl/types.h>

#include <memory>
#include <string>

#include "broker/secrets/host_key.h"

namespace zn::broker {

struct DeploymentCaPaths {
  std::string cert;  // PEM, 0644: give this to guests
  std::string key;   // 0600, never leaves the host: sealed (zerod), or PEM (ensure_deployment_ca)
};

struct DeploymentCa {
  DeploymentCaPaths paths;
  std::shared_ptr<EVP_PKEY> key;  // opened from the sealed file
};

// The context a CA key is sealed for (the sealer's associated data).
inline constexpr const char* kDeploymentCaKeyContext = "deployment-ca/key";

// Loads the CA in dir, or creates it, its key sealed under `host_key`; a
// key sealed under `rotating_to` (a rotation a crash interrupted) opens too.
// A plain PEM key from before sealing is sealed in place (written sealed
// beside it, fsync'ed, renamed over it) before it is used. Throws
// std::runtime_error naming the file and the problem, never key bytes: a key
// that opens under no key, a key file readable by group or others, only one
// of the two files. Nothing is ever regenerated over an existing file.
DeploymentCa open_deployment_ca(const std::string& dir, const HostKey& host_key,
                                const HostKey* rotating_to = nullptr,
                                const std::string& common_name = "zeroness deployment CA");

// Host key rotation: the sealed key re-sealed from `from` to `to` (kept as
// it is if already under `to`), replaced atomically. Throws; on error the
// file is unchanged.
void reseal_deployment_ca(const std::string& dir, const HostKey& from, const HostKey& to);

// Whether dir holds a sealed CA key (then a missing host key is a refusal).
bool deployment_ca_sealed(const std::string& dir);

// A CA with its key as a plain PEM (0600): for tests and tools that hold no
// host key. zerod never uses it.
DeploymentCaPaths ensure_deployment_ca(const std::string& dir,
                                       const std::string& common_name = "zeroness deployment CA");

}  // namespace zn::broker
