#include "runtime/generated_text.h"

#include "engine/tokenizer/tokenizer.h"

namespace lockstep::runtime {

std::optional<std::string> DecodeText(const ModelFiles& files, const std::vector<uint32_t>& ids) {
  if (!files.has_tokenizer) return std::nullopt;
  auto tok = Tokenizer::FromFile(files.tokenizer_path);
  if (!tok.ok()) return std::nullopt;
  return tok->Decode(ids);
}

}  // namespace lockstep::runtime
