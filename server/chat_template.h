// The chat template of a model (a folder's tokenizer_config.json
// "chat_template", a GGUF file's tokenizer.chat_template), rendered without a Jinja engine: only the ChatML
// family that SmolLM2 and Qwen2 use is recognised —
//   [<|im_start|>system\nDEFAULT<|im_end|>\n  when the first message is not
//    a system message and the template has such a default]
//   <|im_start|>ROLE\nCONTENT<|im_end|>\n   for every message
//   <|im_start|>assistant\n                 (the generation prompt)
// Any other template is refused with an error naming it, never guessed.
// Messages are text: a role or content that the tokenizer would turn into
// a special token (ChatML's <|im_start|>, which opens a turn, among them)
// is refused by CheckMessages, so no content can forge a system turn.
// Immutable after load; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/model_files.h"
#include "engine/tokenizer/tokenizer.h"

namespace lockstep::server {

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
 public:
  // Recognises `jinja` (the template text). Unimplemented names it otherwise.
  static Result<ChatTemplate> FromJinja(const std::string& jinja);
  // Reads DIR/tokenizer_config.json; NotFound if absent or without a template.
  static Result<ChatTemplate> FromModelDir(const std::string& dir);
  // A folder's as FromModelDir, a GGUF file's from its metadata (NotFound
  // without tokenizer.chat_template).
  static Result<ChatTemplate> FromModel(const ModelFiles& files);

  // Invalid naming the message and the special token it holds.
  static Status CheckMessages(const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer);

  std::string Render(const std::vector<ChatMessage>& messages) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_ = "chatml";
  std::optional<std::string> default_system_;
};

}  // namespace lockstep::server
