#include "engine/weights.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/ops/huge_pages.h"
#include "engine/weight_cache.h"

namespace lockstep {
namespace {

using Shape = std::vector<int64_t>;

std::string LayerName(int layer, const char* suffix) { return LayerTensorName(layer, suffix); }

// Builds the destination of every tensor a stage reads and the sink that
// fills it from the checkpoint's bytes (Checkpoint::ReadAll), so each byte
// is read once and goes straight into its final place: matrices packed
// row block by row block, vectors widened. Destinations never move after
// their sink is made.
// What a load with a weight cache found: matrices taken from it and packed
// afresh (counted as the sinks are made, on one thread), and the first one
// whose cached bytes differ from the checkpoint (set from any reader).
struct CacheCheck {
  size_t from_cache = 0, packed = 0;
  std::atomic<bool> differs{false};
  std::mutex mu;
  std::string first_difference;

  void Differs(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    if (!differs.exchange(true)) first_difference = name;
  }
};

// Calls fn(destination row, bytes) for the rows a piece of tensor `t`
// holds (bytes [at, at + bytes.size()), whole rows of `row_bytes`): one
// run at row at / row_bytes, or, for rows stored permuted (a GGUF
// llama-arch q/k, E2.2), each row at its §2.5 place (HfRowOf).
template <typename Fn>
void ForEachRowRun(const TensorInfo& t, uint64_t at, std::span<const uint8_t> bytes,
                   uint64_t row_bytes, Fn&& fn) {
  const uint64_t r0 = at / row_bytes;
  if (t.permuted_heads <= 0) return fn(r0, bytes);
  for (uint64_t i = 0; i * row_bytes < bytes.size(); ++i) {
    fn(HfRowOf(t, r0 + i), bytes.subspan(static_cast<size_t>(i * row_bytes), static_cast<size_t>(row_bytes)));
  }
}

// The ops type of a dtype a GGUF file can hold (ggml ids are the key both
// layers share; CheckStageTensors has checked their sizes agree).
ops::GgmlType GgmlOf(DType d) { return static_cast<ops::GgmlType>(GgmlTypeOf(d)); }

// `n` elements of `dtype` bytes as their f32 values: BF16 and F16 widened
// exactly, F32 as is, block types dequantized (E2.3).
void DecodeF32(DType dtype, std::span<const uint8_t> bytes, size_t n, float* out) {
  if (IsBlockDType(dtype)) return ops::DequantizeRow(GgmlOf(dtype), bytes, n, out);
  WidenToF32(dtype, bytes, out);
}

// The type a matrix of `dtype` is resident as: its own (BF16, F16, the
// block types; F32 as f32) unless the format widens every weight to f32.
ops::WeightType ResidentType(DType dtype, WeightFormat format) {
  if (format != WeightFormat::kPackedBf16 || dtype == DType::kF32) return ops::WeightType::kF32;
  if (dtype == DType::kBF16) return ops::WeightType::kBf16;
  return ops::WeightTypeOf(GgmlOf(dtype));
}

// Packs whole rows of `dtype` bytes at row r0 of `dst`: kept at their own
// type when `dst` is, else decoded to f32 one piece at a time.
void PackRows(DType dtype, ops::PackedMatrix& dst, uint64_t r0, std::span<const uint8_t> bytes) {
  if (dtype == DType::kBF16) return dst.PackBf16Rows(r0, bytes);
  if (dtype == DType::kF32) return dst.PackF32Rows(r0, bytes);
  if (dst.type() != ops::WeightType::kF32) return dst.PackRows(r0, bytes);
  const size_t rows = bytes.size() / DTypeRowBytes(dtype, dst.cols());
  thread_local std::vector<float> widened;  // one piece, not the tensor
  widened.resize(rows * dst.cols());
  for (size_t r = 0; r < rows; ++r) {
    const size_t row_bytes = DTypeRowBytes(dtype, dst.cols());
    DecodeF32(dtype, bytes.subspan(r * row_bytes, row_bytes), dst.cols(), widened.data() + r * dst.cols());
  }
  dst.PackF32Rows(r0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(widened.data()),
                                               widened.size() * sizeof(float)));
}

class SinkBuilder {
 public:
  SinkBuilder(const Checkpoint& f, WeightFormat format, const WeightCache* cache = nullptr,
              CacheCheck* check = nullptr)
      : f_(f), format_(format), cache_(cache), check_(check) {}

