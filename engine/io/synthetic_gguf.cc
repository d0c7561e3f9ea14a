#include "engine/io/synthetic_gguf.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "engine/io/gguf_config.h"
#include "engine/io/gguf_names.h"
#include "engine/io/gguf_writer.h"
#include "engine/io/seeded_random.h"
#include "engine/io/synthetic_model.h"

namespace lockstep {
namespace {

struct MixRow {
  std::string_view name;
  DType type;
};

constexpr MixRow kPlainMixes[] = {
    {"f32", DType::kF32},   {"f16", DType::kF16},   {"bf16", DType::kBF16}, {"q8_0", DType::kQ8_0},
    {"q4_0", DType::kQ4_0}, {"q4_k", DType::kQ4_K}, {"q5_k", DType::kQ5_K}, {"q6_k", DType::kQ6_K},
};

// A quantized weight's standard deviation over d: the stored quants and
// scales are uniform over their ranges, dmin = d * kDminOverD.
double SpreadOverD(DType t) {
  switch (t) {
    case DType::kQ8_0: return 73.9;   // i8
    case DType::kQ4_0: return 4.61;   // q - 8, q in 0..15
    case DType::kQ4_K: return 258.0;  // d*sc*q - dmin*m, 6-bit sc and m
    case DType::kQ5_K: return 527.0;
    case DType::kQ6_K: return 1367.0; // i8 scale * (q - 32)
    default: return 1.0;
  }
}
double DminOverD(DType t) { return t == DType::kQ4_K ? 7.5 : 15.5; }

void PutF16(uint8_t* at, float v) {
  const uint16_t h = F16RoundNearestEven(v);
  at[0] = static_cast<uint8_t>(h & 0xFF);
  at[1] = static_cast<uint8_t>(h >> 8);
}

// Random valid blocks of a quantized type whose weights spread about sigma.
void FillBlocks(DType t, SplitMix64& rng, double sigma, std::span<uint8_t> out) {
  const size_t block = static_cast<size_t>(DTypeBlockBytes(t));
  for (size_t b = 0; b < out.size(); b += block) {
    uint8_t* p = out.data() + b;
    for (size_t i = 0; i < block; i += 8) {
      const uint64_t r = rng.Next();
      std::memcpy(p + i, &r, std::min<size_t>(8, block - i));
    }
    const double jitter = 0.5 + static_cast<double>(rng.Next() >> 11) / 9007199254740992.0;
    const float d = static_cast<float>(sigma / SpreadOverD(t) * jitter);
    if (t == DType::kQ6_K) {
      PutF16(p + 208, d);
    } else {
      PutF16(p, d);
      if (t == DType::kQ4_K || t == DType::kQ5_K) PutF16(p + 2, d * static_cast<float>(DminOverD(t)));
    }
  }
}

// One float value as `t` (F32, F16, BF16) at `at`: the BF16 value
// synthetic_model.h writes, widened (or for F16 rounded) from it.
void PutValue(DType t, float v, uint8_t* at) {
  const uint16_t b = Bf16RoundNearestEven(v);
  if (t == DType::kBF16) {
    at[0] = static_cast<uint8_t>(b & 0xFF);
    at[1] = static_cast<uint8_t>(b >> 8);
    return;
  }
  const float wide = std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
  if (t == DType::kF16) return PutF16(at, wide);
  std::memcpy(at, &wide, 4);
}

struct Spec {
  std::vector<std::string> hf;  // seeds the values: the §2.5 name (each expert's, stacked)
  std::string gguf;
  std::vector<uint64_t> ne;
  DType type;
  double center, amplitude;  // of the float values (synthetic_model.h)
  int permuted_heads = 0;    // llama q/k: rows stored permuted
};

// The float values of a tensor in order: each stacked matrix from its own
// stream, one after another.
class StackValues {
 public:
  StackValues(const Spec& s, uint64_t seed)
      : s_(s), seed_(seed), per_matrix_(s.ne[0] * (s.ne.size() > 1 ? s.ne[1] : 1)),
        values_(s.hf[0], seed, s.center, s.amplitude) {}
  float Next() {
    if (used_ == per_matrix_) {
      values_ = SyntheticValues(s_.hf[++matrix_], seed_, s_.center, s_.amplitude);
      used_ = 0;
    }
    ++used_;
    return values_.Next();
  }

