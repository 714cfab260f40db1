#include "decoder/layer.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "gguf_model/model.h"

namespace gm {

int linear_kind_index(const std::string& kind) {
  for (int k = 0; k < kNumLinear; ++k)
    if (kind == kLinearKinds[k]) return k;
  return -1;
}

void set_compute_threads(int n) {
  if (n <= 0) return;
  // Looked up at run time: the BLAS behind LibTorch is a system choice (alternatives).
  using SetFn = void (*)(int);
  if (auto f = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
  const char* e = std::getenv("GAMMA_TORCH_INTRA_THREADS");
  at::set_num_threads(e && std::atoi(e) > 0 ? std::atoi(e) : 1);
}

Positional make_positional(const HParams& hp, int64_t n_pos, const std::vector<float>& freq_factors) {
  // ggml_rope_cache_init: theta starts at the position and is multiplied by theta_scale
  // per pair, in float. Recomputing theta with pow() in double would differ by up to ~1e-3
  // rad at long positions, which is far above the 1e-4 match wanted, so copy ggml exactly.
  const int64_t half = hp.head_dim / 2;
  const float theta_scale = powf(hp.rope_freq_base, -2.0f / float(hp.head_dim));
  std::vector<float> c(static_cast<size_t>(n_pos * half)), s(size_t(n_pos * half));
  for (int64_t p = 0; p < n_pos; ++p) {
    float theta = float(p);
    for (int64_t i = 0; i < half; ++i) {
      const float ff = freq_factors.empty() ? 1.0f : freq_factors[size_t(i)];
      const float t = hp.rope_freq_scale * (theta / ff);  // rope_yarn with ext_factor 0
      c[size_t(p * half + i)] = cosf(t) * hp.rope_attn_factor;
      s[size_t(p * half + i)] = sinf(t) * hp.rope_attn_factor;
      theta *= theta_scale;
    }
  }
  Positional pos;
  pos.n_pos = n_pos;
  auto opts = at::TensorOptions().dtype(at::kFloat);
  pos.cos = at::from_blob(c.data(), {n_pos, half}, opts).clone();
  pos.sin = at::from_blob(s.data(), {n_pos, half}, opts).clone();
  pos.mask = at::full({n_pos, n_pos}, -std::numeric_limits<float>::infinity(), opts).triu(1);
  return pos;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, float eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

namespace {

// x: [B, T, H, D]; cos/sin: [T, D/2].
at::Tensor rope(const at::Tensor& x, const Positional& pos, RopeType type) {
  const int64_t T = x.size(1), D = x.size(3);
  auto c = pos.cos.narrow(0, 0, T).view({T, 1, D / 2});
  auto s = pos.sin.narrow(0, 0, T).view({T, 1, D / 2});
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
  q = rope(q, pos, hp.rope_type);
  k = rope(k, pos, hp.rope_type);
  // GQA without copying K/V: query head h uses kv head h / rep (ggml's broadcast), so group
  // the rep query heads of one kv head into the row dimension of one matmul.
  auto qg = q.permute({0, 2, 1, 3}).reshape({B, Hkv, rep * T, D});
  auto kt = k.permute({0, 2, 3, 1});  // [B, Hkv, D, T]
  auto scores = at::matmul(qg, kt).view({B, Hkv, rep, T, T}) * hp.kq_scale + pos.mask.narrow(0, 0, T).narrow(1, 0, T);
  auto probs = at::softmax(scores, -1).view({B, Hkv, rep * T, T});
  auto o = at::matmul(probs, vv.permute({0, 2, 1, 3}));  // [B, Hkv, rep*T, D]
  return o.view({B, H, T, D}).permute({0, 2, 1, 3}).reshape({B, T, H * D});
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

at::Tensor layer_forward(const HParams& hp, const LayerParams& lp, const std::array<at::Tensor, kNumLinear>& w,
                         const Positional& pos, const at::Tensor& x) {
  auto h = rms_norm(x, lp.attn_norm, hp.rms_eps);
  auto o = attention(hp, lp, pos, linear(h, w[kAttnQ], lp.bias[kAttnQ]), linear(h, w[kAttnK], lp.bias[kAttnK]),
                     linear(h, w[kAttnV], lp.bias[kAttnV]));
  auto h2 = x + linear(o, w[kAttnOut], lp.bias[kAttnOut]);
  auto f = rms_norm(h2, lp.ffn_norm, hp.rms_eps);
  auto g = linear(f, w[kFfnGate], lp.bias[kFfnGate]);
  auto u = linear(f, w[kFfnUp], lp.bias[kFfnUp]);
  return h2 + linear(at::silu(g) * u, w[kFfnDown], lp.bias[kFfnDown]);
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
  const int64_t out[kNumLinear] = {hp_.n_embd_q(), hp_.n_embd_kv(), hp_.n_embd_kv(), hp_.n_embd,
                                   hp_.n_ff, hp_.n_ff, hp_.n_embd};
  for (int k = 0; k < kNumLinear; ++k)
    if (m.find(p + kLinearKinds[k] + ".bias") >= 0)
      GAMMA_RETURN_IF_ERROR(need(std::string(kLinearKinds[k]) + ".bias", out[k], lp.bias[size_t(k)]));
  return lp;
}

Result<std::array<at::Tensor, kNumLinear>> TorchDecoder::layer_weights(int il) const {
  std::array<at::Tensor, kNumLinear> w;
  const int64_t out[kNumLinear] = {hp_.n_embd_q(), hp_.n_embd_kv(), hp_.n_embd_kv(), hp_.n_embd,
                                   hp_.n_ff, hp_.n_ff, hp_.n_embd};
  const int64_t in[kNumLinear] = {hp_.n_embd, hp_.n_embd, hp_.n_embd, hp_.n_embd_q(),
                                  hp_.n_embd, hp_.n_embd, hp_.n_ff};
  for (int k = 0; k < kNumLinear; ++k) {
    const std::string name = "blk." + std::to_string(il) + "." + kLinearKinds[k] + ".weight";
    GAMMA_ASSIGN_OR_RETURN(w[size_t(k)], read_tensor(*model_, name));
    if (w[size_t(k)].dim() != 2 || w[size_t(k)].size(0) != out[k] || w[size_t(k)].size(1) != in[k])
      return Status::errorf("{}: {} has shape {}x{}, expected {}x{}", model_->path(), name, w[size_t(k)].size(0),
                            w[size_t(k)].dim() > 1 ? w[size_t(k)].size(1) : 1, out[k], in[k]);
  }
  return w;
}

Result<at::Tensor> TorchDecoder::embed(const std::vector<int32_t>& tokens) const {
  GAMMA_ASSIGN_OR_RETURN(auto emb, read_tensor(*model_, "token_embd.weight"));
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  for (int64_t t : ids)
    if (t < 0 || t >= hp_.n_vocab) return Status::errorf("token id {} outside the vocabulary ({})", t, hp_.n_vocab);
  auto idx = at::from_blob(ids.data(), {int64_t(ids.size())}, at::TensorOptions().dtype(at::kLong)).clone();
  return emb.index_select(0, idx);
}

Result<at::Tensor> TorchDecoder::logits(const at::Tensor& h) const {
  GAMMA_ASSIGN_OR_RETURN(auto norm, read_tensor(*model_, "output_norm.weight"));
  GAMMA_ASSIGN_OR_RETURN(auto head, read_tensor(*model_, hp_.tied_embeddings ? "token_embd.weight" : "output.weight"));
  auto out = at::linear(rms_norm(h, norm.view({hp_.n_embd}), hp_.rms_eps), head);
  if (model_->find("output.bias") >= 0) {
    GAMMA_ASSIGN_OR_RETURN(auto b, read_tensor(*model_, "output.bias"));
    out = out + b.view({hp_.n_vocab});
  }
  return out;
}

}  // namespace gm