  void Vector(const std::string& name, std::vector<float>& out, size_t n) {
    const TensorRef t = f_.Find(name);
    out.assign(n, 0.0f);
    float* dst = out.data();
    // Pieces of whole blocks; a permuted bias's elements move one by one.
    const DType dtype = t.info->dtype;
    const uint64_t block_bytes = static_cast<uint64_t>(DTypeBlockBytes(dtype));
    const uint64_t block_elems = static_cast<uint64_t>(DTypeBlockElems(dtype));
    const TensorInfo* info = t.info;
    Add(t, block_bytes, [info, dst, block_bytes, block_elems](uint64_t at, std::span<const uint8_t> bytes) {
      const uint64_t e0 = at / block_bytes * block_elems;
      const size_t n = static_cast<size_t>(bytes.size() / block_bytes * block_elems);
      if (info->permuted_heads <= 0) return DecodeF32(info->dtype, bytes, n, dst + e0);
      std::vector<float> piece(n);
      DecodeF32(info->dtype, bytes, n, piece.data());
      for (size_t i = 0; i < n; ++i) dst[HfRowOf(*info, e0 + i)] = piece[i];
    });
  }

  // An optional bias (§9.1): left empty when the checkpoint does not carry it.
  void OptionalVector(const std::string& name, std::vector<float>& out, size_t n) {
    if (f_.Find(name).file != nullptr) Vector(name, out, n);
  }

  void Matrix(const std::string& name, WeightMatrix& m, size_t rows, size_t cols) {
    const TensorRef t = f_.Find(name);
    const TensorInfo* info = t.info;
    const DType dtype = info->dtype;
    const uint64_t row_bytes = DTypeRowBytes(dtype, cols);
    m.rows = rows;
    m.cols = cols;
    if (format_ == WeightFormat::kF32Rows) {
      m.data.assign(rows * cols, 0.0f);
      float* dst = m.data.data();
      Add(t, row_bytes, [info, dst, row_bytes, cols](uint64_t at, std::span<const uint8_t> bytes) {
        ForEachRowRun(*info, at, bytes, row_bytes, [&](uint64_t r, std::span<const uint8_t> run) {
          for (uint64_t i = 0; i * row_bytes < run.size(); ++i) {
            DecodeF32(info->dtype, run.subspan(i * row_bytes, row_bytes), cols, dst + (r + i) * cols);
          }
        });
      });
      return;
    }
    // Weights keep their own type (BF16 bits, F16 halves, GGUF blocks)
    // unless asked to widen; F32 ones pack as f32.
    const ops::WeightType resident = ResidentType(dtype, format_);
    packed_.emplace_back(name, &m.packed);
    if (cache_ != nullptr) {
      if (std::optional<ops::PackedMatrix> view = cache_->Find(name, rows, cols, resident)) {
        m.packed = std::move(*view);
        ++check_->from_cache;
        if (!m.packed.PaddingIsZero()) check_->Differs(name);
        const ops::PackedMatrix* cached = &m.packed;
        CacheCheck* check = check_;
        Add(t, row_bytes, [info, cached, check, name, row_bytes](uint64_t at, std::span<const uint8_t> bytes) {
          ForEachRowRun(*info, at, bytes, row_bytes, [&](uint64_t r, std::span<const uint8_t> run) {
            if (!cached->SameAsRows(r, run)) check->Differs(name);
          });
        });
        return;
      }
      ++check_->packed;
    }
    m.packed = ops::PackedMatrix::Allocated(rows, cols, resident, ops::PackedMatrix::Populate::kLater);
    ops::PackedMatrix* dst = &m.packed;
    unpopulated_.push_back(dst);
    Add(t, row_bytes, [info, dst, row_bytes](uint64_t at, std::span<const uint8_t> bytes) {
      ForEachRowRun(*info, at, bytes, row_bytes, [&](uint64_t r0, std::span<const uint8_t> run) {
        PackRows(info->dtype, *dst, r0, run);
      });
    });
  }

