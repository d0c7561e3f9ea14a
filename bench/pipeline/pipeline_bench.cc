// pipeline_bench: S sessions decoding at once on a running cluster, against
// the monolithic decode of the same model in this process.
//
//   pipeline_bench --config C.json [--sessions 1,3,6] [--gen 32]
//                  [--prompt-len 8] [--mono-threads 1,2] [--repeats 2] [--label TEXT]
//   pipeline_bench --model DIR --workers K [--worker-threads T] [--lockstep EXE] ...
//                  [--rounds N]
//
// The second form spawns K loopback worker processes of the lockstep binary
// EXE (default: next to this one, ../../cli/lockstep) with T compute threads
// each (default 1), as `lockstep run --workers K --threads T` does, after
// the monolithic measurements (so idle workers are not even running then).
//
// Session i has its own prompt and, for odd i, sampling (temperature 0.8,
// seed 1000+i). Every session first decodes alone (its solo result, which
// also warms the workers); then for each S, sessions 0..S-1 decode
// concurrently from S threads (the coordinator keeps their S steps in
// flight; the workers batch what is queued). Each concurrent result must
// equal its solo result bit for bit, or the bench fails. Printed per S: the
// mean per-token latency, aggregate tokens/s (S * gen over the wall time),
// the ratios to monolithic and to S = 1, and the bytes between the
// coordinator and the workers per token. Every figure is the best of
// --repeats measurements (a shared machine only ever slows a run down).
//
// --rounds N (N > 0) then alternates, N times, one monolithic decode at the
// first --mono-threads count and one sharded S = 1 decode of the same
// request, and prints each round's ratio and their median: the two sides
// of a ratio are measured seconds apart, so a machine whose speed drifts
// (a shared VM) moves both. The same session stays in the pipeline's
// median whether the best-of figures above came out high or low.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <latch>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "coordinator/coordinator.h"
#include "engine/ops/fp_env.h"
#include "runtime/checked_decode.h"
#include "runtime/compare.h"
#include "runtime/local_run.h"
#include "runtime/cluster_run.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string config;
  std::string model;  // loopback: spawn `workers` workers for this folder
  int workers = 0;
  int worker_threads = 1;
  std::string lockstep;
  std::vector<int> sessions = {1, 3, 6};
  std::vector<int> mono_threads = {1, 2};
  uint32_t gen = 32;
  uint32_t prompt_len = 8;
  int repeats = 2;
  int rounds = 0;
  std::string label = "-";
};

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::atoi(item.c_str()));
  return out;
}

Result<Options> ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--config") o.config = value;
    else if (flag == "--model") o.model = value;
    else if (flag == "--workers") o.workers = std::atoi(value.c_str());
    else if (flag == "--worker-threads") o.worker_threads = std::atoi(value.c_str());
    else if (flag == "--lockstep") o.lockstep = value;
    else if (flag == "--sessions") o.sessions = ParseList(value);
    else if (flag == "--mono-threads") o.mono_threads = ParseList(value);
    else if (flag == "--gen") o.gen = static_cast<uint32_t>(std::atoi(value.c_str()));
    else if (flag == "--prompt-len") o.prompt_len = static_cast<uint32_t>(std::atoi(value.c_str()));
    else if (flag == "--label") o.label = value;
    else if (flag == "--repeats") o.repeats = std::atoi(value.c_str());
    else if (flag == "--rounds") o.rounds = std::atoi(value.c_str());
    else return InvalidError("unknown flag " + flag);
  }
  if (argc % 2 == 0) return InvalidError("every flag takes a value");
  if (o.config.empty() == o.model.empty()) return InvalidError("give --config or --model");
  if (!o.model.empty() && (o.workers < 1 || o.worker_threads < 1)) {
    return InvalidError("--model needs --workers >= 1 and --worker-threads >= 1");
  }
  for (int s : o.sessions) {
    if (s < 1 || s > 64) return InvalidError("--sessions entries must be 1..64");
  }
  if (o.gen < 2 || o.prompt_len < 1 || o.repeats < 1 || o.rounds < 0) {
    return InvalidError("need --gen >= 2, --prompt-len >= 1, --repeats >= 1, --rounds >= 0");
  }
  return o;
}

DecodeRequest SessionRequest(const Options& o, int i, uint32_t vocab) {
  DecodeRequest req;
  for (uint32_t t = 0; t < o.prompt_len; ++t) req.prompt.push_back((7 + 31 * i + 13 * t) % vocab);
  req.gen = o.gen;
  if (i % 2 == 1) req.sampling = SamplingParams{0.8f, 0, 1.0f, 1000 + static_cast<uint64_t>(i)};
  return req;
}

