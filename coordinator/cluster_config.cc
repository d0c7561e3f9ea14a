#include "coordinator/cluster_config.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>

#include <filesystem>

#include "base/json.h"
#include "keys/identity.h"
#include "wire/endpoint.h"

namespace lockstep {
namespace {

using nlohmann::json;

Status Bad(const std::string& name, const std::string& key, const std::string& why) {
  return InvalidError(name + ": \"" + key + "\" " + why);
}

Result<int64_t> PositiveInt(const json& j, const std::string& name, const std::string& key) {
  if (!j.is_number_integer() || j.get<int64_t>() <= 0) {
    return Bad(name, key, "must be a positive integer");
  }
  return j.get<int64_t>();
}

Result<std::vector<LayerRange>> ParsePlanJson(const json& j, const std::string& name) {
  std::vector<LayerRange> plan;
  if (!j.is_array()) return Bad(name, "plan", "must be \"auto\" or a list of [lo, hi] pairs");
  for (const json& r : j) {
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() ||
        !r[1].is_number_integer()) {
      return Bad(name, "plan", "entry " + r.dump() + " is not a [lo, hi] pair of integers");
    }
    const int64_t lo = r[0].get<int64_t>(), hi = r[1].get<int64_t>();
    if (lo < 0 || hi < 0 || hi > std::numeric_limits<int>::max()) {
      return Bad(name, "plan", "entry " + r.dump() + " is out of range");
    }
    plan.push_back({static_cast<int>(lo), static_cast<int>(hi)});
  }
  return plan;
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return (std::filesystem::path(base_dir) / path).string();
}

Status ReadSpares(const json& v, const std::string& name, const std::string& base_dir,
                  ClusterConfig* c) {
  if (!v.is_array()) return Bad(name, "spares", "must be a list of {\"endpoint\", \"key\"}");
  for (const json& s : v) {
    if (!s.is_object() || !s.contains("endpoint") || !s["endpoint"].is_string()) {
      return Bad(name, "spares", "entry " + s.dump() + " has no \"endpoint\" string");
    }
    for (const auto& [field, value] : s.items()) {
      if (field != "endpoint" && field != "key") {
        return Bad(name, "spares", "entry field \"" + field + "\" is not a known field");
      }
    }
    SpareWorker spare{s["endpoint"].get<std::string>(), ""};
    const Status valid = wire::ValidateEndpoint(spare.endpoint, wire::EndpointUse::kConnect);
    if (!valid.ok()) return Bad(name, "spares", valid.message());
    if (s.contains("key")) {
      if (!s["key"].is_string() || s["key"].get<std::string>().empty()) {
        return Bad(name, "spares", "entry " + s.dump() + ": \"key\" must be a public key file");
      }
      Result<keys::PublicIdentity> pub =
          keys::ReadPublicIdentity(Resolve(base_dir, s["key"].get<std::string>()));
      if (!pub.ok()) return pub.status().WithContext(name + ": \"spares\"");
      spare.key = pub->curve_public_z85;
    }
    c->spares.push_back(std::move(spare));
  }
  return Status::Ok();
}

Status ReadKey(const std::string& key, const json& v, const std::string& name,
               const std::string& base_dir, ClusterConfig* c) {
  if (key == "model") {
    if (!v.is_string() || v.get<std::string>().empty()) return Bad(name, key, "must be a path");
    c->model_dir = v.get<std::string>();
  } else if (key == "pins") {
    if (!v.is_object()) return Bad(name, key, "must be an object");
    LOCKSTEP_ASSIGN_OR_RETURN(c->pins, ParseManifest(v.dump(), name + " pins"));
  } else if (key == "workers") {
    if (!v.is_array() || v.empty()) return Bad(name, key, "must be a non-empty list");
    for (const json& w : v) {
      if (!w.is_string() || w.get<std::string>().empty()) {
        return Bad(name, key, "entry " + w.dump() + " is not an endpoint string");
      }
      const Status valid = wire::ValidateEndpoint(w.get<std::string>(), wire::EndpointUse::kConnect);
      if (!valid.ok()) return Bad(name, key, valid.message());
      c->workers.push_back(w.get<std::string>());
    }
  } else if (key == "plan") {
    c->auto_plan = v.is_string() && v.get<std::string>() == "auto";
    if (!c->auto_plan) {
      LOCKSTEP_ASSIGN_OR_RETURN(c->plan, ParsePlanJson(v, name));
    }
  } else if (key == "plan_balance") {
    Result<PlanBalance> b = ParsePlanBalance(v.is_string() ? v.get<std::string>() : v.dump());
    if (!b.ok()) return Bad(name, key, b.status().message());
    c->plan_balance = *b;
  } else if (key == "heartbeat_ms") {
    LOCKSTEP_ASSIGN_OR_RETURN(int64_t ms, PositiveInt(v, name, key));
    c->heartbeat = std::chrono::milliseconds(ms);
  } else if (key == "liveness") {
    LOCKSTEP_ASSIGN_OR_RETURN(int64_t n, PositiveInt(v, name, key));
    if (n > 1000) return Bad(name, key, "must be at most 1000");
    c->liveness = static_cast<int>(n);
  } else if (key == "request_timeout_ms") {
    LOCKSTEP_ASSIGN_OR_RETURN(int64_t ms, PositiveInt(v, name, key));
    c->request_timeout = std::chrono::milliseconds(ms);
  } else if (key == "insecure") {
    if (!v.is_boolean()) return Bad(name, key, "must be true or false");
    c->insecure = v.get<bool>();
  } else if (key == "ship_logits") {
    if (!v.is_boolean()) return Bad(name, key, "must be true or false");
    c->ship_logits = v.get<bool>();
  } else if (key == "key") {
    if (!v.is_string() || v.get<std::string>().empty()) return Bad(name, key, "must be a path");
    Result<keys::Identity> id = keys::ReadIdentity(Resolve(base_dir, v.get<std::string>()));
    if (!id.ok()) return id.status().WithContext(name + ": \"key\"");
    c->key = {id->pub.curve_public_z85, id->curve_secret_z85};
  } else if (key == "worker_keys") {
    if (!v.is_array()) return Bad(name, key, "must be a list of public key files");
    for (const json& w : v) {
      if (!w.is_string() || w.get<std::string>().empty()) {
        return Bad(name, key, "entry " + w.dump() + " is not a path");
      }
      Result<keys::PublicIdentity> pub =
          keys::ReadPublicIdentity(Resolve(base_dir, w.get<std::string>()));
      if (!pub.ok()) return pub.status().WithContext(name + ": \"worker_keys\"");
      c->worker_keys.push_back(pub->curve_public_z85);
    }
  } else if (key == "spares") {
    return ReadSpares(v, name, base_dir, c);
  } else {
    return Bad(name, key, "is not a known key");
  }
  return Status::Ok();
}

}  // namespace

