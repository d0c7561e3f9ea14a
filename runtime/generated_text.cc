#include "runtime/generated_text.h"

#include "runtime/model_tokenizer.h"

namespace lockstep::runtime {

std::optional<std::string> DecodeText(const ModelFiles& files, const std::vector<uint32_t>& ids) {
  auto tok = LoadModelTokenizer(files);
  if (!tok.ok()) return std::nullopt;
  return tok->Decode(ids);
}

}  // namespace lockstep::runtime
