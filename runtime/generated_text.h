// The text of generated token ids, for reports: decoded with the model's
// tokenizer (model_tokenizer.h) when it has a loadable one, else nothing
// (ids are always reported; text is a convenience, never checked).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/io/model_files.h"
#include "engine/tokenizer/tokenizer.h"

namespace lockstep::runtime {

std::optional<std::string> DecodeText(const ModelFiles& files, const std::vector<uint32_t>& ids);
// The same with a tokenizer already loaded (null: nothing). Every
// generated id is decoded, an EOS included, as receipts record it.
std::optional<std::string> DecodeText(const Tokenizer* tokenizer, const std::vector<uint32_t>& ids);

}  // namespace lockstep::runtime
