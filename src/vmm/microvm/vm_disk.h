// A VM's disk (issue 14): a writable overlay of its own on a base image the
// VMs share and never write, in the VM's directory, so it goes with the VM.
//
// Encrypted (the default), the overlay is a qcow2 image inside a LUKS1
// container (cryptsetup makes the header, QEMU's luks driver opens it): its
// data and its metadata, the base's path included, are ciphertext, so a
// copied overlay reveals nothing. The key is 32 random bytes made per VM by
// zerod and never stored: it reaches cryptsetup on a pipe as its stdin and
// qemu-img and QEMU as a `secret` object read from an inherited pipe (never a
// command line, which /proc shows to everyone, nor a file). When the VM goes
// its overlay is deleted, so nothing needs the key again.
//
// Why not qcow2's built-in LUKS (encrypt.format=luks): qemu-img sizes that
// header's PBKDF by timing itself with the thread's user CPU time, which on
// hosts with tick-based accounting reads 0 for a third to half of the runs
// and fails ("Unable to get accurate CPU usage"), after a second or more of
// CPU each time. cryptsetup takes a fixed count; a full-entropy key gains
// nothing from stretching.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zn::vmm {

// The base as QEMU will read it.
struct BaseImage {
  std::string path;    // as given (the overlay's header names it)
  std::string format;  // "raw" or "qcow2"
  uint64_t virtual_size = 0;
};

// The per-VM key: 32 random bytes (libsodium), as base64 text since LUKS
// passphrases and QEMU's secrets are text. Zeroed when it goes.
class DiskKey {
 public:
  DiskKey();
  ~DiskKey();
  DiskKey(const DiskKey&) = delete;
  DiskKey& operator=(const DiskKey&) = delete;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A pipe holding `bytes` with its write end closed (the reader gets them and
// then EOF), owned by uid:gid so a process of that uid can reopen it through
// /proc/self/fd (QEMU's `secret,file=`). The read end is returned (O_CLOEXEC).
int key_pipe(const std::string& bytes, uid_t uid, gid_t gid);

// An executable named `name`: beside `beside` (a binary's path) when given
// and there, else on PATH, else /usr/sbin or /sbin; "" when none.
std::string find_tool(const std::string& name, const std::string& beside = "");

struct ToolResult {
  int status = -1;     // the exit code; -1 when it did not exit normally
  std::string output;  // stdout and stderr
};
// Runs argv (argv[0] an absolute path) with `input` on its stdin and
// `pass_fd` (if >= 0) as its fd 3, nothing else of the caller's open; waits.
ToolResult run_tool(const std::vector<std::string>& argv, const std::string& input = "", int pass_fd = -1);

// `qemu-img info` of the open base (`fd`, read through /proc/self/fd: the
// file inspected is the file QEMU gets). Throws std::runtime_error naming
// `path` when it is not a raw or qcow2 image, or when it is a qcow2 with a
// backing file or an external data file of its own (QEMU would open those
// by name, past what zerod gave the VM).
BaseImage inspect_base(const std::string& qemu_img, const std::string& path, int fd);

struct OverlayTools {
  std::string qemu_img;
  std::string cryptsetup;  // only when encrypting
};
// The overlay's file name in the VM's directory.
std::string overlay_name(bool encrypted);
// Creates it in `dir` (0600, owned by uid:gid) on `base`; encrypted under
// `key` when key is not null. Throws std::runtime_error with the tool's
// output (never the key) when a step fails; nothing is left behind then.
void create_overlay(const OverlayTools& tools, const std::string& dir, const BaseImage& base,
                    const DiskKey* key, uid_t uid, gid_t gid);

}  // namespace zn::vmm
