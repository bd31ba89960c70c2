// The data chains: each filter's output is the next one's input, in order,
// and a stop ends the chain there; the stream screen finds a tripwire split
// across reads before any of it passes, and across WebSocket messages when
// its last byte comes; the scrub redacts a secret split across pieces or
// messages and puts what it replaced in the audit record however the body
// ends; an unarmed connection gets no filter. Each stop beside its positive
// control.
#include "userspace/proxy/filters/data_filter.h"
#include "userspace/proxy/filters/response_scrub_filter.h"
#include "userspace/proxy/filters/stream_screen_filter.h"

#include "filter_fixture.h"
#include "userspace/proxy/filters/chain.h"

namespace zn::proxy::filters {
namespace {

const std::string kSecret = "sk_live_abcdef1234567890";
const std::string kTripwire = "AKIAZNCANARY00001";

// Appends `tag` to every piece; stops at `stop_on` (if given).
class TagFilter final : public DataFilter {
 public:
  TagFilter(std::string tag, std::vector<std::string>& log, std::string stop_on = "")
      : tag_(std::move(tag)), log_(log), stop_on_(std::move(stop_on)) {}
  std::string_view name() const override { return tag_; }
  DataResult on_data(std::string_view in, Mark mark, std::string& out) override {
    log_.push_back(tag_ + ":" + std::string(in) + (mark == Mark::kEnd ? "$" : ""));
    if (!stop_on_.empty() && in.find(stop_on_) != std::string_view::npos) return DataResult{{tag_}};
    out.append(in);
    out += tag_;
    return {};
  }
  void on_close() override { log_.push_back(tag_ + " closed"); }

