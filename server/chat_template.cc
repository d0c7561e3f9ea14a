#include "server/chat_template.h"


#include "base/json.h"
#include "base/read_only_file.h"
#include "engine/io/gguf.h"

namespace lockstep::server {
namespace {

// Jinja text with whitespace outside string literals removed, whitespace
// control dashes dropped and the escape \n turned into a newline, so
// spacing variants of one template compare equal.
std::string Normalize(const std::string& jinja) {
  std::string s;
  for (size_t i = 0; i < jinja.size(); ++i) {
    if (jinja[i] == '\\' && i + 1 < jinja.size() && jinja[i + 1] == 'n') {
      s += '\n';
      ++i;
    } else {
      s += jinja[i];
    }
  }
  for (const char* dash : {"{%-", "-%}", "{{-", "-}}"}) {
    const std::string d = dash, plain = d[0] == '-' ? d.substr(1) : d.substr(0, 2);
    for (size_t p = s.find(d); p != std::string::npos; p = s.find(d, p)) s.replace(p, 3, plain);
  }
  std::string out;
  char quote = 0;
  for (char c : s) {
    if (quote != 0) {
      out += c;
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
      out += c;
    }
  }
  return out;
}

constexpr const char* kHead = "{%formessageinmessages%}";
constexpr const char* kSystemOpen =
    "{%ifloop.firstandmessages[0]['role']!='system'%}{{'<|im_start|>system\n";
constexpr const char* kSystemClose = "<|im_end|>\n'}}{%endif%}";
constexpr const char* kBody =
    "{{'<|im_start|>'+message['role']+'\n'+message['content']+'<|im_end|>'+'\n'}}{%endfor%}"
    "{%ifadd_generation_prompt%}{{'<|im_start|>assistant\n'}}{%endif%}";

bool StartsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

}  // namespace

Result<ChatTemplate> ChatTemplate::FromJinja(const std::string& jinja) {
  const std::string n = Normalize(jinja);
  const std::string head = kHead, open = kSystemOpen, close = kSystemClose, body = kBody;
  ChatTemplate t;
  if (n == head + body) return t;
  if (StartsWith(n, head + open) && n.size() > head.size() + open.size() + close.size() + body.size() &&
      n.compare(n.size() - body.size(), body.size(), body) == 0) {
    const std::string middle = n.substr(head.size() + open.size(),
                                        n.size() - head.size() - open.size() - body.size());
    if (middle.size() >= close.size() &&
        middle.compare(middle.size() - close.size(), close.size(), close) == 0) {
      const std::string text = middle.substr(0, middle.size() - close.size());
      if (text.find('\'') == std::string::npos) {
        t.default_system_ = text;
        return t;
      }
    }
  }
  const std::string shown = jinja.size() > 120 ? jinja.substr(0, 120) + "..." : jinja;
  return UnimplementedError("chat template not supported (only ChatML is built in): " + shown);
}

Result<ChatTemplate> ChatTemplate::FromModelDir(const std::string& dir) {
  const std::string path = dir + "/tokenizer_config.json";
  Result<std::string> text = ReadSmallFile(path, kMaxTokenizerConfigBytes, "tokenizer_config.json");
  if (text.status().kind() == ErrorKind::kNotFound) {
    return NotFoundError(path + " is absent, so the model has no chat template");
  }
  LOCKSTEP_RETURN_IF_ERROR(text.status());
  LOCKSTEP_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonStrict(*text, path, ErrorKind::kInvalid));
  if (!j.is_object()) return InvalidError(path + " is not a JSON object");
  if (!j.contains("chat_template") || !j["chat_template"].is_string()) {
    return NotFoundError(path + " has no \"chat_template\" string");
  }
  return FromJinja(j["chat_template"].get<std::string>());
}

Result<ChatTemplate> ChatTemplate::FromModel(const ModelFiles& files) {
  if (!files.gguf) return FromModelDir(files.dir);
  LOCKSTEP_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(files.weights_path));
  const GgufValue* t = f.Find("tokenizer.chat_template");
  if (t == nullptr || t->type != GgufType::kString) {
    return NotFoundError(files.weights_path + " has no \"tokenizer.chat_template\" string");
  }
  return FromJinja(t->string);
}

Status ChatTemplate::CheckMessages(const std::vector<ChatMessage>& messages,
                                   const Tokenizer& tokenizer) {
  for (size_t i = 0; i < messages.size(); ++i) {
    for (const std::string* text : {&messages[i].role, &messages[i].content}) {
      if (std::optional<std::string> special = tokenizer.FirstSpecialToken(*text)) {
        return InvalidError("messages[" + std::to_string(i) + "]." +
                            (text == &messages[i].role ? "role" : "content") +
                            " holds the special token " + *special +
                            ", which chat messages may not contain");
      }
    }
  }
  return Status::Ok();
}

std::string ChatTemplate::Render(const std::vector<ChatMessage>& messages) const {
  std::string out;
  if (default_system_ && (messages.empty() || messages[0].role != "system")) {
    out += "<|im_start|>system\n" + *default_system_ + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace lockstep::server