 private:
  const Spec& s_;
  const uint64_t seed_, per_matrix_;
  SyntheticValues values_;
  size_t matrix_ = 0;
  uint64_t used_ = 0;
};

// A permuted float tensor (llama q/k) whole in memory, rows moved to
// GGUF's order.
std::vector<uint8_t> FloatTensor(const Spec& s, uint64_t seed) {
  const uint64_t cols = s.ne[0], rows = s.ne.size() > 1 ? s.ne[1] : 1;
  const size_t size = static_cast<size_t>(DTypeSize(s.type));
  std::vector<uint8_t> out(static_cast<size_t>(rows * cols) * size);
  SyntheticValues values(s.hf[0], seed, s.center, s.amplitude);
  TensorInfo order{s.gguf, s.type, {static_cast<int64_t>(rows)}, 0, 0, s.permuted_heads};
  std::vector<uint64_t> stored_at(rows);  // HF row -> stored row
  for (uint64_t r = 0; r < rows; ++r) stored_at[HfRowOf(order, r)] = r;
  for (uint64_t hf = 0; hf < rows; ++hf) {
    for (uint64_t k = 0; k < cols; ++k) {
      PutValue(s.type, values.Next(), out.data() + (stored_at[hf] * cols + k) * size);
    }
  }
  return out;
}

void AddTensor(GgufWriter& w, const Spec& s, uint64_t seed) {
  if (!IsBlockDType(s.type)) {
    if (s.permuted_heads > 0) return w.AddTensor(s.gguf, s.type, s.ne, FloatTensor(s, seed));
    auto spec = std::make_shared<Spec>(s);  // what the stream reads, kept alive with it
    auto values = std::make_shared<StackValues>(*spec, seed);
    const DType t = s.type;
    return w.AddTensor(s.gguf, t, s.ne, [spec, values, t](uint64_t, std::span<uint8_t> out) {
      const size_t size = static_cast<size_t>(DTypeSize(t));
      for (size_t i = 0; i < out.size(); i += size) PutValue(t, values->Next(), out.data() + i);
      return Status::Ok();
    });
  }
  auto rng = std::make_shared<SplitMix64>(s.gguf, seed);
  const DType t = s.type;
  const double sigma = 1.0 / std::sqrt(static_cast<double>(s.ne[0]));
  w.AddTensor(s.gguf, t, s.ne, [rng, t, sigma](uint64_t, std::span<uint8_t> out) {
    FillBlocks(t, *rng, sigma, out);
    return Status::Ok();
  });
}

// A MoE layer (E4): the router [E, hidden] (F32) and the three expert
// stacks ne = [in, out, E], each expert's values from its own §2.5 name.
void AddExperts(const ModelConfig& c, int layer, const GgufQuantMix& mix, std::vector<Spec>& out) {
  const std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
  const std::string blk = "blk." + std::to_string(layer) + ".";
  const uint64_t hidden = static_cast<uint64_t>(c.hidden_size);
  const uint64_t inter = static_cast<uint64_t>(c.moe.intermediate_size);
  const uint64_t experts = static_cast<uint64_t>(c.moe.num_experts);
  out.push_back({{p + "gate.weight"}, blk + "ffn_gate_inp.weight", {hidden, experts}, DType::kF32,
                 0.0, std::sqrt(3.0 / static_cast<double>(hidden)), 0});
  const struct { const char* hf; const char* gguf; uint64_t in, out; } stacks[] = {
      {"gate_proj", "ffn_gate_exps", hidden, inter},
      {"up_proj", "ffn_up_exps", hidden, inter},
      {"down_proj", "ffn_down_exps", inter, hidden}};
  for (const auto& st : stacks) {
    Spec s{{}, blk + st.gguf + ".weight", {st.in, st.out, experts}, DType::kF32, 0.0,
           std::sqrt(3.0 / static_cast<double>(st.in)), 0};
    for (uint64_t e = 0; e < experts; ++e) {
      s.hf.push_back(p + "experts." + std::to_string(e) + "." + st.hf + ".weight");
    }
    s.type = GgufTypeFor(mix, s.gguf, c.num_layers, c.tie_word_embeddings, st.in);
    out.push_back(std::move(s));
  }
}

std::vector<Spec> Specs(const ModelConfig& c, bool with_bias, const GgufQuantMix& mix) {
  const uint64_t hidden = static_cast<uint64_t>(c.hidden_size);
  const uint64_t q_dim = static_cast<uint64_t>(c.num_heads) * static_cast<uint64_t>(c.head_dim);
  const uint64_t kv_dim = static_cast<uint64_t>(c.num_kv_heads) * static_cast<uint64_t>(c.head_dim);
  const uint64_t inter = static_cast<uint64_t>(c.intermediate_size);
  const uint64_t vocab = static_cast<uint64_t>(c.vocab_size);
  const bool tied = c.tie_word_embeddings, llama = c.model_type == "llama";
  const double embed_amp = std::sqrt(3.0 / c.hidden_size);
  std::vector<Spec> out;
  auto add = [&](const std::string& hf, std::vector<uint64_t> ne, double center, double amp,
                 int heads = 0) {
    const std::string gguf = *GgufNameOf(hf);
    // 1-D tensors and the MoE router stay F32, as llama.cpp's quantizer leaves them.
    const bool f32 = ne.size() == 1 || gguf.find(".ffn_gate_inp.") != std::string::npos;
    const DType t = f32 ? DType::kF32 : GgufTypeFor(mix, gguf, c.num_layers, tied, ne[0]);
    out.push_back({{hf}, gguf, std::move(ne), t, center, amp, llama ? heads : 0});
  };
  auto linear = [&](const std::string& hf, uint64_t rows, uint64_t cols, int heads = 0) {
    add(hf, {cols, rows}, 0.0, std::sqrt(3.0 / static_cast<double>(cols)), heads);
  };
  add("model.embed_tokens.weight", {hidden, vocab}, 0.0, embed_amp);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {hidden}, 1.0, 0.2);
    add(p + "post_attention_layernorm.weight", {hidden}, 1.0, 0.2);
    linear(p + "self_attn.q_proj.weight", q_dim, hidden, c.num_heads);
    linear(p + "self_attn.k_proj.weight", kv_dim, hidden, c.num_kv_heads);
    linear(p + "self_attn.v_proj.weight", kv_dim, hidden);
    linear(p + "self_attn.o_proj.weight", hidden, q_dim);
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {static_cast<uint64_t>(c.head_dim)}, 1.0, 0.2);
      add(p + "self_attn.k_norm.weight", {static_cast<uint64_t>(c.head_dim)}, 1.0, 0.2);
    }
    if (c.is_moe()) {
      AddExperts(c, i, mix, out);
    } else {
      linear(p + "mlp.gate_proj.weight", inter, hidden);
      linear(p + "mlp.up_proj.weight", inter, hidden);
      linear(p + "mlp.down_proj.weight", hidden, inter);
    }
    if (with_bias) {
      const double amp = 0.1 * std::sqrt(3.0);
      add(p + "self_attn.q_proj.bias", {q_dim}, 0.0, amp, c.num_heads);
      add(p + "self_attn.k_proj.bias", {kv_dim}, 0.0, amp, c.num_kv_heads);
      add(p + "self_attn.v_proj.bias", {kv_dim}, 0.0, amp);
    }
  }
  add("model.norm.weight", {hidden}, 1.0, 0.2);
  if (!tied) add("lm_head.weight", {hidden, vocab}, 0.0, embed_amp);
  return out;
}

}  // namespace

