#include "learn/learn.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <thread>

#include "gguf_model/model.h"
#include "learn/candidates.h"
#include "learn/checkpoint.h"
#include "learn/dist.h"
#include "learn/layer_step.h"
#include "decoder/hparams.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "scores/scores.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/random.h"
#include "util/threads.h"

namespace fs = std::filesystem;

namespace gm {
namespace {

struct Rng {
  uint64_t s;
  Rng(uint64_t seed, uint64_t step, uint64_t stream) : s(splitmix64(splitmix64(splitmix64(seed) ^ step) ^ stream)) {}
  uint64_t next() { return splitmix64(s++); }
  double uniform_open() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)
  uint64_t below(uint64_t n) { return next() % n; }
};
enum Stream : uint64_t { kGumbel = 1, kBatch = 2, kLayers = 3, kVisitSeqs = 4, kVisitLayers = 5 };

// The batch of a step: consecutive slices of a per-epoch permutation of the sequences.
std::vector<int> batch_of(uint64_t seed, int step, int B, int n_seq, Stream stream = kBatch) {
  std::vector<int> seqs;
  for (int b = 0; b < B; ++b) {
    const int64_t idx = int64_t(step) * B + b, epoch = idx / n_seq;
    std::vector<int> perm(static_cast<size_t>(n_seq));
    for (int i = 0; i < n_seq; ++i) perm[size_t(i)] = i;
    Rng r(seed, uint64_t(epoch), stream);
    for (int i = n_seq - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(r.below(uint64_t(i) + 1))]);
    seqs.push_back(perm[size_t(idx % n_seq)]);
  }
  return seqs;
}

// The layers of a step: all, or k drawn without replacement (each with probability k/L), sorted.
std::vector<int> layers_of(uint64_t seed, int step, int L, int k) {
  std::vector<int> layers(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) layers[size_t(l)] = l;
  if (k < L) {
    Rng r(seed, uint64_t(step), kLayers);
    for (int i = 0; i < k; ++i) std::swap(layers[size_t(i)], layers[size_t(i) + size_t(r.below(uint64_t(L - i)))]);
    layers.resize(size_t(k));
    std::sort(layers.begin(), layers.end());
  }
  return layers;
}

// The layers of a visit: consecutive slices of a per-epoch permutation of the layers, so every
// layer is visited once per L/k visits (a visit is many steps: drawing each independently
// would leave some layers unvisited for long). A slice across two epochs may name a layer
// twice: it is visited once.
std::vector<int> visit_layers(uint64_t seed, int visit, int L, int k) {
  std::vector<int> layers = batch_of(seed, visit, k, L, kVisitLayers);
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  return layers;
}

// Choice tables: the flag and the names the CLI parses and the scores record.
}  // namespace

const Choices<Objective>& choices(Objective) {
  static const Choices<Objective> c{"--objective", {{"mse", Objective::kMse}, {"ce", Objective::kCe}}};
  return c;
}
const Choices<Penalty>& choices(Penalty) {
  static const Choices<Penalty> c{"--penalty", {{"al", Penalty::kAl}, {"dnas", Penalty::kDnas}}};
  return c;
}
const Choices<Optimizer>& choices(Optimizer) {
  static const Choices<Optimizer> c{"--optimizer", {{"adam", Optimizer::kAdam}, {"sgd", Optimizer::kSgd}}};
  return c;
}
const Choices<Estimator>& choices(Estimator) {
  static const Choices<Estimator> c{"--estimator", {{"soft", Estimator::kSoft}, {"st", Estimator::kSt}}};
  return c;
}
const Choices<Forcing>& choices(Forcing) {
  static const Choices<Forcing> c{"--forcing", {{"layer", Forcing::kLayer}, {"sublayer", Forcing::kSublayer}}};
  return c;
}
const Choices<TokenWeights>& choices(TokenWeights) {
  static const Choices<TokenWeights> c{
      "--layer-loss", {{"mse", TokenWeights::kNone}, {"rel", TokenWeights::kRel}, {"clip", TokenWeights::kClip}}};
  return c;
}
const Choices<Init>& choices(Init) {
  static const Choices<Init> c{"--init", {{"tilt", Init::kTilt}, {"uniform", Init::kUniform}}};
  return c;
}

