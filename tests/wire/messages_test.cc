#include "wire/messages.h"

#include <gtest/gtest.h>

#include <cstring>

#include <capnp/message.h>

#include "tests/wire/wire_test_util.h"
#include "wire/envelope.h"

namespace lockstep::wire {
namespace {

Digest DigestOf(const char* s) { return Sha256(std::string_view(s)); }

template <typename T>
T RoundTrip(const T& in) {
  Frame frame = MarshalMessage(Message(in));
  Result<Message> out = ParseMessage(frame);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return T{};
  EXPECT_TRUE(std::holds_alternative<T>(*out)) << MessageName(*out);
  return std::holds_alternative<T>(*out) ? std::get<T>(*out) : T{};
}

TEST(MessagesTest, HelloRoundTrips) {
  Hello in;
  in.worker_id = "worker-3";
  in.weights_sha256 = DigestOf("w");
  in.config_sha256 = DigestOf("c");
  in.tokenizer_sha256 = DigestOf("t");
  in.table_digest = DigestOf("tab");
  in.inv_freq_table_digest = DigestOf("inv");
  in.isa = "avx2";
  Hello out = RoundTrip(in);
  EXPECT_EQ(out.worker_id, "worker-3");
  EXPECT_EQ(out.protocol_version, kProtocolVersion);
  EXPECT_EQ(out.weights_sha256, in.weights_sha256);
  EXPECT_EQ(out.config_sha256, in.config_sha256);
  EXPECT_EQ(out.tokenizer_sha256, in.tokenizer_sha256);
  EXPECT_EQ(out.table_digest, in.table_digest);
  EXPECT_EQ(out.inv_freq_table_digest, in.inv_freq_table_digest);
  EXPECT_EQ(out.isa, "avx2");
}

TEST(MessagesTest, AssignRoundTrips) {
  Assign in;
  in.model_dir = "/models/smollm2-135m";
  in.expected_weights_sha256 = DigestOf("w");
  in.expected_config_sha256 = DigestOf("c");
  in.expected_tokenizer_sha256 = DigestOf("t");
  in.layer_lo = 10;
  in.layer_hi = 20;
  in.is_first = false;
  in.is_last = true;
  in.next_hop = "";
  in.worker_index = 1;
  in.next_hop_key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  in.upstream_key = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
  Assign out = RoundTrip(in);
  EXPECT_EQ(out.model_dir, in.model_dir);
  EXPECT_EQ(out.expected_weights_sha256, in.expected_weights_sha256);
  EXPECT_EQ(out.expected_config_sha256, in.expected_config_sha256);
  EXPECT_EQ(out.expected_tokenizer_sha256, in.expected_tokenizer_sha256);
  EXPECT_EQ(out.layer_lo, 10u);
  EXPECT_EQ(out.layer_hi, 20u);
  EXPECT_FALSE(out.is_first);
  EXPECT_TRUE(out.is_last);
  EXPECT_EQ(out.next_hop, "");
  EXPECT_EQ(out.worker_index, 1u);
  EXPECT_EQ(out.next_hop_key, in.next_hop_key);
  EXPECT_EQ(out.upstream_key, in.upstream_key);
}

TEST(MessagesTest, SmallMessagesRoundTrip) {
  AssignAck ack = RoundTrip(AssignAck{2, 5, 9});
  EXPECT_EQ(ack.worker_index, 2u);
  EXPECT_EQ(ack.layer_lo, 5u);
  EXPECT_EQ(ack.layer_hi, 9u);
  Evict ev = RoundTrip(Evict{77, 100, 28});
  EXPECT_EQ(ev.session_id, 77u);
  EXPECT_EQ(ev.from, 100u);
  EXPECT_EQ(ev.count, 28u);
  Fork fk = RoundTrip(Fork{8, 7, 4096});
  EXPECT_EQ(fk.new_session_id, 8u);
  EXPECT_EQ(fk.source_session_id, 7u);
  EXPECT_EQ(fk.reserve_positions, 4096u);
  EXPECT_EQ(RoundTrip(Release{~uint64_t{0}}).session_id, ~uint64_t{0});
  Heartbeat hb = RoundTrip(Heartbeat{123456789012ull, "coordinator"});
  EXPECT_EQ(hb.sequence, 123456789012ull);
  EXPECT_EQ(hb.sender, "coordinator");
  EXPECT_EQ(RoundTrip(Shutdown{"done"}).reason, "done");
}

TEST(MessagesTest, SessionOpenWindowsRoundTrip) {
  SessionOpen full = RoundTrip(SessionOpen{1, {}, {}});
  EXPECT_EQ(full.window.kind, WindowSpec::Kind::kFull);

  SessionOpen global{2, {WindowSpec::Kind::kGlobal, 4096, {}}, {}};
  SessionOpen g = RoundTrip(global);
  EXPECT_EQ(g.session_id, 2u);
  EXPECT_EQ(g.window.kind, WindowSpec::Kind::kGlobal);
  EXPECT_EQ(g.window.global, 4096u);

  SessionOpen per{3, {WindowSpec::Kind::kPerLayer, 0, {0, 512, 0, 512}}, {}};
  SessionOpen p = RoundTrip(per);
  EXPECT_EQ(p.window.kind, WindowSpec::Kind::kPerLayer);
  EXPECT_EQ(p.window.per_layer, (std::vector<uint32_t>{0, 512, 0, 512}));
}

TEST(MessagesTest, TokenInputKeepsPhase) {
  TokenInput prefill{TokenInput::Phase::kPrefill, 5, 0, 0, {1, 2, 3, 49151}, std::nullopt};
  Frame frame = MarshalMessage(prefill);
  Result<Message> parsed = ParseMessage(frame);
  ASSERT_TRUE(parsed.ok());
  EXPECT_STREQ(MessageName(*parsed), "prefill");
  TokenInput out = std::get<TokenInput>(*parsed);
  EXPECT_EQ(out.phase, TokenInput::Phase::kPrefill);
  EXPECT_EQ(out.token_ids, prefill.token_ids);

  TokenInput decode{TokenInput::Phase::kDecode, 5, 4, 4, {42}, std::nullopt};
  TokenInput d = RoundTrip(decode);
  EXPECT_EQ(d.phase, TokenInput::Phase::kDecode);
  EXPECT_EQ(d.step, 4u);
  EXPECT_EQ(d.first_position, 4u);
  EXPECT_EQ(d.token_ids, std::vector<uint32_t>{42});
}

TEST(MessagesTest, ErrorReportRoundTripsEveryKind) {
  for (int k = 1; k <= static_cast<int>(ErrorKind::kInternal); ++k) {
    ErrorReport in{static_cast<ErrorKind>(k), "boom", true, 9};
    ErrorReport out = RoundTrip(in);
    EXPECT_EQ(out.kind, in.kind);
    EXPECT_EQ(out.message, "boom");
    EXPECT_TRUE(out.has_session);
    EXPECT_EQ(out.session_id, 9u);
    EXPECT_EQ(out.ToStatus().kind(), in.kind);
  }
}

TEST(MessagesTest, TensorMessagesGoThroughTheSameCodec) {
  HiddenFrame h = testing::MakeHidden(2, 576, 11);
  EXPECT_EQ(MarshalMessage(h), MarshalHidden(h));
  HiddenFrame out = RoundTrip(h);
  EXPECT_TRUE(testing::SameBits(out.payload, h.payload));
  Logits l{1, 2, 3, testing::RandomFloats(3, 5), {}};
  EXPECT_EQ(MarshalMessage(l), MarshalLogits(l));
}

TEST(MessagesTest, ErrorKindOkOnTheWireIsCorrupt) {
  capnp::MallocMessageBuilder message;
  auto error = message.initRoot<schema::Envelope>().initError();
  error.setKind(schema::ErrorKind::OK);
  Result<Message> out = ParseMessage(MarshalEnvelope(message));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt);
}

TEST(MessagesTest, ShortDigestInHelloIsCorrupt) {
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<schema::Envelope>().initHello();
  hello.initWeightsSha256(16);
  Result<Message> out = ParseMessage(MarshalEnvelope(message));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(out.status().message().find("hello.weightsSha256"), std::string::npos);
}

TEST(MessagesTest, WrongPointerTypeIsCorruptNotAThrow) {
  // heartbeat.sender (Text) replaced by a struct pointer: capnp accessors
  // throw; the codec must turn that into a status.
  capnp::MallocMessageBuilder message;
  auto hb = message.initRoot<schema::Envelope>().initHeartbeat();
  capnp::AnyStruct::Builder any = capnp::toAny(hb);
  any.getPointerSection()[0].initAs<schema::Release>().setSessionId(5);
  Result<Message> out = ParseMessage(MarshalEnvelope(message));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt) << out.status().ToString();
}

TEST(MessagesTest, EnvelopeFramesAreRefusedWhenOversized) {
  Frame frame = MarshalMessage(Heartbeat{1, std::string(1000, 'x')});
  DecodeLimits limits;
  limits.max_frame_bytes = 512;
  EXPECT_EQ(ParseMessage(frame, limits).status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep::wire