  const std::vector<TensorSink>& sinks() const { return sinks_; }
  // Every packed matrix, by tensor name (what a weight cache holds).
  const std::vector<std::pair<std::string, const ops::PackedMatrix*>>& packed() const {
    return packed_;
  }

  // Faults every packed matrix's pages in from `threads` threads, with
  // huge pages advised before when free 2 MB blocks cover them all, after
  // otherwise (engine/ops/huge_pages.h). The first touch of fresh memory is
  // a large part of loading a big checkpoint, more so where the hypervisor
  // backs a guest's pages only when touched; one thread did all of it
  // before the reading began.
  void PopulateMatrices(int threads) const {
    constexpr size_t kPiece = size_t{32} << 20;
    struct Range {
      ops::PackedMatrix* m;
      size_t begin, end;
    };
    std::vector<Range> ranges;
    size_t total = 0;
    for (ops::PackedMatrix* m : unpopulated_) {
      for (size_t b = 0; b < m->storage_bytes(); b += kPiece) {
        ranges.push_back({m, b, std::min(b + kPiece, m->storage_bytes())});
      }
      total += m->storage_bytes();
    }
    auto advise = [this] {
      for (ops::PackedMatrix* m : unpopulated_) m->AdviseHugePages();
    };
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < ranges.size();) {
        ranges[i].m->PopulatePages(ranges[i].begin, ranges[i].end);
      }
    };
    auto populate = [&] {
      std::vector<std::thread> helpers;
      const size_t n = std::min(static_cast<size_t>(std::max(threads, 1)), ranges.size());
      for (size_t t = 1; t < n; ++t) helpers.emplace_back(work);
      work();
      for (std::thread& t : helpers) t.join();
    };
    ops::PopulateAdvisingHugePages(total, advise, populate);
  }

 private:
  void Add(const TensorRef& t, uint64_t unit,
           std::function<void(uint64_t, std::span<const uint8_t>)> take) {
    sinks_.push_back(TensorSink{t, unit, std::move(take)});
  }

  const Checkpoint& f_;
  const WeightFormat format_;
  const WeightCache* cache_;
  CacheCheck* check_;
  std::vector<TensorSink> sinks_;
  std::vector<std::pair<std::string, const ops::PackedMatrix*>> packed_;
  std::vector<ops::PackedMatrix*> unpopulated_;
};

// E4: the router and every expert, through the same sinks as the dense
// matrices (so they are packed, typed and hashed alike).
void AddExperts(SinkBuilder& b, const ModelConfig& c, int l, LayerWeights& w) {
  const size_t hidden = static_cast<size_t>(c.hidden_size);
  const size_t inter = static_cast<size_t>(c.moe.intermediate_size);
  const size_t experts = static_cast<size_t>(c.moe.num_experts);
  b.Matrix(LayerName(l, "mlp.gate.weight"), w.router, experts, hidden);
  w.experts.resize(experts);
  for (int e = 0; e < c.moe.num_experts; ++e) {
    ExpertWeights& x = w.experts[static_cast<size_t>(e)];
    b.Matrix(ExpertTensorName(l, e, "gate_proj.weight"), x.gate_proj, inter, hidden);
    b.Matrix(ExpertTensorName(l, e, "up_proj.weight"), x.up_proj, inter, hidden);
    b.Matrix(ExpertTensorName(l, e, "down_proj.weight"), x.down_proj, hidden, inter);
  }
}

