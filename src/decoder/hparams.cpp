#include "decoder/hparams.h"

#include <cmath>
#include <optional>

#include "gguf.h"
#include "gguf_model/model.h"

namespace gm {
namespace {

std::optional<double> get_num(gguf_context* ctx, const std::string& key) {
  const int64_t id = gguf_find_key(ctx, key.c_str());
  if (id < 0) return std::nullopt;
  switch (gguf_get_kv_type(ctx, id)) {
    case GGUF_TYPE_UINT8: return gguf_get_val_u8(ctx, id);
    case GGUF_TYPE_INT8: return gguf_get_val_i8(ctx, id);
    case GGUF_TYPE_UINT16: return gguf_get_val_u16(ctx, id);
    case GGUF_TYPE_INT16: return gguf_get_val_i16(ctx, id);
    case GGUF_TYPE_UINT32: return gguf_get_val_u32(ctx, id);
    case GGUF_TYPE_INT32: return gguf_get_val_i32(ctx, id);
    case GGUF_TYPE_UINT64: return double(gguf_get_val_u64(ctx, id));
    case GGUF_TYPE_INT64: return double(gguf_get_val_i64(ctx, id));
    case GGUF_TYPE_FLOAT32: return gguf_get_val_f32(ctx, id);
    case GGUF_TYPE_FLOAT64: return gguf_get_val_f64(ctx, id);
    default: return std::nullopt;  // arrays (per-layer head counts) are not supported
  }
}

// llama.cpp's per-layer sliding-window flags (llama_model_base::load_swa_pattern): an array
// of flags, else a period n (layer il slides unless il % n == n - 1; 0: every layer), else
// `def_period`.
Result<std::vector<bool>> swa_pattern(gguf_context* ctx, const std::string& key, int n_layer, int def_period) {
  std::vector<bool> swa(size_t(n_layer), false);
  const int64_t id = gguf_find_key(ctx, key.c_str());
  if (id >= 0 && gguf_get_kv_type(ctx, id) == GGUF_TYPE_ARRAY) {
    const auto t = gguf_get_arr_type(ctx, id);
    if (gguf_get_arr_n(ctx, id) < size_t(n_layer) || (t != GGUF_TYPE_BOOL && t != GGUF_TYPE_INT32 && t != GGUF_TYPE_UINT32))
      return Status::errorf("{}: {} entries of an unsupported type", key, gguf_get_arr_n(ctx, id));
    const void* d = gguf_get_arr_data(ctx, id);
    for (int il = 0; il < n_layer; ++il)
      swa[size_t(il)] = t == GGUF_TYPE_BOOL ? static_cast<const int8_t*>(d)[il] != 0 : static_cast<const int32_t*>(d)[il] != 0;
    return swa;
  }
  int n = def_period;
  if (id >= 0) {
    auto v = get_num(ctx, key);
    if (!v || *v < 0) return Status::errorf("{}: not a period", key);
    n = int(*v);
  }
  for (int il = 0; il < n_layer; ++il) swa[size_t(il)] = n == 0 || il % n < n - 1;
  return swa;
}

std::string get_str(gguf_context* ctx, const std::string& key, const std::string& def) {
  const int64_t id = gguf_find_key(ctx, key.c_str());
  if (id < 0 || gguf_get_kv_type(ctx, id) != GGUF_TYPE_STRING) return def;
  return gguf_get_val_str(ctx, id);
}

}  // namespace

const std::vector<std::string>& decoder_architectures() {
  static const std::vector<std::string> archs = {"llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "qwen2moe"};
  return archs;
}

namespace {
bool is_moe_architecture(const std::string& arch) { return arch == "qwen3moe" || arch == "qwen2moe"; }
}  // namespace

Status check_decoder_architecture(const std::string& arch) {
  std::string has;
  for (const auto& a : decoder_architectures()) {
    if (a == arch) return Status::ok();
    has += (has.empty() ? "" : ", ") + a;
  }
  return Status::errorf("gamma's LibTorch decoder (HAWQ-V2, Stage I) has no {} layer (it has {})", arch, has);
}

Result<HParams> read_hparams(const Model& m) {
  GAMMA_RETURN_IF_ERROR(check_decoder_architecture(m.arch()));
  HParams h;
  gguf_context* ctx = m.gguf();
  const std::string a = m.arch();
  h.arch = a;
  h.n_layer = m.n_layer();
  auto need = [&](const std::string& key) -> Result<double> {
    auto v = get_num(ctx, a + "." + key);
    if (!v) return Status::errorf("{}: missing or non-scalar key {}.{}", m.path(), a, key);
    return *v;
  };
  GAMMA_ASSIGN_OR_RETURN(double n_embd, need("embedding_length"));
  GAMMA_ASSIGN_OR_RETURN(double n_ff, need("feed_forward_length"));
  GAMMA_ASSIGN_OR_RETURN(double n_head, need("attention.head_count"));
  GAMMA_ASSIGN_OR_RETURN(double eps, need("attention.layer_norm_rms_epsilon"));
  h.n_embd = int64_t(n_embd);
  h.n_ff = int64_t(n_ff);
  h.n_head = int64_t(n_head);
  h.rms_eps = float(eps);
  h.n_head_kv = int64_t(get_num(ctx, a + ".attention.head_count_kv").value_or(n_head));
  h.n_ctx_train = int64_t(get_num(ctx, a + ".context_length").value_or(0));
  if (h.n_head <= 0 || h.n_head_kv <= 0 || h.n_head % h.n_head_kv != 0)
    return Status::errorf("{}: bad head counts {} / {}", m.path(), h.n_head, h.n_head_kv);
  h.head_dim = int64_t(get_num(ctx, a + ".attention.key_length").value_or(double(h.n_embd / h.n_head)));
  const int64_t v_len = int64_t(get_num(ctx, a + ".attention.value_length").value_or(double(h.head_dim)));
  const int64_t n_rot = int64_t(get_num(ctx, a + ".rope.dimension_count").value_or(double(h.head_dim)));
  if (v_len != h.head_dim || n_rot != h.head_dim)
    return Status::errorf("{}: key/value/rope dimensions {}/{}/{} differ (unsupported)", m.path(), h.head_dim,
                          v_len, n_rot);

  // llama.cpp: llama -> NORM, qwen2/qwen3/gemma3/qwen3moe/qwen2moe -> NEOX (llama_model_rope_type).
  h.rope_type = a == "llama" ? RopeType::kNorm : RopeType::kNeox;
  h.qk_norm = a == "qwen3" || a == "qwen3moe";
  // llama_model_qwen3moe: build_moe_ffn(..., SILU, norm_w true, expert_weights_scale, SOFTMAX);
  // llama_model_qwen2moe: the same with norm_w false, its experts n_ff / n_expert_used wide
  // unless the key says, and the shared expert (n_ff wide unless the key says).
  if (is_moe_architecture(a)) {
    GAMMA_ASSIGN_OR_RETURN(double ne, need("expert_count"));
    GAMMA_ASSIGN_OR_RETURN(double nu, need("expert_used_count"));
    h.n_expert = int64_t(ne);
    h.n_expert_used = int64_t(nu);
    const bool q2 = a == "qwen2moe";
    const double def_ff_exp = q2 && nu > 0 ? double(h.n_ff / int64_t(nu)) : double(h.n_ff);
    h.n_ff_exp = int64_t(get_num(ctx, a + ".expert_feed_forward_length").value_or(def_ff_exp));
    h.expert_norm = !q2;
    if (q2) {
      h.n_ff_shexp = int64_t(get_num(ctx, a + ".expert_shared_feed_forward_length").value_or(0.0));
      if (h.n_ff_shexp == 0) h.n_ff_shexp = h.n_ff;
    }
    h.expert_scale = float(get_num(ctx, a + ".expert_weights_scale").value_or(0.0));
    if (h.n_expert <= 0 || h.n_expert_used <= 0 || h.n_expert_used > h.n_expert || h.n_ff_exp <= 0)
      return Status::errorf("{}: bad expert counts {} used of {} (width {})", m.path(), h.n_expert_used, h.n_expert,
                            h.n_ff_exp);
  }
  h.rope_freq_base = float(get_num(ctx, a + ".rope.freq_base").value_or(10000.0));
  const std::string scaling = get_str(ctx, a + ".rope.scaling.type", "linear");
  float factor = float(get_num(ctx, a + ".rope.scaling.factor").value_or(get_num(ctx, a + ".rope.scale_linear").value_or(0.0)));
  if (scaling == "none") {
    h.rope_freq_scale = 1.0f;
  } else if (scaling == "linear") {
    h.rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  } else {
    return Status::errorf("{}: RoPE scaling '{}' is not supported (only none and linear)", m.path(), scaling);
  }
  h.rope_attn_factor = float(get_num(ctx, a + ".rope.scaling.attn_factor").value_or(1.0));
  h.kq_scale = 1.0f / std::sqrt(float(h.head_dim));  // llama.cpp ignores attention.scale here
  if (a == "gemma3") {  // llama_model_gemma3::load_arch_hparams and its graph
    h.qk_norm = true;
    h.post_norms = true;
    h.ffn_act = FfnAct::kGeluTanh;
    h.embd_scale = std::sqrt(float(h.n_embd));
    if (h.n_layer == 62) h.kq_scale = 1.0f / std::sqrt(float(h.n_embd / h.n_head));  // 27B: gemma_pytorch's config
    h.final_softcap = float(get_num(ctx, a + ".final_logit_softcapping").value_or(0.0));
    h.n_swa = int64_t(get_num(ctx, a + ".attention.sliding_window").value_or(0.0));
    if (h.n_swa > 0) {
      GAMMA_ASSIGN_OR_RETURN(h.swa_layers, swa_pattern(ctx, a + ".attention.sliding_window_pattern", h.n_layer, 6));
      h.rope_freq_base_swa = float(get_num(ctx, a + ".rope.freq_base_swa").value_or(10000.0));
    }
  }
  h.has_rope_freqs = m.find("rope_freqs.weight") >= 0;
  h.tied_embeddings = m.tied_embeddings();

  const int64_t te = m.find("token_embd.weight");
  if (te < 0) return Status::errorf("{}: no token_embd.weight", m.path());
  const auto& emb = m.tensors()[size_t(te)];
  if (emb.shape.size() != 2 || emb.shape[0] != h.n_embd)
    return Status::errorf("{}: token_embd.weight has width {} but embedding_length is {}", m.path(),
                          emb.row_width(), h.n_embd);
  h.n_vocab = emb.shape[1];
  return h;
}

}  // namespace gm
