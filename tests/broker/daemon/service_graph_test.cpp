// zerod's services with declared lifetimes: each starts after what it
// needs, they stop in reverse, a failed start stops what had started, and a
// declaration that cannot be ordered is refused before anything starts.
// zerod's own declaration is the graph docs/HACKING.md shows.
#include "broker/daemon/service_graph.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "broker/daemon/zerod_services.h"

namespace zn::broker {
namespace {

struct Journal {
  std::vector<std::string> lines;
  void bind_all(ServiceGraph& g, const std::vector<std::string>& names, const std::string& failing = "") {
    for (const std::string& n : names)
      g.bind(
          n,
          [this, n, failing] {
            if (n == failing) throw std::runtime_error(n + " could not start");
            lines.push_back("start " + n);
          },
          [this, n] { lines.push_back("stop " + n); });
  }
};

TEST(ServiceGraph, StartsEachAfterWhatItNeedsAndStopsInReverse) {
  // Declared in an order that would be wrong: the needs decide.
  ServiceGraph g({{"proxy", {"policy", "audit"}, ""}, {"policy", {"audit"}, ""}, {"audit", {}, ""}});
  Journal j;
  j.bind_all(g, {"proxy", "policy", "audit"});
  EXPECT_EQ(g.order(), (std::vector<std::string>{"audit", "policy", "proxy"}));
  g.start_all();
  g.stop_all();
  g.stop_all();  // idempotent: nothing stops twice
  EXPECT_EQ(j.lines, (std::vector<std::string>{"start audit", "start policy", "start proxy", "stop proxy",
                                               "stop policy", "stop audit"}));
}

TEST(ServiceGraph, IndependentServicesKeepTheirDeclarationOrder) {
  ServiceGraph g({{"c", {}, ""}, {"a", {}, ""}, {"b", {"a"}, ""}, {"d", {}, ""}});
  EXPECT_EQ(g.order(), (std::vector<std::string>{"c", "a", "b", "d"}));
}

TEST(ServiceGraph, AFailedStartStopsWhatHadStartedInReverseAndThrows) {
  for (const std::string failing : {"", "c"}) {
    SCOPED_TRACE(failing.empty() ? "control: nothing fails" : "c fails");
    ServiceGraph g({{"a", {}, ""}, {"b", {"a"}, ""}, {"c", {"b"}, ""}, {"d", {"c"}, ""}});
    Journal j;
    j.bind_all(g, {"a", "b", "c", "d"}, failing);
    if (failing.empty()) {
      g.start_all();
      EXPECT_EQ(j.lines.back(), "start d");
      continue;
    }
    EXPECT_THROW(g.start_all(), std::runtime_error);
    // d never started; c failed, so it is not stopped either.
    EXPECT_EQ(j.lines, (std::vector<std::string>{"start a", "start b", "stop b", "stop a"}));
    g.stop_all();
    EXPECT_EQ(j.lines.size(), 4u);
  }
}

TEST(ServiceGraph, ADeclarationThatCannotBeOrderedIsRefused) {
  EXPECT_THROW(ServiceGraph({{"a", {"b"}, ""}, {"b", {"a"}, ""}}), std::invalid_argument);
  EXPECT_THROW(ServiceGraph({{"a", {"a"}, ""}}), std::invalid_argument);
  EXPECT_THROW(ServiceGraph({{"a", {"ghost"}, ""}}), std::invalid_argument);
  EXPECT_THROW(ServiceGraph({{"a", {}, ""}, {"a", {}, ""}}), std::invalid_argument);
  EXPECT_NO_THROW(ServiceGraph({{"a", {}, ""}, {"b", {"a"}, ""}}));  // the control
}

TEST(ServiceGraph, EveryServiceMustBeBoundOnceBeforeAnythingStarts) {
  ServiceGraph g({{"a", {}, ""}, {"b", {}, ""}});
  Journal j;
  j.bind_all(g, {"a"});
  EXPECT_THROW(g.start_all(), std::logic_error);
  EXPECT_TRUE(j.lines.empty());  // refused before a starts
  EXPECT_THROW(g.bind("a", {}), std::invalid_argument);
  EXPECT_THROW(g.bind("ghost", {}), std::invalid_argument);
  g.bind("b", {});
  g.start_all();
  EXPECT_EQ(j.lines, std::vector<std::string>{"start a"});
}

TEST(ServiceGraph, AStopThatThrowsIsReportedAndTheOthersStillStop) {
  ServiceGraph g({{"a", {}, ""}, {"b", {"a"}, ""}});
  std::vector<std::string> stopped, reported;
  g.bind(
      "a", [] {}, [&] { stopped.push_back("a"); });
  g.bind(
      "b", [] {}, [&]() -> void { throw std::runtime_error("stuck"); });
  g.start_all();
  g.stop_all([&](const std::string& service, const std::string& what) {
    reported.push_back(service + ": " + what);
  });
  EXPECT_EQ(reported, std::vector<std::string>{"b: stuck"});
  EXPECT_EQ(stopped, std::vector<std::string>{"a"});
}

// zerod's declaration orders, and docs/HACKING.md shows exactly it: the
// block between the two markers is describe()'s text.
TEST(ZerodServices, TheGraphInHackingIsTheDeclaration) {
  const ServiceGraph g(zerod_services());
  std::ifstream in(std::string(ZN_SOURCE_DIR) + "/docs/HACKING.md");
  ASSERT_TRUE(in) << "docs/HACKING.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string begin = "<!-- zerod services: begin -->\n```\n",
                    end = "```\n<!-- zerod services: end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "no services block in docs/HACKING.md";
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), g.describe())
      << "docs/HACKING.md's zerod services block must read:\n"
      << g.describe();
  // What the order must hold whatever else changes.
  const std::vector<std::string> order = g.order();
  auto at = [&order](const std::string& name) {
    return std::find(order.begin(), order.end(), name) - order.begin();
  };
  EXPECT_LT(at("participants"), at("restore"));    // every part joins before a session is restored
  EXPECT_LT(at("restore"), at("proxy"));           // nothing is served before the sessions are there
  EXPECT_LT(at("proxy"), at("capability_calls"));  // calls stop while the proxy's loops run
  EXPECT_EQ(order.back(), "control");              // the first to stop
  EXPECT_EQ(order.front(), "netns");
}

}  // namespace
}  // namespace zn::broker