namespace {

struct Mod {
  const ModuleEntry* e = nullptr;
  int kind = -1;
  size_t K = 0;
  std::vector<double> bpw;
  // State (checkpointed): logits and Adam moments. With K == 2 only pi[1] moves (pi[0] = 0):
  // the sigmoid form, p1 = sigmoid((pi1 + g1 - g0) / tau).
  std::vector<double> pi, m, v;
  // --measure-every: summed measured loss change per candidate, and how many measurements.
  std::vector<double> dsum;
  int64_t dn = 0;
  std::vector<double> dsum2;  // squares of each measurement's deltas centred on their mean (--converge)
};

struct State {
  int step = 0;  // steps done
  double lambda1 = 0, lambda2 = 0;
  double mse_ref = 0;  // the MSE of step 0 (all layers): the unit of the MSE term
  double mse_eval_init = 0;  // eval_mse at the initial logits
  json curve = json::array();
  double seconds = 0;  // optimisation time before this process (resumed runs)
  json convergence = json::array();  // --converge: each visit ended early (its step, measurements, change)
};

using Weights = std::vector<std::vector<double>>;  // per module, one weight per candidate

double tau_at(const LearnOptions& o, int step) {
  if (o.tau_end <= 0 || o.steps <= 1) return o.tau;
  return o.tau * std::pow(o.tau_end / o.tau, double(step) / double(o.steps - 1));
}

void softmax(const std::vector<double>& z, std::vector<double>& p) {
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0;
  p.resize(z.size());
  for (size_t i = 0; i < z.size(); ++i) sum += (p[i] = std::exp(z[i] - mx));
  for (double& x : p) x /= sum;
}

// dL/dpi given dL/dp for p = softmax((pi + g) / tau), accumulated into gpi.
void softmax_backward(const std::vector<double>& p, const std::vector<double>& gp, double tau,
                      std::vector<double>& gpi) {
  double dot = 0;
  for (size_t i = 0; i < p.size(); ++i) dot += p[i] * gp[i];
  for (size_t i = 0; i < p.size(); ++i) gpi[i] += p[i] * (gp[i] - dot) / tau;
}

double expected_bpw(const std::vector<Mod>& mods, const Weights& pbar, double n_total) {
  double b = 0;
  for (size_t i = 0; i < mods.size(); ++i)
    for (size_t j = 0; j < mods[i].K; ++j) b += double(mods[i].e->n_params) * pbar[i][j] * mods[i].bpw[j];
  return b / n_total;
}

json hyperparameters(const LearnOptions& o, const std::string& cache_key, int n_seq) {
  json h = json::object();
  h["steps"] = o.steps;
  h["batch"] = o.seqs;  // the key older scores and checkpoints carry
  h["layers_per_step"] = o.layers_per_step;
  h["optimizer"] = choice_name(o.optimizer);
  h["lr"] = o.lr;
  h["lr_lambda"] = o.lr_lambda;
  h["tau"] = o.tau;
  h["tau_end"] = o.tau_end;
  h["seed"] = o.seed;
  h["budget_on"] = "softmax(pi/tau)";
  h["init"] = choice_name(o.init);
  h["lambda2_init"] = o.lambda2_init;
  h["objective"] = choice_name(o.objective);
  h["penalty"] = choice_name(o.penalty);
  if (o.estimator != Estimator::kSoft) h["estimator"] = choice_name(o.estimator);  // absent: soft (older checkpoints match)
  // Absent at their defaults, so that older scores and checkpoints still match.
  if (o.forcing != Forcing::kLayer) h["forcing"] = choice_name(o.forcing);
  if (o.visit_steps > 1) h["visit_steps"] = o.visit_steps;
  if (o.forcing == Forcing::kSublayer) h["visit_seqs"] = o.visit_seqs;
  if (o.layer_loss != TokenWeights::kNone) h["layer_loss"] = choice_name(o.layer_loss);
  if (o.penalty == Penalty::kDnas) h["dnas"] = {{"beta", o.dnas_beta}, {"gamma", o.dnas_gamma}};
  if (o.measure_every > 0) h["measure_every"] = o.measure_every;
  if (o.converge > 0) h["converge"] = o.converge;
  h["mse_unit"] = "step-0 MSE";
  h["calib_tokens"] = int64_t(n_seq) * o.calib.seq_len;
  h["seq_len"] = o.calib.seq_len;
  h["calib_files"] = o.calib.text_files;
  h["activations"] = {{"key", cache_key}, {"dtype", o.calib.f32 ? "f32" : "f16"}};
  return h;
}

Status validate(const LearnOptions& o) {
  if (o.pool_dir.empty()) return Status::error("no pool directory given");
  if (o.teacher_path.empty()) return Status::error("no teacher given (--teacher F32.gguf)");
  if (o.out_path.empty()) return Status::error("no output given (-o SCORES.json)");
  if (o.steps < 0) return Status::errorf("--steps must be >= 0 (got {}; 0 writes the starting scores)", o.steps);
  if (o.seqs < 1) return Status::errorf("--seqs must be at least 1 (got {})", o.seqs);
  if (o.layers_per_step < 0) return Status::errorf("--layers-per-step must be >= 0 (got {})", o.layers_per_step);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return Status::errorf("--lr must be positive (got {})", o.lr);
  if (!(o.lr_lambda >= 0) || !std::isfinite(o.lr_lambda)) return Status::errorf("--lr-lambda must be >= 0 (got {})", o.lr_lambda);
  if (!(o.tau > 0) || !std::isfinite(o.tau)) return Status::errorf("--tau must be positive (got {})", o.tau);
  if (o.tau_end < 0 || !std::isfinite(o.tau_end)) return Status::errorf("--tau-end must be >= 0 (got {})", o.tau_end);
  if (!(o.lambda2_init >= 0) || !std::isfinite(o.lambda2_init)) return Status::errorf("--lambda2-init must be >= 0 (got {})", o.lambda2_init);
  if (o.objective == Objective::kCe && o.layers_per_step != 0) return Status::error("--objective ce chains all layers: --layers-per-step must be 0");
  if (!(o.dnas_beta >= 0) || !std::isfinite(o.dnas_beta) || !(o.dnas_gamma >= 0) || !std::isfinite(o.dnas_gamma))
    return Status::errorf("--dnas-beta and --dnas-gamma must be >= 0 (got {}, {})", o.dnas_beta, o.dnas_gamma);
  if (o.visit_steps < 1) return Status::errorf("--visit-steps must be at least 1 (got {})", o.visit_steps);
  if (o.visit_seqs < 0 || (o.visit_seqs > 0 && o.visit_seqs % o.seqs != 0))
    return Status::errorf("--visit-seqs must be a multiple of --seqs {} (got {})", o.seqs, o.visit_seqs);
  if (o.objective == Objective::kCe && o.layer_loss != TokenWeights::kNone)
    return Status::error("--layer-loss weighs the layer loss: --objective ce has none");
  if (o.objective == Objective::kCe && (o.forcing != Forcing::kLayer || o.visit_steps > 1))
    return Status::error("--objective ce chains all layers: it takes neither --forcing sublayer nor --visit-steps");
  if (o.world_size > 1 && o.rendezvous.empty())
    return Status::error("--world-size > 1 needs --rendezvous tcp://HOST:PORT or file://PATH");
  if (o.world_size > 1 && o.objective == Objective::kCe)
    return Status::error("--objective ce chains all layers in one process: it takes no --world-size");
  if (o.measure_every < 0) return Status::errorf("--measure-every must be >= 0 (got {})", o.measure_every);
  if (o.measure_every > 0 && (o.forcing != Forcing::kSublayer || o.objective != Objective::kMse))
    return Status::error("--measure-every measures with cached candidate outputs: it needs --forcing sublayer");
  if (!(o.converge >= 0) || o.converge >= 1) return Status::errorf("--converge must be in [0, 1) (got {})", o.converge);
  if (o.converge > 0 && (o.measure_every == 0 || o.visit_steps < 2))
    return Status::error("--converge ends a visit when its measured deltas stop moving: it needs --measure-every and --visit-steps > 1");
  if (o.checkpoint_every < 1) return Status::errorf("--checkpoint-every must be at least 1 (got {})", o.checkpoint_every);
  for (const auto& f : o.calib.text_files)
    if (fs::path(f).filename() == "wiki.test.raw")
      return Status::errorf("{} is the evaluation text; calibrate on other text", f);
  if (!std::isfinite(o.target_bpw) || o.target_bpw <= 0) return Status::errorf("--bpw must be positive (got {})", o.target_bpw);
  if (!(o.init_weight > 0 && o.init_weight < 1)) return Status::errorf("--init-weight must be in (0, 1) (got {})", o.init_weight);
  return check_writable_dir(o.out_path);
}

// Stage I, one run: its inputs, its state (checkpointed), and the pieces of a step in the
// order a step uses them: sample -> task term (MSE per layer, or CE chained) -> budget term
// (augmented Lagrangian or DNAS) -> logits update (Adam or SGD) -> duals.
class StageOne {
 public:
  static Result<std::unique_ptr<StageOne>> open(const LearnOptions& opt);
  // Continues from OUT.ckpt when it holds a run with these settings (a note says why not).
  Status resume(LearnResult* result);
  Status optimise();
  Result<json> scores(const LearnResult& result);

