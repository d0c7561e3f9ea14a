#include "wire/messages.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <string_view>

#include <capnp/message.h>

#include "wire/tensor_codec.h"

namespace lockstep::wire {
namespace {

using internal::DigestData;

namespace s = schema;

constexpr std::string_view kStepTag = "lockstep.step.v1";

capnp::Data::Reader StateData(const Sha256State& st) {
  return capnp::Data::Reader(st.bytes.data(), st.bytes.size());
}

// ErrorReport::kind crosses the wire as the schema enum of the same order.
static_assert(static_cast<int>(s::ErrorKind::OK) == static_cast<int>(ErrorKind::kOk));
static_assert(static_cast<int>(s::ErrorKind::MISMATCH) ==
              static_cast<int>(ErrorKind::kMismatch));
static_assert(static_cast<int>(s::ErrorKind::DISCONNECTED) ==
              static_cast<int>(ErrorKind::kDisconnected));
static_assert(static_cast<int>(s::ErrorKind::UNIMPLEMENTED) ==
              static_cast<int>(ErrorKind::kUnimplemented));
static_assert(static_cast<int>(s::ErrorKind::INTERNAL) ==
              static_cast<int>(ErrorKind::kInternal));

// ---- struct -> capnp -------------------------------------------------------

void Write(const Hello& m, s::Envelope::Builder e) {
  auto out = e.initHello();
  out.setWorkerId(m.worker_id);
  out.setProtocolVersion(m.protocol_version);
  out.setWeightsSha256(DigestData(m.weights_sha256));
  out.setConfigSha256(DigestData(m.config_sha256));
  out.setTokenizerSha256(DigestData(m.tokenizer_sha256));
  out.setTableDigest(DigestData(m.table_digest));
  out.setInvFreqTableDigest(DigestData(m.inv_freq_table_digest));
  out.setIsa(m.isa);
}

void Write(const Assign& m, s::Envelope::Builder e) {
  auto out = e.initAssign();
  out.setModelDir(m.model_dir);
  out.setExpectedWeightsSha256(DigestData(m.expected_weights_sha256));
  out.setExpectedConfigSha256(DigestData(m.expected_config_sha256));
  out.setExpectedTokenizerSha256(DigestData(m.expected_tokenizer_sha256));
  out.setLayerLo(m.layer_lo);
  out.setLayerHi(m.layer_hi);
  out.setIsFirst(m.is_first);
  out.setIsLast(m.is_last);
  out.setNextHop(m.next_hop);
  out.setWorkerIndex(m.worker_index);
  out.setNextHopKey(m.next_hop_key);
  out.setUpstreamKey(m.upstream_key);
  out.setRingHop(m.ring_hop);
  out.setRingHopKey(m.ring_hop_key);
  out.setRingUpstreamKey(m.ring_upstream_key);
  if (!m.weight_files.empty()) {
    auto files = out.initWeightFiles(static_cast<unsigned>(m.weight_files.size()));
    for (size_t i = 0; i < m.weight_files.size(); ++i) {
      files[static_cast<unsigned>(i)].setName(m.weight_files[i].name);
      files[static_cast<unsigned>(i)].setSha256(DigestData(m.weight_files[i].sha256));
    }
  }
}

void Write(const AssignAck& m, s::Envelope::Builder e) {
  auto out = e.initAssignAck();
  out.setWorkerIndex(m.worker_index);
  out.setLayerLo(m.layer_lo);
  out.setLayerHi(m.layer_hi);
  out.setResidentBytes(m.resident_bytes);
}

void Write(const SessionOpen& m, s::Envelope::Builder e) {
  auto out = e.initSessionOpen();
  out.setSessionId(m.session_id);
  out.setTrace(m.trace);
  out.setReservePositions(m.reserve_positions);
  auto sampling = out.initSampling();
  sampling.setTemperatureBits(m.sampling.temperature_bits);
  sampling.setTopK(m.sampling.top_k);
  sampling.setTopPBits(m.sampling.top_p_bits);
  sampling.setSeed(m.sampling.seed);
  auto window = out.initWindow();
  switch (m.window.kind) {
    case WindowSpec::Kind::kFull: window.setFull(); break;
    case WindowSpec::Kind::kGlobal: window.setGlobal(m.window.global); break;
    case WindowSpec::Kind::kPerLayer: {
      auto list = window.initPerLayer(m.window.per_layer.size());
      for (size_t i = 0; i < m.window.per_layer.size(); ++i) {
        list.set(i, m.window.per_layer[i]);
      }
      break;
    }
  }
}

void Write(const TokenInput& m, s::Envelope::Builder e) {
  auto out = m.phase == TokenInput::Phase::kPrefill ? e.initPrefill()
                                                    : e.initDecode();
  out.setSessionId(m.session_id);
  out.setStep(m.step);
  out.setFirstPosition(m.first_position);
  auto ids = out.initTokenIds(m.token_ids.size());
  for (size_t i = 0; i < m.token_ids.size(); ++i) ids.set(i, m.token_ids[i]);
  if (m.handoff) internal::WriteHandoff(*m.handoff, out.initHandoff());
  out.setNoOutput(m.no_output);
  out.setRelayed(m.relayed);
  out.setStepRows(m.step_rows);
}

void WriteLaterRows(const std::vector<RowOutcome>& rows, capnp::Data::Builder out) {
  uint8_t* p = out.begin();
  for (const RowOutcome& r : rows) {
    for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(r.token >> (8 * i));
    p = std::copy(r.logits_sha256.begin(), r.logits_sha256.end(), p);
    p = std::copy(r.chain_state.bytes.begin(), r.chain_state.bytes.end(), p);
  }
}

Result<std::vector<RowOutcome>> ReadLaterRows(capnp::Data::Reader in) {
  if (in.size() % kRowOutcomeBytes != 0) {
    return CorruptError("stepResult.laterRows is " + std::to_string(in.size()) +
                        " bytes, not a whole number of " + std::to_string(kRowOutcomeBytes) +
                        "-byte rows");
  }
  std::vector<RowOutcome> rows(in.size() / kRowOutcomeBytes);
  const uint8_t* p = in.begin();
  for (size_t i = 0; i < rows.size(); ++i, p += kRowOutcomeBytes) {
    rows[i].token = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    std::copy(p + 4, p + 36, rows[i].logits_sha256.begin());
    Result<Sha256State> state = Sha256State::Parse({p + 36, Sha256State::kBytes});
    if (!state.ok()) {
      return state.status().WithContext("stepResult.laterRows[" + std::to_string(i) + "].chainState");
    }
    rows[i].chain_state = *state;
  }
  return rows;
}

void Write(const StepResult& m, s::Envelope::Builder e) {
  auto out = e.initStepResult();
  out.setSessionId(m.session_id);
  out.setStep(m.step);
  out.setToken(m.token);
  out.setLogitsSha256(DigestData(m.logits_sha256));
  out.setChainState(StateData(m.chain_state));
  out.setDigest(DigestData(StepResultDigest(m)));
  // Always set (empty when untraced): the last pointer is then never null,
  // so the frame built in place is already canonical (no copy, no allocation).
  internal::WriteLayerDigests(m.layer_digests, out.initLayerDigests(m.layer_digests.size() * 32));
  WriteLaterRows(m.later_rows, out.initLaterRows(m.later_rows.size() * kRowOutcomeBytes));
}

void Write(const HiddenFrame& m, s::Envelope::Builder e) {
  internal::WriteHidden(m, e.initHidden());
}

void Write(const Logits& m, s::Envelope::Builder e) {
  internal::WriteLogits(m, e.initLogits());
}

void Write(const Evict& m, s::Envelope::Builder e) {
  auto out = e.initEvict();
  out.setSessionId(m.session_id);
  out.setFrom(m.from);
  out.setCount(m.count);
}

void Write(const Fork& m, s::Envelope::Builder e) {
  auto out = e.initFork();
  out.setNewSessionId(m.new_session_id);
  out.setSourceSessionId(m.source_session_id);
  out.setReservePositions(m.reserve_positions);
}

void Write(const Release& m, s::Envelope::Builder e) {
  e.initRelease().setSessionId(m.session_id);
}

void Write(const Heartbeat& m, s::Envelope::Builder e) {
  auto out = e.initHeartbeat();
  out.setSequence(m.sequence);
  out.setSender(m.sender);
  out.setComputeNanos(m.compute_nanos);
  out.setBytesToNext(m.bytes_to_next);
}

void Write(const ErrorReport& m, s::Envelope::Builder e) {
  assert(m.kind != ErrorKind::kOk);
  auto out = e.initError();
  out.setKind(static_cast<s::ErrorKind>(m.kind));
  out.setMessage(m.message);
  out.setSessionId(m.session_id);
  out.setHasSession(m.has_session);
}

void Write(const Shutdown& m, s::Envelope::Builder e) {
  e.initShutdown().setReason(m.reason);
}

// ---- capnp -> struct -------------------------------------------------------

const char* NameOf(const TokenInput& m) {
  return m.phase == TokenInput::Phase::kPrefill ? "prefill" : "decode";
}

Result<Digest> ReadDigest(capnp::Data::Reader in, const char* field) {
  Digest d{};
  if (in.size() != d.size()) {
    return CorruptError(std::string(field) + " is " + std::to_string(in.size()) +
                        " bytes, expected 32");
  }
  std::memcpy(d.data(), in.begin(), d.size());
  return d;
}

Result<Message> Read(s::Hello::Reader in) {
  Hello m;
  m.worker_id = in.getWorkerId();
  m.protocol_version = in.getProtocolVersion();
  LOCKSTEP_ASSIGN_OR_RETURN(m.weights_sha256,
                            ReadDigest(in.getWeightsSha256(), "hello.weightsSha256"));
  LOCKSTEP_ASSIGN_OR_RETURN(m.config_sha256,
                            ReadDigest(in.getConfigSha256(), "hello.configSha256"));
  LOCKSTEP_ASSIGN_OR_RETURN(
      m.tokenizer_sha256, ReadDigest(in.getTokenizerSha256(), "hello.tokenizerSha256"));
  LOCKSTEP_ASSIGN_OR_RETURN(m.table_digest,
                            ReadDigest(in.getTableDigest(), "hello.tableDigest"));
  LOCKSTEP_ASSIGN_OR_RETURN(
      m.inv_freq_table_digest,
      ReadDigest(in.getInvFreqTableDigest(), "hello.invFreqTableDigest"));
  m.isa = in.getIsa();
  return Message(std::move(m));
}

Result<Message> Read(s::Assign::Reader in) {
  Assign m;
  m.model_dir = in.getModelDir();
  LOCKSTEP_ASSIGN_OR_RETURN(
      m.expected_weights_sha256,
      ReadDigest(in.getExpectedWeightsSha256(), "assign.expectedWeightsSha256"));
  LOCKSTEP_ASSIGN_OR_RETURN(
      m.expected_config_sha256,
      ReadDigest(in.getExpectedConfigSha256(), "assign.expectedConfigSha256"));
  LOCKSTEP_ASSIGN_OR_RETURN(
      m.expected_tokenizer_sha256,
      ReadDigest(in.getExpectedTokenizerSha256(), "assign.expectedTokenizerSha256"));
  m.layer_lo = in.getLayerLo();
  m.layer_hi = in.getLayerHi();
  m.is_first = in.getIsFirst();
  m.is_last = in.getIsLast();
  m.next_hop = in.getNextHop();
  m.worker_index = in.getWorkerIndex();
  m.next_hop_key = in.getNextHopKey();
  m.upstream_key = in.getUpstreamKey();
  m.ring_hop = in.getRingHop();
  m.ring_hop_key = in.getRingHopKey();
  m.ring_upstream_key = in.getRingUpstreamKey();
  for (auto f : in.getWeightFiles()) {
    WeightFile w;
    w.name = f.getName();
    LOCKSTEP_ASSIGN_OR_RETURN(w.sha256, ReadDigest(f.getSha256(), "assign.weightFiles.sha256"));
    m.weight_files.push_back(std::move(w));
  }
  return Message(std::move(m));
}

Result<Message> Read(s::AssignAck::Reader in) {
  return Message(
      AssignAck{in.getWorkerIndex(), in.getLayerLo(), in.getLayerHi(), in.getResidentBytes()});
}

Result<WindowSpec> Read(s::WindowSpec::Reader in) {
  WindowSpec w;
  switch (in.which()) {
    case s::WindowSpec::FULL: w.kind = WindowSpec::Kind::kFull; return w;
    case s::WindowSpec::GLOBAL:
      w.kind = WindowSpec::Kind::kGlobal;
      w.global = in.getGlobal();
      return w;
    case s::WindowSpec::PER_LAYER:
      w.kind = WindowSpec::Kind::kPerLayer;
      for (uint32_t v : in.getPerLayer()) w.per_layer.push_back(v);  // bounded by frame
      return w;
  }
  return InvalidError("unknown window kind " +
                      std::to_string(static_cast<int>(in.which())));
}

Result<Message> Read(s::SessionOpen::Reader in) {
  SessionOpen m;
  m.session_id = in.getSessionId();
  m.trace = in.getTrace();
  m.reserve_positions = in.getReservePositions();
  if (in.hasSampling()) {
    auto p = in.getSampling();
    m.sampling = Sampling{p.getTemperatureBits(), p.getTopK(), p.getTopPBits(), p.getSeed()};
  }
  LOCKSTEP_ASSIGN_OR_RETURN(m.window, Read(in.getWindow()));
  return Message(std::move(m));
}

Result<Message> Read(s::TokenInput::Reader in, TokenInput::Phase phase) {
  TokenInput m;
  m.phase = phase;
  m.session_id = in.getSessionId();
  m.step = in.getStep();
  m.first_position = in.getFirstPosition();
  auto ids = in.getTokenIds();
  m.token_ids.reserve(ids.size());
  for (uint32_t id : ids) m.token_ids.push_back(id);
  LOCKSTEP_ASSIGN_OR_RETURN(m.handoff,
                            internal::ReadHandoff(in.hasHandoff(), in.getHandoff(), NameOf(m)));
  m.no_output = in.getNoOutput();
  if (m.no_output && m.handoff) {
    return CorruptError(std::string(NameOf(m)) + ": noOutput with a chain handoff");
  }
  m.relayed = in.getRelayed();
  if (m.relayed && !m.handoff) {
    return CorruptError(std::string(NameOf(m)) + ": a relayed step without a chain handoff");
  }
  m.step_rows = in.getStepRows();
  LOCKSTEP_RETURN_IF_ERROR(
      CheckStepRowsShape(m.step_rows, m.handoff, m.relayed, m.token_ids.size(), NameOf(m)));
  return Message(std::move(m));
}

Result<Message> Read(s::StepResult::Reader in) {
  StepResult m;
  m.session_id = in.getSessionId();
  m.step = in.getStep();
  m.token = in.getToken();
  LOCKSTEP_ASSIGN_OR_RETURN(m.logits_sha256,
                            ReadDigest(in.getLogitsSha256(), "stepResult.logitsSha256"));
  const capnp::Data::Reader state = in.getChainState();
  Result<Sha256State> parsed = Sha256State::Parse({state.begin(), state.size()});
  if (!parsed.ok()) return parsed.status().WithContext("stepResult.chainState");
  m.chain_state = *parsed;
  LOCKSTEP_ASSIGN_OR_RETURN(m.layer_digests,
                            internal::ReadLayerDigests(in.getLayerDigests(), "stepResult"));
  LOCKSTEP_ASSIGN_OR_RETURN(m.later_rows, ReadLaterRows(in.getLaterRows()));
  LOCKSTEP_ASSIGN_OR_RETURN(const Digest digest, ReadDigest(in.getDigest(), "stepResult.digest"));
  if (digest != StepResultDigest(m)) {
    return CorruptError("step result digest mismatch (session " + std::to_string(m.session_id) +
                        " step " + std::to_string(m.step) + ")");
  }
  return Message(std::move(m));
}

Result<Message> Read(s::Error::Reader in) {
  const auto kind = static_cast<uint16_t>(in.getKind());
  if (kind == 0 || kind > static_cast<uint16_t>(s::ErrorKind::INTERNAL)) {
    return CorruptError("error message has kind " + std::to_string(kind));
  }
  ErrorReport m;
  m.kind = static_cast<ErrorKind>(kind);
  m.message = in.getMessage();
  m.session_id = in.getSessionId();
  m.has_session = in.getHasSession();
  return Message(std::move(m));
}

template <typename T>
Result<Message> Wrap(Result<T> r) {
  if (!r.ok()) return r.status();
  return Message(std::move(r).value());
}

Result<Message> ReadEnvelope(s::Envelope::Reader e) {
  using W = s::Envelope::Which;
  switch (e.which()) {
    case W::HELLO: return Read(e.getHello());
    case W::ASSIGN: return Read(e.getAssign());
    case W::ASSIGN_ACK: return Read(e.getAssignAck());
    case W::SESSION_OPEN: return Read(e.getSessionOpen());
    case W::PREFILL: return Read(e.getPrefill(), TokenInput::Phase::kPrefill);
    case W::DECODE: return Read(e.getDecode(), TokenInput::Phase::kDecode);
    case W::HIDDEN: return Wrap(internal::ReadHidden(e.getHidden()));
    case W::LOGITS: return Wrap(internal::ReadLogits(e.getLogits()));
    case W::EVICT: {
      auto in = e.getEvict();
      return Message(Evict{in.getSessionId(), in.getFrom(), in.getCount()});
    }
    case W::FORK: {
      auto in = e.getFork();
      return Message(Fork{in.getNewSessionId(), in.getSourceSessionId(), in.getReservePositions()});
    }
    case W::RELEASE: return Message(Release{e.getRelease().getSessionId()});
    case W::HEARTBEAT: {
      auto in = e.getHeartbeat();
      return Message(Heartbeat{in.getSequence(), in.getSender(), in.getComputeNanos(),
                               in.getBytesToNext()});
    }
    case W::ERROR: return Read(e.getError());
    case W::SHUTDOWN: return Message(Shutdown{e.getShutdown().getReason()});
    case W::STEP_RESULT: return Read(e.getStepResult());
  }
  return InvalidError("unknown envelope member " +
                      std::to_string(static_cast<int>(e.which())));
}

const char* NameOf(const Hello&) { return "hello"; }
const char* NameOf(const Assign&) { return "assign"; }
const char* NameOf(const AssignAck&) { return "assignAck"; }
const char* NameOf(const SessionOpen&) { return "sessionOpen"; }
const char* NameOf(const HiddenFrame&) { return "hidden"; }
const char* NameOf(const Logits&) { return "logits"; }
const char* NameOf(const Evict&) { return "evict"; }
const char* NameOf(const Fork&) { return "fork"; }
const char* NameOf(const Release&) { return "release"; }
const char* NameOf(const Heartbeat&) { return "heartbeat"; }
const char* NameOf(const ErrorReport&) { return "error"; }
const char* NameOf(const Shutdown&) { return "shutdown"; }
const char* NameOf(const StepResult&) { return "stepResult"; }

}  // namespace

Digest StepResultDigest(const StepResult& r) {
  Sha256Stream st;
  st.Update({reinterpret_cast<const uint8_t*>(kStepTag.data()), kStepTag.size()});
  st.UpdateU32Le(static_cast<uint32_t>(r.session_id));
  st.UpdateU32Le(static_cast<uint32_t>(r.session_id >> 32));
  st.UpdateU32Le(r.step);
  st.UpdateU32Le(r.token);
  st.Update(r.logits_sha256);
  st.Update(r.chain_state.bytes);
  internal::HashLayerDigests(st, r.layer_digests);
  if (!r.later_rows.empty()) {  // "rows" where "layers" or nothing would be
    constexpr std::string_view kRowsTag = "rows";
    st.Update({reinterpret_cast<const uint8_t*>(kRowsTag.data()), kRowsTag.size()});
    st.UpdateU32Le(static_cast<uint32_t>(r.later_rows.size()));
    for (const RowOutcome& row : r.later_rows) {
      st.UpdateU32Le(row.token);
      st.Update(row.logits_sha256);
      st.Update(row.chain_state.bytes);
    }
  }
  return st.Finalize();
}

const char* MessageName(const Message& message) {
  return std::visit([](const auto& m) { return NameOf(m); }, message);
}

void MarshalStepResult(const StepResult& r, Frame* out) {
  // Canonical size: root pointer, Envelope, StepResult, then its blobs in
  // order (logits sha256, chain state, digest, layer digests, later rows).
  const size_t words = EnvelopeWords<s::StepResult>() + BlobWords(32) +
                       BlobWords(Sha256State::kBytes) + BlobWords(32) +
                       BlobWords(r.layer_digests.size() * 32) +
                       BlobWords(r.later_rows.size() * kRowOutcomeBytes);
  MarshalEnvelopeInPlace(words, [&r](s::Envelope::Builder root) { Write(r, root); }, out);
}

void MarshalTokenInput(const TokenInput& m, Frame* out) {
  // Canonical size: root pointer, Envelope, TokenInput, then what it points
  // to in order (the token list, the handoff and its chain state).
  const size_t words = EnvelopeWords<s::TokenInput>() + BlobWords(m.token_ids.size() * 4) +
                       internal::HandoffWords(m.handoff);
  MarshalEnvelopeInPlace(words, [&m](s::Envelope::Builder root) { Write(m, root); }, out);
}

Frame MarshalMessage(const Message& message) {
  if (const auto* h = std::get_if<HiddenFrame>(&message)) return MarshalHidden(*h);
  if (const auto* l = std::get_if<Logits>(&message)) return MarshalLogits(*l);
  if (const auto* r = std::get_if<StepResult>(&message)) {
    Frame out;
    MarshalStepResult(*r, &out);
    return out;
  }
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<s::Envelope>();
  std::visit([&root](const auto& m) { Write(m, root); }, message);
  return MarshalEnvelope(builder);
}

Result<Message> ParseMessage(std::span<const uint8_t> bytes,
                             const DecodeLimits& limits) {
  LOCKSTEP_ASSIGN_OR_RETURN(ParsedEnvelope parsed, ParseEnvelope(bytes, limits));
  return internal::GuardedRead([&] { return ReadEnvelope(parsed.root()); });
}

std::optional<uint64_t> SessionOfRefusedFrame(std::span<const uint8_t> bytes,
                                              const DecodeLimits& limits) {
  Result<ParsedEnvelope> env = ParseEnvelope(bytes, limits);
  if (!env.ok()) return std::nullopt;
  try {
    if (env->which() == s::Envelope::HIDDEN) return env->root().getHidden().getSessionId();
    if (env->which() == s::Envelope::LOGITS) return env->root().getLogits().getSessionId();
    if (env->which() == s::Envelope::STEP_RESULT) {
      return env->root().getStepResult().getSessionId();
    }
  } catch (const kj::Exception&) {
  }
  return std::nullopt;
}

}  // namespace lockstep::wire