Result<ClusterConfig> ParseClusterConfig(std::string_view text, const std::string& name,
                                         const std::string& base_dir) {
  LOCKSTEP_ASSIGN_OR_RETURN(json doc, ParseJsonStrict(text, name, ErrorKind::kInvalid));
  if (!doc.is_object()) return InvalidError(name + ": must be a JSON object");
  ClusterConfig c;
  for (const auto& [key, value] : doc.items()) {
    LOCKSTEP_RETURN_IF_ERROR(ReadKey(key, value, name, base_dir, &c));
  }
  if (c.model_dir.empty()) return Bad(name, "model", "is required");
  if (c.workers.empty()) return Bad(name, "workers", "is required");
  const bool networked =
      std::any_of(c.workers.begin(), c.workers.end(),
                  [](const std::string& w) { return !wire::IsInprocEndpoint(w); }) ||
      std::any_of(c.spares.begin(), c.spares.end(),
                  [](const SpareWorker& s) { return !wire::IsInprocEndpoint(s.endpoint); });
  if (c.insecure || !networked) {
    const bool spare_keys = std::any_of(c.spares.begin(), c.spares.end(),
                                        [](const SpareWorker& s) { return !s.key.empty(); });
    if (!c.key.public_z85.empty() || !c.worker_keys.empty() || spare_keys) {
      return Bad(name, "insecure", "contradicts \"key\" / \"worker_keys\": choose one");
    }
    return c;
  }
  if (c.key.public_z85.empty()) {
    return Bad(name, "key",
               "is required (the coordinator's key file from lockstep keygen) unless "
               "\"insecure\": true");
  }
  if (c.worker_keys.size() != c.workers.size()) {
    return Bad(name, "worker_keys",
               "must list one public key file per worker (" + std::to_string(c.workers.size()) +
                   "), got " + std::to_string(c.worker_keys.size()));
  }
  for (const SpareWorker& s : c.spares) {
    if (s.key.empty()) return Bad(name, "spares", "entry " + s.endpoint + " needs a \"key\"");
  }
  return c;
}

Result<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open the cluster config");
  std::stringstream text;
  text << in.rdbuf();
  return ParseClusterConfig(text.str(), path, std::filesystem::path(path).parent_path().string());
}

Result<std::vector<LayerRange>> ParsePlanText(const std::string& text) {
  std::vector<LayerRange> plan;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    const size_t colon = part.find(':');
    LayerRange r;
    const char* p = part.data();
    const char* e = p + part.size();
    auto a = std::from_chars(p, p + (colon == std::string::npos ? 0 : colon), r.lo);
    auto b = std::from_chars(p + colon + 1, e, r.hi);
    if (colon == std::string::npos || a.ec != std::errc() || a.ptr != p + colon ||
        b.ec != std::errc() || b.ptr != e || r.lo < 0) {
      return InvalidError("--plan: '" + part + "' is not LO:HI (e.g. 0:10,10:20)");
    }
    plan.push_back(r);
    start = end + 1;
  }
  return plan;
}

