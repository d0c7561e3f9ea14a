#include "cli/make_model_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "base/read_only_file.h"
#include "cli/exit_status.h"
#include "engine/io/model_config.h"
#include "engine/io/synthetic_gguf.h"
#include "engine/rope_table.h"
#include "engine/tokenizer/synthetic_tokenizer.h"
#include "runtime/gguf_convert.h"

namespace lockstep::cli {
namespace {

Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IoError(tmp + ": cannot create");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) return IoError(tmp + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IoError(path + ": " + ec.message());
  return Status::Ok();
}

// Copies the bytes only (not the source's permission bits).
Status CopyFile(const std::string& from, const std::string& to) {
  LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(from, kMaxTokenizerFileBytes, "a file to copy"));
  return WriteTextFile(to, text);
}

// A named shape's config.json text; "" for SyntheticConfigJson's shapes.
Result<std::string> ShapeConfig(const MakeModelOptions& o, SyntheticShape& dims) {
  if (o.shape.empty()) return std::string();
  if (o.shape == "smollm2-135m" || o.shape == "qwen3-0.6b" || o.shape == "qwen3-30b-a3b") {
    dims = o.shape == "smollm2-135m" ? SmolLM2Shape()
           : o.shape == "qwen3-0.6b" ? Qwen3_0_6BShape()
                                     : Qwen3_30B_A3BShape();
    return std::string();
  }
  std::string text;
  if (o.shape == "llama3.2-1b") text = Llama32_1BConfigJson();
  if (o.shape == "llama3.1-8b") text = Llama31_8BConfigJson();
  if (text.empty()) {
    return InvalidError("--shape: unknown shape '" + o.shape +
                        "' (known: smollm2-135m, llama3.2-1b, llama3.1-8b, qwen3-0.6b, "
                        "qwen3-30b-a3b)");
  }
  if (!o.config_path.empty()) {
    return InvalidError("--shape " + o.shape + " comes with its own config; drop --config");
  }
  return text;
}

// A shape whose config.json is not SyntheticConfigJson's (llama3 rope
// scaling, a list of eos ids) is written out first and then used as the
// --config file would be.
Status MakeFolder(const MakeModelOptions& o) {
  SyntheticShape dims = o.dims;
  std::string config_path = o.config_path;
  LOCKSTEP_ASSIGN_OR_RETURN(const std::string shape_config, ShapeConfig(o, dims));
  if (!shape_config.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec) return IoError(o.out_dir + ": cannot create directory: " + ec.message());
    config_path = o.out_dir + "/config.json";
    LOCKSTEP_RETURN_IF_ERROR(WriteTextFile(config_path, shape_config));
  }
  LOCKSTEP_RETURN_IF_ERROR(WriteSyntheticModel(o.out_dir, dims, *o.seed, config_path, o.shards));
  const std::string tok_out = o.out_dir + "/tokenizer.json";
  if (!o.tokenizer_path.empty()) return CopyFile(o.tokenizer_path, tok_out);
  LOCKSTEP_ASSIGN_OR_RETURN(ModelConfig cfg, LoadModelConfig(o.out_dir + "/config.json"));
  LOCKSTEP_ASSIGN_OR_RETURN(std::string tok, SyntheticTokenizerJson(
                                                 static_cast<uint32_t>(cfg.vocab_size), *o.seed));
  return WriteTextFile(tok_out, tok);
}