 private:
  StageOne() = default;
  Status load_modules();
  void init_logits();
  // --init-plan: the plan's candidate becomes each module's mode (p = weight); its sha256.
  Result<std::string> warm_start(const std::string& plan_path, double weight);
  Status save_checkpoint(double seconds) const;
  Status load_layer(int l, const Weights& w, LayerMix& mix, std::vector<std::vector<float>>& bufs);
  void set_weights(int l, const Weights& w, LayerMix& mix);
  // The visit of a step (--visit-steps > 1; step 0 is never in one): its index, or -1.
  int visit_of(int step) const { return opt_.visit_steps > 1 && step > 0 ? (step - 1) / opt_.visit_steps : -1; }
  int visit_start(int visit) const { return 1 + visit * opt_.visit_steps; }
  Status enter_visit(int visit, const std::vector<int>& layers);
  // One layer's task term on seqs, its candidates loaded here (no visit, or step 0).
  Result<double> layer_mse(int l, const std::vector<int>& seqs, const Weights& w, double scale, bool measure);
  // Whether a step also measures its candidates' loss changes (--measure-every).
  bool measured(int step) const { return opt_.measure_every > 0 && step % opt_.measure_every == 0; }
  // After the last measurement, the largest standard error of a module's mean deltas relative
  // to its largest |mean|, and the fewest measurements a module of those layers has (--converge).
  double change_ = 1;
  int64_t min_dn_ = 0;
  // Layer l's measured loss changes (rows r0.. of its visit) into dstep_.
  Status measure(int l, const LayerMix& mix, int r0);
  Result<double> eval_mse(const Weights& w);
  void sample(int step, double tau);
  Result<double> task_mse(int step, const std::vector<int>& seqs, const std::vector<int>& layers, int k_step,
                          const Weights& wmix);
  Result<double> task_ce(int step, const std::vector<int>& seqs, const Weights& wmix);
  struct Budget {
    double mu, loss, mse_factor;
  };
  Budget budget_term(double mse, double gap) const;
  void update_logits(int step, double tau, double mu);
  double elapsed() const {
    return st_.seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count();
  }

  LearnOptions opt_;
  Manifest man_;
  std::string pool_sha_;
  std::unique_ptr<Model> teacher_;
  std::vector<Mod> mods_;
  double n_total_ = 0;
  int L_ = 0, k_layers_ = 0;
  std::vector<std::array<int, kLayerKinds>> by_layer_;  // module index by layer and kind, -1: none
  std::unique_ptr<CandidateStore> store_;
  std::unique_ptr<ActivationCache> cache_;
  std::unique_ptr<LayerStep> stepper_;
  json config_;
  std::string ckpt_path_;
  State st_;
  // Step buffers: the teacher's input/output of a layer, one layer's dequantized candidates
  // (reused layer after layer), every layer's input (--objective ce), and per module the
  // noisy p, the noise-free pbar, d(loss)/dp and the one-hot sample (--estimator st).
  std::vector<float> x_, y_;
  std::vector<std::vector<float>> bufs_, xs_;
  // The current visit: its layers with their candidates (resident for the visit's steps).
  struct Resident {
    int layer;
    std::vector<std::vector<float>> bufs;
    LayerMix mix;
  };
  std::vector<Resident> visit_;
  int visit_id_ = -1;
  // The job: this rank's layers [lo_, hi_) and the group (world size 1: no group).
  std::unique_ptr<Comm> comm_;
  int lo_ = 0, hi_ = 0;
  bool owns(int l) const { return l >= lo_ && l < hi_; }
  // Sums per-layer MSEs and every module's gradient over the ranks.
  Status reduce(std::vector<double>& mse_layers, bool measure_now);
  Weights p_, pbar_, gp_, w_, dstep_;  // dstep_: a measured step's loss changes (--measure-every)
  std::chrono::steady_clock::time_point t_start_;
  double t_dequant_ = 0, t_layer_ = 0, t_io_ = 0, t_visit_ = 0;
  int start_step_ = 0;
};

Result<std::unique_ptr<StageOne>> StageOne::open(const LearnOptions& opt) {
  std::unique_ptr<StageOne> s(new StageOne());
  s->opt_ = opt;
  GAMMA_ASSIGN_OR_RETURN(s->man_, Manifest::load(opt.pool_dir));
  GAMMA_ASSIGN_OR_RETURN(s->pool_sha_, sha256_file(opt.pool_dir + "/manifest.json"));
  GAMMA_ASSIGN_OR_RETURN(s->teacher_, Model::open(opt.teacher_path));
  GAMMA_RETURN_IF_ERROR(s->load_modules());
  if (opt.init == Init::kTilt) s->init_logits();
  std::string init_plan_sha;
  if (!opt.init_plan.empty()) {
    GAMMA_ASSIGN_OR_RETURN(init_plan_sha, s->warm_start(opt.init_plan, opt.init_weight));
  }
  const int L = s->L_ = s->man_.n_layer;
  if (opt.layers_per_step > L) return Status::errorf("--layers-per-step {} exceeds the {} layers", opt.layers_per_step, L);
  s->k_layers_ = opt.layers_per_step == 0 ? L : opt.layers_per_step;
  GAMMA_ASSIGN_OR_RETURN(s->store_, CandidateStore::open(s->man_));
  if (opt.world_size > L) return Status::errorf("--world-size {} exceeds the {} layers", opt.world_size, L);
  GAMMA_ASSIGN_OR_RETURN(s->comm_, Comm::connect(opt.rendezvous, opt.rank, opt.world_size, opt.dist_timeout));
  s->lo_ = int(int64_t(opt.rank) * L / opt.world_size);
  s->hi_ = int(int64_t(opt.rank + 1) * L / opt.world_size);

  // Teacher activations and the layer.
  GAMMA_ASSIGN_OR_RETURN(s->cache_, open_cache_part(*s->comm_, opt.teacher_path, opt.calib, s->lo_, s->hi_));
  if (s->cache_->n_layer() != L) return Status::errorf("activation cache has {} layers, the pool {}", s->cache_->n_layer(), L);
  if (opt.seqs > s->cache_->n_seq())
    return Status::errorf("--seqs {} exceeds the {} calibration sequences (raise --calib-tokens)", opt.seqs, s->cache_->n_seq());
  if (opt.forcing == Forcing::kSublayer) {
    int& V = s->opt_.visit_seqs;
    if (V == 0) V = opt.seqs;
    if (V > s->cache_->n_seq())
      return Status::errorf("--visit-seqs {} exceeds the {} calibration sequences (raise --calib-tokens)", V, s->cache_->n_seq());
  }
  GAMMA_ASSIGN_OR_RETURN(s->stepper_, LayerStep::create(opt.teacher_path, s->cache_->seq_len(), opt.n_threads));
  s->stepper_->set_token_weights(opt.layer_loss);
  s->x_.resize(size_t(opt.seqs) * size_t(s->cache_->seq_len()) * size_t(s->stepper_->hparams().n_embd));
  s->y_.resize(s->x_.size());
  const size_t n = s->mods_.size();
  s->p_.resize(n);
  s->pbar_.resize(n);
  s->gp_.resize(n);
  s->w_.resize(n);
  s->dstep_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s->dstep_[i].assign(s->mods_[i].K, 0.0);
    if (opt.measure_every > 0) s->mods_[i].dsum.assign(s->mods_[i].K, 0.0);
    if (opt.converge > 0) s->mods_[i].dsum2.assign(s->mods_[i].K, 0.0);
  }
  s->by_layer_.resize(size_t(L));
  for (auto& a : s->by_layer_) a.fill(-1);
  for (size_t i = 0; i < n; ++i) s->by_layer_[size_t(s->mods_[i].e->layer)][size_t(s->mods_[i].kind)] = int(i);

