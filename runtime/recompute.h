// Recomputing a receipt's decode on this machine (`lockstep verify`): the
// receipt's prompt, generation length, evictions, window and sampling, by
// teacher forcing its tokens (engine/teacher_forcing.h: the result equals a
// decode replay's up to the first step whose token the model does not
// choose, where it ends), on a cluster (`config`), on K loopback workers,
// or monolithically, after
// checking that the model here has the receipt's table digests. A model
// whose artifacts differ from the pins is refused as Mismatch naming the
// folder. The comparison with the receipt is the caller's
// (receipt::FirstDivergence).
#pragma once

#include <string>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/io/model_files.h"
#include "engine/model_loader.h"
#include "receipt/receipt.h"

namespace lockstep::runtime {

struct RecomputeOptions {
  std::string model_dir;     // the model folder (monolithic and loopback)
  int workers = 0;           // > 0: on this many loopback worker processes
  std::string config;        // non-empty: on the cluster of this config file
  bool ship_logits = false;  // sharded: logits to the coordinator (the old path)
  ComputeOptions compute{};  // kernels and threads here and on loopback workers (same bits)
};

struct Recomputed {
  DecodeResult result;
  std::string where;  // how it ran, for the report
  double decode_s = 0;  // monolithic: wall seconds of the recomputation, weights loaded (else 0)
};

Result<Recomputed> RecomputeReceipt(const receipt::ParsedReceipt& r, const ModelPins& pins,
                                    const RecomputeOptions& o);

}  // namespace lockstep::runtime
