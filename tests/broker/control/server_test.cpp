// The control server tells a handler who called: the peer's uid and pid
// from SO_PEERCRED (what approvals and grants record as the decider).
#include "broker/control/server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "support/temp_dir.h"

namespace zn::broker {
namespace {

TEST(ControlServer, AHandlerWithTheCallerSeesThePeersCredentials) {
  zn::test::TempDir dir;
  const std::string socket = dir.file("ctl/zerod.sock");
  ControlServer server(socket, ::geteuid());
  server.handle_with_caller("whoami", [](const nlohmann::json& args, const ControlCaller& caller) {
    return nlohmann::json{{"uid", caller.uid}, {"pid", caller.pid}, {"echo", args.value("x", 0)}};
  });
  server.handle("plain", [](const nlohmann::json&) { return nlohmann::json{{"plain", true}}; });
  server.start();
  const nlohmann::json r = control_call(socket, "whoami", {{"x", 7}});
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_EQ(r["result"]["uid"], ::geteuid());
  EXPECT_EQ(r["result"]["pid"], ::getpid());
  EXPECT_EQ(r["result"]["echo"], 7);
  EXPECT_EQ(control_call(socket, "plain")["result"]["plain"], true);
  server.stop();
}

}  // namespace
}  // namespace zn::broker