  s->config_ = json::object();
  s->config_["pool_manifest_sha256"] = s->pool_sha_;
  s->config_["teacher"] = s->teacher_->fingerprint();
  s->config_["target_bpw"] = opt.target_bpw;
  s->config_["hyperparameters"] = hyperparameters(s->opt_, s->cache_->key(), s->cache_->n_seq());
  if (!init_plan_sha.empty())  // absent without a warm start, so older checkpoints match
    s->config_["hyperparameters"]["init_plan"] = {{"sha256", init_plan_sha}, {"weight", opt.init_weight}};
  s->ckpt_path_ = opt.out_path + ".ckpt";
  // Every rank must run rank 0's job (same pool, teacher, target, hyperparameters).
  std::string cfg = s->config_.dump();
  const std::string mine = cfg;
  GAMMA_RETURN_IF_ERROR(s->comm_->broadcast(cfg));
  if (cfg != mine) return Status::errorf("rank {} was started with other settings, pool or teacher than rank 0", opt.rank);
  s->st_.lambda2 = opt.lambda2_init;
  return s;
}

// The pool's modules against the teacher, and the budget the pool can reach.
Status StageOne::load_modules() {
  const Model& teacher = *teacher_;
  if (teacher.arch() != man_.arch || teacher.n_layer() != man_.n_layer)
    return Status::errorf("teacher {} is {} with {} layers but the pool is of {} with {} layers", opt_.teacher_path,
                          teacher.arch(), teacher.n_layer(), man_.arch, man_.n_layer);
  double b_min = 0, b_max = 0;
  for (const auto& e : man_.modules) {
    const int64_t ti = teacher.find(e.name);
    if (ti < 0) return Status::errorf("teacher {} has no tensor {} (a teacher of another model?)", opt_.teacher_path, e.name);
    if (teacher.tensors()[size_t(ti)].shape != e.shape)
      return Status::errorf("{} has another shape in the teacher than in the pool (a teacher of another model?)", e.name);
    if (e.candidates.empty()) return Status::errorf("pool module {} has no candidates", e.name);
    if (e.layer < 0 || e.layer >= man_.n_layer) return Status::errorf("pool module {} has layer {}", e.name, e.layer);
    Mod m;
    m.e = &e;
    m.kind = linear_kind_index(e.kind);
    if (m.kind < 0) return Status::errorf("pool module {} has unknown kind {}", e.name, e.kind);
    m.K = e.candidates.size();
    for (const auto& c : e.candidates) m.bpw.push_back(c.bpw);
    m.pi.assign(m.K, 0.0);
    m.m.assign(m.K, 0.0);
    m.v.assign(m.K, 0.0);
    n_total_ += double(e.n_params);
    b_min += double(e.n_params) * *std::min_element(m.bpw.begin(), m.bpw.end());
    b_max += double(e.n_params) * *std::max_element(m.bpw.begin(), m.bpw.end());
    mods_.push_back(std::move(m));
  }
  if (mods_.empty()) return Status::errorf("pool {} has no modules", opt_.pool_dir);
  b_min /= n_total_;
  b_max /= n_total_;
  if (opt_.target_bpw < b_min - 1e-9 || opt_.target_bpw > b_max + 1e-9)
    return Status::errorf("--bpw {} is outside what the pool can reach ({:.4f} .. {:.4f} bits per weight)",
                          opt_.target_bpw, b_min, b_max);
  return Status::ok();
}

// --init tilt: pi_b = -beta (bpw_b - bpw_0) with one beta for all modules, the one that puts
// the expected bpw on the target: no module is preferred, the budget holds from step 0, and
// the steps go to telling modules apart rather than to walking the average down from the
// uniform mixture (which at lr 5e-3 alone takes hundreds of steps).
void StageOne::init_logits() {
  auto bhat_at = [&](double beta) {
    double b = 0;
    std::vector<double> z, pb;
    for (const auto& m : mods_) {
      z.resize(m.K);
      for (size_t j = 0; j < m.K; ++j) z[j] = -beta * (m.bpw[j] - m.bpw[0]) / opt_.tau;
      softmax(z, pb);
      for (size_t j = 0; j < m.K; ++j) b += double(m.e->n_params) * pb[j] * m.bpw[j];
    }
    return b / n_total_;
  };
  double lo = -50, hi = 50;  // bhat falls as beta rises
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    (bhat_at(mid) > opt_.target_bpw ? lo : hi) = mid;
  }
  const double beta = 0.5 * (lo + hi);
  for (auto& m : mods_)
    for (size_t j = 0; j < m.K; ++j) m.pi[j] = -beta * (m.bpw[j] - m.bpw[0]);
}

Result<std::string> StageOne::warm_start(const std::string& plan_path, double weight) {
  auto loaded = Plan::load(plan_path);
  if (!loaded.is_ok()) return loaded.status().with_context("--init-plan");
  const Plan& plan = *loaded;
  if (auto s = plan.validate(man_); !s.is_ok()) return s.with_context("--init-plan " + plan_path);
  // p = softmax(pi / tau): pi_a = tau log(w / (1 - w) * sum_{b != a} exp(pi_b / tau)), then
  // every pi shifted so pi_0 = 0 (the sigmoid form of K = 2 moves pi_1 only).
  for (auto& m : mods_) {
    if (m.K < 2) continue;  // one candidate: nothing to prefer
    const std::string& want = plan.modules.at(m.e->name);
    size_t a = 0;  // validate() made sure the plan's candidate is one of the module's
    while (m.e->candidates[a].id != want) ++a;
    double mx = -INFINITY;
    for (size_t j = 0; j < m.K; ++j)
      if (j != a) mx = std::max(mx, m.pi[j] / opt_.tau);
    double rest = 0;
    for (size_t j = 0; j < m.K; ++j)
      if (j != a) rest += std::exp(m.pi[j] / opt_.tau - mx);
    m.pi[a] = opt_.tau * (std::log(weight / (1 - weight) * rest) + mx);
    const double p0 = m.pi[0];
    for (double& x : m.pi) x -= p0;
  }
  return sha256_file(plan_path);
}

