#include "learn/layer_step.h"

#include <ATen/Parallel.h>

#include <map>

#include "gguf_model/model.h"
#include "decoder/layer.h"

namespace gm {

namespace {
// A layer's linear weights as used (mixed or the teacher's) and the candidates they mix.
struct LayerWeights {
  std::array<at::Tensor, kNumLinear> w;
  std::array<std::vector<at::Tensor>, kNumLinear> cands;
};
}  // namespace

struct LayerStep::Impl {
  std::unique_ptr<TorchDecoder> model;
  std::vector<LayerParams> params;
  Positional pos;
  int seq_len = 0;
  std::map<std::pair<int, int>, at::Tensor> teacher_w;  // modules without pool candidates
  at::Tensor out_norm, head, head_bias;  // loaded on the first head_kl

  // Layer il's linear weights: W_mix = sum_b p_b W_b (requiring grad when `grad`), or the
  // teacher's for modules without candidates; and the candidates as tensors.
  Result<LayerWeights> weights(int il, std::array<ModuleMix, 7>& mods, bool grad);
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

Result<LayerWeights> LayerStep::Impl::weights(int il, std::array<ModuleMix, 7>& mods, bool grad) {
  LayerWeights r;
  auto& w = r.w;
  auto& cands = r.cands;
  const HParams& hp = model->hparams();
  if (il < 0 || il >= hp.n_layer) return Status::errorf("no layer {}", il);
  const int64_t out[kNumLinear] = {hp.n_embd_q(), hp.n_embd_kv(), hp.n_embd_kv(), hp.n_embd, hp.n_ff, hp.n_ff, hp.n_embd};
  const int64_t in[kNumLinear] = {hp.n_embd, hp.n_embd, hp.n_embd, hp.n_embd_q(), hp.n_embd, hp.n_embd, hp.n_ff};
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::NoGradGuard no_grad;
  for (int k = 0; k < kNumLinear; ++k) {
    auto& m = mods[size_t(k)];
    if (m.cands.empty()) {  // not in the pool: the teacher's weight, no gradient
      auto key = std::make_pair(il, k);
      if (!teacher_w.count(key)) {
        GAMMA_ASSIGN_OR_RETURN(auto all, model->layer_weights(il));
        for (int j = 0; j < kNumLinear; ++j)
          if (mods[size_t(j)].cands.empty()) teacher_w[{il, j}] = all[size_t(j)];
      }
      w[size_t(k)] = teacher_w[key];
      continue;
    }
    if (m.p.size() != m.cands.size()) return Status::error("mixing weights and candidates differ in number");
    at::Tensor mix = at::zeros({out[k], in[k]}, f32);
    for (size_t b = 0; b < m.cands.size(); ++b) {
      cands[size_t(k)].push_back(at::from_blob(const_cast<float*>(m.cands[b]), {out[k], in[k]}, f32));
      mix.add_(cands[size_t(k)].back(), m.p[b]);
    }
    w[size_t(k)] = grad ? mix.requires_grad_(true) : mix;
  }
  return r;
}

namespace {
// dL/dp_b = <dL/dW_mix, W_b>, accumulated into each module's grad.
void accumulate_grads(std::array<ModuleMix, 7>& mods, const LayerWeights& lw) {
  const auto& w = lw.w;
  const auto& cands = lw.cands;
  at::NoGradGuard no_grad;
  for (int k = 0; k < kNumLinear; ++k) {
    auto& m = mods[size_t(k)];
    if (m.cands.empty()) continue;
    if (m.grad->size() != m.cands.size()) m.grad->assign(m.cands.size(), 0.0);
    if (!w[size_t(k)].grad().defined()) continue;  // no path to the loss: zero gradient
    auto g = w[size_t(k)].grad().view({-1});
    for (size_t b = 0; b < m.cands.size(); ++b) (*m.grad)[b] += at::dot(g, cands[size_t(k)][b].view({-1})).item<double>();
  }
}
}  // namespace

Result<double> LayerStep::run(int il, std::array<ModuleMix, 7>& mods, const float* x, const float* y, int n_seq,
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
  auto mse = (out_t - yt).pow(2).mean();
  if (!backward) return mse.item<double>();
  (mse * scale).backward();
  accumulate_grads(mods, lw);
  return mse.item<double>();
}

Status LayerStep::forward(int il, std::array<ModuleMix, 7>& mods, const float* x, float* y, int n_seq) {
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

Status LayerStep::backward(int il, std::array<ModuleMix, 7>& mods, const float* x, const float* grad_y, float* grad_x,
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
  auto logits = [&](const at::Tensor& x) {
    auto o = at::linear(rms_norm(x, im.out_norm.view({hp.n_embd}), hp.rms_eps), im.head);
    return im.head_bias.defined() ? o + im.head_bias.view({hp.n_vocab}) : o;
  };
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