void AddLayer(SinkBuilder& b, const ModelConfig& c, int l, LayerWeights& w) {
  const size_t hidden = static_cast<size_t>(c.hidden_size);
  const size_t q_width = static_cast<size_t>(c.num_heads) * static_cast<size_t>(c.head_dim);
  const size_t kv_width = static_cast<size_t>(c.num_kv_heads) * static_cast<size_t>(c.head_dim);
  const size_t inter = static_cast<size_t>(c.intermediate_size);
  b.Vector(LayerName(l, "input_layernorm.weight"), w.input_norm, hidden);
  b.Matrix(LayerName(l, "self_attn.q_proj.weight"), w.q_proj, q_width, hidden);
  b.Matrix(LayerName(l, "self_attn.k_proj.weight"), w.k_proj, kv_width, hidden);
  b.Matrix(LayerName(l, "self_attn.v_proj.weight"), w.v_proj, kv_width, hidden);
  b.OptionalVector(LayerName(l, "self_attn.q_proj.bias"), w.q_bias, q_width);
  b.OptionalVector(LayerName(l, "self_attn.k_proj.bias"), w.k_bias, kv_width);
  b.OptionalVector(LayerName(l, "self_attn.v_proj.bias"), w.v_bias, kv_width);
  if (c.qk_norm) {  // E3
    b.Vector(LayerName(l, "self_attn.q_norm.weight"), w.q_norm, static_cast<size_t>(c.head_dim));
    b.Vector(LayerName(l, "self_attn.k_norm.weight"), w.k_norm, static_cast<size_t>(c.head_dim));
  }
  b.Matrix(LayerName(l, "self_attn.o_proj.weight"), w.o_proj, hidden, q_width);
  b.Vector(LayerName(l, "post_attention_layernorm.weight"), w.post_norm, hidden);
  if (c.is_moe()) return AddExperts(b, c, l, w);
  b.Matrix(LayerName(l, "mlp.gate_proj.weight"), w.gate_proj, inter, hidden);
  b.Matrix(LayerName(l, "mlp.up_proj.weight"), w.up_proj, inter, hidden);
  b.Matrix(LayerName(l, "mlp.down_proj.weight"), w.down_proj, hidden, inter);
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

void ForEachMatrix(LayerWeights& l, const std::function<void(WeightMatrix&)>& fn) {
  for (WeightMatrix* m : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj,
                          &l.down_proj, &l.router}) {
    fn(*m);
  }
  for (ExpertWeights& x : l.experts) {
    for (WeightMatrix* m : {&x.gate_proj, &x.up_proj, &x.down_proj}) fn(*m);
  }
}

namespace {

size_t MatrixBytes(const WeightMatrix& m) {
  return m.packed.empty() ? m.data.size() * sizeof(float) : m.packed.bytes();
}

// What one token reads of a MoE layer's experts: the k largest of them.
size_t ChosenExpertBytes(const std::vector<ExpertWeights>& experts, int k) {
  std::vector<size_t> sizes;
  for (const ExpertWeights& x : experts) {
    sizes.push_back(MatrixBytes(x.gate_proj) + MatrixBytes(x.up_proj) + MatrixBytes(x.down_proj));
  }
  const size_t n = std::min(sizes.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(sizes.begin(), sizes.begin() + static_cast<ptrdiff_t>(n), sizes.end(),
                    std::greater<>());
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += sizes[i];
  return total;
}

}  // namespace

size_t WeightBytesPerToken(const StageWeights& w) {
  size_t total = 0;
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj,
                                  &l.up_proj, &l.down_proj, &l.router}) {
      total += MatrixBytes(*m);
    }
    total += ChosenExpertBytes(l.experts, w.experts_per_tok);
  }
  if (w.spec.last) total += MatrixBytes(w.head());
  return total;
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
               t.info->dtype != DType::kF32 && !IsBlockDType(t.info->dtype)) {
      first = UnimplementedError(where + " has dtype " + std::string(DTypeName(t.info->dtype)) +
                                 "; weights must be BF16, F16, F32 or a GGUF block type");
    } else if (IsBlockDType(t.info->dtype) &&
               ops::BlockOf(GgmlOf(t.info->dtype)).bytes !=
                   static_cast<size_t>(DTypeBlockBytes(t.info->dtype))) {
      first = InternalError(where + ": the file's and the kernels' block sizes disagree");
    }
  });
  return first;
}

