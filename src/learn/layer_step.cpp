#include "learn/layer_step.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <map>

#include "gguf_model/model.h"
#include "decoder/layer.h"

namespace gm {

static_assert(kLayerKinds == kNumLinear, "learn's layer kinds are the decoder's");

namespace {
// A layer's linear weights as used (mixed or the teacher's) and the candidates they mix.
struct LayerWeights {
  std::array<at::Tensor, kNumLinear> w;
  std::array<std::vector<at::Tensor>, kNumLinear> cands;
};

// A visit (see begin_visit): the teacher's tensors of its sequences and the cached outputs.
struct Visit {
  at::Tensor x, y, h2;                      // [V, T, n_embd]
  std::array<at::Tensor, kNumLinear> out;   // cached kinds: [K, V*T, n_out], no bias
};

at::Tensor f32_tensor(const float* p, at::IntArrayRef sizes) {
  return at::from_blob(const_cast<float*>(p), sizes, at::TensorOptions().dtype(at::kFloat));
}

// Per-token weights of the layer loss against target t ([..., n_embd]). Qwen's first token
// carries ~3e4 times the others' mean square from layer 2 to 26 (results/iq_qwen/token_energy.md):
// plain MSE is then mostly that token's error, which the norms downstream scale away.
// rel: 1 / mean_e(t^2), every token's error relative to its own mean square (what the next
// RMSNorm divides by). clip: 1 for every token up to kClip times the median token's mean
// square, and its error brought to that scale above it: the loss stays plain MSE (whose scale
// across layers is the residual stream's, where an error persists) except for outlier tokens.
constexpr double kClip = 10;
at::Tensor token_weights(const at::Tensor& t, bool clip) {
  auto ms = t.pow(2).mean(-1, true);
  if (!clip) return 1.0 / (ms + 1e-12);
  const auto cap = kClip * ms.median();
  return at::clamp_max(cap / (ms + 1e-12), 1.0);
}

// mean(w (a - t)^2), w undefined: plain MSE.
at::Tensor sq_err(const at::Tensor& a, const at::Tensor& t, const at::Tensor& w) {
  return w.defined() ? ((a - t).pow(2) * w).mean() : (a - t).pow(2).mean();
}
}  // namespace

struct LayerStep::Impl {
  std::unique_ptr<TorchDecoder> model;
  std::vector<LayerParams> params;
  Positional pos;
  int seq_len = 0;
  std::map<std::pair<int, int>, at::Tensor> teacher_w;  // modules without pool candidates
  at::Tensor out_norm, head, head_bias;  // loaded on the first head_kl
  std::map<int, Visit> visits;
  TokenWeights token_weights_mode = TokenWeights::kNone;
  // The per-token weights of the loss against target t (undefined: plain MSE).
  at::Tensor loss_weights(const at::Tensor& t) const {
    if (token_weights_mode == TokenWeights::kNone) return at::Tensor();
    return token_weights(t, token_weights_mode == TokenWeights::kClip);
  }

  std::array<int64_t, kNumLinear> n_out() const {
    const HParams& hp = model->hparams();
    const int64_t ff = hp.moe() ? hp.n_ff_exp : hp.n_ff, fs = hp.n_ff_shexp;
    return {hp.n_embd_q(), hp.n_embd_kv(), hp.n_embd_kv(), hp.n_embd, ff, ff, hp.n_embd, fs, fs, hp.n_embd};
  }
  std::array<int64_t, kNumLinear> n_in() const {
    const HParams& hp = model->hparams();
    const int64_t ff = hp.moe() ? hp.n_ff_exp : hp.n_ff, fs = hp.n_ff_shexp;
    return {hp.n_embd, hp.n_embd, hp.n_embd, hp.n_embd_q(), hp.n_embd, hp.n_embd, ff, hp.n_embd, hp.n_embd, fs};
  }
  // Kind k's weight in torch order: [out, in], a MoE layer's experts [n_expert, out, in].
  std::vector<int64_t> shape(int k) const {
    const HParams& hp = model->hparams();
    std::vector<int64_t> s = {n_out()[size_t(k)], n_in()[size_t(k)]};
    if (hp.moe() && k >= kFfnGate && k <= kFfnDown) s.insert(s.begin(), hp.n_expert);
    return s;
  }
  // The teacher's weight of layer il, kind k, a module without pool candidates (kept).
  Result<at::Tensor> teacher_weight(int il, int k, const LayerMix& mods);

