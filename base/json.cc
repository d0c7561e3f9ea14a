#include "base/json.h"

#include <functional>
#include <set>
#include <vector>

namespace lockstep {
namespace {

// Deepest bracket nesting outside of strings. Cheap pre-check so that a
// hostile "[[[[..." never reaches the parser.
int MaxNesting(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) max_depth = depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// Parser callback state: one key set per open object.
struct KeyTracker {
  std::vector<std::set<std::string>> open;
  std::string duplicate;

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event,
                  nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open.emplace_back();
    if (event == E::object_end && !open.empty()) open.pop_back();
    if (event == E::key && !open.empty() && duplicate.empty()) {
      std::string key = parsed.get<std::string>();
      if (!open.back().insert(key).second) duplicate = key;
    }
    return true;
  }
};

}  // namespace

Result<nlohmann::json> ParseJsonStrict(std::string_view text,
                                       const std::string& source,
                                       ErrorKind kind) {
  if (text.size() > kMaxJsonBytes) {
    return Status(kind, source + ": " + std::to_string(text.size()) +
                            " bytes of JSON, over the limit of " + std::to_string(kMaxJsonBytes));
  }
  // nlohmann's lexer takes NUL for end of input; JSON never contains one.
  if (text.find('\0') != std::string_view::npos) {
    return Status(kind, source + ": NUL byte in JSON text");
  }
  if (MaxNesting(text) > kMaxJsonDepth) {
    return Status(kind, source + ": JSON nested deeper than " +
                            std::to_string(kMaxJsonDepth) + " levels");
  }
  KeyTracker tracker;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end(), std::ref(tracker));
  } catch (const nlohmann::json::exception& e) {
    return Status(kind, source + ": not valid JSON: " + e.what());
  }
  if (!tracker.duplicate.empty()) {
    return Status(kind, source + ": duplicate JSON key \"" +
                            tracker.duplicate + "\"");
  }
  return j;
}

const char* JsonTypeName(const nlohmann::json& j) { return j.type_name(); }

}  // namespace lockstep