Result<runtime::TimedResult> DecodeOn(Coordinator& c, const DecodeRequest& req) {
  const runtime::BackendFactory open = [&]() -> Result<std::unique_ptr<StepBackend>> {
    LOCKSTEP_ASSIGN_OR_RETURN(auto s, c.OpenSession(std::nullopt, req.sampling));
    return std::unique_ptr<StepBackend>(std::move(s));
  };
  return runtime::DecodeChecked(open, req, c.seed(), 1);
}

struct Row {
  double ms_per_token = 0, tok_s = 0, bytes_per_token = 0;
};

// Sessions 0..S-1 at once; each result must equal its solo one.
Result<Row> Concurrent(Coordinator& c, const std::vector<DecodeRequest>& reqs,
                       const std::vector<DecodeResult>& solo, int S) {
  std::vector<Result<runtime::TimedResult>> got(S, InternalError("not run"));
  std::latch start(S + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < S; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      got[i] = DecodeOn(c, reqs[i]);
    });
  }
  const WireStats before = c.stats();
  const Clock::time_point t0 = Clock::now();
  start.arrive_and_wait();
  for (std::thread& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const WireStats after = c.stats();
  Row row;
  for (int i = 0; i < S; ++i) {
    if (!got[i].ok()) return got[i].status().WithContext("session " + std::to_string(i));
    LOCKSTEP_RETURN_IF_ERROR(runtime::CompareResults(got[i]->result, solo[i],
                                                     "session " + std::to_string(i), "solo"));
    row.ms_per_token += got[i]->decode_ms_per_token / S;
  }
  const double tokens = double(S) * reqs[0].gen;
  row.tok_s = tokens / wall;
  row.bytes_per_token = double(after.bytes_sent - before.bytes_sent + after.bytes_received -
                               before.bytes_received) /
                        tokens;
  return row;
}

// The cluster config: the file, or a loopback one for --model (workers
// filled in once they are spawned).
Result<ClusterConfig> ConfigFor(const Options& o) {
  if (!o.config.empty()) return LoadClusterConfig(o.config);
  ClusterConfig cfg;
  cfg.model_dir = std::filesystem::absolute(o.model).string();
  cfg.workers.assign(static_cast<size_t>(o.workers), "");
  cfg.request_timeout = std::chrono::milliseconds(600000);
  return cfg;
}

