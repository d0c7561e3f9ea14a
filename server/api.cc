#include "server/api.h"

#include "receipt/receipt.h"
#include "runtime/generated_text.h"
#include "runtime/run_receipt.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

namespace lockstep::server {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

uint64_t FreshSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// What the client sees of a generation: no EOS, cut at the first stop string.
struct Visible {
  std::string text;
  bool stopped_by_string = false;
};

Visible TextOf(const std::vector<uint32_t>& generated, const ApiContext& ctx,
               const GenerationSpec& spec) {
  Visible v;
  if (ctx.model.tokenizer == nullptr) return v;
  std::vector<uint32_t> ids = generated;
  if (!ids.empty() && std::find(ctx.eos.begin(), ctx.eos.end(), ids.back()) != ctx.eos.end()) {
    ids.pop_back();
  }
  v.text = ctx.model.tokenizer->Decode(ids);
  size_t cut = std::string::npos;
  for (const std::string& s : spec.stop) cut = std::min(cut, v.text.find(s));
  if (cut != std::string::npos) {
    v.text.resize(cut);
    v.stopped_by_string = true;
  }
  return v;
}

// Bytes of `text` safe to stream before the generation ends: no trailing
// U+FFFD (an incomplete UTF-8 sequence may still complete) and nothing
// that could be the start of a stop string.
size_t StreamableLength(const std::string& text, const GenerationSpec& spec) {
  size_t n = text.size();
  while (n >= 3 && text.compare(n - 3, 3, "\xEF\xBF\xBD") == 0) n -= 3;
  size_t hold = 0;
  for (const std::string& s : spec.stop) hold = std::max(hold, s.size() - 1);
  n = n > hold ? n - hold : 0;
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n;
}

// The receipt (receipt/receipt.h), the same object `lockstep run --json`
// prints for the same request and cluster (its timings aside).
json Receipt(const Finish& f, const ParsedRequest& r, const ApiContext& ctx) {
  receipt::ReceiptInputs in = runtime::RunReceiptInputs(
      f.result, r.spec.request, ctx.site,
      runtime::DecodeText(ctx.model.tokenizer, f.result.generated));
  if (r.spec.speculative) in.speculative = ctx.speculative_source;
  return receipt::BuildReceipt(in);
}

// Ours, beside the receipt: what the server did that does not change bits.
void AddExtensions(const Finish& f, json* out) {
  (*out)["prefix_reused_tokens"] = f.prefix_reused;
  if (f.determinism_ok) (*out)["determinism_check"] = *f.determinism_ok ? "passed" : "failed";
}

std::string FinishReason(const Finish& f) { return f.reason; }

// The error a generation that ended in error answers with: 429 with
// Retry-After when a worker refused it for capacity, else 500.
ApiError FinishError(const Finish& f) {
  if (f.overloaded) return Overloaded(f.error, "workers_busy");
  return ApiError{500, f.error, "server_error", "", "generation_failed"};
}

}  // namespace

void Api::Respond(int status, const std::string& type, const std::string& body, Exchange& ex) {
  ctx_.metrics->Request(status);
  ex.Respond(status, type, body, 0);
}

void Api::Fail(const ApiError& e, Exchange& ex) {
  ctx_.metrics->Request(e.status);
  ctx_.metrics->Error(e.code.empty() ? e.type : e.code);
  ex.Respond(e.status, "application/json", Dump(e.ToJson()), e.retry_after_s);
}

void Api::Handle(const std::string& method, const std::string& target, const std::string& body,
                 Exchange& ex) {
  const std::string path = target.substr(0, target.find('?'));
  const bool post = method == "POST", get = method == "GET";
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) return Fail(ApiError{405, "use POST for " + path, "invalid_request_error", "", "method_not_allowed"}, ex);
    if (shutting_down_) {
      return Fail(ApiError{503, "the server is shutting down", "unavailable_error", "", "shutting_down"}, ex);
    }
    return Generate(body, path == "/v1/chat/completions", ex);
  }
  if (path == "/v1/models" && get) {
    json m = {{"id", ctx_.model.id}, {"object", "model"}, {"created", 0}, {"owned_by", "lockstep"}};
    return Respond(200, "application/json", Dump({{"object", "list"}, {"data", json::array({m})}}), ex);
  }
  if (path == "/healthz" && get) {
    // Each stage as the coordinator sees it now (after a recovery: the
    // spare, and the worker it replaced); a dead worker breaks the whole
    // pipeline, so the status is then degraded.
    const Status cluster = ctx_.cluster ? ctx_.cluster->health() : Status::Ok();
    std::vector<StageState> now;
    if (ctx_.cluster) {
      now = ctx_.cluster->stages();
    } else {
      for (const StageInfo& s : ctx_.stages) now.push_back(StageState{s.endpoint, s.lo, s.hi, {}, {}});
    }
    json stages = json::array();
    for (const StageState& s : now) {
      json w = {{"endpoint", s.endpoint}, {"layers", {s.lo, s.hi}}, {"status", s.status.ok() ? "ok" : "failed"}};
      if (!s.status.ok()) w["error"] = s.status.ToString();
      if (!s.replaced.empty()) w["replaced"] = s.replaced;
      stages.push_back(std::move(w));
    }
    const char* status = shutting_down_ ? "shutting_down" : cluster.ok() ? "ok" : "degraded";
    json h = {{"status", status},
              {"model", ctx_.model.id},
              {"plan", ctx_.site.plan.empty() ? "monolithic" : ctx_.site.plan},
              {"coordinator", {{"status", "ok"}, {"active_sessions", ctx_.scheduler->ActiveSessions()}}},
              {"workers", stages}};
    return Respond(shutting_down_ || !cluster.ok() ? 503 : 200, "application/json", Dump(h), ex);
  }
  if (path == "/metrics" && get) {
    return Respond(200, "text/plain; version=0.0.4", ctx_.metrics->Render(), ex);
  }
  Fail(ApiError{404, "no route " + method + " " + path, "invalid_request_error", "", "not_found"}, ex);
}

