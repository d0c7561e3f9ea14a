#include "engine/tokenizer/synthetic_tokenizer.h"

#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/byte_unicode.h"

namespace lockstep {
namespace {

using ojson = nlohmann::ordered_json;

constexpr char kSample[] =
    "Once upon a time there was a little girl who lived in a village near the "
    "forest. Whenever she went out, the little girl wore a red riding cloak, so "
    "everyone in the village called her Little Red Riding Hood. One morning she "
    "asked her mother if she could go to visit her grandmother, as it had been "
    "a long time since they had seen each other. The sun was shining and the "
    "birds were singing when she walked along the path through the trees. "
    "The quick brown fox jumps over the lazy dog. It is a truth universally "
    "acknowledged that a single man in possession of a good fortune must be in "
    "want of a wife. We hold these truths to be self evident, that all people "
    "are created equal. In the beginning the world was without form and the "
    "people of the town would gather every evening to talk about the weather, "
    "the harvest, their children and the news from the city. She said that he "
    "would come back tomorrow, and they were happy because it was the first "
    "time that anyone had found the answer to the question.";

// splitmix64: tiny, well-mixed, seedable.
uint64_t Mix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a: a hash that is the same on every platform (std::hash is not).
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

struct Trainer {
  std::vector<std::vector<std::string>> words;  // symbols per distinct word
  std::vector<uint64_t> weights;
  std::vector<std::string> vocab;               // id -> token
  std::set<std::string> known;
  std::vector<std::pair<std::string, std::string>> merges;

  void Add(const std::string& token) {
    vocab.push_back(token);
    known.insert(token);
  }
  // Most frequent pair whose merge is new; ties by a seeded key. False if none.
  bool BestPair(uint64_t seed, std::pair<std::string, std::string>* best) const {
    std::map<std::pair<std::string, std::string>, uint64_t> counts;
    for (size_t w = 0; w < words.size(); ++w) {
      for (size_t i = 0; i + 1 < words[w].size(); ++i) counts[{words[w][i], words[w][i + 1]}] += weights[w];
    }
    uint64_t best_count = 0, best_key = 0;
    for (const auto& [pair, count] : counts) {
      if (known.count(pair.first + pair.second)) continue;
      uint64_t st = seed ^ Fnv1a(pair.first + '\x01' + pair.second);
      const uint64_t key = Mix(&st);
      if (count > best_count || (count == best_count && key < best_key)) {
        best_count = count, best_key = key, *best = pair;
      }
    }
    return best_count > 0;
  }
  void Apply(const std::pair<std::string, std::string>& p) {
    for (auto& w : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == p.first && w[i + 1] == p.second) {
          out.push_back(p.first + p.second);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      w = std::move(out);
    }
    merges.push_back(p);
    Add(p.first + p.second);
  }
};

void LoadSample(uint64_t seed, Trainer* t) {
  std::map<std::string, uint64_t> counts;
  std::string text = kSample, word;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ' ';
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) {
      word += c;
      continue;
    }
    if (!word.empty() && word != " ") counts[word]++;
    word = (c == ' ') ? " " : "";
    if (c != ' ' && i < text.size()) counts[std::string(1, c)]++;
  }
  uint64_t st = seed;
  for (const auto& [w, n] : counts) {
    std::vector<std::string> symbols;
    for (unsigned char b : w) symbols.push_back(ByteToSymbol(b));
    t->words.push_back(std::move(symbols));
    t->weights.push_back(n * 4 + Mix(&st) % 4);
  }
}

// Seeded merge of two existing tokens whose concatenation is new.
void RandomMerge(uint64_t* st, Trainer* t) {
  for (;;) {
    const std::string& a = t->vocab[3 + Mix(st) % (t->vocab.size() - 3)];
    const std::string& b = t->vocab[3 + Mix(st) % (t->vocab.size() - 3)];
    if (!t->known.count(a + b)) {
      const std::pair<std::string, std::string> p{a, b};
      t->merges.push_back(p);
      t->Add(a + b);
      return;
    }
  }
}

ojson Config(const Trainer& t) {
  ojson added = ojson::array();
  const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 3; ++i) {
    added.push_back({{"id", i}, {"content", specials[i]}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                     {"special", true}});
  }
  ojson vocab = ojson::object();
  for (size_t id = 0; id < t.vocab.size(); ++id) vocab[t.vocab[id]] = id;
  ojson merges = ojson::array();
  for (const auto& [a, b] : t.merges) merges.push_back(a + " " + b);
  const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                            {"trim_offsets", true}, {"use_regex", true}};
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
          {"added_tokens", added}, {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers",
              {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}}},
          {"post_processor", nullptr}, {"decoder", byte_level},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                     {"vocab", vocab}, {"merges", merges}}}};
}

}  // namespace

Result<std::string> SyntheticTokenizerJson(uint32_t vocab_size, uint64_t seed) {
  if (vocab_size < kMinSyntheticVocabSize || vocab_size > kMaxSyntheticVocabSize) {
    return InvalidError("synthetic tokenizer: vocab_size " + std::to_string(vocab_size) +
                        " is outside [" + std::to_string(kMinSyntheticVocabSize) + ", " +
                        std::to_string(kMaxSyntheticVocabSize) + "]");
  }
  Trainer t;
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) t.Add(s);
  for (int b = 0; b < 256; ++b) t.Add(ByteToSymbol(static_cast<uint8_t>(b)));
  LoadSample(seed, &t);
  uint64_t st = seed ^ 0x5EEDull;
  std::pair<std::string, std::string> pair;
  while (t.vocab.size() < vocab_size) {
    if (t.BestPair(seed, &pair)) {
      t.Apply(pair);
    } else {
      RandomMerge(&st, &t);
    }
  }
  return Config(t).dump(2);
}

}  // namespace lockstep
