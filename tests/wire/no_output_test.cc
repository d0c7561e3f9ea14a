// no_output on TokenInput and HiddenFrame: a prompt chunk whose outputs
// nobody needs. Round trips keep it, the hidden frame's digest binds it,
// and a step that asks for no output and for a chosen token is refused.
#include <gtest/gtest.h>

#include "tests/wire/wire_test_util.h"
#include "wire/hidden_frame.h"
#include "wire/messages.h"

namespace lockstep::wire {
namespace {

TokenInput Chunk() {
  TokenInput in;
  in.phase = TokenInput::Phase::kPrefill;
  in.session_id = 3;
  in.step = 4;
  in.first_position = 64;
  in.token_ids = {6, 7, 8};
  return in;
}

TEST(NoOutputTest, TokenInputCarriesIt) {
  TokenInput in = Chunk();
  Result<Message> plain = ParseMessage(MarshalMessage(in));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(std::get<TokenInput>(*plain).no_output);
  in.no_output = true;
  Result<Message> out = ParseMessage(MarshalMessage(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::get<TokenInput>(*out).no_output);
  EXPECT_EQ(std::get<TokenInput>(*out).token_ids, in.token_ids);
}

TEST(NoOutputTest, HiddenFrameCarriesItUnderItsDigest) {
  HiddenFrame in = testing::MakeHidden(3, 8, 11);
  const Digest without = HiddenFrameDigest(in);
  in.no_output = true;
  EXPECT_NE(HiddenFrameDigest(in), without);
  Result<HiddenFrame> out = UnmarshalHidden(MarshalHidden(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->no_output);
  EXPECT_TRUE(testing::SameBits(out->payload, in.payload));
}

TEST(NoOutputTest, WithAHandoffIsRefused) {
  Sha256Stream chain;
  TokenInput in = Chunk();
  in.no_output = true;
  in.handoff = ChainHandoff{0, chain.Export()};
  Result<Message> t = ParseMessage(MarshalMessage(in));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(t.status().message().find("noOutput with a chain handoff"), std::string::npos);

  HiddenFrame h = testing::MakeHidden(1, 8, 5);
  h.no_output = true;
  h.handoff = ChainHandoff{0, chain.Export()};
  Result<HiddenFrame> f = UnmarshalHidden(MarshalHidden(h));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(f.status().message().find("noOutput with a chain handoff"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::wire
