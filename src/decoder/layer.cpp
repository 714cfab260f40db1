#include "decoder/layer.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gguf_model/model.h"

namespace gm {

std::string linear_kind_name(const HParams& hp, int k) {
  if (k >= kShexpGate) return kSharedExpertKinds[k - kShexpGate];
  return std::string(kLinearKinds[k]) + (hp.moe() && k >= kFfnGate ? "_exps" : "");
}

bool has_kind(const HParams& hp, int k) { return k < kShexpGate || hp.shexp(); }

void set_compute_threads(int n) {
  if (n <= 0) return;
  // Looked up at run time: the BLAS behind LibTorch is a system choice (alternatives).
  using SetFn = void (*)(int);
  if (auto f = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
  const char* e = std::getenv("GAMMA_TORCH_INTRA_THREADS");
  at::set_num_threads(e && std::atoi(e) > 0 ? std::atoi(e) : 1);
}

namespace {

// ggml_rope_cache_init: theta starts at the position and is multiplied by theta_scale per
// pair, in float. Recomputing theta with pow() in double would differ by up to ~1e-3 rad at
// long positions, which is far above the 1e-4 match wanted, so copy ggml exactly.
std::pair<at::Tensor, at::Tensor> rope_cache(const HParams& hp, int64_t n_pos, float base, float scale,
                                             const std::vector<float>& freq_factors) {
  const int64_t half = hp.head_dim / 2;
  const float theta_scale = powf(base, -2.0f / float(hp.head_dim));
  std::vector<float> c(static_cast<size_t>(n_pos * half)), s(size_t(n_pos * half));
  for (int64_t p = 0; p < n_pos; ++p) {
    float theta = float(p);
    for (int64_t i = 0; i < half; ++i) {
      const float ff = freq_factors.empty() ? 1.0f : freq_factors[size_t(i)];
      const float t = scale * (theta / ff);  // rope_yarn with ext_factor 0
      c[size_t(p * half + i)] = cosf(t) * hp.rope_attn_factor;
      s[size_t(p * half + i)] = sinf(t) * hp.rope_attn_factor;
      theta *= theta_scale;
    }
  }
  auto opts = at::TensorOptions().dtype(at::kFloat);
  return {at::from_blob(c.data(), {n_pos, half}, opts).clone(), at::from_blob(s.data(), {n_pos, half}, opts).clone()};
}

}  // namespace

Positional make_positional(const HParams& hp, int64_t n_pos, const std::vector<float>& freq_factors) {
  Positional pos;
  pos.n_pos = n_pos;
  std::tie(pos.cos, pos.sin) = rope_cache(hp, n_pos, hp.rope_freq_base, hp.rope_freq_scale, freq_factors);
  auto opts = at::TensorOptions().dtype(at::kFloat);
  const float inf = std::numeric_limits<float>::infinity();
  pos.mask = at::full({n_pos, n_pos}, -inf, opts).triu(1);
  if (hp.n_swa > 0) {  // llama_hparams::is_masked_swa, STANDARD: key p0 hidden from query p1 when p1 - p0 >= n_swa
    std::tie(pos.cos_swa, pos.sin_swa) =
        rope_cache(hp, n_pos, hp.rope_freq_base_swa, hp.rope_freq_scale_swa, freq_factors);
    pos.mask_swa = pos.mask + at::full({n_pos, n_pos}, -inf, opts).tril(-hp.n_swa);
  }
  return pos;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, float eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

namespace {

// x: [B, T, H, D]; cos/sin: [T, D/2].
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RopeType type) {
  const int64_t T = x.size(1), D = x.size(3);
  auto c = cos.narrow(0, 0, T).view({T, 1, D / 2});
  auto s = sin.narrow(0, 0, T).view({T, 1, D / 2});
  if (type == RopeType::kNorm) {  // pairs (2i, 2i+1)
    auto xv = x.view({x.size(0), T, x.size(2), D / 2, 2});
    auto x0 = xv.select(-1, 0), x1 = xv.select(-1, 1);
    return at::stack({x0 * c - x1 * s, x0 * s + x1 * c}, -1).view(x.sizes());
  }
  auto x0 = x.narrow(-1, 0, D / 2), x1 = x.narrow(-1, D / 2, D / 2);  // NEOX: pairs (i, i+D/2)
  return at::cat({x0 * c - x1 * s, x0 * s + x1 * c}, -1);
}

}  // namespace

at::Tensor attention(const HParams& hp, const LayerParams& lp, const Positional& pos, at::Tensor q, at::Tensor k,
                     const at::Tensor& v) {
  const int64_t B = q.size(0), T = q.size(1);
  const int64_t H = hp.n_head, Hkv = hp.n_head_kv, D = hp.head_dim, rep = H / Hkv;
  q = q.view({B, T, H, D});
  k = k.view({B, T, Hkv, D});
  auto vv = v.view({B, T, Hkv, D});
  if (hp.qk_norm) {
    q = rms_norm(q, lp.q_norm, hp.rms_eps);
    k = rms_norm(k, lp.k_norm, hp.rms_eps);
  }
  const bool swa = lp.swa && pos.mask_swa.defined();
  const at::Tensor& cos = swa ? pos.cos_swa : pos.cos;
  const at::Tensor& sin = swa ? pos.sin_swa : pos.sin;
  q = rope(q, cos, sin, hp.rope_type);
  k = rope(k, cos, sin, hp.rope_type);
  // GQA without copying K/V: query head h uses kv head h / rep (ggml's broadcast), so group
  // the rep query heads of one kv head into the row dimension of one matmul.
  auto qg = q.permute({0, 2, 1, 3}).reshape({B, Hkv, rep * T, D});
  auto kt = k.permute({0, 2, 3, 1});  // [B, Hkv, D, T]
  auto scores = at::matmul(qg, kt).view({B, Hkv, rep, T, T}) * hp.kq_scale +
                (swa ? pos.mask_swa : pos.mask).narrow(0, 0, T).narrow(1, 0, T);
  auto probs = at::softmax(scores, -1).view({B, Hkv, rep * T, T});
  auto o = at::matmul(probs, vv.permute({0, 2, 1, 3}));  // [B, Hkv, rep*T, D]
  return o.view({B, H, T, D}).permute({0, 2, 1, 3}).reshape({B, T, H * D});
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

at::Tensor ffn_act(const HParams& hp, const at::Tensor& gate, const at::Tensor& up) {
  if (hp.ffn_act == FfnAct::kSilu) return at::silu(gate) * up;
  // ggml_vec_geglu_f32 (GGML_GELU_FP16): the GELU of the gate rounded to F16, looked up in an F16
  // table, except outside [-10, 10] (0 below, the identity above). Forward exactly that; the
  // gradient of the smooth tanh GELU (the table's step function has none).
  auto smooth = at::gelu(gate, "tanh");
  at::Tensor table;
  {
    at::NoGradGuard ng;
    auto g16 = gate.to(at::kHalf).to(at::kFloat);
    table = at::gelu(g16, "tanh").to(at::kHalf).to(at::kFloat);
    table = at::where(gate <= -10.0f, at::zeros_like(gate), at::where(gate >= 10.0f, gate, table));
  }
  return (smooth + (table - smooth).detach()) * up;
}

at::Tensor attn_residual(const HParams& hp, const LayerParams& lp, const at::Tensor& x, const at::Tensor& o) {
  return hp.post_norms ? x + rms_norm(o, lp.attn_post_norm, hp.rms_eps) : x + o;
}

at::Tensor ffn_residual(const HParams& hp, const LayerParams& lp, const at::Tensor& h2, const at::Tensor& f) {
  return hp.post_norms ? h2 + rms_norm(f, lp.ffn_post_norm, hp.rms_eps) : h2 + f;
}

at::Tensor head_logits(const HParams& hp, const at::Tensor& h, const at::Tensor& out_norm, const at::Tensor& head,
                       const at::Tensor& bias) {
  auto out = at::linear(rms_norm(h, out_norm.view({hp.n_embd}), hp.rms_eps), head);
  if (bias.defined()) out = out + bias.view({hp.n_vocab});
  if (hp.final_softcap > 0) out = at::tanh(out / hp.final_softcap) * hp.final_softcap;
  return out;
}

namespace {

// build_moe_ffn with softmax gating: probs = softmax(router f); the top n_expert_used of each
// token (ggml_argsort_top_k); their probs renormalized (sum clamped at 2^-14) and scaled; each
// expert's SwiGLU on the tokens routed to it, weighted, summed. Sparse: an expert computes only
// its tokens, as mul_mat_id does.
at::Tensor moe_ffn(const HParams& hp, const LayerParams& lp, const at::Tensor& gate, const at::Tensor& up,
                   const at::Tensor& down, const at::Tensor& f) {
  const auto shape = f.sizes().vec();
  auto x = f.reshape({-1, hp.n_embd});  // [N, n_embd]
  auto probs = at::softmax(at::linear(x, lp.router), -1);  // [N, n_expert]
  auto top = probs.topk(hp.n_expert_used, -1);
  at::Tensor wsel = std::get<0>(top), sel = std::get<1>(top);  // [N, used]
  if (hp.expert_norm) wsel = wsel / wsel.sum(-1, /*keepdim=*/true).clamp_min(6.103515625e-5);
  if (hp.expert_scale != 0.0f && hp.expert_scale != 1.0f) wsel = wsel * hp.expert_scale;
  auto out = at::zeros_like(x);
  for (int64_t e = 0; e < hp.n_expert; ++e) {
    auto hit = (sel == e).nonzero();  // [n_e, 2]: (token, slot)
    if (hit.size(0) == 0) continue;
    auto tok = hit.select(1, 0), slot = hit.select(1, 1);
    auto xe = x.index_select(0, tok);
    auto a = ffn_act(hp, at::linear(xe, gate.select(0, e)), at::linear(xe, up.select(0, e)));
    auto ye = at::linear(a, down.select(0, e)) * wsel.index({tok, slot}).unsqueeze(1);
    out = out.index_add(0, tok, ye);
  }
  return out.view(shape);
}

}  // namespace

at::Tensor ffn(const HParams& hp, const LayerParams& lp, const std::array<at::Tensor, kNumLinear>& w, const at::Tensor& f) {
  if (!hp.moe())
    return linear(ffn_act(hp, linear(f, w[kFfnGate], lp.bias[kFfnGate]), linear(f, w[kFfnUp], lp.bias[kFfnUp])),
                  w[kFfnDown], lp.bias[kFfnDown]);
  auto out = moe_ffn(hp, lp, w[kFfnGate], w[kFfnUp], w[kFfnDown], f);
  if (!hp.shexp()) return out;
  // qwen2moe's shared expert: a SwiGLU every token takes, gated by sigmoid(f . ffn_gate_inp_shexp)
  // (ggml computes the sigmoid as silu(g) / g).
  auto g = at::sigmoid(at::matmul(f, lp.shexp_gate).unsqueeze(-1));
  return out + at::linear(ffn_act(hp, at::linear(f, w[kShexpGate]), at::linear(f, w[kShexpUp])), w[kShexpDown]) * g;
}

at::Tensor layer_forward(const HParams& hp, const LayerParams& lp, const std::array<at::Tensor, kNumLinear>& w,
                         const Positional& pos, const at::Tensor& x) {
  auto h = rms_norm(x, lp.attn_norm, hp.rms_eps);
  auto o = attention(hp, lp, pos, linear(h, w[kAttnQ], lp.bias[kAttnQ]), linear(h, w[kAttnK], lp.bias[kAttnK]),
                     linear(h, w[kAttnV], lp.bias[kAttnV]));
  auto h2 = attn_residual(hp, lp, x, linear(o, w[kAttnOut], lp.bias[kAttnOut]));
  auto f = rms_norm(h2, lp.ffn_norm, hp.rms_eps);
  return ffn_residual(hp, lp, h2, ffn(hp, lp, w, f));
}

Result<at::Tensor> read_tensor(const Model& m, const std::string& name) {
  const int64_t i = m.find(name);
  if (i < 0) return Status::errorf("{}: tensor {} not found", m.path(), name);
  const auto& t = m.tensors()[size_t(i)];
  GAMMA_ASSIGN_OR_RETURN(auto data, m.read_f32(t));
  std::vector<int64_t> sizes(t.shape.rbegin(), t.shape.rend());
  return at::from_blob(data.data(), sizes, at::TensorOptions().dtype(at::kFloat)).clone();
}

TorchDecoder::~TorchDecoder() = default;

Result<std::unique_ptr<TorchDecoder>> TorchDecoder::open(const std::string& path) {
  std::unique_ptr<TorchDecoder> tm(new TorchDecoder());
  GAMMA_ASSIGN_OR_RETURN(tm->model_, Model::open(path));
  GAMMA_ASSIGN_OR_RETURN(tm->hp_, read_hparams(*tm->model_));
  if (tm->hp_.has_rope_freqs) {
    GAMMA_ASSIGN_OR_RETURN(tm->rope_freqs_, tm->model_->read_f32(tm->model_->tensor("rope_freqs.weight")));
    if (int64_t(tm->rope_freqs_.size()) < tm->hp_.head_dim / 2)
      return Status::errorf("{}: rope_freqs.weight has {} values, expected {}", path, tm->rope_freqs_.size(),
                            tm->hp_.head_dim / 2);
  }
  return tm;
}

Result<LayerParams> TorchDecoder::layer_params(int il) const {
  const Model& m = *model_;
  const std::string p = "blk." + std::to_string(il) + ".";
  LayerParams lp;
  auto need = [&](const std::string& n, int64_t size, at::Tensor& dst) -> Status {
    GAMMA_ASSIGN_OR_RETURN(dst, read_tensor(m, p + n));
    if (dst.numel() != size) return Status::errorf("{}: {}{} has {} values, expected {}", m.path(), p, n, dst.numel(), size);
    dst = dst.view({size});
    return Status::ok();
  };
  GAMMA_RETURN_IF_ERROR(need("attn_norm.weight", hp_.n_embd, lp.attn_norm));
  GAMMA_RETURN_IF_ERROR(need("ffn_norm.weight", hp_.n_embd, lp.ffn_norm));
  if (hp_.qk_norm) {
    GAMMA_RETURN_IF_ERROR(need("attn_q_norm.weight", hp_.head_dim, lp.q_norm));
    GAMMA_RETURN_IF_ERROR(need("attn_k_norm.weight", hp_.head_dim, lp.k_norm));
  }
  if (hp_.post_norms) {
    GAMMA_RETURN_IF_ERROR(need("post_attention_norm.weight", hp_.n_embd, lp.attn_post_norm));
    GAMMA_RETURN_IF_ERROR(need("post_ffw_norm.weight", hp_.n_embd, lp.ffn_post_norm));
  }
  lp.swa = hp_.is_swa(il);
  if (hp_.moe()) {
    GAMMA_RETURN_IF_ERROR(need("ffn_gate_inp.weight", hp_.n_expert * hp_.n_embd, lp.router));
    lp.router = lp.router.view({hp_.n_expert, hp_.n_embd});
  }
  if (hp_.shexp()) GAMMA_RETURN_IF_ERROR(need("ffn_gate_inp_shexp.weight", hp_.n_embd, lp.shexp_gate));
  // Biases: qwen2's (and qwen2moe's) q/k/v; the FFN's of a dense layer if a model has them.
  const int64_t out[7] = {hp_.n_embd_q(), hp_.n_embd_kv(), hp_.n_embd_kv(), hp_.n_embd, hp_.n_ff, hp_.n_ff, hp_.n_embd};
  for (int k = 0; k < 7; ++k)
    if (m.find(p + kLinearKinds[k] + ".bias") >= 0)
      GAMMA_RETURN_IF_ERROR(need(std::string(kLinearKinds[k]) + ".bias", out[k], lp.bias[size_t(k)]));
  return lp;
}

Result<std::array<at::Tensor, kNumLinear>> TorchDecoder::layer_weights(int il) const {
  std::array<at::Tensor, kNumLinear> w;
  const int64_t ff = hp_.moe() ? hp_.n_ff_exp : hp_.n_ff, fs = hp_.n_ff_shexp;
  const int64_t out[kNumLinear] = {hp_.n_embd_q(), hp_.n_embd_kv(), hp_.n_embd_kv(), hp_.n_embd, ff, ff, hp_.n_embd,
                                   fs, fs, hp_.n_embd};
  const int64_t in[kNumLinear] = {hp_.n_embd, hp_.n_embd, hp_.n_embd, hp_.n_embd_q(), hp_.n_embd, hp_.n_embd, ff,
                                  hp_.n_embd, hp_.n_embd, fs};
  for (int k = 0; k < kNumLinear; ++k) {
    if (!has_kind(hp_, k)) continue;
    const std::string name = "blk." + std::to_string(il) + "." + linear_kind_name(hp_, k) + ".weight";
    GAMMA_ASSIGN_OR_RETURN(w[size_t(k)], read_tensor(*model_, name));
    std::vector<int64_t> want = {out[k], in[k]};
    if (hp_.moe() && k >= kFfnGate && k <= kFfnDown) want.insert(want.begin(), hp_.n_expert);
    if (w[size_t(k)].sizes().vec() != want)
      return Status::errorf("{}: {} has shape {}, expected {}", model_->path(), name,
                            fmt::format("{}", fmt::join(w[size_t(k)].sizes().vec(), "x")), fmt::format("{}", fmt::join(want, "x")));
  }
  return w;
}

Result<at::Tensor> TorchDecoder::embed(const std::vector<int32_t>& tokens) const {
  GAMMA_ASSIGN_OR_RETURN(auto emb, read_tensor(*model_, "token_embd.weight"));
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  for (int64_t t : ids)
    if (t < 0 || t >= hp_.n_vocab) return Status::errorf("token id {} outside the vocabulary ({})", t, hp_.n_vocab);
  auto idx = at::from_blob(ids.data(), {int64_t(ids.size())}, at::TensorOptions().dtype(at::kLong)).clone();
  auto e = emb.index_select(0, idx);
  return hp_.embd_scale == 1.0f ? e : e * hp_.embd_scale;
}

Result<at::Tensor> TorchDecoder::logits(const at::Tensor& h) const {
  GAMMA_ASSIGN_OR_RETURN(auto norm, read_tensor(*model_, "output_norm.weight"));
  GAMMA_ASSIGN_OR_RETURN(auto head, read_tensor(*model_, hp_.tied_embeddings ? "token_embd.weight" : "output.weight"));
  at::Tensor bias;
  if (model_->find("output.bias") >= 0) {
    GAMMA_ASSIGN_OR_RETURN(bias, read_tensor(*model_, "output.bias"));
  }
  return head_logits(hp_, h, norm, head, bias);
}

}  // namespace gm
