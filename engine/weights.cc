#include "engine/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace lockstep {
namespace {

using Shape = std::vector<int64_t>;

std::string LayerName(int layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

Result<std::vector<float>> ReadVector(const SafetensorsFile& f, const std::string& name, size_t n) {
  const Shape shape{static_cast<int64_t>(n)};
  return f.ReadF32(name, shape);
}

// Maps a tensor's pages in one call before it is read (an mmap'd file would
// otherwise fault page by page). Advisory: errors are ignored.
void Prefault(std::span<const uint8_t> bytes) {
#ifdef MADV_POPULATE_READ
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
  if (bytes.size() > (size_t{1} << 20)) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_READ);
#else
  (void)bytes;
#endif
}

Result<WeightMatrix> ReadMatrix(const SafetensorsFile& f, const std::string& name,
                                size_t rows, size_t cols, WeightFormat format,
                                ops::ThreadPool* pool) {
  const Shape shape{static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
  WeightMatrix m;
  m.rows = rows;
  m.cols = cols;
  const TensorInfo* t = f.Find(name);
  if (format == WeightFormat::kF32Rows || t == nullptr || t->dtype != DType::kBF16) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::vector<float> data, f.ReadF32(name, shape));
    if (format == WeightFormat::kF32Rows) {
      m.data = std::move(data);
    } else {
      m.packed = ops::PackedMatrix::FromF32(data.data(), rows, cols);
    }
    return m;
  }
  if (t->shape != shape) {  // let ReadF32 word the shape error
    return f.ReadF32(name, shape).status();
  }
  const ops::WeightType type =
      format == WeightFormat::kPackedBf16 ? ops::WeightType::kBf16 : ops::WeightType::kF32;
  Prefault(f.Bytes(*t));
  m.packed = ops::PackedMatrix::FromBf16Bytes(f.Bytes(*t), rows, cols, type, pool);
  return m;
}

// An optional bias (§9.1): empty when the checkpoint does not carry it.
Result<std::vector<float>> ReadOptionalBias(const SafetensorsFile& f, const std::string& name,
                                            size_t n) {
  if (f.Find(name) == nullptr) return std::vector<float>{};
  return ReadVector(f, name, n);
}

Result<LayerWeights> LoadLayer(const SafetensorsFile& f, const ModelConfig& c, int l,
                               WeightFormat fmt, ops::ThreadPool* pool) {
  const size_t hidden = static_cast<size_t>(c.hidden_size);
  const size_t q_width = static_cast<size_t>(c.num_heads) * static_cast<size_t>(c.head_dim);
  const size_t kv_width = static_cast<size_t>(c.num_kv_heads) * static_cast<size_t>(c.head_dim);
  const size_t inter = static_cast<size_t>(c.intermediate_size);
  LayerWeights w;
  LOCKSTEP_ASSIGN_OR_RETURN(w.input_norm, ReadVector(f, LayerName(l, "input_layernorm.weight"), hidden));
  LOCKSTEP_ASSIGN_OR_RETURN(w.q_proj, ReadMatrix(f, LayerName(l, "self_attn.q_proj.weight"), q_width, hidden, fmt, pool));
  LOCKSTEP_ASSIGN_OR_RETURN(w.k_proj, ReadMatrix(f, LayerName(l, "self_attn.k_proj.weight"), kv_width, hidden, fmt, pool));
  LOCKSTEP_ASSIGN_OR_RETURN(w.v_proj, ReadMatrix(f, LayerName(l, "self_attn.v_proj.weight"), kv_width, hidden, fmt, pool));
  LOCKSTEP_ASSIGN_OR_RETURN(w.q_bias, ReadOptionalBias(f, LayerName(l, "self_attn.q_proj.bias"), q_width));
  LOCKSTEP_ASSIGN_OR_RETURN(w.k_bias, ReadOptionalBias(f, LayerName(l, "self_attn.k_proj.bias"), kv_width));
  LOCKSTEP_ASSIGN_OR_RETURN(w.v_bias, ReadOptionalBias(f, LayerName(l, "self_attn.v_proj.bias"), kv_width));
  LOCKSTEP_ASSIGN_OR_RETURN(w.o_proj, ReadMatrix(f, LayerName(l, "self_attn.o_proj.weight"), hidden, q_width, fmt, pool));
  LOCKSTEP_ASSIGN_OR_RETURN(w.post_norm, ReadVector(f, LayerName(l, "post_attention_layernorm.weight"), hidden));
  LOCKSTEP_ASSIGN_OR_RETURN(w.gate_proj, ReadMatrix(f, LayerName(l, "mlp.gate_proj.weight"), inter, hidden, fmt, pool));
  LOCKSTEP_ASSIGN_OR_RETURN(w.up_proj, ReadMatrix(f, LayerName(l, "mlp.up_proj.weight"), inter, hidden, fmt, pool));
  LOCKSTEP_ASSIGN_OR_RETURN(w.down_proj, ReadMatrix(f, LayerName(l, "mlp.down_proj.weight"), hidden, inter, fmt, pool));
  return w;
}

}  // namespace

Status ValidateStageSpec(const ModelConfig& cfg, const StageSpec& spec) {
  if (spec.lo < 0 || spec.hi > cfg.num_layers || spec.lo > spec.hi) {
    return InvalidError("layer range [" + std::to_string(spec.lo) + ", " +
                        std::to_string(spec.hi) + ") is outside the model's " +
                        std::to_string(cfg.num_layers) + " layers");
  }
  if (spec.lo == spec.hi && !spec.first && !spec.last) {
    return InvalidError("empty layer range [" + std::to_string(spec.lo) + ", " +
                        std::to_string(spec.hi) + ")");
  }
  return Status::Ok();
}

Result<StageWeights> LoadStageWeights(const SafetensorsFile& f, const ModelConfig& c,
                                      const StageSpec& spec) {
  return LoadStageWeights(f, c, spec, WeightFormat::kPackedBf16);
}

size_t WeightBytesPerToken(const StageWeights& w) {
  auto bytes = [](const WeightMatrix& m) {
    return m.packed.empty() ? m.data.size() * sizeof(float) : m.packed.bytes();
  };
  size_t total = 0;
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj,
                                  &l.up_proj, &l.down_proj}) {
      total += bytes(*m);
    }
  }
  if (w.spec.last) total += bytes(w.head());
  return total;
}

Result<StageWeights> LoadStageWeights(const SafetensorsFile& f, const ModelConfig& c,
                                      const StageSpec& spec, WeightFormat format,
                                      ops::ThreadPool* pool) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateStageSpec(c, spec));
  const size_t hidden = static_cast<size_t>(c.hidden_size);
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  StageWeights w;
  w.spec = spec;
  const bool tied = c.tie_word_embeddings;
  if (spec.first || (spec.last && tied)) {
    LOCKSTEP_ASSIGN_OR_RETURN(w.embed, ReadMatrix(f, "model.embed_tokens.weight", vocab, hidden, format, pool));
  }
  for (int l = spec.lo; l < spec.hi; ++l) {
    LOCKSTEP_ASSIGN_OR_RETURN(LayerWeights lw, LoadLayer(f, c, l, format, pool));
    w.layers.push_back(std::move(lw));
  }
  if (spec.last) {
    LOCKSTEP_ASSIGN_OR_RETURN(w.final_norm, ReadVector(f, "model.norm.weight", hidden));
    if (!tied) {
      LOCKSTEP_ASSIGN_OR_RETURN(w.lm_head, ReadMatrix(f, "lm_head.weight", vocab, hidden, format, pool));
    }
  }
  return w;
}

}  // namespace lockstep