uint16_t F16RoundNearestEven(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  const int exp = static_cast<int>(abs >> 23);
  if (exp >= 113) {  // a normal half: drop 13 mantissa bits, ties to even
    const uint32_t m = abs - (112u << 23);
    const uint32_t r = (m + 0x0FFFu + ((m >> 13) & 1u)) >> 13;
    return static_cast<uint16_t>(sign | r);
  }
  if (exp < 102) return sign;  // below half the smallest subnormal
  // A subnormal half: value = mant * 2^(exp - 150), in units of 2^-24.
  const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
  const int shift = 126 - exp;  // 14..24
  const uint32_t half_ulp = 1u << (shift - 1);
  const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u);
  const uint32_t r = q + (rem > half_ulp || (rem == half_ulp && (q & 1u)) ? 1u : 0u);
  return static_cast<uint16_t>(sign | r);
}

Result<GgufQuantMix> GgufQuantMixByName(std::string_view name) {
  for (const MixRow& m : kPlainMixes) {
    if (m.name == name) return GgufQuantMix{std::string(name), m.type, m.type, m.type, m.type};
  }
  if (name == "q4_k_m") {
    return GgufQuantMix{"q4_k_m", DType::kQ4_K, DType::kQ4_K, DType::kQ6_K, DType::kQ6_K};
  }
  return InvalidError("--quant: unknown type '" + std::string(name) +
                      "' (known: f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m)");
}

