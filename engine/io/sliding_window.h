// Per-layer attention windows from a config.json object (part of
// ParseModelConfig, separate because three conventions exist):
//  - "layer_types" array, if present, decides per layer:
//    "full_attention" -> 0, "sliding_attention" -> sliding_window;
//  - else Qwen2 style "use_sliding_window": true with "sliding_window" W and
//    "max_window_layers" M: layers i >= M get W, the others 0;
//    "use_sliding_window": false or null: every layer 0;
//  - else Mistral style "sliding_window" integer: every layer gets W;
//    absent or null: every layer 0.
// Window 0 means full causal attention. Stateless: thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "base/status.h"

namespace lockstep {

// REQUIRES: root is an object, num_layers > 0. Returns [num_layers] windows.
// Invalid (naming `source` and the field) on ill-typed values; Unimplemented
// on a layer type other than full/sliding attention.
Result<std::vector<int>> ParseLayerWindows(const nlohmann::json& root,
                                           int num_layers,
                                           const std::string& source);

}  // namespace lockstep
