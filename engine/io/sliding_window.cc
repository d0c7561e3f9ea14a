#include "engine/io/sliding_window.h"

#include <climits>

namespace lockstep {
namespace {

using nlohmann::json;

bool Has(const json& root, const char* key) {
  return root.contains(key) && !root[key].is_null();
}

Status FieldError(const std::string& source, const char* key, const std::string& what) {
  return InvalidError(source + ": field \"" + key + "\": " + what);
}

// A JSON integer in [lo, INT_MAX].
Result<int> IntField(const json& root, const char* key, uint64_t lo,
                     const std::string& source) {
  if (!Has(root, key)) return FieldError(source, key, "missing");
  const json& v = root[key];
  if (!v.is_number_unsigned() || v.get<uint64_t>() < lo ||
      v.get<uint64_t>() > INT_MAX) {
    return FieldError(source, key, "must be an integer in [" + std::to_string(lo) +
                                       ", " + std::to_string(INT_MAX) + "], got " +
                                       v.dump());
  }
  return static_cast<int>(v.get<uint64_t>());
}

Result<std::vector<int>> FromLayerTypes(const json& root, int num_layers,
                                        const std::string& source) {
  const json& types = root["layer_types"];
  if (!types.is_array() || types.size() != static_cast<size_t>(num_layers)) {
    return FieldError(source, "layer_types",
                      "must be an array of num_hidden_layers (" +
                          std::to_string(num_layers) + ") strings");
  }
  std::vector<int> windows(num_layers, 0);
  for (int i = 0; i < num_layers; ++i) {
    const json& t = types[i];
    if (t == "full_attention") continue;
    if (t != "sliding_attention") {
      return UnimplementedError(source + ": field \"layer_types\": entry " +
                                std::to_string(i) + " is " + t.dump());
    }
    LOCKSTEP_ASSIGN_OR_RETURN(windows[i], IntField(root, "sliding_window", 1, source));
  }
  return windows;
}

Result<std::vector<int>> FromUseSlidingWindow(const json& root, int num_layers,
                                              const std::string& source) {
  const json& use = root["use_sliding_window"];
  if (!use.is_boolean()) {
    return FieldError(source, "use_sliding_window", "is not true/false/null");
  }
  std::vector<int> windows(num_layers, 0);
  if (!use.get<bool>()) return windows;
  LOCKSTEP_ASSIGN_OR_RETURN(int w, IntField(root, "sliding_window", 1, source));
  LOCKSTEP_ASSIGN_OR_RETURN(int m, IntField(root, "max_window_layers", 0, source));
  for (int i = m; i < num_layers; ++i) windows[i] = w;
  return windows;
}

}  // namespace

Result<std::vector<int>> ParseLayerWindows(const json& root, int num_layers,
                                           const std::string& source) {
  if (Has(root, "layer_types")) return FromLayerTypes(root, num_layers, source);
  if (Has(root, "use_sliding_window")) {
    return FromUseSlidingWindow(root, num_layers, source);
  }
  if (root.contains("use_sliding_window")) return std::vector<int>(num_layers, 0);
  if (!Has(root, "sliding_window")) return std::vector<int>(num_layers, 0);
  LOCKSTEP_ASSIGN_OR_RETURN(int w, IntField(root, "sliding_window", 1, source));
  return std::vector<int>(num_layers, w);
}

}  // namespace lockstep