// One synthetic .gguf file: the folder's config (shape, --config), the
// tokenizer (--tokenizer or the synthetic one) as metadata.
Status MakeGguf(const MakeModelOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(GgufQuantMix mix, GgufQuantMixByName(o.quant));
  if (!o.from_dir.empty()) return runtime::ConvertToGguf(o.from_dir, o.out_dir, mix.matrices);
  if (o.shards != 1) return InvalidError("--shards: a GGUF checkpoint is one file");
  SyntheticShape dims = o.dims;
  LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ShapeConfig(o, dims));
  if (text.empty() && !o.config_path.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(text, ReadSmallFile(o.config_path, kMaxConfigJsonBytes, "config.json"));
  }
  if (text.empty()) text = SyntheticConfigJson(dims);
  LOCKSTEP_ASSIGN_OR_RETURN(ModelConfig cfg, ParseModelConfig(text, o.config_path.empty() ? o.shape : o.config_path));
  if (cfg.rope_scaling) {
    cfg.rope_freqs = Llama3RopeFreqs(cfg);
    cfg.rope_scaling.reset();
  }
  std::string tok;
  if (!o.tokenizer_path.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(tok, ReadSmallFile(o.tokenizer_path, kMaxTokenizerFileBytes, "tokenizer.json"));
  } else {
    LOCKSTEP_ASSIGN_OR_RETURN(tok, SyntheticTokenizerJson(static_cast<uint32_t>(cfg.vocab_size), *o.seed));
  }
  LOCKSTEP_ASSIGN_OR_RETURN(auto keys, runtime::GgufTokenizerKeys(
                                           tok, o.tokenizer_path.empty() ? "the synthetic tokenizer" : o.tokenizer_path,
                                           static_cast<uint32_t>(cfg.vocab_size)));
  const bool bias = o.config_path.empty() && o.shape.empty() ? dims.bias : cfg.attention_bias;
  return WriteSyntheticGguf(o.out_dir, cfg, bias, mix, *o.seed, keys);
}

Status MakeModel(const MakeModelOptions& o) {
  if (!o.seed && o.from_dir.empty()) return InvalidError("--seed is required (unless --from)");
  if (o.gguf) return MakeGguf(o);
  if (!o.from_dir.empty()) return InvalidError("--from converts to GGUF only: add --gguf");
  return MakeFolder(o);
}

}  // namespace

CLI::App* AddMakeModelCommand(CLI::App& app, MakeModelOptions& o) {
  CLI::App* c = app.add_subcommand("make-model", "Write a seeded synthetic checkpoint");
  c->add_option("out_dir", o.out_dir, "Output folder (with --gguf: the .gguf file)")->required();
  c->add_option("--seed", o.seed, "PRNG seed (required unless --from)");
  c->add_option("--shape", o.shape,
                "Named shape: smollm2-135m, llama3.2-1b, llama3.1-8b, qwen3-0.6b or qwen3-30b-a3b");
  c->add_option("--hidden", o.dims.hidden, "hidden_size");
  c->add_option("--layers", o.dims.layers, "num_hidden_layers");
  c->add_option("--heads", o.dims.heads, "num_attention_heads");
  c->add_option("--kv-heads", o.dims.kv_heads, "num_key_value_heads");
  c->add_option("--inter", o.dims.inter, "intermediate_size");
  c->add_option("--vocab", o.dims.vocab, "vocab_size");
  c->add_option("--theta", o.dims.theta, "rope_theta");
  c->add_flag("--bias", o.dims.bias, "q/k/v projection biases (Qwen2-style)");
  c->add_flag("--untied", o.dims.untied, "separate lm_head.weight");
  c->add_flag("--qwen3", o.dims.qwen3, "Qwen3: per-head q/k RMSNorm (model_type qwen3)");
  c->add_option("--head-dim", o.dims.head_dim, "head_dim (Qwen3; default hidden/heads)");
  c->add_option("--experts", o.dims.experts, "num_experts: a Qwen3-MoE model (implies --qwen3)");
  c->add_option("--top-k", o.dims.top_k, "num_experts_per_tok (with --experts)");
  c->add_option("--moe-inter", o.dims.moe_inter, "moe_intermediate_size (with --experts)");
  c->add_flag("--norm-topk", o.dims.norm_topk, "norm_topk_prob true (with --experts)");
  c->add_option("--tokenizer", o.tokenizer_path, "Copy this tokenizer.json");
  c->add_option("--config", o.config_path, "Copy this config.json (shape follows it)");
  c->add_option("--shards", o.shards,
                "Write model-0000K-of-0000N.safetensors + model.safetensors.index.json")
      ->check(CLI::Range(1, 999));
  c->add_flag("--gguf", o.gguf, "Write one GGUF file (docs/gguf.md) instead of a folder");
  c->add_option("--quant", o.quant,
                "GGUF weight type: f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m");
  c->add_option("--from", o.from_dir, "With --gguf: convert this safetensors folder (f32, f16, bf16)");
  return c;
}

int RunMakeModelCommand(const MakeModelOptions& o) {
  const Status st = MakeModel(o);
  if (st.ok()) std::cout << "wrote " << o.out_dir << "\n";
  return ExitStatus("make-model", st);
}

}  // namespace lockstep::cli