Status StageOne::resume(LearnResult* result) {
  // Rank 0 reads the checkpoint and decides; every rank gets its text (none: a fresh start).
  std::string text;
  if (comm_->rank() == 0 && fs::exists(ckpt_path_) && !opt_.restart) {
    auto j = read_json(ckpt_path_, Checkpoint::kSchema, Checkpoint::kVersion);
    if (!j.is_ok()) {
      result->note = "ignored unreadable checkpoint " + ckpt_path_ + ": " + j.status().message();
    } else if ((*j)["config"] != config_) {
      result->note = "ignored checkpoint " + ckpt_path_ + " of a run with other settings";
    } else {
      text = j->dump();
    }
  }
  GAMMA_RETURN_IF_ERROR(comm_->broadcast(text));
  if (text.empty()) return Status::ok();
  auto damaged = [&](const std::string& why) {
    return Status::errorf("checkpoint {} is damaged ({}); delete it or pass --restart", ckpt_path_, why);
  };
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return damaged("not JSON as received");
  auto ck = Checkpoint::from_json(j, ckpt_path_);
  if (!ck.is_ok()) return damaged(ck.status().message());
  if (ck->modules.size() != mods_.size()) return damaged("module count differs");
  for (size_t i = 0; i < mods_.size(); ++i)
    if (ck->modules[i].pi.size() != mods_[i].K) return damaged("candidate count differs");
  st_.step = ck->step;
  st_.lambda1 = ck->lambda1;
  st_.lambda2 = ck->lambda2;
  st_.mse_ref = ck->mse_ref;
  st_.mse_eval_init = ck->mse_eval_init;
  st_.curve = ck->curve;
  st_.convergence = ck->convergence;
  st_.seconds = ck->seconds;
  for (size_t i = 0; i < mods_.size(); ++i) {
    mods_[i].pi = ck->modules[i].pi;
    mods_[i].m = ck->modules[i].m;
    mods_[i].v = ck->modules[i].v;
    if (!ck->modules[i].dsum.empty()) mods_[i].dsum = ck->modules[i].dsum, mods_[i].dn = ck->modules[i].dn;
    if (!ck->modules[i].dsum2.empty()) mods_[i].dsum2 = ck->modules[i].dsum2;
  }
  result->resumed_from = st_.step;
  return Status::ok();
}

Status StageOne::reduce(std::vector<double>& mse_layers, bool measure_now) {
  if (comm_->world_size() == 1) return Status::ok();
  std::vector<double> buf = mse_layers;
  for (const auto& g : gp_) buf.insert(buf.end(), g.begin(), g.end());
  if (measure_now) for (const auto& d : dstep_) buf.insert(buf.end(), d.begin(), d.end());
  GAMMA_RETURN_IF_ERROR(comm_->all_reduce_sum(buf));
  size_t at = 0;
  for (double& v : mse_layers) v = buf[at++];
  for (auto& g : gp_)
    for (double& v : g) v = buf[at++];
  if (measure_now)
    for (auto& d : dstep_)
      for (double& v : d) v = buf[at++];
  return Status::ok();
}

Status StageOne::save_checkpoint(double seconds) const {
  if (comm_->rank() != 0) return Status::ok();  // the state is the same on every rank
  Checkpoint c;
  c.config = config_;
  c.step = st_.step;
  c.lambda1 = st_.lambda1;
  c.lambda2 = st_.lambda2;
  c.mse_ref = st_.mse_ref;
  c.mse_eval_init = st_.mse_eval_init;
  c.seconds = seconds;
  c.curve = st_.curve;
  c.convergence = st_.convergence;
  for (const auto& m : mods_) c.modules.push_back({m.e->name, m.pi, m.m, m.v, m.dsum, m.dn, m.dsum2});
  return c.save(ckpt_path_);
}

// Dequantizes layer l's candidates into bufs and points `mix` at them with mixing weights w.
Status StageOne::load_layer(int l, const Weights& w, LayerMix& mix,
                            std::vector<std::vector<float>>& bufs) {
  size_t nb = 0;
  for (int k = 0; k < kLayerKinds; ++k) {
    const int mi = by_layer_[size_t(l)][size_t(k)];
    if (mi < 0) continue;
    const Mod& m = mods_[size_t(mi)];
    for (size_t j = 0; j < m.K; ++j, ++nb) {
      if (bufs.size() <= nb) bufs.emplace_back();
      bufs[nb].resize(size_t(m.e->n_params));
      GAMMA_RETURN_IF_ERROR(store_->dequantize(*m.e, m.e->candidates[j], bufs[nb].data(), opt_.n_threads));
      mix[size_t(k)].cands.push_back(bufs[nb].data());
    }
  }
  set_weights(l, w, mix);
  return Status::ok();
}

void StageOne::set_weights(int l, const Weights& w, LayerMix& mix) {
  for (int k = 0; k < kLayerKinds; ++k) {
    const int mi = by_layer_[size_t(l)][size_t(k)];
    if (mi < 0) continue;
    mix[size_t(k)].p = w[size_t(mi)];
    mix[size_t(k)].grad = &gp_[size_t(mi)];
  }
}

// Loads a visit's layers once: candidates dequantized and, with sublayer forcing, the
// visit's sequences read and every cached kind's outputs computed, after which those
// kinds' candidates are freed (only attn_output and ffn_down are read per step).
Status StageOne::enter_visit(int visit, const std::vector<int>& layers) {
  if (visit == visit_id_) return Status::ok();
  stepper_->end_visits();
  visit_.clear();
  visit_id_ = -1;
  std::vector<float> vx, vy;
  std::vector<int> seqs;
  if (opt_.forcing == Forcing::kSublayer) {
    seqs = batch_of(opt_.seed, visit, opt_.visit_seqs, cache_->n_seq(), kVisitSeqs);
    vx.resize(x_.size() / size_t(opt_.seqs) * size_t(opt_.visit_seqs));
    vy.resize(vx.size());
  }
  for (int l : layers) {
    if (!owns(l)) continue;
    visit_.push_back(Resident{l, {}, {}});
    Resident& r = visit_.back();
    GAMMA_RETURN_IF_ERROR(load_layer(l, p_, r.mix, r.bufs));
    if (opt_.forcing != Forcing::kSublayer) continue;
    GAMMA_RETURN_IF_ERROR(cache_->read(l, seqs, vx.data()));
    GAMMA_RETURN_IF_ERROR(cache_->read(l + 1, seqs, vy.data()));
    GAMMA_RETURN_IF_ERROR(stepper_->begin_visit(l, r.mix, vx.data(), vy.data(), opt_.visit_seqs));
    size_t nb = 0;
    for (int k = 0; k < kLayerKinds; ++k) {
      auto& c = r.mix[size_t(k)].cands;
      for (auto& ptr : c) {
        if (stepper_->cached_kind(k)) {
          std::vector<float>().swap(r.bufs[nb]);
          ptr = nullptr;
        }
        ++nb;
      }
    }
  }
  visit_id_ = visit;
  return Status::ok();
}

Status StageOne::measure(int l, const LayerMix& mix, int r0) {
  LayerDeltas d;
  GAMMA_RETURN_IF_ERROR(stepper_->visit_deltas(l, mix, r0, opt_.seqs, d));
  for (int k = 0; k < kLayerKinds; ++k)
    if (const int mi = by_layer_[size_t(l)][size_t(k)]; mi >= 0) dstep_[size_t(mi)] = d[size_t(k)];
  return Status::ok();
}

