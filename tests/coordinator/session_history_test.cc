// SessionHistory on its own: a replay gives back every feed in the chunks
// it was sent, at the positions it had, and every eviction at its point,
// and stops at the first feed that fails. The Recovery cluster tests show
// the replayed caches equal the originals bit for bit.
#include "coordinator/session_history.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lockstep {
namespace {

// One replayed event as text: "feed@POS:T,T,..." or "evict FROM+COUNT".
std::vector<std::string> Replayed(const SessionHistory& h, Status* st = nullptr,
                                  size_t fail_at_feed = SIZE_MAX) {
  std::vector<std::string> got;
  size_t feeds = 0;
  const Status s = h.Replay(
      [&](std::span<const uint32_t> tokens, uint32_t pos) {
        if (feeds++ == fail_at_feed) return DisconnectedError("stage gone");
        std::string e = "feed@" + std::to_string(pos) + ":";
        for (uint32_t t : tokens) e += std::to_string(t) + ",";
        got.push_back(e);
        return Status::Ok();
      },
      [&](uint32_t from, uint32_t count) {
        got.push_back("evict " + std::to_string(from) + "+" + std::to_string(count));
      });
  if (st != nullptr) *st = s;
  return got;
}

TEST(SessionHistory, ReplaysFeedsInTheirChunksAndEvictionsAtTheirPoints) {
  SessionHistory h;
  const std::vector<uint32_t> prompt{5, 6, 7, 8}, one{9}, two{10};
  h.Fed(prompt);
  h.Fed(one);
  h.Evicted(1, 2);  // the cache is 5 long, then 3
  h.Fed(two);
  EXPECT_EQ(h.length(), 4u);
  EXPECT_EQ(h.tokens_fed(), 6u);
  const std::vector<std::string> expected{"feed@0:5,6,7,8,", "feed@4:9,", "evict 1+2",
                                          "feed@3:10,"};
  EXPECT_EQ(Replayed(h), expected);
}

TEST(SessionHistory, AForkCarriesItsSourcesHistoryAndThenGoesItsOwnWay) {
  SessionHistory source;
  const std::vector<uint32_t> prompt{1, 2, 3}, a{4}, b{5};
  source.Fed(prompt);
  SessionHistory fork = source;
  source.Fed(a);
  fork.Fed(b);
  EXPECT_EQ(Replayed(source), (std::vector<std::string>{"feed@0:1,2,3,", "feed@3:4,"}));
  EXPECT_EQ(Replayed(fork), (std::vector<std::string>{"feed@0:1,2,3,", "feed@3:5,"}));
}

TEST(SessionHistory, AReplayStopsAtTheFirstFeedThatFails) {
  SessionHistory h;
  const std::vector<uint32_t> a{1, 2}, b{3}, c{4};
  h.Fed(a);
  h.Fed(b);
  h.Evicted(0, 1);
  h.Fed(c);
  Status st;
  EXPECT_EQ(Replayed(h, &st, 1), (std::vector<std::string>{"feed@0:1,2,"}));
  EXPECT_EQ(st.kind(), ErrorKind::kDisconnected);
  EXPECT_EQ(st.message(), "stage gone");
}

TEST(SessionHistory, AnEmptyHistoryReplaysNothing) {
  SessionHistory h;
  Status st = InternalError("unset");
  EXPECT_TRUE(Replayed(h, &st).empty());
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(h.length(), 0u);
}

}  // namespace
}  // namespace lockstep
