// digest_probe MODEL_DIR IDS GEN WINDOW ISA [EVICT...]
//
// The numeric core alone (engine/ and what it links, no tokenizer, wire or
// server), so that another compiler or optimisation level can be checked
// against the main build in a fraction of a full build. Runs one greedy
// decode of the token ids IDS (comma separated) for GEN steps with the
// kernels ISA, window WINDOW (0 = the model's own) and evictions
// FROM:COUNT@STEP, and prints one JSON object with the fields `lockstep run
// --json` prints for the same run: cis2_ref, argmax_digest,
// generated_token_ids and steps[{token, logits_sha256}].
// Exit 0 on success, 2 with a message on bad arguments or a failed decode.
#include <charconv>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/limits.h"
#include "engine/decode.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "engine/ops/fp_env.h"

namespace lockstep {
namespace {

Result<std::vector<uint32_t>> ParseIds(std::string_view text) {
  std::vector<uint32_t> ids;
  while (!text.empty()) {
    const size_t comma = std::min(text.find(','), text.size());
    uint32_t v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + comma, v);
    if (comma == 0 || ec != std::errc() || p != text.data() + comma) {
      return InvalidError("not a token id list: '" + std::string(text) + "'");
    }
    ids.push_back(v);
    text.remove_prefix(std::min(comma + 1, text.size()));
  }
  if (ids.empty()) return InvalidError("no token ids");
  return ids;
}

Result<DecodeResult> Decode(int argc, char** argv) {
  LOCKSTEP_RETURN_IF_ERROR(ops::PinFpEnvironment());
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(argv[1], ModelPins{}));
  DecodeRequest req;
  LOCKSTEP_ASSIGN_OR_RETURN(req.prompt, ParseIds(argv[2]));
  req.gen = static_cast<uint32_t>(std::stoul(argv[3]));
  req.max_positions = MaxPositions(Limits{}, model.config.max_position_embeddings);
  for (int i = 6; i < argc; ++i) {
    LOCKSTEP_ASSIGN_OR_RETURN(EvictSpec e, ParseEvictSpec(argv[i]));
    req.evictions.push_back(e);
  }
  ComputeOptions compute;
  compute.isa = argv[5];
  LOCKSTEP_ASSIGN_OR_RETURN(LoadedStage stage, LoadStage(model, StageSpec{0, model.config.num_layers, true, true}, compute));
  LocalBackend backend(*stage);
  const int window = std::stoi(argv[4]);
  if (window > 0) LOCKSTEP_RETURN_IF_ERROR(backend.SetWindow(window));
  return RunDecode(backend, req, model.Seed());
}

nlohmann::json ToJson(const DecodeResult& r) {
  nlohmann::json steps = nlohmann::json::array();
  for (size_t i = 0; i < r.generated.size(); ++i) {
    steps.push_back({{"token", r.generated[i]}, {"logits_sha256", ToHex(r.logits_sha256[i])}});
  }
  return {{"cis2_ref", ToHex(r.cis2_ref)},
          {"argmax_digest", ToHex(r.argmax_digest)},
          {"generated_token_ids", r.generated},
          {"steps", steps}};
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: digest_probe MODEL_DIR IDS GEN WINDOW ISA [FROM:COUNT@STEP...]\n";
    return 2;
  }
  lockstep::Result<lockstep::DecodeResult> r = lockstep::Decode(argc, argv);
  if (!r.ok()) {
    std::cerr << "digest_probe: " << r.status().ToString() << "\n";
    return 2;
  }
  std::cout << lockstep::ToJson(*r).dump() << "\n";
  return 0;
}
