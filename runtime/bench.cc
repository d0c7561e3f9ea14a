#include "runtime/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "engine/local_backend.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/huge_pages.h"
#include "engine/ops/thread_pool.h"
#include "engine/step_outcome.h"
#include "engine/witness.h"
#include "runtime/local_run.h"
#include "runtime/timed_backend.h"

namespace lockstep::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

size_t PeakRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss) * 1024;
}

// A deterministic prompt for session s.
std::vector<uint32_t> Prompt(size_t len, size_t s, size_t vocab) {
  std::vector<uint32_t> p(len);
  for (size_t i = 0; i < len; ++i) p[i] = static_cast<uint32_t>((i * 7919 + s * 104729 + 13) % vocab);
  return p;
}

// One greedy session on its own LocalBackend (cache reserved for the whole
// decode), its witness chain and its last step's outcome.
struct Session {
  std::unique_ptr<LocalBackend> backend;
  std::vector<float> hidden, logits;  // [1][hidden] for batched steps; [vocab]
  std::vector<uint32_t> tokens;
  WitnessChain chain;
  StepOutcome outcome;
};

Session NewSession(const Stage& st, const WitnessSeed& seed, std::span<const uint32_t> prompt,
                   size_t gen) {
  Session s{std::make_unique<LocalBackend>(st, prompt.size() + gen), {}, {}, {},
            WitnessChain(seed, prompt), {}};
  s.hidden.reserve(st.hidden());
  s.logits.resize(st.vocab());
  s.tokens.reserve(prompt.size() + gen);
  return s;
}

const SamplingParams kGreedy{};

// A step's choice as a decode makes it (ChooseAndWitnessAll: the token,
// the chain fold and the logits digest, on the stage's pool).
StepChoice ChoiceOf(Session& s, std::span<const float> logits) {
  return {logits, &kGreedy, static_cast<uint32_t>(s.tokens.size()), &s.chain, nullptr, &s.outcome};
}

// The path every decode takes: LocalBackend::Feed, then the step's choice.
Status Step(const Stage& st, Session& s, std::span<const uint32_t> feed) {
  LOCKSTEP_RETURN_IF_ERROR(s.backend->Feed(feed, &s.logits));
  const StepChoice c = ChoiceOf(s, s.logits);
  ChooseAndWitnessAll(std::span(&c, 1), st.pool());
  s.tokens.push_back(s.outcome.token);
  return Status::Ok();
}

// One decode step of every session as one batch (ForwardBatch +
// LogitsBatch, then every session's choice at once, as the server's
// scheduler does), each session feeding its last token.
struct Batch {
  ForwardScratch scratch;
  std::vector<Stage::BatchItem> items;
  std::vector<float> last, logits;  // [S][hidden], [S][vocab]
  std::vector<StepChoice> choices;
};

Status BatchedStep(const Stage& st, std::vector<Session>& ss, Batch& b) {
  const size_t S = ss.size(), h = st.hidden(), vocab = st.vocab();
  for (size_t i = 0; i < S; ++i) {
    LOCKSTEP_RETURN_IF_ERROR(st.Embed(std::span(&ss[i].tokens.back(), 1), &ss[i].hidden));
    KvCache& cache = ss[i].backend->cache();
    b.items[i] = {ss[i].hidden, static_cast<int64_t>(cache.size()), &cache};
  }
  LOCKSTEP_RETURN_IF_ERROR(st.ForwardBatch(b.items, b.scratch));
  for (size_t i = 0; i < S; ++i) std::copy_n(ss[i].hidden.begin(), h, b.last.begin() + static_cast<ptrdiff_t>(i * h));
  st.LogitsBatch(b.last, b.logits, b.scratch);
  b.choices.clear();
  for (size_t i = 0; i < S; ++i) {
    b.choices.push_back(ChoiceOf(ss[i], std::span<const float>(b.logits).subspan(i * vocab, vocab)));
  }
  ChooseAndWitnessAll(b.choices, st.pool());
  for (Session& s : ss) s.tokens.push_back(s.outcome.token);
  return Status::Ok();
}