// --rounds: monolithic and sharded S = 1 alternated, each round's ratio
// (monolithic ms/token over sharded) and the median.
Status Interleaved(const Options& o, OpenModel& model, Coordinator& c,
                   const DecodeRequest& req, const DecodeResult& solo) {
  runtime::LocalRunOptions lo;
  lo.compute.threads = static_cast<size_t>(o.mono_threads.empty() ? 1 : o.mono_threads[0]);
  lo.runs = 1;
  std::vector<double> ratios;
  for (int r = 0; r < o.rounds; ++r) {
    LOCKSTEP_ASSIGN_OR_RETURN(runtime::TimedResult m, runtime::RunMonolithic(model, req, lo));
    LOCKSTEP_ASSIGN_OR_RETURN(runtime::TimedResult p, DecodeOn(c, req));
    LOCKSTEP_RETURN_IF_ERROR(runtime::CompareResults(p.result, solo, "sharded", "solo"));
    ratios.push_back(m.decode_ms_per_token / p.decode_ms_per_token);
    std::printf("%-10s round %-8d %9.2f ms/token monolithic %zut, %.2f sharded S=1: %.3fx\n",
                o.label.c_str(), r + 1, m.decode_ms_per_token, lo.compute.threads,
                p.decode_ms_per_token, ratios.back());
    std::fflush(stdout);
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  std::printf("%-10s sharded S=1 / monolithic over %zu interleaved rounds: median %.3fx "
              "(min %.3f, max %.3f)\n",
              o.label.c_str(), n, median, sorted.front(), sorted.back());
  return Status::Ok();
}

Result<std::unique_ptr<runtime::WorkerProcesses>> SpawnLoopback(const Options& o,
                                                                 const char* argv0,
                                                                 ClusterConfig* cfg) {
  runtime::WorkerSpawnOptions spawn;
  spawn.exe = o.lockstep;
  if (spawn.exe.empty()) {
    spawn.exe = (std::filesystem::absolute(argv0).parent_path() / "../../cli/lockstep").string();
  }
  spawn.count = o.workers;
  spawn.compute.threads = static_cast<size_t>(o.worker_threads);
  return runtime::SpawnLoopbackCluster(spawn, cfg);
}

Status Main(const Options& o, const char* argv0) {
  LOCKSTEP_RETURN_IF_ERROR(ops::PinFpEnvironment());
  LOCKSTEP_ASSIGN_OR_RETURN(ClusterConfig cfg, ConfigFor(o));
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(cfg.model_dir, cfg.pins));
  const uint32_t vocab = static_cast<uint32_t>(model.config.vocab_size);
  int max_s = 1;
  for (int s : o.sessions) max_s = std::max(max_s, s);
  std::vector<DecodeRequest> reqs;
  for (int i = 0; i < max_s; ++i) reqs.push_back(SessionRequest(o, i, vocab));

  std::printf("%-10s %-14s %9s %10s %8s %8s %12s\n", "link", "run", "ms/token", "tok/s",
              "x mono1", "x S=1", "bytes/token");
  double mono1 = 0;
  for (int threads : o.mono_threads) {
    runtime::LocalRunOptions lo;
    lo.compute.threads = static_cast<size_t>(threads);
    lo.runs = 1;
    double best_ms = 0;
    for (int r = 0; r < o.repeats; ++r) {
      LOCKSTEP_ASSIGN_OR_RETURN(runtime::TimedResult m, runtime::RunMonolithic(model, reqs[0], lo));
      if (r == 0 || m.decode_ms_per_token < best_ms) best_ms = m.decode_ms_per_token;
    }
    const double tok_s = 1000.0 / best_ms;
    if (mono1 == 0) mono1 = tok_s;
    std::printf("%-10s %-14s %9.2f %10.1f %8.2f %8s %12s\n", o.label.c_str(),
                ("monolithic " + std::to_string(threads) + "t").c_str(), best_ms, tok_s,
                tok_s / mono1, "-", "-");
  }
  std::fflush(stdout);

  std::unique_ptr<runtime::WorkerProcesses> procs;
  if (!o.model.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(procs, SpawnLoopback(o, argv0, &cfg));
  }
  zmq::context_t context(1);
  LOCKSTEP_ASSIGN_OR_RETURN(auto c, Coordinator::Start(context, cfg));
  std::vector<DecodeResult> solo;
  for (const DecodeRequest& r : reqs) {
    LOCKSTEP_ASSIGN_OR_RETURN(runtime::TimedResult t, DecodeOn(*c, r));
    solo.push_back(std::move(t.result));
  }
  double s1 = 0;
  for (int S : o.sessions) {
    Row row;
    for (int r = 0; r < o.repeats; ++r) {
      LOCKSTEP_ASSIGN_OR_RETURN(Row got, Concurrent(*c, reqs, solo, S));
      if (got.tok_s > row.tok_s) row = got;
    }
    if (S == 1) s1 = row.tok_s;
    char vs1[16] = "-";
    if (s1 > 0) std::snprintf(vs1, sizeof vs1, "%.2f", row.tok_s / s1);
    std::printf("%-10s %-14s %9.2f %10.1f %8.2f %8s %12.0f\n", o.label.c_str(),
                ("sharded S=" + std::to_string(S)).c_str(), row.ms_per_token, row.tok_s,
                row.tok_s / mono1, vs1, row.bytes_per_token);
    std::fflush(stdout);
  }
  std::printf("%-10s every concurrent session's digests equal its solo run (%s)\n",
              o.label.c_str(), cfg.ship_logits ? "ship_logits" : "chosen on the last stage");
  if (o.rounds > 0) LOCKSTEP_RETURN_IF_ERROR(Interleaved(o, model, *c, reqs[0], solo[0]));
  if (procs) {
    c->ShutdownWorkers("bench finished");
    c.reset();  // its I/O thread flushes the shutdown as it stops
    procs->Reap(std::chrono::milliseconds(2000));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  lockstep::Result<lockstep::Options> o = lockstep::ParseArgs(argc, argv);
  if (!o.ok()) {
    std::cerr << "pipeline_bench: " << o.status().ToString() << "\n";
    return 2;
  }
  const lockstep::Status st = lockstep::Main(*o, argv[0]);
  if (!st.ok()) {
    std::cerr << "pipeline_bench: " << st.ToString() << "\n";
    return 1;
  }
  return 0;
}
