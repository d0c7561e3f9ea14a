// A small, valid byte-level BPE tokenizer.json for synthetic checkpoints:
// SmolLM2-like configuration (Digits + ByteLevel pre-tokenizer, ByteLevel
// decoder), special tokens <|endoftext|>, <|im_start|>, <|im_end|> at ids
// 0-2, the 256 byte symbols at ids 3-258 in byte order, then merges learned
// from a built-in English sample (the seed perturbs word weights and breaks
// ties) until exactly `vocab_size` ids exist. When the sample runs out of
// pairs, seeded merges of existing tokens fill the rest.
// Pure function: same (vocab_size, seed) -> same bytes. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace lockstep {

inline constexpr uint32_t kMinSyntheticVocabSize = 264;   // 3 + 256 + 5 merges
inline constexpr uint32_t kMaxSyntheticVocabSize = 1u << 18;

// Invalid when vocab_size is outside [kMinSyntheticVocabSize,
// kMaxSyntheticVocabSize].
Result<std::string> SyntheticTokenizerJson(uint32_t vocab_size, uint64_t seed);

}  // namespace lockstep
