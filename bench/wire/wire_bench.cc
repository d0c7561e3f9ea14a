// Codec and transport costs for one pipeline hop.
//   BM_HiddenRoundTrip/seq: MarshalHidden + UnmarshalHidden at SmolLM2
//   width 576 (seq 1 is one decode step; the target is < 5 us).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>

#include "wire/hidden_frame.h"
#include "wire/messages.h"
#include "wire/transport.h"

namespace lockstep::wire {
namespace {

constexpr uint32_t kWidth = 576;

HiddenFrame MakeFrame(uint32_t seq) {
  std::mt19937 rng(1);
  std::vector<uint32_t> bits(size_t{seq} * kWidth);
  for (auto& b : bits) b = rng();
  HiddenFrame f{1,           2,     3, seq, kWidth, 15, std::vector<float>(bits.size()),
                std::nullopt, false, {}};
  std::memcpy(f.payload.data(), bits.data(), bits.size() * 4);
  return f;
}

void SetBytes(benchmark::State& state, size_t bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_HiddenRoundTrip(benchmark::State& state) {
  const HiddenFrame frame = MakeFrame(static_cast<uint32_t>(state.range(0)));
  for (auto _ : state) {
    Frame bytes = MarshalHidden(frame);
    Result<HiddenFrame> back = UnmarshalHidden(bytes);
    if (!back.ok()) state.SkipWithError(back.status().ToString().c_str());
    benchmark::DoNotOptimize(back);
  }
  SetBytes(state, frame.payload.size() * 4);
}
BENCHMARK(BM_HiddenRoundTrip)->Arg(1)->Arg(16)->Arg(512);

void BM_HiddenMarshal(benchmark::State& state) {
  const HiddenFrame frame = MakeFrame(1);
  for (auto _ : state) benchmark::DoNotOptimize(MarshalHidden(frame));
}
BENCHMARK(BM_HiddenMarshal);

void BM_HiddenUnmarshal(benchmark::State& state) {
  const Frame bytes = MarshalHidden(MakeFrame(1));
  for (auto _ : state) benchmark::DoNotOptimize(UnmarshalHidden(bytes));
}
BENCHMARK(BM_HiddenUnmarshal);

void BM_Sha256OfOnePosition(benchmark::State& state) {
  const HiddenFrame frame = MakeFrame(1);
  for (auto _ : state) benchmark::DoNotOptimize(HiddenFrameDigest(frame));
}
BENCHMARK(BM_Sha256OfOnePosition);

// Fixed cost of one SHA-256 (context set-up and finalisation).
void BM_Sha256Empty(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Sha256(std::string_view()));
}
BENCHMARK(BM_Sha256Empty);

void BM_HeartbeatRoundTrip(benchmark::State& state) {
  for (auto _ : state) {
    Frame bytes = MarshalMessage(Heartbeat{7, "worker-0"});
    benchmark::DoNotOptimize(ParseMessage(bytes));
  }
}
BENCHMARK(BM_HeartbeatRoundTrip);

// One decode-step hop through ZeroMQ: encode, send, receive, decode.
void HopBench(benchmark::State& state, const std::string& endpoint) {
  zmq::context_t context(1);
  // CURVE on tcp, as deployed (inproc is never encrypted).
  const CurveKeyPair server_keys = GenerateCurveKeyPair().value();
  const CurveKeyPair client_keys = GenerateCurveKeyPair().value();
  TransportOptions server_options, client_options;
  server_options.security.own = server_keys;
  server_options.security.allowed_clients_z85 = {client_keys.public_z85};
  client_options.security.own = client_keys;
  client_options.security.server_public_z85 = server_keys.public_z85;
  Server server = Server::Bind(context, endpoint, server_options).value();
  Client client = Client::Connect(context, server.endpoint(), "stage", client_options).value();
  const HiddenFrame frame = MakeFrame(1);
  for (auto _ : state) {
    if (!client.Send(MarshalHidden(frame)).ok()) state.SkipWithError("send");
    Result<Incoming> in = server.Receive(std::chrono::milliseconds(1000));
    if (!in.ok()) state.SkipWithError("receive");
    benchmark::DoNotOptimize(UnmarshalHidden(in->bytes()));
  }
}
void BM_HopInproc(benchmark::State& state) { HopBench(state, "inproc://bench"); }
void BM_HopTcpLoopback(benchmark::State& state) { HopBench(state, "tcp://127.0.0.1:*"); }
BENCHMARK(BM_HopInproc);
BENCHMARK(BM_HopTcpLoopback);

}  // namespace
}  // namespace lockstep::wire

BENCHMARK_MAIN();
