#include "engine/same_tokenizer.h"

namespace lockstep {
namespace {

std::string IdList(const std::vector<uint32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

std::string Both(const TokenizerIdentity& target, const TokenizerIdentity& draft) {
  return "draft model " + draft.model + " and target model " + target.model;
}

}  // namespace

TokenizerIdentity TokenizerIdentityOf(const ModelFiles& files, const ModelConfig& config,
                                      const Digest& tokenizer_sha256) {
  return TokenizerIdentity{files.gguf ? files.weights_path : files.dir, files.gguf, tokenizer_sha256,
                           config.vocab_size, config.eos_token_ids};
}

Status CheckSameTokenizer(const TokenizerIdentity& target, const TokenizerIdentity& draft) {
  if (draft.vocab_size != target.vocab_size) {
    return MismatchError(Both(target, draft) + " differ in vocabulary size (" +
                         std::to_string(draft.vocab_size) + " vs " +
                         std::to_string(target.vocab_size) + " tokens)");
  }
  const bool both_name_eos = !draft.eos_token_ids.empty() && !target.eos_token_ids.empty();
  if (both_name_eos && draft.eos_token_ids != target.eos_token_ids) {
    return MismatchError(Both(target, draft) + " differ in end-of-sequence ids (" +
                         IdList(draft.eos_token_ids) + " vs " + IdList(target.eos_token_ids) + ")");
  }
  if (!draft.gguf && !target.gguf && draft.tokenizer_json != target.tokenizer_json) {
    return MismatchError(Both(target, draft) + " differ in tokenizer.json (sha256 " +
                         ToHex(draft.tokenizer_json) + " vs " + ToHex(target.tokenizer_json) + ")");
  }
  return Status::Ok();
}

}  // namespace lockstep