void Api::Generate(const std::string& body, bool chat, Exchange& ex) {
  auto parsed = ParseRequest(body, chat, ctx_.model, FreshSeed());
  if (auto* e = std::get_if<ApiError>(&parsed)) return Fail(*e, ex);
  const ParsedRequest& r = std::get<ParsedRequest>(parsed);
  auto submitted = ctx_.scheduler->Submit(r.spec);
  if (auto* e = std::get_if<ApiError>(&submitted)) return Fail(*e, ex);
  std::shared_ptr<GenerationStream> stream = std::get<std::shared_ptr<GenerationStream>>(submitted);

  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string object = chat ? "chat.completion" : "text_completion";
  auto chunk = [&](const std::string& text, const json& finish_reason) {
    json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created}, {"model", ctx_.model.id}};
    json choice = {{"index", 0}, {"finish_reason", finish_reason}};
    if (chat) {
      choice["delta"] = text.empty() ? json::object() : json{{"content", text}};
    } else {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
    }
    c["choices"] = json::array({choice});
    return c;
  };

  if (r.stream) {
    if (!ex.BeginEvents()) return stream->Cancel();
    ctx_.metrics->Request(200);
    if (chat) {
      json first = chunk("", nullptr);
      first["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
      if (!ex.SendEvent(Dump(first))) return stream->Cancel();
    } else if (r.echo && !r.prompt_text.empty()) {
      if (!ex.SendEvent(Dump(chunk(r.prompt_text, nullptr)))) return stream->Cancel();
    }
  }
  std::vector<uint32_t> tokens;
  std::optional<Finish> finish;
  size_t sent = 0;
  for (;;) {
    const size_t before = tokens.size();
    stream->Wait(std::chrono::milliseconds(50), &tokens, &finish);
    if (!finish && ex.PeerGone()) {
      stream->Wait(std::chrono::milliseconds(0), &tokens, &finish);
    }
    if (!finish && ex.PeerGone()) {
      stream->Cancel();
      ctx_.metrics->Error("client_disconnected");
      return;
    }
    if (r.stream && tokens.size() > before && !finish) {
      const Visible v = TextOf(tokens, ctx_, r.spec);
      // An event for every step that produced tokens, even when their
      // text is held back (incomplete UTF-8, a possible stop string): the
      // client sees each token's timing, as OpenAI's one chunk per token.
      const size_t n = std::max(sent, StreamableLength(v.text, r.spec));
      if (!ex.SendEvent(Dump(chunk(v.text.substr(sent, n - sent), nullptr)))) {
        stream->Cancel();
        ctx_.metrics->Error("client_disconnected");
        return;
      }
      sent = n;
    }
    if (finish) break;
  }
  if (finish->reason == "error") {
    const ApiError e = FinishError(*finish);
    if (!r.stream) return Fail(e, ex);
    // The headers (200) are sent: the error is the stream's last event, the
    // body the same request unstreamed would have had, and the stream ends
    // there, with no [DONE].
    ctx_.metrics->Error(e.code);
    ex.SendEvent(Dump(e.ToJson()));
    return;
  }
  const Visible v = TextOf(finish->result.generated, ctx_, r.spec);
  const size_t completion = finish->result.generated.size();
  json usage = {{"prompt_tokens", r.spec.request.prompt.size()},
                {"completion_tokens", completion},
                {"total_tokens", r.spec.request.prompt.size() + completion}};
  const json receipt = Receipt(*finish, r, ctx_);
  if (r.stream) {
    json last = chunk(sent < v.text.size() ? v.text.substr(sent) : "", FinishReason(*finish));
    last["usage"] = usage;
    last["seed"] = r.spec.request.sampling.seed;
    last["receipt"] = receipt;
    AddExtensions(*finish, &last);
    ex.SendEvent(Dump(last));
    ex.SendEvent("[DONE]");
    return;
  }
  json choice = {{"index", 0}, {"finish_reason", FinishReason(*finish)}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", v.text}};
  } else {
    choice["text"] = r.echo ? r.prompt_text + v.text : v.text;
    choice["logprobs"] = nullptr;
  }
  json out = {{"id", id}, {"object", object}, {"created", created}, {"model", ctx_.model.id},
              {"choices", json::array({choice})}, {"usage", usage},
              {"seed", r.spec.request.sampling.seed}, {"receipt", receipt}};
  AddExtensions(*finish, &out);
  Respond(200, "application/json", Dump(out), ex);
}

}  // namespace lockstep::server
