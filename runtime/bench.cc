#include "runtime/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iostream>
#include <set>
#include <string>

#include "engine/batch_stepper.h"
#include "engine/decode_session.h"
#include "engine/local_backend.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/huge_pages.h"
#include "engine/ops/thread_pool.h"
#include "engine/stage_tensors.h"
#include "runtime/compare.h"
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

// One greedy session as every front end runs it: a DecodeSession on its
// own LocalBackend (cache reserved for the whole decode).
struct Session {
  DecodeRequest req;
  std::unique_ptr<LocalBackend> backend;
  std::unique_ptr<DecodeSession> decode;
};

Session NewSession(const Stage& st, const WitnessSeed& seed, std::vector<uint32_t> prompt,
                   size_t gen) {
  Session s;
  s.req.prompt = std::move(prompt);
  s.req.gen = static_cast<uint32_t>(gen);
  s.backend = std::make_unique<LocalBackend>(st, s.req.prompt.size() + gen);
  s.decode = std::make_unique<DecodeSession>(*s.backend, s.req, seed);
  return s;
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
  for (size_t r = 0; r < std::max<size_t>(o.repeats, 1); ++r) {
    Session s = NewSession(st, seed, Prompt(o.prompt_len, 99, st.vocab()), 1);
    const auto t0 = Clock::now();
    LOCKSTEP_RETURN_IF_ERROR(s.decode->Step());
    rates.push_back(static_cast<double>(o.prompt_len) / Since(t0));
  }
  f->prefill_tok_s = *std::max_element(rates.begin(), rates.end());
  f->prefill_median_tok_s = Median(rates);
  return Status::Ok();
}

// S sessions decoded as one batch through the server's stepper
// (LocalBatchStepper), interleaved step by step with the same S sessions
// decoded solo (DecodeSession::Step, as RunDecode), so both see the same
// machine load; every batched session's result must equal its solo twin's
// (CompareResults: tokens and every digest).
Status MeasureBatched(const Stage& st, const WitnessSeed& seed, const BenchOptions& o,
                      BenchFigures* f) {
  const size_t S = o.sessions, len = o.decode_prompt_len;
  std::vector<Session> batched, solo;
  std::vector<DecodeSession*> batch;
  for (size_t i = 0; i < S; ++i) {
    batched.push_back(NewSession(st, seed, Prompt(len, i, st.vocab()), o.gen));
    solo.push_back(NewSession(st, seed, Prompt(len, i, st.vocab()), o.gen));
    LOCKSTEP_RETURN_IF_ERROR(batched[i].decode->Step());
    LOCKSTEP_RETURN_IF_ERROR(solo[i].decode->Step());
    batch.push_back(batched[i].decode.get());
  }
  LocalBatchStepper stepper(st);
  stepper.Reserve(S, S, len + o.gen);
  std::vector<Status> status(S);
  double t_batch = 0, t_solo = 0;
  for (size_t step = 1; step < o.gen; ++step) {
    auto t0 = Clock::now();
    stepper.Step(batch, 0, status);
    t_batch += Since(t0);
    for (const Status& st_i : status) LOCKSTEP_RETURN_IF_ERROR(st_i);
    t0 = Clock::now();
    for (Session& s : solo) LOCKSTEP_RETURN_IF_ERROR(s.decode->Step());
    t_solo += Since(t0);
  }
  f->batched_tok_s = static_cast<double>(S * (o.gen - 1)) / t_batch;
  f->solo_tok_s = static_cast<double>(S * (o.gen - 1)) / t_solo;
  for (size_t i = 0; i < S; ++i) {
    if (!CompareResults(batched[i].decode->result(), solo[i].decode->result(), "batched", "solo")
             .ok()) {
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
  f->decode = std::move(run.result);
  return Status::Ok();
}

}  // namespace

std::string HeldWeightTypes(const OpenModel& model, const StageSpec& spec, WeightFormat format) {
  if (format != WeightFormat::kPackedBf16) return "f32";
  std::set<std::string> names;
  ForEachStageTensor(model.config, spec, [&](const std::string& name, std::vector<int64_t> shape, bool) {
    const TensorRef t = model.weights->Find(name);
    if (shape.size() != 2 || t.info == nullptr) return;
    std::string n(DTypeName(t.info->dtype));
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    names.insert(n);
  });
  std::string joined;
  for (const std::string& n : names) joined += (joined.empty() ? "" : "+") + n;
  return joined;
}

Result<std::vector<DecodeResult>> DecodeBatched(const Stage& stage, const WitnessSeed& seed,
                                                const std::vector<DecodeRequest>& reqs,
                                                size_t prefill_chunk) {
  std::vector<std::unique_ptr<LocalBackend>> backends;
  std::vector<std::unique_ptr<DecodeSession>> sessions;
  std::vector<DecodeSession*> batch;
  for (const DecodeRequest& r : reqs) {
    LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(r));
    backends.push_back(std::make_unique<LocalBackend>(stage, r.prompt.size() + r.gen));
    if (r.window) LOCKSTEP_RETURN_IF_ERROR(backends.back()->SetWindow(*r.window));
    sessions.push_back(std::make_unique<DecodeSession>(*backends.back(), r, seed));
    batch.push_back(sessions.back().get());
  }
  LocalBatchStepper stepper(stage);
  std::vector<Status> status(batch.size());
  while (std::any_of(batch.begin(), batch.end(), [](DecodeSession* s) { return !s->done(); })) {
    stepper.Step(batch, prefill_chunk, status);
    for (const Status& st : status) LOCKSTEP_RETURN_IF_ERROR(st);
  }
  std::vector<DecodeResult> out;
  for (const auto& s : sessions) out.push_back(s->result());
  return out;
}

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
  f->weights = HeldWeightTypes(model, all, o.compute.weights);
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
