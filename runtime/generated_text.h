// The text of generated token ids, for reports: decoded with the model's
// tokenizer (model_tokenizer.h) when it has a loadable one, else nothing
// (ids are always reported; text is a convenience, never checked).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/io/model_files.h"

namespace lockstep::runtime {

std::optional<std::string> DecodeText(const ModelFiles& files, const std::vector<uint32_t>& ids);

}  // namespace lockstep::runtime