namespace {

DType MixTypeFor(const GgufQuantMix& mix, std::string_view gguf, int layers, bool tied) {
  if (gguf == "output.weight" || (tied && gguf == "token_embd.weight")) return mix.output;
  if (gguf == "token_embd.weight") return mix.embedding;
  const std::optional<int> layer = GgufLayerOf(gguf);
  const bool v_or_down = gguf.find(".attn_v.") != std::string_view::npos ||
                         gguf.find(".ffn_down") != std::string_view::npos;
  if (layer && v_or_down) {
    const int i = *layer, n = layers;
    if (i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2) return mix.more_bits;
  }
  return mix.matrices;
}

}  // namespace

DType GgufTypeFor(const GgufQuantMix& mix, std::string_view gguf, int layers, bool tied,
                  uint64_t cols) {
  const DType t = MixTypeFor(mix, gguf, layers, tied);
  if (cols % static_cast<uint64_t>(DTypeBlockElems(t)) == 0) return t;
  if (t == DType::kQ4_K) return DType::kQ4_0;
  if (t == DType::kQ5_K || t == DType::kQ6_K) return DType::kQ8_0;
  return t;
}

Status WriteSyntheticGguf(const std::string& path, const ModelConfig& cfg, bool with_bias,
                          const GgufQuantMix& mix, uint64_t seed,
                          const std::vector<std::pair<std::string, GgufValue>>& extra) {
  if (cfg.rope_scaling) {
    return InvalidError(path + ": a GGUF file holds Llama-3 rope scaling as rope_freqs.weight, "
                               "not as rope_scaling");
  }
  GgufWriter w;
  for (auto& [key, value] : GgufConfigKeys(cfg)) w.Set(key, value);
  for (const auto& [key, value] : extra) w.Set(key, value);
  for (const Spec& s : Specs(cfg, with_bias, mix)) {
    if (s.ne[0] % static_cast<uint64_t>(DTypeBlockElems(s.type)) != 0) {
      return InvalidError(path + ": tensor \"" + s.gguf + "\" has rows of " + std::to_string(s.ne[0]) +
                          " elements, not whole " + std::string(DTypeName(s.type)) + " blocks");
    }
    AddTensor(w, s, seed);
  }
  if (!cfg.rope_freqs.empty()) w.AddF32Vector(kGgufRopeFreqs, cfg.rope_freqs);
  return w.Write(path);
}

}  // namespace lockstep