// STREAM-style bandwidth over buffers far larger than the caches, split
// across the pool: read (xor of 64-bit words) and triad a = b + s*c
// (3 arrays counted, as STREAM does). Best of `repeats`, in GB/s. 512 MB
// arrays: a VM's reported cache sizes can be smaller than the host's (a
// guest reporting 32 MB of L3 read a 128 MB array at 50-60 GB/s in about
// one run in three, 30-35 GB/s otherwise). The arrays get huge pages where
// free (ops::AllocateLarge), as the packed weights do: on a guest whose
// host shadows its page tables, 4 KB pages read 2-20 GB/s where 2 MB pages
// read 40-60.
void MeasureStream(ops::ThreadPool* pool, size_t repeats, BenchFigures* f) {
  const size_t n = size_t{128} << 20;  // floats per array: 512 MB each
  const ops::LargeBuffer storage = ops::AllocateLarge(3 * n * sizeof(float));
  float* const a = reinterpret_cast<float*>(storage.get());
  float* const b = a + n;
  float* const c = b + n;
  const size_t chunk = size_t{1} << 18;
  ops::ForEachChunk(pool, n, chunk, [&](size_t lo, size_t hi, size_t) {
    std::fill(a + lo, a + hi, 1.0f);
    std::fill(b + lo, b + hi, 2.0f);
    std::fill(c + lo, c + hi, 0.5f);
  });
  std::vector<uint64_t> sink((n + chunk - 1) / chunk);
  for (size_t r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    ops::ForEachChunk(pool, n, chunk, [&](size_t lo, size_t hi, size_t) {
      const uint64_t* w = reinterpret_cast<const uint64_t*>(b + lo);
      uint64_t x0 = 0, x1 = 0, x2 = 0, x3 = 0;
      for (size_t i = 0; i + 4 <= (hi - lo) / 2; i += 4) {
        x0 ^= w[i], x1 ^= w[i + 1], x2 ^= w[i + 2], x3 ^= w[i + 3];
      }
      sink[lo / chunk] = x0 ^ x1 ^ x2 ^ x3;
    });
    f->stream_read_gb_s = std::max(f->stream_read_gb_s, n * 4.0 / Since(t0) / 1e9);
    t0 = Clock::now();
    ops::ForEachChunk(pool, n, chunk, [&](size_t lo, size_t hi, size_t) {
      for (size_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
    });
    f->stream_triad_gb_s = std::max(f->stream_triad_gb_s, n * 12.0 / Since(t0) / 1e9);
  }
  if (sink[0] == 1 && a[0] == 0.0f) std::cerr << "";  // keep the reads
}


double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

Status MeasurePrefill(const Stage& st, const WitnessSeed& seed, const BenchOptions& o,
                      BenchFigures* f) {
  std::vector<double> rates;
  const std::vector<uint32_t> prompt = Prompt(o.prompt_len, 99, st.vocab());
  for (size_t r = 0; r < std::max<size_t>(o.repeats, 1); ++r) {
    Session s = NewSession(st, seed, prompt, 1);
    const auto t0 = Clock::now();
    LOCKSTEP_RETURN_IF_ERROR(Step(st, s, prompt));
    rates.push_back(static_cast<double>(o.prompt_len) / Since(t0));
  }
  f->prefill_tok_s = *std::max_element(rates.begin(), rates.end());
  f->prefill_median_tok_s = Median(rates);
  return Status::Ok();
}

// S sessions decoded as one batch, interleaved step by step with the same
// S sessions decoded solo (so both see the same machine load); every
// batched session's tokens, witness chain and last logits digest must
// equal its solo twin's.
Status MeasureBatched(const Stage& st, const WitnessSeed& seed, const BenchOptions& o,
                      BenchFigures* f) {
  const size_t S = o.sessions, len = o.decode_prompt_len;
  std::vector<Session> batched, solo;
  for (size_t i = 0; i < S; ++i) {
    const std::vector<uint32_t> prompt = Prompt(len, i, st.vocab());
    batched.push_back(NewSession(st, seed, prompt, o.gen));
    solo.push_back(NewSession(st, seed, prompt, o.gen));
    LOCKSTEP_RETURN_IF_ERROR(Step(st, batched[i], prompt));
    LOCKSTEP_RETURN_IF_ERROR(Step(st, solo[i], prompt));
  }
  Batch b{st.NewScratch(S, len + o.gen), std::vector<Stage::BatchItem>(S),
          std::vector<float>(S * st.hidden()), std::vector<float>(S * st.vocab()), {}};
  b.choices.reserve(S);
  double t_batch = 0, t_solo = 0;
  for (size_t step = 1; step < o.gen; ++step) {
    auto t0 = Clock::now();
    LOCKSTEP_RETURN_IF_ERROR(BatchedStep(st, batched, b));
    t_batch += Since(t0);
    t0 = Clock::now();
    for (Session& s : solo) LOCKSTEP_RETURN_IF_ERROR(Step(st, s, std::span(&s.tokens.back(), 1)));
    t_solo += Since(t0);
  }
  f->batched_tok_s = static_cast<double>(S * (o.gen - 1)) / t_batch;
  f->solo_tok_s = static_cast<double>(S * (o.gen - 1)) / t_solo;
  for (size_t i = 0; i < S; ++i) {
    if (batched[i].tokens != solo[i].tokens ||
        batched[i].outcome.logits_sha256 != solo[i].outcome.logits_sha256 ||
        batched[i].chain.Finalize() != solo[i].chain.Finalize()) {
      f->batched_equals_solo = false;
    }
  }
  return Status::Ok();
}

// The decode is timed as `lockstep run` times it: RunDecode on a
// LocalBackend through DecodeOnStage (one run, no §12.4 twin).
Status MeasureDecode(const Stage& st, const WitnessSeed& seed, const BenchOptions& o,
                     Clock::time_point t0, BenchFigures* f) {
  DecodeRequest req;
  req.prompt = Prompt(o.decode_prompt_len, 0, st.vocab());
  req.gen = static_cast<uint32_t>(o.gen);
  LOCKSTEP_ASSIGN_OR_RETURN(TimedResult run,
                            DecodeOnStage(st, seed, req, std::nullopt, 1));
  const double cpu_end = ProcessCpuSeconds();
  const double wall = std::chrono::duration<double>(Clock::now() - run.first_token).count();
  f->ttft_s = std::chrono::duration<double>(run.first_token - t0).count();
  f->ttft_cpu_s = run.first_token_cpu_s;
  f->decode_tok_s = run.decode_ms_per_token > 0 ? 1000.0 / run.decode_ms_per_token : 0;
  f->decode_cpu_share = (cpu_end - run.first_token_cpu_s) / (wall * static_cast<double>(o.compute.threads));
  return Status::Ok();
}

}  // namespace

