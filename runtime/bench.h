// The measurements of `lockstep bench` on a model folder, figures only
// (printing is the caller's): time to first token (open + hash, load,
// prefill), decode throughput timed on the path `lockstep run` times
// (DecodeOnStage: RunDecode on a LocalBackend through a TimedBackend),
// prefill throughput, weight bytes per token, the timed decode's
// result (prompt ids, tokens, digests: the same bits `run` gives), and with sessions > 1 the
// same S sessions decoded as one batch (the server's LocalBatchStepper
// over DecodeSessions) and one by one, interleaved, each batched session
// checked bit-equal to its solo twin; a STREAM-style
// memory bandwidth measured in the same process.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/model_loader.h"

namespace lockstep::runtime {

struct BenchOptions {
  std::string model_dir;
  ComputeOptions compute{"auto", 2, WeightFormat::kPackedBf16};
  size_t sessions = 1;           // > 1: also the batched measurement
  size_t prompt_len = 128;       // prefill measurement
  size_t decode_prompt_len = 4;  // decode measurement's prompt
  size_t gen = 128;              // tokens per session, >= 2
  size_t repeats = 3;            // prefill and stream: best of N
};

struct BenchFigures {
  std::string isa;      // the kernels that ran
  std::string weights;  // the types the matrices were held in (HeldWeightTypes)
  double ttft_s = 0, load_s = 0, decode_tok_s = 0, prefill_tok_s = 0, prefill_median_tok_s = 0;
  double solo_tok_s = 0;  // the same sessions decoded one by one, interleaved
  double batched_tok_s = 0, stream_read_gb_s = 0, stream_triad_gb_s = 0;
  bool batched_equals_solo = true;
  size_t weight_bytes = 0;
  size_t peak_rss = 0;          // before the stream buffers exist
  double decode_cpu_share = 0;  // process CPU time / (wall * threads) while decoding
  double ttft_cpu_s = 0;        // process CPU time until the first token
  double open_s = 0;            // OpenModelDir: config and tokenizer hashed, config parsed
  std::string weight_cache_note;  // LoadedStage::weight_cache_note
  // The timed decode itself (greedy, `decode_prompt_len` prompt ids of
  // Prompt(), `gen` tokens): what it decoded, so its bits can be held
  // equal to `run`'s and `serve`'s for the same request.
  DecodeResult decode;
};

// Decodes `reqs` together as `bench` batches them (DecodeSessions stepped
// by a LocalBatchStepper, prompts prefilled `prefill_chunk` tokens per
// step), each result equal to its solo RunDecode. REQUIRES: stage holds
// every layer.
Result<std::vector<DecodeResult>> DecodeBatched(const Stage& stage, const WitnessSeed& seed,
                                                const std::vector<DecodeRequest>& reqs,
                                                size_t prefill_chunk = 64);

// The types the matrices of `spec` (its 2-D tensors: linear layers,
// embedding, LM head) are held in when loaded as `format`: "f32" when
// widened at load, else the checkpoint's own types, each once, E2.3's /
// safetensors' names in lower case, sorted and joined by '+' ("bf16" for a
// BF16 folder, "q4_k+q6_k" for a Q4_K_M file of K-quant-wide rows).
std::string HeldWeightTypes(const OpenModel& model, const StageSpec& spec, WeightFormat format);

// Invalid for gen < 2 or a zero length/count, or options LoadStage refuses.
Result<BenchFigures> RunBench(const BenchOptions& o);

}  // namespace lockstep::runtime