Result<double> StageOne::layer_mse(int l, const std::vector<int>& seqs, const Weights& w, double scale, bool measure_now) {
  auto t0 = std::chrono::steady_clock::now();
  GAMMA_RETURN_IF_ERROR(cache_->read(l, seqs, x_.data()));
  GAMMA_RETURN_IF_ERROR(cache_->read(l + 1, seqs, y_.data()));
  auto t1 = std::chrono::steady_clock::now();
  LayerMix mix;
  GAMMA_RETURN_IF_ERROR(load_layer(l, w, mix, bufs_));
  auto t2 = std::chrono::steady_clock::now();
  t_io_ += std::chrono::duration<double>(t1 - t0).count();
  t_dequant_ += std::chrono::duration<double>(t2 - t1).count();
  if (opt_.forcing == Forcing::kLayer) return stepper_->run(l, mix, x_.data(), y_.data(), opt_.seqs, scale);
  GAMMA_RETURN_IF_ERROR(stepper_->begin_visit(l, mix, x_.data(), y_.data(), opt_.seqs));
  auto r = stepper_->visit_step(l, mix, 0, opt_.seqs, scale);
  if (r.is_ok() && measure_now) GAMMA_RETURN_IF_ERROR(measure(l, mix, 0));
  stepper_->end_visits();
  return r;
}

// The objective at noise-free weights w over every layer, on a fixed batch (the first
// sequences): comparable across runs and settings (full steps vs layer sampling).
Result<double> StageOne::eval_mse(const Weights& w) {
  std::vector<int> seqs;
  for (int b = 0; b < opt_.seqs; ++b) seqs.push_back(b);
  std::vector<double> per_layer(size_t(L_), 0.0);
  for (int l = 0; l < L_; ++l) {
    if (!owns(l)) continue;
    GAMMA_RETURN_IF_ERROR(cache_->read(l, seqs, x_.data()));
    GAMMA_RETURN_IF_ERROR(cache_->read(l + 1, seqs, y_.data()));
    LayerMix mix;
    GAMMA_RETURN_IF_ERROR(load_layer(l, w, mix, bufs_));
    GAMMA_ASSIGN_OR_RETURN(per_layer[size_t(l)], stepper_->run(l, mix, x_.data(), y_.data(), opt_.seqs, 1.0, /*backward=*/false));
  }
  GAMMA_RETURN_IF_ERROR(comm_->all_reduce_sum(per_layer));
  double sum = 0;
  for (double m : per_layer) sum += m / double(L_);
  return sum;
}

// Gumbel-softmax weights p_ (noisy, for mixing), the noise-free pbar_ (budget, scores) and,
// for --estimator st, the sample's one-hot w_; clears the gradients gp_.
void StageOne::sample(int step, double tau) {
  Rng gumbel(opt_.seed, uint64_t(step), kGumbel);
  std::vector<double> z;
  for (size_t i = 0; i < mods_.size(); ++i) {
    const Mod& m = mods_[i];
    z.assign(m.K, 0.0);
    for (size_t j = 0; j < m.K; ++j) z[j] = m.pi[j] / tau;
    softmax(z, pbar_[i]);
    for (size_t j = 0; j < m.K; ++j) z[j] = (m.pi[j] - std::log(-std::log(gumbel.uniform_open()))) / tau;
    softmax(z, p_[i]);
    gp_[i].assign(m.K, 0.0);
    if (opt_.estimator == Estimator::kSt) {  // the layer sees the sample's one candidate
      w_[i].assign(m.K, 0.0);
      w_[i][size_t(std::max_element(p_[i].begin(), p_[i].end()) - p_[i].begin())] = 1.0;
    }
  }
}

// GAMMA's task term: the teacher-forced MSE of each sampled layer (scaled by 1/k_step, so
// the sum over a sample estimates the mean over all layers), gradients into gp_.
Result<double> StageOne::task_mse(int step, const std::vector<int>& seqs, const std::vector<int>& layers, int k_step,
                                  const Weights& wmix) {
  const int visit = visit_of(step);
  if (visit >= 0) {
    auto t0 = std::chrono::steady_clock::now();
    GAMMA_RETURN_IF_ERROR(enter_visit(visit, layers));
    t_visit_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<double> mse_layers(size_t(L_), 0.0);
  const bool measure_now = measured(step);
  size_t resident = 0;
  int ran = 0;  // layers this process has run in this step
  for (size_t li = 0; li < layers.size(); ++li) {
    const int l = layers[li];
    if (!owns(l)) continue;
    auto t0 = std::chrono::steady_clock::now();
    const double pre = t_io_ + t_dequant_;  // layer_mse adds its reads to these
    const double scale = 1.0 / double(k_step);
    double mse_l;
    if (visit < 0) {
      GAMMA_ASSIGN_OR_RETURN(mse_l, layer_mse(l, seqs, wmix, scale, measure_now));
    } else {
      Resident& r = visit_[resident++];  // this rank's layers of the visit, in order
      if (r.layer != l) return Status::errorf("visit holds layer {} where layer {} was expected", r.layer, l);
      set_weights(l, wmix, r.mix);
      if (opt_.forcing == Forcing::kSublayer) {  // the step's slice of the visit's sequences
        const int r0 = int(int64_t(step - visit_start(visit)) * opt_.seqs % opt_.visit_seqs);
        GAMMA_ASSIGN_OR_RETURN(mse_l, stepper_->visit_step(l, r.mix, r0, opt_.seqs, scale));
        if (measure_now) GAMMA_RETURN_IF_ERROR(measure(l, r.mix, r0));
      } else {
        GAMMA_RETURN_IF_ERROR(cache_->read(l, seqs, x_.data()));
        GAMMA_RETURN_IF_ERROR(cache_->read(l + 1, seqs, y_.data()));
        GAMMA_ASSIGN_OR_RETURN(mse_l, stepper_->run(l, r.mix, x_.data(), y_.data(), opt_.seqs, scale));
      }
    }
    if (!std::isfinite(mse_l)) return Status::errorf("layer {} MSE is {} at step {}", l, mse_l, step);
    mse_layers[size_t(l)] = mse_l;
    t_layer_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - (t_io_ + t_dequant_ - pre);
    if (opt_.on_layer_done) opt_.on_layer_done(step, ran);
    ++ran;
  }
  GAMMA_RETURN_IF_ERROR(reduce(mse_layers, measure_now));
  if (measure_now) {  // every rank adds every layer's measurement (reduced above), so all decide alike
    change_ = 0;
    min_dn_ = INT64_MAX;
    for (int l : layers)
      for (int k = 0; k < kLayerKinds; ++k)
        if (const int mi = by_layer_[size_t(l)][size_t(k)]; mi >= 0) {
          Mod& m = mods_[size_t(mi)];
          const std::vector<double>& d = dstep_[size_t(mi)];
          // The knapsack takes one candidate per module, so only the differences between a
          // module's candidates matter: a measurement's deltas centred on their mean over the
          // candidates lose the common shift of the sampled assignment, most of their scatter.
          const double c = std::accumulate(d.begin(), d.end(), 0.0) / double(m.K);
          for (size_t j = 0; j < m.K; ++j) {
            m.dsum[j] += d[j];
            if (!m.dsum2.empty()) m.dsum2[j] += (d[j] - c) * (d[j] - c);
          }
          ++m.dn;
          min_dn_ = std::min(min_dn_, m.dn);
          // Those centred means' standard error against their largest |value| (the module's
          // spread of costs in the knapsack).
          if (!m.dsum2.empty() && m.dn >= 2 && m.K > 1) {
            double se = 0, scale = 0;
            const double n = double(m.dn);
            const double cbar = std::accumulate(m.dsum.begin(), m.dsum.end(), 0.0) / double(m.K) / n;
            for (size_t j = 0; j < m.K; ++j) {
              const double mean = m.dsum[j] / n - cbar, var = std::max(0.0, m.dsum2[j] / n - mean * mean) * n / (n - 1);
              se = std::max(se, std::sqrt(var / n));
              scale = std::max(scale, std::fabs(mean));
            }
            if (scale > 0) change_ = std::max(change_, se / scale);
          }
          dstep_[size_t(mi)].assign(m.K, 0.0);
        }
  }
  double mse = 0;
  for (int l : layers) mse += mse_layers[size_t(l)] / double(k_step);
  return mse;
}

// The CE ablation's task term: every layer chained forward keeping each layer's input, the
// KL of the final logits against the teacher's, then backward layer by layer.
Result<double> StageOne::task_ce(int step, const std::vector<int>& seqs, const Weights& wmix) {
  auto t0 = std::chrono::steady_clock::now();
  const int B = opt_.seqs;
  const size_t n = x_.size();
  xs_.resize(size_t(L_) + 1);
  for (auto& b : xs_) b.resize(n);
  GAMMA_RETURN_IF_ERROR(cache_->read(0, seqs, xs_[0].data()));
  GAMMA_RETURN_IF_ERROR(cache_->read(L_, seqs, y_.data()));
  for (int l = 0; l < L_; ++l) {
    LayerMix mix;
    GAMMA_RETURN_IF_ERROR(load_layer(l, wmix, mix, bufs_));
    GAMMA_RETURN_IF_ERROR(stepper_->forward(l, mix, xs_[size_t(l)].data(), xs_[size_t(l) + 1].data(), B));
  }
  std::vector<float> g(n), g2(n);
  GAMMA_ASSIGN_OR_RETURN(double kl, stepper_->head_kl(xs_[size_t(L_)].data(), y_.data(), g.data(), B, 1.0));
  if (!std::isfinite(kl)) return Status::errorf("KL is {} at step {}", kl, step);
  for (int l = L_ - 1; l >= 0; --l) {
    LayerMix mix;
    GAMMA_RETURN_IF_ERROR(load_layer(l, wmix, mix, bufs_));
    GAMMA_RETURN_IF_ERROR(stepper_->backward(l, mix, xs_[size_t(l)].data(), g.data(), l > 0 ? g2.data() : nullptr, B));
    std::swap(g, g2);
  }
  t_layer_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opt_.on_layer_done) opt_.on_layer_done(step, 0);
  return kl;
}