 private:
  std::string tag_;
  std::vector<std::string>& log_;
  std::string stop_on_;
};

// Feeds `pieces` through `chain`, the last with end; what passed.
std::string through(DataChain& chain, const std::vector<std::string>& pieces, DataResult* stop = nullptr) {
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    DataResult r = chain.run(pieces[i], i + 1 == pieces.size(), out);
    if (r.stopped()) {
      if (stop) *stop = std::move(r);
      break;
    }
  }
  return out;
}

TEST(DataChainTest, NoFilterPassesTheBytesAsTheyCame) {
  DataChain chain;
  EXPECT_TRUE(chain.empty());
  EXPECT_EQ(through(chain, {"ab", "", "cd"}), "abcd");
}

TEST(DataChainTest, EachFiltersOutputIsTheNextOnesInputInOrder) {
  std::vector<std::string> log;
  DataChain chain;
  chain.add(std::make_unique<TagFilter>("1", log));
  chain.add(std::make_unique<TagFilter>("2", log));
  chain.add(std::make_unique<TagFilter>("3", log));
  EXPECT_EQ(chain.names(), (std::vector<std::string_view>{"1", "2", "3"}));
  EXPECT_EQ(through(chain, {"a", "b"}), "a123b123");
  EXPECT_EQ(log, (std::vector<std::string>{"1:a", "2:a1", "3:a12", "1:b$", "2:b1$", "3:b12$"}));
  chain.close();
  chain.close();  // once
  EXPECT_EQ(std::count(log.begin(), log.end(), "2 closed"), 1);
}

TEST(DataChainTest, AStopEndsTheChainThereAndNothingOfThatPiecePasses) {
  std::vector<std::string> log;
  DataChain chain;
  chain.add(std::make_unique<TagFilter>("1", log));
  chain.add(std::make_unique<TagFilter>("2", log, "bad"));
  chain.add(std::make_unique<TagFilter>("3", log));
  DataResult stop;
  const std::string out = through(chain, {"ok", "bad", "after"}, &stop);
  ASSERT_TRUE(stop.stopped());
  EXPECT_EQ(stop.tripwires, std::vector<std::string>{"2"});
  EXPECT_EQ(out, "ok123");  // the first piece only
  EXPECT_EQ(std::count(log.begin(), log.end(), "3:bad1"), 0);
  // Positive control: the same chain and pieces without the word.
  std::vector<std::string> clean_log;
  DataChain clean;
  clean.add(std::make_unique<TagFilter>("1", clean_log));
  clean.add(std::make_unique<TagFilter>("2", clean_log, "bad"));
  EXPECT_EQ(through(clean, {"ok", "good"}), "ok12good12");
}

class BodyChainsTest : public FilterTest {};

TEST_F(BodyChainsTest, AStreamedTripwireIsFoundAcrossReadsBeforeAnyOfItPasses) {
  ASSERT_TRUE(screen.arm({{kTripwire, "canary:0"}}));
  Request& r = get("/");
  DataChain chain = guest_data_chain(r.decision.substitutions, connection);
  ASSERT_EQ(chain.names(), std::vector<std::string_view>{"stream screen"});
  // Split at every third byte, and escaped as JSON would (\u0041 for A).
  std::vector<std::string> pieces = {"{\"k\":\"", "\\u0041KIAZN", "CANA", "RY00001\"}"};
  std::string out;
  DataResult stop;
  for (size_t i = 0; i < pieces.size() && !stop.stopped(); ++i)
    stop = chain.run(pieces[i], i + 1 == pieces.size(), out);
  ASSERT_TRUE(stop.stopped());
  EXPECT_EQ(stop.tripwires, std::vector<std::string>{"canary:0"});
  EXPECT_EQ(out.find("AKIA"), std::string::npos);
  EXPECT_EQ(out.find("\\u0041"), std::string::npos) << out;
  // Positive control: a body without it passes whole, nothing held back.
  DataChain clean = guest_data_chain(r.decision.substitutions, connection);
  EXPECT_EQ(through(clean, {"{\"k\":\"AKIAZN", "CANARY0000", "2\"}"}), "{\"k\":\"AKIAZNCANARY00002\"}");
}

TEST_F(BodyChainsTest, WithoutTripwiresOrSecretsThereIsNoFilter) {
  RequestSummary summary;
  EXPECT_TRUE(guest_data_chain({}, connection).empty());
  EXPECT_TRUE(upstream_data_chain(connection, summary).empty());
  // Positive control: armed, each has its filter.
  ASSERT_TRUE(screen.arm({{kTripwire, "canary:0"}}));
  ASSERT_TRUE(scrubber.add_secret(kSecret, "stripe"));
  EXPECT_FALSE(guest_data_chain({}, connection).empty());
  EXPECT_FALSE(upstream_data_chain(connection, summary).empty());
}

// A WebSocket's messages: each goes whole at its end, and the stream goes on.
TEST_F(BodyChainsTest, ATripwireSplitAcrossMessagesIsFoundWhenItsLastByteComes) {
  ASSERT_TRUE(screen.arm({{kTripwire, "canary:0"}}));
  DataChain chain = guest_data_chain({}, connection);
  std::string out;
  ASSERT_FALSE(chain.run("first AKIAZNCAN", Mark::kMessageEnd, out).stopped());
  EXPECT_EQ(out, "first AKIAZNCAN");  // delivered whole: a message cannot wait
  const DataResult r = chain.run("ARY00001 second", Mark::kMessageEnd, out);
  ASSERT_TRUE(r.stopped());
  EXPECT_EQ(r.tripwires, std::vector<std::string>{"canary:0"});
  EXPECT_EQ(out, "first AKIAZNCAN");  // nothing of the second
  // Positive control: the same two messages without the last byte matching.
  DataChain clean = guest_data_chain({}, connection);
  std::string clean_out;
  ASSERT_FALSE(clean.run("first AKIAZNCAN", Mark::kMessageEnd, clean_out).stopped());
  ASSERT_FALSE(clean.run("ARY00002 second", Mark::kMessageEnd, clean_out).stopped());
  EXPECT_EQ(clean_out, "first AKIAZNCANARY00002 second");
}

TEST_F(BodyChainsTest, ASecretSplitAcrossMessagesIsRedactedFromWhereItIsFound) {
  ASSERT_TRUE(scrubber.add_secret(kSecret, "stripe"));
  RequestSummary summary;
  DataChain chain = upstream_data_chain(connection, summary);
  std::string first, second;
  chain.run("one sk_live_abcdef12", Mark::kMessageEnd, first);
  chain.run("34567890 two", Mark::kMessageEnd, second);
  chain.close();
  EXPECT_EQ(first.rfind("one ", 0), 0u);
  EXPECT_EQ(first.find("sk_live_abcdef12"), std::string::npos)
      << first;  // a long partial match goes redacted
  EXPECT_EQ(second.find("34567890"), std::string::npos) << second;
  EXPECT_EQ(second.substr(second.size() - 4), " two");
  EXPECT_GE(summary.reflected_in_body, 1u);  // the part redacted at the boundary, and the rest
  // Positive control: messages that only look like its start go as they came.
  RequestSummary clean_summary;
  DataChain clean = upstream_data_chain(connection, clean_summary);
  std::string a, b;
  clean.run("one sk_", Mark::kMessageEnd, a);
  clean.run("two", Mark::kMessageEnd, b);
  EXPECT_EQ(a + b, "one sk_two");
}

TEST_F(BodyChainsTest, AResponseSecretSplitAcrossPiecesIsRedactedAndAudited) {
  ASSERT_TRUE(scrubber.add_secret(kSecret, "stripe"));
  RequestSummary summary;
  {
    DataChain chain = upstream_data_chain(connection, summary);
    ASSERT_EQ(chain.names(), std::vector<std::string_view>{"response scrub"});
    const std::string out = through(chain, {"echo: sk_live_ab", "cdef12345", "67890 and more"});
    EXPECT_EQ(out.find("sk_live"), std::string::npos) << out;
    EXPECT_EQ(out.size(), std::string("echo: ").size() + kSecret.size() + std::string(" and more").size());
    EXPECT_EQ(out.rfind(" and more"), out.size() - 9);
    chain.close();
  }
  EXPECT_EQ(summary.reflected_in_body, 1u);
  EXPECT_EQ(summary.reflected_in_head, 0u);
  EXPECT_EQ(summary.reflected_identities, std::vector<std::string>{"stripe"});
  // Positive control: a body without it passes unchanged, and nothing is noted.
  RequestSummary clean_summary;
  DataChain clean = upstream_data_chain(connection, clean_summary);
  EXPECT_EQ(through(clean, {"echo: sk_live_ab", "cdef12345"}), "echo: sk_live_abcdef12345");
  clean.close();
  EXPECT_EQ(clean_summary.reflected_in_body, 0u);
  EXPECT_TRUE(clean_summary.reflected_identities.empty());
}

TEST_F(BodyChainsTest, ABodyCutShortStillHasWhatWasRedactedAudited) {
  ASSERT_TRUE(scrubber.add_secret(kSecret, "stripe"));
  RequestSummary summary;
  DataChain chain = upstream_data_chain(connection, summary);
  std::string out;
  chain.run("a " + kSecret + " b " + kSecret.substr(0, 10), false, out);  // then the upstream fails
  chain.close();
  EXPECT_EQ(out.find(kSecret), std::string::npos);
  EXPECT_EQ(summary.reflected_in_body, 1u);
}

}  // namespace
}  // namespace zn::proxy::filters
