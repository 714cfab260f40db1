#include "decoder/verify.h"

#include <ATen/Parallel.h>

#include <chrono>

#include "decoder/layer.h"
#include "decoder/llama_runner.h"
#include "util/threads.h"

namespace gm {
namespace {

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(1e-30, b.norm().item<double>());
}
double max_err(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}
at::Tensor as_tensor(std::vector<float>& v, int64_t rows, int64_t cols) {
  return at::from_blob(v.data(), {rows, cols}, at::TensorOptions().dtype(at::kFloat));
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

json VerifyReport::to_json() const {
  json j = json::object();
  j["n_tokens"] = n_tokens;
  j["embd_rel_err"] = embd_rel_err;
  j["layer_rel_err"] = layer_rel_err;
  j["layer_max_err"] = layer_max_err;
  j["chained_rel_err"] = chained_rel_err;
  j["logit_rel_err"] = logit_rel_err;
  j["logit_max_err"] = logit_max_err;
  j["llama_seconds"] = llama_seconds;
  j["torch_seconds"] = torch_seconds;
  return j;
}

Result<VerifyReport> verify_against_llama(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                                          int n_threads, const std::function<void(HParams&)>& tweak) {
  n_threads = resolve_threads(n_threads);
  set_compute_threads(n_threads);
  at::NoGradGuard no_grad;
  const int64_t T = int64_t(tokens.size());
  GAMMA_ASSIGN_OR_RETURN(auto tm, TorchDecoder::open(gguf_path));
  if (tweak) {
    HParams h = tm->hparams();
    tweak(h);
    tm->set_hparams(h);
  }
  const HParams& hp = tm->hparams();
  GAMMA_ASSIGN_OR_RETURN(auto runner, LlamaRunner::open(gguf_path, int(T), n_threads));
  if (runner->n_layer() != hp.n_layer || runner->n_embd() != hp.n_embd)
    return Status::errorf("{}: libllama sees {} layers x {} but the GGUF says {} x {}", gguf_path, runner->n_layer(),
                          runner->n_embd(), hp.n_layer, hp.n_embd);
  LlamaRunner::Capture cap;
  auto t0 = std::chrono::steady_clock::now();
  GAMMA_RETURN_IF_ERROR(runner->run(tokens, &cap, true, true));
  VerifyReport r;
  r.n_tokens = int(T);
  r.llama_seconds = seconds_since(t0);

  GAMMA_ASSIGN_OR_RETURN(auto emb, tm->embed(tokens));
  r.embd_rel_err = rel_err(emb, as_tensor(cap.hidden[0], T, hp.n_embd));
  const Positional pos = make_positional(hp, T, tm->rope_freqs());
  at::Tensor chained = emb.view({1, T, hp.n_embd});
  double torch_s = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    GAMMA_ASSIGN_OR_RETURN(auto lp, tm->layer_params(il));
    GAMMA_ASSIGN_OR_RETURN(auto w, tm->layer_weights(il));
    auto x = as_tensor(cap.hidden[size_t(il)], T, hp.n_embd).view({1, T, hp.n_embd});
    auto ref = as_tensor(cap.hidden[size_t(il) + 1], T, hp.n_embd).view({1, T, hp.n_embd});
    auto t1 = std::chrono::steady_clock::now();
    auto y = layer_forward(hp, lp, w, pos, x);
    torch_s += seconds_since(t1);
    r.layer_rel_err.push_back(rel_err(y, ref));
    r.layer_max_err.push_back(max_err(y, ref));
    chained = layer_forward(hp, lp, w, pos, chained);
    r.chained_rel_err.push_back(rel_err(chained, ref));
  }
  r.torch_seconds = torch_s;
  auto last = as_tensor(cap.hidden[size_t(hp.n_layer)], T, hp.n_embd);
  GAMMA_ASSIGN_OR_RETURN(auto logits, tm->logits(last));
  if (runner->n_vocab() != hp.n_vocab) return Status::errorf("vocabulary sizes differ ({} vs {})", runner->n_vocab(), hp.n_vocab);
  auto ref_logits = as_tensor(cap.logits, T, hp.n_vocab);
  r.logit_rel_err = rel_err(logits, ref_logits);
  r.logit_max_err = max_err(logits, ref_logits);
  return r;
}

}  // namespace gm