// The budget term at the expected bits' gap to the target: mu = d(budget term)/d bhat, the
// loss, and the factor on the task term's gradient (1 but for DNAS).
StageOne::Budget StageOne::budget_term(double mse, double gap) const {
  if (opt_.penalty == Penalty::kDnas) {  // loss = M F, F = (1 + beta gap^2)^gamma: dL/dp = F dM/dp, dL/db = M F'
    const double base = 1.0 + opt_.dnas_beta * gap * gap, F = std::pow(base, opt_.dnas_gamma);
    return {(mse / st_.mse_ref) * opt_.dnas_gamma * std::pow(base, opt_.dnas_gamma - 1) * 2.0 * opt_.dnas_beta * gap,
            mse / st_.mse_ref * F, F};
  }
  return {st_.lambda1 + 2.0 * st_.lambda2 * gap,  // d(lambda1 gap + lambda2 gap^2)/d bhat
          mse / st_.mse_ref + st_.lambda1 * gap + st_.lambda2 * gap * gap, 1.0};
}

// One descent step of every module's logits: the task gradient through the noisy softmax, the
// budget's through the noise-free one.
void StageOne::update_logits(int step, double tau, double mu) {
  const int t = step + 1;
  for (size_t i = 0; i < mods_.size(); ++i) {
    Mod& m = mods_[i];
    if (m.K < 2) continue;
    std::vector<double> gpi(m.K, 0.0), gb(m.K);
    softmax_backward(p_[i], gp_[i], tau, gpi);
    for (size_t j = 0; j < m.K; ++j) gb[j] = mu * double(m.e->n_params) / n_total_ * m.bpw[j];
    softmax_backward(pbar_[i], gb, tau, gpi);
    for (size_t j = (m.K == 2 ? 1 : 0); j < m.K; ++j) {  // K == 2: pi[0] stays 0 (sigmoid form)
      if (opt_.optimizer == Optimizer::kSgd) {
        m.pi[j] -= opt_.lr * gpi[j];
        continue;
      }
      m.m[j] = 0.9 * m.m[j] + 0.1 * gpi[j];
      m.v[j] = 0.999 * m.v[j] + 0.001 * gpi[j] * gpi[j];
      const double mh = m.m[j] / (1.0 - std::pow(0.9, t)), vh = m.v[j] / (1.0 - std::pow(0.999, t));
      m.pi[j] -= opt_.lr * mh / (std::sqrt(vh) + 1e-8);
    }
  }
}

