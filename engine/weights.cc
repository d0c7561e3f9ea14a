#include "engine/weights.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace lockstep {
namespace {

using Shape = std::vector<int64_t>;

std::string LayerName(int layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

Result<std::vector<float>> ReadVector(const Checkpoint& f, const std::string& name, size_t n) {
  const Shape shape{static_cast<int64_t>(n)};
  return f.ReadF32(name, shape);
}

// Rows per block read from the file at once (about 8 MiB of bf16), a whole
// number of panels: a matrix is read and packed block by block, so loading
// never holds a second copy of a tensor.
size_t BlockRows(size_t cols) {
  const size_t rows = (size_t{8} << 20) / (2 * std::max<size_t>(cols, 1));
  return std::max<size_t>(ops::kPanelRows, rows / ops::kPanelRows * ops::kPanelRows);
}

// Reads a BF16 tensor block by block into `m`, blocks spread over the
// pool's threads (each reads and packs its own blocks).
Status ReadBf16Blocks(const TensorRef& t, ops::PackedMatrix& m, ops::ThreadPool* pool) {
  const size_t rows = m.rows(), cols = m.cols();
  const size_t block = BlockRows(cols);
  const size_t blocks = (rows + block - 1) / block;
  std::mutex mu;
  Status first_error;
  const size_t threads = pool ? pool->size() : 1;
  std::vector<std::vector<uint8_t>> buffers(threads);
  ops::ForEachChunk(pool, blocks, 1, [&](size_t b0, size_t b1, size_t thread) {
    std::vector<uint8_t>& buf = buffers[thread];
    for (size_t b = b0; b < b1; ++b) {
      const size_t r0 = b * block, n = std::min(block, rows - r0);
      buf.resize(2 * n * cols);
      Status st = t.file->Read(*t.info, 2 * r0 * cols, buf);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = st;
        return;
      }
      m.PackBf16Rows(r0, buf);
    }
  });
  return first_error;
}

Result<WeightMatrix> ReadMatrix(const Checkpoint& f, const std::string& name,
                                size_t rows, size_t cols, WeightFormat format,
                                ops::ThreadPool* pool) {
  const Shape shape{static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
  WeightMatrix m;
  m.rows = rows;
  m.cols = cols;
  const TensorRef t = f.Find(name);
  if (format == WeightFormat::kF32Rows || t.info == nullptr || t.info->dtype != DType::kBF16) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::vector<float> data, f.ReadF32(name, shape));
    if (format == WeightFormat::kF32Rows) {
      m.data = std::move(data);
    } else {
      m.packed = ops::PackedMatrix::FromF32(data.data(), rows, cols);
    }
    return m;
  }
  if (t.info->shape != shape) {  // let ReadF32 word the shape error
    return f.ReadF32(name, shape).status();
  }
  const ops::WeightType type =
      format == WeightFormat::kPackedBf16 ? ops::WeightType::kBf16 : ops::WeightType::kF32;
  m.packed = ops::PackedMatrix::Allocated(rows, cols, type);
  LOCKSTEP_RETURN_IF_ERROR(ReadBf16Blocks(t, m.packed, pool));
  return m;
}

// An optional bias (§9.1): empty when the checkpoint does not carry it.
Result<std::vector<float>> ReadOptionalBias(const Checkpoint& f, const std::string& name,
                                            size_t n) {
  if (f.Find(name).file == nullptr) return std::vector<float>{};
  return ReadVector(f, name, n);
}

Result<LayerWeights> LoadLayer(const Checkpoint& f, const ModelConfig& c, int l,
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

Result<StageWeights> LoadStageWeights(const Checkpoint& f, const ModelConfig& c,
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

namespace {

void ForEachStageTensor(const ModelConfig& c, const StageSpec& spec,
                        const std::function<void(const std::string& name, Shape shape,
                                                 bool optional)>& fn) {
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size, inter = c.intermediate_size;
  const int64_t q_width = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_width = int64_t{c.num_kv_heads} * c.head_dim;
  const bool tied = c.tie_word_embeddings;
  if (spec.first || (spec.last && tied)) fn("model.embed_tokens.weight", {vocab, hidden}, false);
  for (int l = spec.lo; l < spec.hi; ++l) {
    fn(LayerName(l, "input_layernorm.weight"), {hidden}, false);
    fn(LayerName(l, "self_attn.q_proj.weight"), {q_width, hidden}, false);
    fn(LayerName(l, "self_attn.k_proj.weight"), {kv_width, hidden}, false);
    fn(LayerName(l, "self_attn.v_proj.weight"), {kv_width, hidden}, false);
    fn(LayerName(l, "self_attn.q_proj.bias"), {q_width}, true);
    fn(LayerName(l, "self_attn.k_proj.bias"), {kv_width}, true);
    fn(LayerName(l, "self_attn.v_proj.bias"), {kv_width}, true);
    fn(LayerName(l, "self_attn.o_proj.weight"), {hidden, q_width}, false);
    fn(LayerName(l, "post_attention_layernorm.weight"), {hidden}, false);
    fn(LayerName(l, "mlp.gate_proj.weight"), {inter, hidden}, false);
    fn(LayerName(l, "mlp.up_proj.weight"), {inter, hidden}, false);
    fn(LayerName(l, "mlp.down_proj.weight"), {hidden, inter}, false);
  }
  if (spec.last) {
    fn("model.norm.weight", {hidden}, false);
    if (!tied) fn("lm_head.weight", {vocab, hidden}, false);
  }
}

}  // namespace

Checkpoint::Filter StageTensorFilter(const ModelConfig& c, const StageSpec& spec) {
  auto names = std::make_shared<std::set<std::string, std::less<>>>();
  ForEachStageTensor(c, spec, [&](const std::string& name, Shape, bool) { names->insert(name); });
  return [names](std::string_view name) { return names->count(name) > 0; };
}

namespace {

Status CheckStageTensors(const Checkpoint& f, const ModelConfig& c, const StageSpec& spec) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateStageSpec(c, spec));
  Status first;
  ForEachStageTensor(c, spec, [&](const std::string& name, Shape shape, bool optional) {
    if (!first.ok()) return;
    const TensorRef t = f.Find(name);
    const std::string where = f.path() + ": tensor \"" + name + "\"";
    if (t.info == nullptr) {
      if (!optional) first = NotFoundError(where + " not found");
    } else if (t.info->shape != shape) {
      first = f.ReadF32(name, shape).status();  // words the shape error
    } else if (t.info->dtype != DType::kBF16 && t.info->dtype != DType::kF16 &&
               t.info->dtype != DType::kF32) {
      first = UnimplementedError(where + " has dtype " + std::string(DTypeName(t.info->dtype)) +
                                 "; weights must be BF16, F16 or F32");
    }
  });
  return first;
}

}  // namespace

Result<StageWeights> LoadStageWeights(const Checkpoint& f, const ModelConfig& c,
                                      const StageSpec& spec, WeightFormat format,
                                      ops::ThreadPool* pool) {
  // Every tensor present, shaped and typed as the config says before
  // anything is allocated.
  LOCKSTEP_RETURN_IF_ERROR(CheckStageTensors(f, c, spec));
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
  LOCKSTEP_RETURN_IF_ERROR(f.CheckUnchanged());
  return w;
}

}  // namespace lockstep
