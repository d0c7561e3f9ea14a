#include "engine/tokenizer/tokenizer_json.h"

#include <exception>

#include "base/json.h"

namespace lockstep {
namespace {

using json = nlohmann::json;

// Builds a json tree like nlohmann's DOM parser, except that the object at
// model.vocab and the array at model.merges are read into flat vectors.
class TokenizerSax : public nlohmann::json_sax<json> {
 public:
  explicit TokenizerSax(TokenizerDoc* doc) : doc_(doc) {}

  const std::string& error() const { return error_; }

  bool null() override { return Value(json(nullptr)); }
  bool boolean(bool v) override { return Value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return VocabId(v);
    return Value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) {
      return VocabId(v > 0xFFFFFFFFull ? -1 : static_cast<int64_t>(v));
    }
    return Value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (mode_ == Mode::kVocab) return Fail("model.vocab[\"" + key_ + "\"]: id is not an integer");
    return Value(json(v));
  }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) return MergeString(v);
    if (mode_ == Mode::kMergePair) return MergePairPart(v);
    if (mode_ == Mode::kVocab) return Fail("model.vocab[\"" + key_ + "\"]: id is not an integer");
    return Value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }
  bool key(string_t& k) override {
    // model.vocab's tokens are checked by the BPE model, which names them;
    // model.vocab and model.merges themselves are not in the tree.
    const bool flat_again = stack_.size() == 2 && model_depth_ &&
                            ((k == "vocab" && doc_->has_vocab) || (k == "merges" && doc_->has_merges));
    if (mode_ == Mode::kNormal && !stack_.empty() && (stack_.back()->contains(k) || flat_again)) {
      return Fail("duplicate JSON key \"" + k + "\"");
    }
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override {
    if (mode_ == Mode::kVocab) return Fail("model.vocab[\"" + key_ + "\"]: id is not an integer");
    if (mode_ != Mode::kNormal) return Fail(MergeWhere() + ": unexpected object");
    if (AtModelField("vocab")) {
      mode_ = Mode::kVocab;
      doc_->has_vocab = true;
      doc_->vocab.reserve(65536);
      return true;
    }
    return Open(json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kNormal;
      return true;
    }
    return Close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ == Mode::kVocab) return Fail("model.vocab[\"" + key_ + "\"]: id is not an integer");
    if (mode_ != Mode::kNormal) return Fail(MergeWhere() + ": unexpected nested array");
    if (AtModelField("merges")) {
      mode_ = Mode::kMerges;
      doc_->has_merges = true;
      doc_->merges.reserve(65536);
      return true;
    }
    return Open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) return Fail(MergeWhere() + ": a merge pair needs exactly 2 strings");
      doc_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kNormal;
      return true;
    }
    return Close();
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& e) override {
    if (error_.empty()) error_ = std::string("malformed JSON: ") + e.what();
    return false;
  }

 private:
  enum class Mode { kNormal, kVocab, kMerges, kMergePair };

  bool Fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
    return false;
  }
  std::string MergeWhere() const {
    return "model.merges[" + std::to_string(doc_->merges.size()) + "]";
  }
  // True when the next value is root["model"][field].
  bool AtModelField(const char* field) const {
    return stack_.size() == 2 && stack_[1]->is_object() && model_depth_ &&
           key_ == field;
  }
  bool VocabId(int64_t v) {
    if (v < 0 || v > 0xFFFFFFFFll) {
      return Fail("model.vocab[\"" + key_ + "\"]: id " + std::to_string(v) +
                  " is not a u32");
    }
    doc_->vocab.emplace_back(std::move(key_), static_cast<uint32_t>(v));
    return true;
  }
  bool MergeString(string_t& v) {
    const size_t sp = v.find(' ');
    if (sp == std::string::npos || v.find(' ', sp + 1) != std::string::npos) {
      return Fail(MergeWhere() + ": \"" + v + "\" is not of the form \"a b\"");
    }
    doc_->merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
    return true;
  }
  bool MergePairPart(string_t& v) {
    if (pair_.size() >= 2) return Fail(MergeWhere() + ": a merge pair needs exactly 2 strings");
    pair_.push_back(std::move(v));
    return true;
  }
  // Places `v` in the current container; returns a pointer to it.
  json* Place(json v) {
    if (stack_.empty()) {
      doc_->root = std::move(v);
      return &doc_->root;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    json& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }
  bool Value(json v) {
    if (mode_ == Mode::kVocab) return Fail("model.vocab[\"" + key_ + "\"]: id is not an integer");
    if (mode_ != Mode::kNormal) {
      return Fail(MergeWhere() + ": must be an \"a b\" string or an [\"a\", \"b\"] pair");
    }
    Place(std::move(v));
    return true;
  }
  bool Open(json container) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      return Fail("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    const bool entering_model =
        stack_.size() == 1 && stack_[0]->is_object() && key_ == "model";
    json* p = Place(std::move(container));
    stack_.push_back(p);
    if (stack_.size() == 2) model_depth_ = entering_model;
    return true;
  }
  bool Close() {
    if (stack_.empty()) return Fail("unbalanced JSON");
    stack_.pop_back();
    if (stack_.size() < 2) model_depth_ = false;
    return true;
  }

  TokenizerDoc* doc_;
  std::vector<json*> stack_;
  std::string key_;
  std::vector<std::string> pair_;
  Mode mode_ = Mode::kNormal;
  bool model_depth_ = false;  // stack_[1] is root["model"]
  std::string error_;
};

}  // namespace

Result<TokenizerDoc> ParseTokenizerJson(std::string_view text,
                                        const std::string& source_name) {
  TokenizerDoc doc;
  TokenizerSax sax(&doc);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const std::exception& e) {
    return InvalidError(source_name + ": malformed JSON: " + e.what());
  }
  if (!ok) {
    return InvalidError(source_name + ": " +
                        (sax.error().empty() ? "malformed JSON" : sax.error()));
  }
  if (!doc.root.is_object()) {
    return InvalidError(source_name + ": top level is not a JSON object");
  }
  return doc;
}

}  // namespace lockstep