Status StageOne::optimise() {
  if (st_.step == 0) {
    for (size_t i = 0; i < mods_.size(); ++i) {
      std::vector<double> z(mods_[i].K);
      for (size_t j = 0; j < mods_[i].K; ++j) z[j] = mods_[i].pi[j] / tau_at(opt_, 0);
      softmax(z, pbar_[i]);
    }
    GAMMA_ASSIGN_OR_RETURN(st_.mse_eval_init, eval_mse(pbar_));
  }
  start_step_ = st_.step;
  std::unique_ptr<Progress> bar;
  if (!opt_.quiet && st_.step < opt_.steps) bar = std::make_unique<Progress>("learn", opt_.steps - st_.step);
  t_start_ = std::chrono::steady_clock::now();
  for (int step = st_.step; step < opt_.steps; ++step) {
    const double tau = tau_at(opt_, step);
    sample(step, tau);
    const Weights& wmix = opt_.estimator == Estimator::kSt ? w_ : p_;  // what the layers are run with
    const std::vector<int> seqs = batch_of(opt_.seed, step, opt_.seqs, cache_->n_seq());
    const int k_step = step == 0 ? L_ : k_layers_;  // step 0 takes all: its MSE is the MSE term's unit
    double mse;
    if (opt_.objective == Objective::kCe) {
      GAMMA_ASSIGN_OR_RETURN(mse, task_ce(step, seqs, wmix));
    } else {
      const int visit = visit_of(step);
      const auto layers = visit >= 0 ? visit_layers(opt_.seed, visit, L_, k_step) : layers_of(opt_.seed, step, L_, k_step);
      GAMMA_ASSIGN_OR_RETURN(mse, task_mse(step, seqs, layers, k_step, wmix));
    }
    // The task term in units of the step-0 MSE: a constant factor (the paper's objective with
    // lambda rescaled), which makes lambda's scale, and so --lr-lambda, model-independent.
    if (step == 0) st_.mse_ref = mse > 0 ? mse : 1.0;
    const double bhat = expected_bpw(mods_, pbar_, n_total_);
    const double gap = bhat - opt_.target_bpw;
    const Budget b = budget_term(mse, gap);
    for (auto& g : gp_)
      for (double& v : g) v *= b.mse_factor / st_.mse_ref;
    update_logits(step, tau, b.mu);
    if (opt_.penalty == Penalty::kAl) {  // dual ascent
      st_.lambda1 += opt_.lr_lambda * gap;
      st_.lambda2 += opt_.lr_lambda * gap * gap;
    }
    st_.step = step + 1;
    st_.curve.push_back({{"step", step}, {"loss", b.loss}, {"mse", mse}, {"bpw", bhat}, {"lambda1", st_.lambda1},
                         {"lambda2", st_.lambda2}, {"tau", tau}, {"seconds", elapsed()}});
    if (opt_.converge > 0 && measured(step) && min_dn_ >= 2) st_.curve.back()["delta_rel_se"] = change_;
    // --converge: the visit's measured deltas are known well enough; its remaining steps are skipped.
    if (const int visit = visit_of(step); opt_.converge > 0 && visit >= 0 && measured(step) && min_dn_ >= 3 &&
                                          change_ < opt_.converge) {
      const int end = std::min(opt_.steps, visit_start(visit + 1));
      if (end > st_.step) {
        st_.convergence.push_back({{"visit", visit}, {"step", step}, {"measurements", min_dn_}, {"change", change_},
                                   {"skipped_steps", end - st_.step}});
        step = end - 1;
        st_.step = end;
      }
    }
    if (bar)
      bar->update(st_.step - start_step_, fmt::format("loss {:.4g} mse {:.4g} b {:.4f} l1 {:.3g} l2 {:.3g}", b.loss, mse,
                                                       bhat, st_.lambda1, st_.lambda2));
    if (st_.step % opt_.checkpoint_every == 0 && st_.step < opt_.steps) GAMMA_RETURN_IF_ERROR(save_checkpoint(elapsed()));
  }
  if (bar) bar->finish();
  return Status::ok();
}

// SCORES.json: p = softmax(pi / tau) at the last step's tau, the logits, the final figures.
Result<json> StageOne::scores(const LearnResult& result) {
  const double tau = tau_at(opt_, opt_.steps - 1);
  scores::Scores sc;  // Stage II's input: score = p; the rest of the file is Stage I's record
  sc.method = "gamma";
  sc.model_fingerprint = man_.model_fingerprint;
  sc.pool_manifest_sha256 = pool_sha_;
  sc.target_bpw = opt_.target_bpw;
  for (size_t i = 0; i < mods_.size(); ++i) {
    std::vector<double> z(mods_[i].K);
    for (size_t j = 0; j < mods_[i].K; ++j) z[j] = mods_[i].pi[j] / tau;
    softmax(z, pbar_[i]);
    for (size_t j = 0; j < mods_[i].K; ++j) {
      const std::string& id = mods_[i].e->candidates[j].id;
      sc.score[mods_[i].e->name][id] = sc.p[mods_[i].e->name][id] = pbar_[i][j];
    }
  }
  const double bhat = expected_bpw(mods_, pbar_, n_total_);
  GAMMA_ASSIGN_OR_RETURN(const double mse_eval, eval_mse(pbar_));
  json out = sc.to_json();
  for (const auto& m : mods_) {
    json lj = json::object();
    for (size_t j = 0; j < m.K; ++j) lj[m.e->candidates[j].id] = m.pi[j];
    out["modules"][m.e->name]["logits"] = lj;
    if (m.dn > 0) {  // --measure-every: the mean measured loss change of each candidate
      json dj = json::object();
      for (size_t j = 0; j < m.K; ++j) dj[m.e->candidates[j].id] = m.dsum[j] / double(m.dn);
      out["modules"][m.e->name]["delta"] = dj;
      out["modules"][m.e->name]["delta_n"] = m.dn;
    }
  }
  out["teacher_fingerprint"] = teacher_->fingerprint();
  out["hyperparameters"] = config_["hyperparameters"];
  const json& last = st_.curve.empty() ? json::object() : st_.curve.back();
  out["final"] = {{"bpw_expected", bhat}, {"lambda1", st_.lambda1}, {"lambda2", st_.lambda2}, {"mse_ref", st_.mse_ref},
                  {"mse_eval_init", st_.mse_eval_init}, {"mse_eval", mse_eval},
                  {"loss", last.value("loss", 0.0)}, {"mse", last.value("mse", 0.0)}, {"steps", st_.step},
                  {"steps_run", st_.curve.size()}};
  out["curve"] = st_.curve;
  if (opt_.converge > 0) out["convergence"] = st_.convergence;
  const double secs = elapsed();
  const int done_here = opt_.steps - start_step_;
  out["stats"] = {{"seconds", secs},
                  {"seconds_this_process", secs - st_.seconds},
                  {"steps_this_process", done_here},
                  {"seconds_per_step", done_here > 0 ? (secs - st_.seconds) / done_here : 0.0},
                  {"time_split", {{"activations_io", t_io_}, {"dequantize", t_dequant_}, {"layer_fwd_bwd", t_layer_},
                                    {"visit_setup", t_visit_}}},
                  {"peak_rss_bytes", peak_rss_bytes()},
                  {"threads", opt_.n_threads},
                  {"world_size", comm_->world_size()},
                  {"resumed_from_step", result.resumed_from}};
  return out;
}

}  // namespace

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return uint64_t(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024;
  return 0;
}

Result<LearnResult> learn(const LearnOptions& opt_in) {
  LearnOptions opt = opt_in;
  GAMMA_RETURN_IF_ERROR(validate(opt));
  opt.n_threads = resolve_threads(opt.n_threads);
  if (opt.calib.text_files.empty()) {
    GAMMA_ASSIGN_OR_RETURN(opt.calib.text_files, default_calibration_files());
  }
  opt.calib.n_threads = opt.n_threads;
  opt.calib.quiet = opt.quiet;
  GAMMA_ASSIGN_OR_RETURN(auto stage, StageOne::open(opt));
  LearnResult result;
  GAMMA_RETURN_IF_ERROR(stage->resume(&result));
  GAMMA_RETURN_IF_ERROR(stage->optimise());
  GAMMA_ASSIGN_OR_RETURN(json out, stage->scores(result));
  if (opt.rank == 0) {
    GAMMA_RETURN_IF_ERROR(write_json(opt.out_path, out));
    std::error_code ec;
    fs::remove(opt.out_path + ".ckpt", ec);
  }
  result.scores = std::move(out);
  return result;
}

}  // namespace gm