  // The visit of layer il, checked to hold rows [r0, r0 + n).
  Result<const Visit*> visit_rows(int il, int r0, int n) const {
    auto it = visits.find(il);
    if (it == visits.end()) return Status::errorf("layer {} is not being visited", il);
    if (r0 < 0 || n < 1 || r0 + n > it->second.x.size(0)) return Status::errorf("rows {}..{} outside the visit", r0, r0 + n);
    return &it->second;
  }
  // Layer il's linear weights: W_mix = sum_b p_b W_b (requiring grad when `grad`), or the
  // teacher's for modules without candidates; and the candidates as tensors.
  // kinds: which kinds to build (a bit mask, default all); the others stay undefined.
  Result<LayerWeights> weights(int il, LayerMix& mods, bool grad, uint16_t kinds = (1u << kNumLinear) - 1);
};

LayerStep::LayerStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LayerStep::~LayerStep() = default;
const HParams& LayerStep::hparams() const { return impl_->model->hparams(); }

Result<std::unique_ptr<LayerStep>> LayerStep::create(const std::string& teacher_path, int seq_len, int n_threads) {
  set_compute_threads(n_threads);
  auto impl = std::make_unique<Impl>();
  GAMMA_ASSIGN_OR_RETURN(impl->model, TorchDecoder::open(teacher_path));
  const HParams& hp = impl->model->hparams();
  for (int il = 0; il < hp.n_layer; ++il) {
    GAMMA_ASSIGN_OR_RETURN(auto lp, impl->model->layer_params(il));
    impl->params.push_back(std::move(lp));
  }
  impl->pos = make_positional(hp, seq_len, impl->model->rope_freqs());
  impl->seq_len = seq_len;
  return std::unique_ptr<LayerStep>(new LayerStep(std::move(impl)));
}

Result<at::Tensor> LayerStep::Impl::teacher_weight(int il, int k, const LayerMix& mods) {
  auto key = std::make_pair(il, k);
  if (!teacher_w.count(key)) {
    GAMMA_ASSIGN_OR_RETURN(auto all, model->layer_weights(il));
    for (int j = 0; j < kNumLinear; ++j)
      if (mods[size_t(j)].cands.empty()) teacher_w[{il, j}] = all[size_t(j)];
  }
  return teacher_w[key];
}

Result<LayerWeights> LayerStep::Impl::weights(int il, LayerMix& mods, bool grad, uint16_t kinds) {
  LayerWeights r;
  auto& w = r.w;
  auto& cands = r.cands;
  const HParams& hp = model->hparams();
  if (il < 0 || il >= hp.n_layer) return Status::errorf("no layer {}", il);
  at::NoGradGuard no_grad;
  for (int k = 0; k < kNumLinear; ++k) {
    if (!(kinds >> k & 1)) continue;
    const std::vector<int64_t> sh = shape(k);
    auto& m = mods[size_t(k)];
    if (m.cands.empty()) {  // not in the pool: the teacher's weight, no gradient
      GAMMA_ASSIGN_OR_RETURN(w[size_t(k)], teacher_weight(il, k, mods));
      continue;
    }
    if (m.p.size() != m.cands.size()) return Status::error("mixing weights and candidates differ in number");
    for (size_t b = 0; b < m.cands.size(); ++b) cands[size_t(k)].push_back(f32_tensor(m.cands[b], sh));
    // A one-hot p (--estimator st) runs the sampled candidate itself: no mixture to build.
    const auto one = std::find(m.p.begin(), m.p.end(), 1.0);
    if (one != m.p.end() && std::count(m.p.begin(), m.p.end(), 0.0) == std::ptrdiff_t(m.p.size()) - 1) {
      w[size_t(k)] = cands[size_t(k)][size_t(one - m.p.begin())].detach();
    } else {
      at::Tensor mix = at::zeros(sh, at::TensorOptions().dtype(at::kFloat));
      for (size_t b = 0; b < m.cands.size(); ++b)
        if (m.p[b] != 0) mix.add_(cands[size_t(k)][b], m.p[b]);
      w[size_t(k)] = mix;
    }
    if (grad) w[size_t(k)].requires_grad_(true);
  }
  return r;
}

namespace {
// dL/dp_b = <dL/dW_mix, W_b>, accumulated into each module's grad.
void accumulate_grads(LayerMix& mods, const LayerWeights& lw) {
  const auto& w = lw.w;
  const auto& cands = lw.cands;
  at::NoGradGuard no_grad;
  for (int k = 0; k < kNumLinear; ++k) {
    auto& m = mods[size_t(k)];
    if (m.cands.empty() || !w[size_t(k)].defined()) continue;
    if (m.grad->size() != m.cands.size()) m.grad->assign(m.cands.size(), 0.0);
    if (!w[size_t(k)].grad().defined()) continue;  // no path to the loss: zero gradient
    auto g = w[size_t(k)].grad().view({-1});
    for (size_t b = 0; b < m.cands.size(); ++b) (*m.grad)[b] += at::dot(g, cands[size_t(k)][b].view({-1})).item<double>();
  }
}
}  // namespace

Result<double> LayerStep::run(int il, LayerMix& mods, const float* x, const float* y, int n_seq,
                              double scale, bool backward) {
  Impl& im = *impl_;
  const HParams& hp = im.model->hparams();
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  GAMMA_ASSIGN_OR_RETURN(auto lw, im.weights(il, mods, backward));
  const int64_t T = im.seq_len;
  std::unique_ptr<at::NoGradGuard> no_grad_fwd;
  if (!backward) no_grad_fwd = std::make_unique<at::NoGradGuard>();
  auto xt = at::from_blob(const_cast<float*>(x), {n_seq, T, hp.n_embd}, f32);
  auto yt = at::from_blob(const_cast<float*>(y), {n_seq, T, hp.n_embd}, f32);
  auto out_t = layer_forward(hp, im.params[size_t(il)], lw.w, im.pos, xt);
  auto mse = sq_err(out_t, yt, im.loss_weights(yt));
  if (!backward) return mse.item<double>();
  (mse * scale).backward();
  accumulate_grads(mods, lw);
  return mse.item<double>();
}

bool LayerStep::cached_kind(int k) const {
  return k == kAttnQ || k == kAttnK || k == kAttnV || (!impl_->model->hparams().moe() && (k == kFfnGate || k == kFfnUp));
}

Status LayerStep::begin_visit(int il, const LayerMix& mods, const float* x, const float* y,
                              int n_seq) {
  Impl& im = *impl_;
  const HParams& hp = im.model->hparams();
  if (il < 0 || il >= hp.n_layer) return Status::errorf("no layer {}", il);
  const LayerParams& lp = im.params[size_t(il)];
  const auto out = im.n_out(), in = im.n_in();
  const int64_t T = im.seq_len, N = int64_t(n_seq) * T;
  at::NoGradGuard no_grad;
  Visit v;
  v.x = f32_tensor(x, {n_seq, T, hp.n_embd}).clone();
  v.y = f32_tensor(y, {n_seq, T, hp.n_embd}).clone();
  // The teacher's attention block gives the FFN's input (h2) and the attention's target.
  GAMMA_ASSIGN_OR_RETURN(auto tw, im.model->layer_weights(il));
  auto h = rms_norm(v.x, lp.attn_norm, hp.rms_eps);
  auto o = attention(hp, lp, im.pos, linear(h, tw[kAttnQ], lp.bias[kAttnQ]), linear(h, tw[kAttnK], lp.bias[kAttnK]),
                     linear(h, tw[kAttnV], lp.bias[kAttnV]));
  v.h2 = attn_residual(hp, lp, v.x, linear(o, tw[kAttnOut], lp.bias[kAttnOut]));
  auto f = rms_norm(v.h2, lp.ffn_norm, hp.rms_eps).view({N, hp.n_embd});
  h = h.view({N, hp.n_embd});
  for (int k = 0; k < kNumLinear; ++k) {
    if (!cached_kind(k)) continue;
    const at::Tensor& input = k >= kFfnGate ? f : h;
    const auto& m = mods[size_t(k)];
    if (m.cands.empty()) {  // the teacher's output, one fixed "candidate"
      v.out[size_t(k)] = at::mm(input, tw[size_t(k)].t()).unsqueeze(0);
      continue;
    }
    v.out[size_t(k)] = at::empty({int64_t(m.cands.size()), N, out[k]}, at::TensorOptions().dtype(at::kFloat));
    for (size_t b = 0; b < m.cands.size(); ++b) {
      auto dst = v.out[size_t(k)].select(0, int64_t(b));
      at::mm_out(dst, input, f32_tensor(m.cands[b], {out[k], in[k]}).t());
    }
  }
  im.visits[il] = std::move(v);
  return Status::ok();
}

uint16_t LayerStep::weight_kinds() const {
  uint16_t m = 0;
  for (int k = 0; k < kNumLinear; ++k)
    if (!cached_kind(k)) m = uint16_t(m | 1u << k);
  return m;
}

namespace {
// The mixed outputs of a visit's cached kinds on rows [r0, r0 + n): p a leaf (requiring grad
// when `grad`), Y = sum_b p_b Y_b (+ bias), as [n, T, n_out].
Status mix_cached(const LayerStep& step, const Visit& v, const LayerParams& lp, const LayerMix& mods,
                  int r0, int n, int64_t T, bool grad, std::array<at::Tensor, kNumLinear>& p,
                  std::array<at::Tensor, kNumLinear>& y) {
  for (int k = 0; k < kNumLinear; ++k) {
    if (!step.cached_kind(k)) continue;
    auto ys = v.out[size_t(k)].narrow(1, int64_t(r0) * T, int64_t(n) * T);
    const auto& m = mods[size_t(k)];
    if (m.cands.empty()) {
      y[size_t(k)] = ys.select(0, 0);
    } else {
      if (int64_t(m.p.size()) != ys.size(0)) return Status::error("mixing weights and cached outputs differ in number");
      std::vector<float> pf(m.p.begin(), m.p.end());
      p[size_t(k)] = at::from_blob(pf.data(), {int64_t(pf.size())}, at::TensorOptions().dtype(at::kFloat)).clone();
      if (grad) p[size_t(k)].requires_grad_(true);
      y[size_t(k)] = at::tensordot(p[size_t(k)], ys, {0}, {0});
    }
    if (lp.bias[size_t(k)].defined()) y[size_t(k)] = y[size_t(k)] + lp.bias[size_t(k)];
    y[size_t(k)] = y[size_t(k)].view({n, T, -1});
  }
  return Status::ok();
}

// The FFN block of a visit step on the teacher's attention output h2t: from the cached gate and
// up outputs y (a dense layer), or a MoE layer's experts from their weights w on h2t's norm.
at::Tensor ffn_block(const HParams& hp, const LayerParams& lp, const std::array<at::Tensor, kNumLinear>& y,
                     const std::array<at::Tensor, kNumLinear>& w, const at::Tensor& h2t) {
  if (hp.moe()) return ffn(hp, lp, w, rms_norm(h2t, lp.ffn_norm, hp.rms_eps));
  return linear(ffn_act(hp, y[kFfnGate], y[kFfnUp]), w[kFfnDown], lp.bias[kFfnDown]);
}

// mean(w (a - t)^2) - mean(w (b - t)^2) as mean(w (a - b)(a + b - 2t)), summed in double: a
// candidate's loss change is often far below the float rounding of either loss.
double mse_change(const at::Tensor& a, const at::Tensor& b, const at::Tensor& t, const at::Tensor& w) {
  auto d = (a - b) * (a + b - 2 * t);
  if (w.defined()) d = d * w;
  return d.sum(at::kDouble).item<double>() / double(t.numel());
}
}  // namespace

Result<double> LayerStep::visit_step(int il, LayerMix& mods, int r0, int n, double scale,
                                     bool backward) {
  Impl& im = *impl_;
  const HParams& hp = im.model->hparams();
  GAMMA_ASSIGN_OR_RETURN(const Visit* vp, im.visit_rows(il, r0, n));
  const Visit& v = *vp;
  const int64_t T = im.seq_len;
  const LayerParams& lp = im.params[size_t(il)];
  std::unique_ptr<at::NoGradGuard> no_grad;
  if (!backward) no_grad = std::make_unique<at::NoGradGuard>();
  // Weights: the kinds not cached (the cached kinds' candidates may be gone by now).
  GAMMA_ASSIGN_OR_RETURN(auto lw, im.weights(il, mods, backward, weight_kinds()));
  std::array<at::Tensor, kNumLinear> p, y;
  GAMMA_RETURN_IF_ERROR(mix_cached(*this, v, lp, mods, r0, n, T, backward, p, y));
  auto x = v.x.narrow(0, r0, n), h2t = v.h2.narrow(0, r0, n), yt = v.y.narrow(0, r0, n);
  auto o = attention(hp, lp, im.pos, y[kAttnQ], y[kAttnK], y[kAttnV]);
  auto h2 = attn_residual(hp, lp, x, linear(o, lw.w[kAttnOut], lp.bias[kAttnOut]));
  auto ffn = ffn_residual(hp, lp, h2t, ffn_block(hp, lp, y, lw.w, h2t));
  const at::Tensor wh2 = im.loss_weights(h2t), wy = im.loss_weights(yt);
  auto mse = sq_err(h2, h2t, wh2) + sq_err(ffn, yt, wy);
  if (!backward) return mse.item<double>();
  (mse * scale).backward();
  accumulate_grads(mods, lw);
  at::NoGradGuard ng;
  for (int k = 0; k < kNumLinear; ++k) {
    auto& m = mods[size_t(k)];
    if (!cached_kind(k) || m.cands.empty()) continue;
    if (m.grad->size() != m.cands.size()) m.grad->assign(m.cands.size(), 0.0);
    if (!p[size_t(k)].grad().defined()) continue;
    auto g = p[size_t(k)].grad();
    for (size_t b = 0; b < m.cands.size(); ++b) (*m.grad)[b] += double(g[int64_t(b)].item<float>());
  }
  return mse.item<double>();
}

Status LayerStep::visit_deltas(int il, const LayerMix& mods_in, int r0, int n,
                               LayerDeltas& delta) {
  Impl& im = *impl_;
  const HParams& hp = im.model->hparams();
  GAMMA_ASSIGN_OR_RETURN(const Visit* vp, im.visit_rows(il, r0, n));
  const Visit& v = *vp;
  const int64_t T = im.seq_len;
  const LayerParams& lp = im.params[size_t(il)];
  at::NoGradGuard no_grad;
  LayerMix mods = mods_in;  // weights() reads them only
  GAMMA_ASSIGN_OR_RETURN(auto lw, im.weights(il, mods, false, weight_kinds()));
  std::array<at::Tensor, kNumLinear> p, y;
  GAMMA_RETURN_IF_ERROR(mix_cached(*this, v, lp, mods, r0, n, T, false, p, y));
  auto x = v.x.narrow(0, r0, n), h2t = v.h2.narrow(0, r0, n), yt = v.y.narrow(0, r0, n);
  const at::Tensor wh2 = im.loss_weights(h2t), wy = im.loss_weights(yt);
  // The step's own outputs: the attention block's (h2) and the FFN's.
  auto h2_of = [&](const std::array<at::Tensor, kNumLinear>& q, const at::Tensor& wo) {
    return attn_residual(hp, lp, x, linear(attention(hp, lp, im.pos, q[kAttnQ], q[kAttnK], q[kAttnV]), wo, lp.bias[kAttnOut]));
  };
  // The FFN's output with the cached outputs yy and the weights ww (one of them a candidate's).
  auto ffn_of = [&](const std::array<at::Tensor, kNumLinear>& yy, const std::array<at::Tensor, kNumLinear>& ww) {
    return ffn_residual(hp, lp, h2t, ffn_block(hp, lp, yy, ww, h2t));
  };
  const auto o = attention(hp, lp, im.pos, y[kAttnQ], y[kAttnK], y[kAttnV]);
  const auto h2 = attn_residual(hp, lp, x, linear(o, lw.w[kAttnOut], lp.bias[kAttnOut]));
  const auto ffn = ffn_of(y, lw.w);
  for (int k = 0; k < kNumLinear; ++k) {
    const auto& m = mods[size_t(k)];
    auto& d = delta[size_t(k)];
    d.assign(m.cands.size(), 0.0);
    for (size_t b = 0; b < m.cands.size(); ++b) {
      if (!cached_kind(k)) {  // attn_output, ffn_down (and a MoE layer's experts): the candidate's weight
        if (k == kAttnOut) {
          d[b] = mse_change(attn_residual(hp, lp, x, linear(o, lw.cands[size_t(k)][b], lp.bias[kAttnOut])), h2, h2t, wh2);
        } else {
          auto alt = lw.w;
          alt[size_t(k)] = lw.cands[size_t(k)][b];
          d[b] = mse_change(ffn_of(y, alt), ffn, yt, wy);
        }
        continue;
      }
      auto alt = y;  // q/k/v/gate/up: the candidate's cached output
      alt[size_t(k)] = v.out[size_t(k)].select(0, int64_t(b)).narrow(0, int64_t(r0) * T, int64_t(n) * T);
      if (lp.bias[size_t(k)].defined()) alt[size_t(k)] = alt[size_t(k)] + lp.bias[size_t(k)];
      alt[size_t(k)] = alt[size_t(k)].view({n, T, -1});
      d[b] = k <= kAttnV ? mse_change(h2_of(alt, lw.w[kAttnOut]), h2, h2t, wh2) : mse_change(ffn_of(alt, lw.w), ffn, yt, wy);
    }
  }
  return Status::ok();
}

void LayerStep::end_visits() { impl_->visits.clear(); }

void LayerStep::set_token_weights(TokenWeights w) { impl_->token_weights_mode = w; }

Status LayerStep::forward(int il, LayerMix& mods, const float* x, float* y, int n_seq) {
  Impl& im = *impl_;
  const HParams& hp = im.model->hparams();
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  GAMMA_ASSIGN_OR_RETURN(auto lw, im.weights(il, mods, false));
  at::NoGradGuard no_grad;
  const int64_t T = im.seq_len;
  auto xt = at::from_blob(const_cast<float*>(x), {n_seq, T, hp.n_embd}, f32);
  at::from_blob(y, {n_seq, T, hp.n_embd}, f32).copy_(layer_forward(hp, im.params[size_t(il)], lw.w, im.pos, xt));
  return Status::ok();
}

Status LayerStep::backward(int il, LayerMix& mods, const float* x, const float* grad_y, float* grad_x,
                           int n_seq) {
  Impl& im = *impl_;
  const HParams& hp = im.model->hparams();
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  GAMMA_ASSIGN_OR_RETURN(auto lw, im.weights(il, mods, true));
  const int64_t T = im.seq_len;
  auto xt = at::from_blob(const_cast<float*>(x), {n_seq, T, hp.n_embd}, f32).clone();
  if (grad_x) xt.requires_grad_(true);
  auto gy = at::from_blob(const_cast<float*>(grad_y), {n_seq, T, hp.n_embd}, f32);
  layer_forward(hp, im.params[size_t(il)], lw.w, im.pos, xt).backward(gy);
  accumulate_grads(mods, lw);
  if (grad_x) {
    at::NoGradGuard no_grad;
    at::from_blob(grad_x, {n_seq, T, hp.n_embd}, f32).copy_(xt.grad());
  }
  return Status::ok();
}

Result<double> LayerStep::head_kl(const float* h, const float* h_teacher, float* grad_h, int n_seq, double scale) {
  Impl& im = *impl_;
  const HParams& hp = im.model->hparams();
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  if (!im.head.defined()) {
    const Model& m = im.model->model();
    GAMMA_ASSIGN_OR_RETURN(im.out_norm, read_tensor(m, "output_norm.weight"));
    GAMMA_ASSIGN_OR_RETURN(im.head, read_tensor(m, hp.tied_embeddings ? "token_embd.weight" : "output.weight"));
    if (m.find("output.bias") >= 0) {
      GAMMA_ASSIGN_OR_RETURN(im.head_bias, read_tensor(m, "output.bias"));
    }
  }
  auto logits = [&](const at::Tensor& x) { return head_logits(hp, x, im.out_norm, im.head, im.head_bias); };
  const int64_t N = int64_t(n_seq) * im.seq_len;
  at::Tensor log_q;
  {
    at::NoGradGuard no_grad;
    log_q = at::log_softmax(logits(at::from_blob(const_cast<float*>(h_teacher), {N, hp.n_embd}, f32)), -1);
  }
  auto ht = at::from_blob(const_cast<float*>(h), {N, hp.n_embd}, f32).clone().requires_grad_(true);
  auto log_p = at::log_softmax(logits(ht), -1);
  auto kl = (log_q.exp() * (log_q - log_p)).sum(-1).mean();
  (kl * scale).backward();
  at::NoGradGuard no_grad;
  at::from_blob(grad_h, {N, hp.n_embd}, f32).copy_(ht.grad());
  return kl.item<double>();
}

}  // namespace gm
