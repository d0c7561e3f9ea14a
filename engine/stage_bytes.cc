#include "engine/stage_bytes.h"

#include <algorithm>
#include <functional>

namespace lockstep {

PartBytes ModelBytes::Stage(const StageSpec& spec) const {
  PartBytes out;
  for (int l = spec.lo; l < spec.hi; ++l) out += layers[static_cast<size_t>(l)];
  if (spec.first) out += first;
  if (spec.last) out += last;
  return out;
}

namespace {

// Bytes of every tensor `each` names; NotFound for an absent required one.
Result<uint64_t> SumTensors(const Checkpoint& w,
                            const std::function<void(const StageTensorFn&)>& each) {
  uint64_t total = 0;
  Status missing;
  each([&](const std::string& name, std::vector<int64_t>, bool optional) {
    const TensorRef t = w.Find(name);
    if (t.info != nullptr) {
      total += t.info->nbytes;
    } else if (!optional && missing.ok()) {
      missing = NotFoundError(w.path() + ": tensor \"" + name + "\" not found");
    }
  });
  if (!missing.ok()) return missing;
  return total;
}

// E4: each of layer l's experts' bytes. REQUIRES: every expert tensor
// present (as the caller's SumTensors checked).
std::vector<uint64_t> ExpertBytes(const Checkpoint& w, const ModelConfig& c, int l) {
  std::vector<uint64_t> experts;
  for (int e = 0; e < c.moe.num_experts; ++e) {
    uint64_t b = 0;
    for (const char* m : {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}) {
      b += w.Find(ExpertTensorName(l, e, m)).info->nbytes;
    }
    experts.push_back(b);
  }
  return experts;
}

Result<PartBytes> LayerBytes(const Checkpoint& w, const ModelConfig& c, int l) {
  LOCKSTEP_ASSIGN_OR_RETURN(
      const uint64_t resident,
      SumTensors(w, [&](const StageTensorFn& fn) { ForEachLayerTensor(c, l, fn); }));
  std::vector<uint64_t> experts = ExpertBytes(w, c, l);
  uint64_t per_token = resident;
  for (uint64_t b : experts) per_token -= b;
  // A token reads k of them: the k largest bound it.
  const size_t k =
      std::min(experts.size(), static_cast<size_t>(std::max(c.moe.experts_per_tok, 0)));
  std::partial_sort(experts.begin(), experts.begin() + static_cast<ptrdiff_t>(k), experts.end(),
                    std::greater<>());
  for (size_t i = 0; i < k; ++i) per_token += experts[i];
  return PartBytes{resident, per_token};
}

// The embedding (first) or the final norm and LM head (last).
Result<PartBytes> EndBytes(const Checkpoint& w, const ModelConfig& c, bool first) {
  LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t resident, SumTensors(w, [&](const StageTensorFn& fn) {
    ForEachStageTensor(c, StageSpec{0, 0, first, !first}, fn);
  }));
  const uint64_t rows = static_cast<uint64_t>(std::max(c.vocab_size, 1));
  return PartBytes{resident, first ? resident / rows : resident};  // a lookup reads one row
}

}  // namespace

Result<ModelBytes> MeasureModelBytes(const Checkpoint& w, const ModelConfig& c) {
  ModelBytes out;
  for (int l = 0; l < c.num_layers; ++l) {
    LOCKSTEP_ASSIGN_OR_RETURN(PartBytes b, LayerBytes(w, c, l));
    out.layers.push_back(b);
  }
  LOCKSTEP_ASSIGN_OR_RETURN(out.first, EndBytes(w, c, true));
  LOCKSTEP_ASSIGN_OR_RETURN(out.last, EndBytes(w, c, false));
  return out;
}

Result<PartBytes> MeasureStageBytes(const Checkpoint& w, const ModelConfig& c,
                                    const StageSpec& spec) {
  PartBytes out;
  for (int l = spec.lo; l < spec.hi; ++l) {
    LOCKSTEP_ASSIGN_OR_RETURN(const PartBytes b, LayerBytes(w, c, l));
    out += b;
  }
  for (const bool first : {true, false}) {
    if (first ? !spec.first : !spec.last) continue;
    LOCKSTEP_ASSIGN_OR_RETURN(const PartBytes b, EndBytes(w, c, first));
    out += b;
  }
  return out;
}

}  // namespace lockstep