Result<PlanBalance> ParsePlanBalance(const std::string& text) {
  if (text == "memory") return PlanBalance::kMemory;
  if (text == "memory+work") return PlanBalance::kMemoryAndWork;
  return InvalidError("plan balance '" + text + "' is not \"memory\" or \"memory+work\"");
}

std::string PlanText(const std::vector<LayerRange>& plan) {
  std::string s;
  for (const LayerRange& r : plan) {
    s += (s.empty() ? "" : ",") + std::to_string(r.lo) + ":" + std::to_string(r.hi);
  }
  return s;
}

Status ValidatePlan(const std::vector<LayerRange>& plan, int num_layers, size_t workers) {
  const std::string text = "plan " + PlanText(plan) + ": ";
  if (plan.size() != workers) {
    return InvalidError(text + std::to_string(plan.size()) + " ranges for " +
                        std::to_string(workers) + " workers (need one range per worker)");
  }
  int next = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::string range = "range " + std::to_string(i) + " [" + std::to_string(plan[i].lo) +
                              "," + std::to_string(plan[i].hi) + ")";
    if (plan[i].lo != next) {
      return InvalidError(text + range + " should start at layer " + std::to_string(next) +
                          (next == 0 ? "" : " (ranges must be contiguous)"));
    }
    if (plan[i].hi <= plan[i].lo) return InvalidError(text + range + " is empty");
    if (plan[i].hi > num_layers) {
      return InvalidError(text + range + " runs past the model's " +
                          std::to_string(num_layers) + " layers");
    }
    next = plan[i].hi;
  }
  if (next != num_layers) {
    return InvalidError(text + "covers layers [0," + std::to_string(next) + ") of " +
                        std::to_string(num_layers));
  }
  return Status::Ok();
}

std::vector<LayerRange> AutoPlan(const ModelBytes& bytes, size_t workers, PlanBalance balance) {
  const size_t layers = bytes.layers.size();
  const bool work = balance == PlanBalance::kMemoryAndWork;
  auto weigh = [work](const PartBytes& b) {
    return double(b.resident) + (work ? double(b.per_token) : 0.0);
  };
  std::vector<double> prefix(layers + 1, 0.0);  // prefix[l]: layers [0, l)
  for (size_t l = 0; l < layers; ++l) prefix[l + 1] = prefix[l] + weigh(bytes.layers[l]);
  auto cost = [&](size_t lo, size_t hi, size_t stage) {
    double v = prefix[hi] - prefix[lo];
    if (stage == 0) v += weigh(bytes.first);
    if (stage + 1 == workers) v += weigh(bytes.last);
    return v;
  };
  // best[s][l]: the least max-cost splitting layers [0, l) into s+1 stages.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(workers, std::vector<double>(layers + 1, inf));
  std::vector<std::vector<size_t>> cut(workers, std::vector<size_t>(layers + 1, 0));
  for (size_t l = 1; l <= layers; ++l) best[0][l] = cost(0, l, 0);
  for (size_t s = 1; s < workers; ++s) {
    for (size_t l = s + 1; l <= layers; ++l) {
      for (size_t m = s; m < l; ++m) {
        const double v = std::max(best[s - 1][m], cost(m, l, s));
        if (v < best[s][l]) best[s][l] = v, cut[s][l] = m;
      }
    }
  }
  std::vector<LayerRange> plan(workers);
  size_t hi = layers;
  for (size_t s = workers; s-- > 0;) {
    const size_t lo = s == 0 ? 0 : cut[s][hi];
    plan[s] = {static_cast<int>(lo), static_cast<int>(hi)};
    hi = lo;
  }
  return plan;
}

Result<std::vector<StageSpec>> ResolvePlan(const ClusterConfig& cfg, const ModelInfo& info) {
  const ModelConfig& model = info.config;
  const size_t n = cfg.workers.size();
  if (cfg.auto_plan && (n == 0 || n > static_cast<size_t>(model.num_layers))) {
    return InvalidError("plan auto: " + std::to_string(n) + " workers for a model of " +
                        std::to_string(model.num_layers) +
                        " layers (each worker needs at least one layer)");
  }
  std::vector<LayerRange> plan = cfg.plan;
  if (cfg.auto_plan) {
    LOCKSTEP_ASSIGN_OR_RETURN(const ModelBytes bytes, MeasureModelBytes(info.files, model));
    plan = AutoPlan(bytes, n, cfg.plan_balance);
  }
  LOCKSTEP_RETURN_IF_ERROR(ValidatePlan(plan, model.num_layers, n));
  std::vector<StageSpec> specs;
  for (size_t i = 0; i < n; ++i) {
    specs.push_back(StageSpec{plan[i].lo, plan[i].hi, i == 0, i + 1 == n});
  }
  return specs;
}

}  // namespace lockstep
