#include "layers/layers.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "emit/emit.h"
#include "eval/layer_states.h"
#include "eval/plan_kld.h"
#include "gguf_model/model.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "util/files.h"
#include "util/json.h"

namespace gm::layers {
namespace {

namespace fs = std::filesystem;
constexpr const char* kPartialSchema = "gamma.layers.partial";
constexpr int kPartialVersion = 1;

Status check_options(const LayersOptions& o) {
  if (o.n_ctx < 8) return Status::errorf("--ctx must be at least 8 (got {})", o.n_ctx);
  if (o.chunks < 1) return Status::errorf("--chunks must be at least 1 (got {})", o.chunks);
  if (!file_exists(o.teacher)) return Status::errorf("--teacher {} does not exist", o.teacher);
  GAMMA_RETURN_IF_ERROR(check_text_file(o.text, "--calib"));
  return check_writable_dir(o.out);
}

// --head TENSOR=TYPE[,TYPE...] -> tensor -> types, each checked against the model's tensor.
Status parse_heads(const Manifest& m, const std::vector<std::string>& specs, std::map<std::string, std::vector<std::string>>* out) {
  for (const auto& spec : specs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return Status::errorf("--head '{}': expected TENSOR=TYPE[,TYPE...], e.g. output.weight=Q4_K,Q5_K", spec);
    const std::string tensor = spec.substr(0, eq);
    auto& types = (*out)[tensor];
    std::string rest = spec.substr(eq + 1);
    for (size_t p = 0; p <= rest.size();) {
      const size_t c = std::min(rest.find(',', p), rest.size());
      const std::string t = rest.substr(p, c - p);
      if (t.empty()) return Status::errorf("--head '{}': an empty type", spec);
      GAMMA_RETURN_IF_ERROR(check_fixed_type(m, tensor, t).with_context("--head " + spec));
      if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
      p = c + 1;
    }
  }
  return Status::ok();
}

}  // namespace

// The reference candidate: the source's own type (an exact copy of the source's data), else the
// candidate closest to the source. The low one: `low` where the module has it; for "auto" Q2_K
// (a whole Qwen-1.5B layer there costs 0.008-0.04 KLD, clear of the noise of 4 x 512 tokens and
// inside the range the small budgets choose from), else the module's cheapest candidate (e.g.
// SmolLM2's 576-wide modules, which fit only 32-wide types). A module without it stays at its
// reference; every layer needs one module that goes below it.
Status pick_candidates(const Manifest& m, const std::string& low, std::map<std::string, std::string>* ref,
                       std::map<std::string, std::string>* low_of) {
  std::map<int, int> below;  // layer -> modules taken below their reference
  for (const auto& e : m.modules) {
    const Candidate* r = e.find(e.source_type);
    if (!r) {
      r = &e.candidates.front();
      for (const auto& c : e.candidates)
        if (c.rel_err < r->rel_err) r = &c;
    }
    const Candidate* l = low == "auto" ? (e.find("Q2_K") ? e.find("Q2_K") : &e.candidates.front()) : e.find(low);
    if (!l || l->bytes >= r->bytes) l = r;
    (*ref)[e.name] = r->id;
    (*low_of)[e.name] = l->id;
    below[e.layer] += l != r;
  }
  for (const auto& [layer, n] : below)
    if (n == 0)
      return Status::errorf("--low {}: no module of layer {} has a candidate below its reference (the pool's types: {})", low,
                            layer, fmt::join(m.types, ","));
  return Status::ok();
}

Result<LayersResult> measure_layers(const LayersOptions& o) {
  GAMMA_RETURN_IF_ERROR(check_options(o));
  GAMMA_ASSIGN_OR_RETURN(Manifest m, Manifest::load(o.pool));
  if (m.modules.empty()) return Status::errorf("{}: the pool has no linear modules", o.pool);
  GAMMA_ASSIGN_OR_RETURN(OutputLock lock, OutputLock::take(o.out, "gamma layers"));
  const auto t0 = std::chrono::steady_clock::now();

  scores::LayerSensitivity ls;
  ls.model_fingerprint = m.model_fingerprint;
  GAMMA_RETURN_IF_ERROR(pick_candidates(m, o.low, &ls.ref, &ls.low));
  std::map<std::string, std::vector<std::string>> heads;
  GAMMA_RETURN_IF_ERROR(parse_heads(m, o.heads, &heads));
  std::set<int> layers;
  for (const auto& e : m.modules) layers.insert(e.layer);
  Plan base;
  base.model_fingerprint = m.model_fingerprint;
  base.method = "layers";
  base.modules = ls.ref;
  for (const auto& f : m.fixed) base.fixed[f.name] = f.source_type;
  GAMMA_RETURN_IF_ERROR(base.validate(m));

  // Layer l's file computes what the base file computes up to layer l: where llama.cpp runs a
  // model cut before a layer (emit's starts_at_any_layer), the base file's evaluation keeps each
  // chunk's hidden states between layers and layer l's file holds the layers from l on, run from
  // the state at l (eval/layer_states.h): on Qwen2.5-1.5B the 29 files' layer work falls to 0.52x.
  // Every file is evaluated one chunk per decode, as the states need, so all compare alike.
  const bool from_layer = starts_at_any_layer(m.arch) && m.n_layer > 1;
  std::unique_ptr<eval::LayerStates> states;
  if (from_layer) {
    GAMMA_ASSIGN_OR_RETURN(auto src, Model::open(m.model_path));
    const int64_t e = src->find("token_embd.weight");
    if (e < 0) return Status::errorf("{}: no token_embd.weight to size the hidden states by", m.model_path);
    states = std::make_unique<eval::LayerStates>(m.n_layer, o.chunks, o.n_ctx, src->tensors()[size_t(e)].shape[0]);
  }

  GAMMA_ASSIGN_OR_RETURN(std::string manifest_sha, sha256_file(o.pool + "/manifest.json"));
  json config = {{"manifest_sha256", manifest_sha}, {"teacher", fs::absolute(o.teacher).string()},
                 {"text", fs::absolute(o.text).string()}, {"ctx", o.n_ctx}, {"chunks", o.chunks}, {"low", o.low},
                 {"batch", o.n_ctx}, {"from_layer", from_layer}};
  if (!heads.empty()) config["heads"] = heads;  // absent without --head: earlier partial files still resume
  const std::string partial = o.out + ".partial.json";
  std::map<std::string, double> done;  // "base", the layer number or "TENSOR=TYPE" -> KLD
  double spent_before = 0;
  LayersResult r;
  if (file_exists(partial)) {
    GAMMA_ASSIGN_OR_RETURN(json s, read_json(partial, kPartialSchema, kPartialVersion));
    for (const auto& [k, v] : config.items())
      if (!s.contains("config") || !s["config"].contains(k) || s["config"][k] != v)
        return Status::errorf("{} is from another measurement ({} differs); remove it or choose another -o", partial, k);
    if (!s.contains("kld") || !s["kld"].is_object()) return Status::errorf(Status::Code::kCorrupt, "{}: no \"kld\" object", partial);
    for (const auto& [k, v] : s["kld"].items()) {
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        return Status::errorf(Status::Code::kCorrupt, "{}: kld[{}] is not a finite number; remove the file", partial, k);
      done[k] = v.get<double>();
    }
    if (s.contains("seconds") && s["seconds"].is_number()) spent_before = s["seconds"].get<double>();
    r.resumed_from = int(done.size());
  }
  auto spent = [&] {
    return spent_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };

  const std::string dir = o.tmp_dir.empty() ? fs::path(o.out).parent_path().string() : o.tmp_dir;
  const std::string gguf = (fs::path(dir.empty() ? "." : dir) / (fs::path(o.out).filename().string() + ".layer.gguf")).string();
  // A head type equal to the source's is the base file itself: measured once, as "base".
  auto is_base = [&](const std::string& tensor, const std::string& t) { return base.fixed.at(tensor) == t; };
  size_t n_files = layers.size() + 1;
  for (const auto& [tensor, types] : heads)
    for (const auto& t : types) n_files += is_base(tensor, t) ? 0 : 1;
  // The file of `p` evaluated; with first_layer > 0 cut before that layer and run from the base
  // file's states there, which a resumed measurement (its base already done) measures again.
  auto evaluate = [&](const Plan& p, int first_layer, eval::LayerStates* capture) -> Result<double> {
    eval::PlanKldRequest q{o.pool, gguf, o.teacher, o.kld_base, o.text, o.n_ctx, o.chunks, o.threads};
    q.n_batch = o.n_ctx;
    q.capture = capture;
    if (first_layer > 0) q.input = states.get(), q.first_layer = first_layer;
    return eval::plan_kld(q, p);
  };
  auto kld = [&](const Plan& p, int first_layer, eval::LayerStates* capture) -> Result<double> {
    if (first_layer > 0 && !states->complete()) {
      GAMMA_ASSIGN_OR_RETURN(double again, evaluate(base, 0, states.get()));
      (void)again;  // the base file's value is the partial file's
    }
    return evaluate(p, first_layer, capture);
  };
  auto measure = [&](const std::string& key, const Plan& p, int first_layer) -> Status {
    if (done.count(key)) return Status::ok();
    GAMMA_ASSIGN_OR_RETURN(done[key], kld(p, first_layer, key == "base" ? states.get() : nullptr));
    ++r.measured;
    json s = json_header(kPartialSchema, kPartialVersion);
    s["config"] = config, s["kld"] = done, s["seconds"] = spent();
    GAMMA_RETURN_IF_ERROR(write_file_atomic_nosync(partial, s.dump(1)));
    if (!o.quiet)
      std::fprintf(stderr, "gamma layers: %s: KLD %.6f%s (%zu of %zu, %.0f s)\n",
                   key == "base" || key.find('=') != std::string::npos ? key.c_str() : ("layer " + key).c_str(), done[key],
                   key == "base" ? "" : fmt::format(" ({:+.6f})", done[key] - done["base"]).c_str(), done.size(), n_files,
                   spent());
    return Status::ok();
  };
  GAMMA_RETURN_IF_ERROR(measure("base", base, 0));
  for (int l : layers) {
    Plan p = base;
    for (const auto& e : m.modules)
      if (e.layer == l) p.modules[e.name] = ls.low[e.name];
    GAMMA_RETURN_IF_ERROR(measure(std::to_string(l), p, from_layer ? l : 0));
  }
  for (const auto& [tensor, types] : heads)
    for (const auto& t : types) {
      if (is_base(tensor, t)) continue;
      Plan p = base;
      p.fixed[tensor] = t;
      // The output head is read after the last layer: its file is that layer alone. The token
      // embedding (and a head tied to it) changes the first layer's input: the whole file.
      GAMMA_RETURN_IF_ERROR(measure(tensor + "=" + t, p, from_layer && tensor == "output.weight" ? m.n_layer - 1 : 0));
    }

  ls.base_kld = done.at("base");
  for (int l : layers) ls.kld[l] = done.at(std::to_string(l));
  for (const auto& [tensor, types] : heads) {
    ls.head_ref[tensor] = base.fixed.at(tensor);
    for (const auto& t : types)
      if (!is_base(tensor, t)) ls.head_kld[tensor][t] = done.at(tensor + "=" + t);
    ls.head_kld[tensor][ls.head_ref[tensor]] = ls.base_kld;  // the source's own type is the base file
  }
  r.seconds = spent();
  ls.info = {{"how", "KLD vs the teacher with one layer's modules at the low candidate, all else at the source's types"},
             {"config", config}, {"pool", o.pool}, {"seconds", r.seconds}};
  GAMMA_RETURN_IF_ERROR(write_json(o.out, ls.to_json()));
  std::error_code ec;
  fs::remove(partial, ec);
  ls.source = o.out;
  r.sensitivity = std::move(ls);
  return r;
}

}  // namespace gm::layers