Result<BenchFigures> RunBench(const BenchOptions& o) {
  BenchFigures figures;
  BenchFigures* f = &figures;
  if (o.gen < 2 || o.decode_prompt_len == 0 || o.prompt_len == 0 || o.sessions == 0) {
    return InvalidError("need --gen >= 2, --prompt-len >= 1, --sessions >= 1");
  }
  const auto t0 = Clock::now();  // time to first token: open, hash, load, prefill
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(o.model_dir, ModelPins{}));
  f->open_s = Since(t0);
  const StageSpec all{0, model.config.num_layers, true, true};
  LOCKSTEP_ASSIGN_OR_RETURN(LoadedStage stage, LoadStage(model, all, o.compute));
  f->isa = stage->kernels().name;
  f->weight_cache_note = stage.weight_cache_note;
  f->load_s = Since(t0);
  LOCKSTEP_RETURN_IF_ERROR(MeasureDecode(*stage, model.Seed(), o, t0, f));
  f->weight_bytes = stage->weight_bytes_per_token();
  LOCKSTEP_RETURN_IF_ERROR(MeasurePrefill(*stage, model.Seed(), o, f));
  if (o.sessions > 1) LOCKSTEP_RETURN_IF_ERROR(MeasureBatched(*stage, model.Seed(), o, f));
  f->peak_rss = PeakRssBytes();
  MeasureStream(stage.pool.get(), o.repeats, f);
  return figures;
}

}  // namespace lockstep::runtime