// One load into `w` (which must stay in place while `written` is used):
// every tensor read, hashed and packed (or, with a cache, each cached
// matrix compared with its packing). `written`, when given, receives the
// matrices a cache file would hold.
Status LoadOnce(const Checkpoint& f, const ModelConfig& c, const StageSpec& spec,
                WeightFormat format, int threads, std::vector<FileDigest>* digests,
                const WeightCache* cache, CacheCheck* check, StageWeights& w,
                std::vector<std::pair<std::string, const ops::PackedMatrix*>>* written) {
  const size_t hidden = static_cast<size_t>(c.hidden_size);
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  w.spec = spec;
  w.experts_per_tok = c.moe.experts_per_tok;
  w.layers.resize(static_cast<size_t>(spec.hi - spec.lo));
  SinkBuilder b(f, format, cache, check);
  const bool tied = c.tie_word_embeddings;
  if (spec.first || (spec.last && tied)) {
    b.Matrix("model.embed_tokens.weight", w.embed, vocab, hidden);
  }
  for (int l = spec.lo; l < spec.hi; ++l) AddLayer(b, c, l, w.layers[static_cast<size_t>(l - spec.lo)]);
  if (spec.last) {
    b.Vector("model.norm.weight", w.final_norm, hidden);
    if (!tied) b.Matrix("lm_head.weight", w.lm_head, vocab, hidden);
  }
  b.PopulateMatrices(threads);
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<FileDigest> read, f.ReadAll(b.sinks(), threads));
  LOCKSTEP_RETURN_IF_ERROR(f.CheckUnchanged());
  if (digests != nullptr) *digests = std::move(read);
  if (written != nullptr) *written = b.packed();
  return Status::Ok();
}

std::string StageTag(const StageSpec& spec, WeightFormat format) {
  return "layers " + std::to_string(spec.lo) + "-" + std::to_string(spec.hi) +
         (spec.first ? " first" : "") + (spec.last ? " last" : "") + " format " +
         std::to_string(static_cast<int>(format));
}

}  // namespace

Result<StageWeights> LoadStageWeights(const Checkpoint& f, const ModelConfig& c,
                                      const StageSpec& spec, WeightFormat format, int threads,
                                      std::vector<FileDigest>* digests, WeightCacheUse* cache) {
  // Every tensor present, shaped and typed as the config says before
  // anything is allocated.
  LOCKSTEP_RETURN_IF_ERROR(CheckStageTensors(f, c, spec));
  std::string path;  // the cache file, when there is one to use
  if (cache != nullptr && !cache->dir.empty()) {
    if (format != WeightFormat::kPackedBf16) {
      cache->note = "weight cache: not used (it holds weights at their own type, not widened ones)";
    } else if (Result<std::string> p = WeightCache::PathFor(cache->dir, f, StageTag(spec, format));
               !p.ok()) {
      cache->note = "weight cache: not used: " + p.status().message();
    } else {
      path = *p;
    }
  }
  if (path.empty()) {
    StageWeights w;
    LOCKSTEP_RETURN_IF_ERROR(LoadOnce(f, c, spec, format, threads, digests, nullptr, nullptr, w, nullptr));
    return w;
  }
  std::string why;  // why the file was not used, if it was not
  Result<WeightCache> opened = WeightCache::Open(path, threads);
  if (opened.ok()) {
    CacheCheck check;
    StageWeights w;
    LOCKSTEP_RETURN_IF_ERROR(
        LoadOnce(f, c, spec, format, threads, digests, &*opened, &check, w, nullptr));
    if (!check.differs && check.packed == 0) {
      cache->note = "weight cache: " + std::to_string(check.from_cache) +
                    " matrices read from " + path + ", each equal to the checkpoint's bytes";
      return w;
    }
    if (check.differs) {
      why = "its " + check.first_difference + " differs from the checkpoint's bytes";
    } else {
      why = "it lacks " + std::to_string(check.packed) + " of the stage's matrices";
    }
  } else if (opened.status().kind() != ErrorKind::kNotFound) {
    why = opened.status().message();
  }
  std::vector<std::pair<std::string, const ops::PackedMatrix*>> matrices;
  StageWeights w;
  LOCKSTEP_RETURN_IF_ERROR(
      LoadOnce(f, c, spec, format, threads, digests, nullptr, nullptr, w, &matrices));
  const Status wrote = WeightCache::Write(path, matrices);
  cache->note = "weight cache: " + (why.empty() ? std::string("none yet") : "not used, " + why) +
                "; " + (wrote.ok() ? "wrote " + path : "could not write it: " + wrote.message());
  return w;
}

}  // namespace lockstep
